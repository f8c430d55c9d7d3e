/*
 * pygc: every CPython garbage-collection pause: which generation, which thread,
 * how long, how many objects it found unreachable. Hooks, best first: the USDT
 * probes python:gc__start/gc__done (distro builds, also stripped ones), else uprobes
 * on the collector function of that version (builds with symbols, e.g. pyenv).
 */
#include "tool.h"
#include "trackers.h"

static const struct tool_doc doc = {
	.name = "pygc",
	.summary = "Trace CPython garbage-collection pauses: generation, thread, duration, objects found.",
	.examples = "  pygc                  # every CPython process on the host\n"
		    "  pygc -p 4242          # the collections of pid 4242\n"
		    "  pygc -p 4242 -g 2     # only full (generation 2) collections\n"
		    "  pygc --min-ms 10 -j   # pauses of 10 ms or more, JSON lines\n"
		    "  pygc -p 4242 --stack  # and the Python code that triggered each one\n",
};

int main(int argc, char **argv)
{
	return tool_main(&doc, &pygc_tracker, argc, argv);
}
