/*
 * pystack: where CPU goes in CPython processes, in Python frames (sampled with a
 * cpu-clock perf event, the frames walked in BPF). The tracker is
 * src/trackers/pystack.c.
 */
#include "tool.h"
#include "trackers.h"

static const struct tool_doc doc = {
	.name = "pystack",
	.summary = "Sample where CPython processes spend CPU, as Python stacks (BPF frame walker).",
	.examples = "  pystack -p 4242               # top functions of pid 4242 at exit\n"
		    "  pystack -p 4242 -d 10 -f      # 10 s of folded stacks for flamegraph.pl\n"
		    "  pystack -p 4242 --children -i 5  # gunicorn master and workers, a table every 5 s\n"
		    "  pystack -p 4242 -d 30 -o cpu.svg  # an interactive flame graph (.speedscope.json, .pb.gz)\n"
		    "  pystack -p 4242 --top         # a live table, q quits\n"
		    "  pystack -p 4242 -j            # one JSON line per sample\n"
		    "  pystack --from sqlite:m.db -e prod --since -1h -o cpu.svg  # what a --sqlite run stored\n"
		    "  pystack --from sqlite:m.db --since -1h -f --baseline-until -1h  # what changed in the last hour\n"
		    "  pystack --from sqlite:m.db -e prod --baseline-env canary -o diff.svg  # env against env\n",
};

int main(int argc, char **argv)
{
	return tool_main(&doc, &pystack_tracker, argc, argv);
}
