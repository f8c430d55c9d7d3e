/*
 * pymonitor: the trackers of the small tools in one process, for a host that ships
 * every event into ClickHouse (or SQLite): `-p PID... -e ENV --enable ...` and the
 * original ebpf_monitor's per-tracker flags. One event loop, one sink; a tracker
 * that cannot attach is a warning, the others run.
 *
 * Adding a tracker is one entry below: its --enable name, its tracker_ops, and the
 * original's flags mapped onto the tracker's own long options.
 */
#include "monitor.h"

extern const struct tracker_ops pygc_tracker, pyhandoff_tracker, tcphandshake_tracker, tcploss_tracker,
	hostnet_tracker, pystack_tracker, pygil_tracker,
	pyoffcpu_tracker;

static const struct monitor_entry trackers[] = {
	{ "gc", &pygc_tracker, NULL, false, { { 0 } } },
	{ "gil", &pygil_tracker, NULL, true,
	  { { "gil-min-wait-ms", "min-wait-ms", "MS", "gil: only GIL waits of MS or more (default 1.0)" },
	    { "gil-py-enable", NULL, NULL, "gil: the waiter's and holder's Python stacks (always walked)" },
	    { "gil-py-min-ms", "py-min-ms", "MS", "gil: Python stacks only of waits of MS or more" },
	    { 0 } } },
	{ "offcpu", &pyoffcpu_tracker, NULL, true,
	  { { "offcpu-min-total-ms", "min-ms", "MS", "offcpu: only periods off the CPU of MS or more (default 20)" },
	    { "offcpu-max-stack-depth", "max-stack-depth", "N", "offcpu: frames kept per stack (default 20)" },
	    { "offcpu-py-enable", NULL, NULL, "offcpu: the Python stack (always walked)" },
	    { "offcpu-py-min-ms", "py-min-ms", "MS", "offcpu: Python stacks only of periods of MS or more" },
	    { 0 } } },
	{ "handoff", &pyhandoff_tracker, NULL, false,
	  { { "handoff-min-ms", "min-ms", "MS", "handoff: only waits of MS or more" }, { 0 } } },
	{ "tcp_accept", &tcphandshake_tracker, "tcp_accept", false, { { 0 } } },
	{ "tcp_connect", &tcphandshake_tracker, "tcp_connect", false, { { 0 } } },
	{ "tcp_loss", &tcploss_tracker, NULL, false,
	  { { "loss-filter-ip", "filter-ip", "IP", "tcp_loss: only connections with IP on either side" }, { 0 } } },
	{ "host_net_health", &hostnet_tracker, NULL, false,
	  { { "hnh-interface", "interface", "IFACE", "host_net_health: counters of IFACE (default: the default route's)" },
	    { "hnh-interval", "interval", "SECONDS", "host_net_health: seconds between snapshots (default 30)" },
	    { "hnh-procs", "procs", "LIST", "host_net_health: fd usage of these process names" },
	    { 0 } } },
	{ "py_stack", &pystack_tracker, NULL, false,
	  { { "pystack-frequency", "frequency", "HZ", "py_stack: samples per second and CPU (default 99)" }, { 0 } } },
};

static const struct tool_doc doc = {
	.name = "pymonitor",
	.summary = "Run the pyebpf trackers in one process, every event into ClickHouse or SQLite.",
	.examples = "  pymonitor -p 4242 -e prod --clickhouse-url http://127.0.0.1:8123\n"
		    "  pymonitor -p 4242 4243 -e prod --enable gc py_stack --sqlite /var/lib/pymonitor.db\n"
		    "  pymonitor --all -e staging --enable tcp_connect,tcp_loss --sqlite /var/tmp/net.db -d 60\n",
};

int main(int argc, char **argv)
{
	return monitor_main(&doc, trackers, sizeof(trackers) / sizeof(trackers[0]), argc, argv);
}
