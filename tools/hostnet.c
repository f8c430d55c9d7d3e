/*
 * hostnet: a periodic host network health snapshot, entirely in user space: TCP
 * socket states from netlink sock_diag, ephemeral port use, interface and NIC
 * allowance counters, conntrack fill, and fd usage of the processes that matter.
 * It reads the network namespace it runs in (works under `ip netns exec`).
 */
#include "tool.h"
#include "trackers.h"

static const struct tool_doc doc = {
	.name = "hostnet",
	.summary = "Print a periodic host network health snapshot: TCP states, ports, NIC counters, fds.",
	.examples = "  hostnet                          # every 30 s, default-route interface\n"
		    "  hostnet -i 5 -c 3                # three snapshots, 5 s apart\n"
		    "  hostnet --interface eth1 -j      # eth1, JSON lines\n"
		    "  hostnet --procs java,node        # fd usage of java and node processes\n"
		    "  ip netns exec NS hostnet -c 1    # inside a network namespace\n",
};

int main(int argc, char **argv)
{
	return tool_main(&doc, &hostnet_tracker, argc, argv);
}
