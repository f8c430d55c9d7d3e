/*
 * tcploss: TCP retransmits, RTO losses, resets sent and received and zero-window
 * episodes, with each connection's congestion context and owning process, from
 * tracepoints only (this kernel has no kprobes).
 */
#include "tool.h"
#include "trackers.h"

static const struct tool_doc doc = {
	.name = "tcploss",
	.summary = "Trace TCP retransmits, losses, resets and zero windows, with congestion context and owning process.",
	.examples = "  tcploss                        # every event on the host\n"
		    "  tcploss -p 4242                # connections owned by pid 4242\n"
		    "  tcploss --filter-ip 10.0.0.7   # connections to or from 10.0.0.7\n"
		    "  tcploss --port 443 --connections 60  # port 443 for a minute, then a per-connection table\n"
		    "  tcploss -i 10                  # which connections had trouble, every 10 s\n"
		    "  tcploss -j -e prod             # JSON lines tagged env=prod\n",
};

int main(int argc, char **argv)
{
	return tool_main(&doc, &tcploss_tracker, argc, argv);
}
