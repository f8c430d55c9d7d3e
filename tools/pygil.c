/*
 * pygil: who waits for CPython's GIL, how long, and who holds it, with the Python
 * stacks of both. Hooks, best first: uprobes on take_gil (builds with symbols, e.g.
 * pyenv), else libc's timed wait on the GIL's condition variable (stripped distro
 * builds). At the end (and every -i) a per-thread table of time holding, waiting and
 * neither, and the holder stacks that made others wait longest (-f: folded). With
 * --from, the holder stacks of the waits a database sink stored.
 */
#include "tool.h"
#include "trackers.h"

static const struct tool_doc doc = {
	.name = "pygil",
	.summary = "Trace CPython GIL waits: waiter, duration, holder, and both Python stacks.",
	.examples = "  pygil -p 4242                  # every GIL wait of 1 ms or more in pid 4242\n"
		    "  pygil -p 4242 --min-wait-ms 10 # only waits of 10 ms or more\n"
		    "  pygil -p 4242 -d 10 -f         # holder stacks folded, weighted by time waited\n"
		    "  pygil -p 4242 -d 10 -o gil.svg # the same as a flame graph\n"
		    "  pygil -p 4242 -i 5 --no-stacks # the per-thread table every 5 seconds\n"
		    "  pygil -p 4242 -j               # JSON lines\n"
		    "  pygil --from sqlite:m.db -e prod --since -1h -o gil.svg  # what a --sqlite run stored\n",
};

int main(int argc, char **argv)
{
	return tool_main(&doc, &pygil_tracker, argc, argv);
}
