/*
 * pyloop: what blocks the event loops (asyncio, uvloop, gevent, tornado, selectors) of
 * CPython processes, for how long, and where: each loop iteration of --min-ms or more
 * with its on-CPU, off-CPU and run-queue time and the Python stacks that took it. The
 * tracker is src/trackers/pyloop.c.
 */
#include "tool.h"
#include "trackers.h"

static const struct tool_doc doc = {
	.name = "pyloop",
	.summary = "What blocks CPython event loops: each stall of the loop with its Python stacks.",
	.examples = "  pyloop -p 4242                 # stalls of 100 ms or more, and the loop's table at the end\n"
		    "  pyloop -p 4242 --min-ms 20 -j  # stalls of 20 ms or more, as JSON\n"
		    "  pyloop -p 4242 -i 10           # the loop threads' table every 10 s\n"
		    "  pyloop -p 4242 -d 60 -o stalls.svg  # a minute of stall stacks as a flame graph\n"
		    "  pyloop -p 4242 --children -f   # uvicorn/gunicorn workers, folded stall stacks\n",
};

int main(int argc, char **argv)
{
	return tool_main(&doc, &pyloop_tracker, argc, argv);
}
