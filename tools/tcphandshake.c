/*
 * tcphandshake: TCP connect and accept handshake latency, outcome and srtt, per
 * process, from tracepoints only (this kernel has no kprobes).
 */
#include "tool.h"
#include "trackers.h"

static const struct tool_doc doc = {
	.name = "tcphandshake",
	.summary = "Trace TCP connect and accept handshakes: latency, outcome, srtt, accept-queue wait.",
	.examples = "  tcphandshake                 # every handshake on the host\n"
		    "  tcphandshake -p 4242         # connects and accepts of pid 4242\n"
		    "  tcphandshake --min-us 10000  # handshakes slower than 10 ms\n"
		    "  tcphandshake --port 443 -j   # port 443, JSON lines\n",
};

int main(int argc, char **argv)
{
	return tool_main(&doc, &tcphandshake_tracker, argc, argv);
}
