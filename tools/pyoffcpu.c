/*
 * pyoffcpu: why threads of CPython processes are not running: each off-CPU period
 * with its run-queue wait and the kernel, native and Python stacks it began in, from
 * scheduler tracepoints only; or (--from) the periods a database sink stored. The
 * tracker is src/trackers/pyoffcpu.c.
 */
#include "tool.h"
#include "trackers.h"

static const struct tool_doc doc = {
	.name = "pyoffcpu",
	.summary = "Why CPython threads are off the CPU: kernel, native and Python stacks per sleep.",
	.examples = "  pyoffcpu -p 4242               # periods off the CPU of 20 ms or more\n"
		    "  pyoffcpu -p 4242 -j --state D  # uninterruptible waits (disk I/O), as JSON\n"
		    "  pyoffcpu -p 4242 -f -d 10 --min-ms 0  # 10 s of folded off-CPU stacks (us)\n"
		    "  pyoffcpu -p 4242 -d 10 --min-ms 0 -o off.svg  # the same as a flame graph\n"
		    "  pyoffcpu -p 4242 --children --no-py  # gunicorn and its workers, native stacks\n"
		    "  pyoffcpu --from sqlite:m.db -e prod --since -1h -o off.svg  # what a --sqlite run stored\n",
};

int main(int argc, char **argv)
{
	return tool_main(&doc, &pyoffcpu_tracker, argc, argv);
}
