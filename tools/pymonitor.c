/*
 * pymonitor: the trackers of the small tools in one process, for a host that ships
 * every event into ClickHouse (or SQLite): `-p PID... -e ENV --enable ...` and the
 * original ebpf_monitor's per-tracker flags. One event loop, one sink; a tracker
 * that cannot attach is a warning, the others run.
 *
 * Its trackers are the list of src/trackers/trackers.h, in that order; each one's
 * --enable words and the original's flags mapped onto its own long options are in
 * its ops (.monitor).
 */
#include "monitor.h"
#include "trackers.h"

static const struct tracker_ops *const trackers[] = { PYEBPF_TRACKERS(PYEBPF_TRACKER_ADDRESS) };

static const struct tool_doc doc = {
	.name = "pymonitor",
	.summary = "Run the pyebpf trackers in one process, every event into ClickHouse or SQLite.",
	.examples = "  pymonitor -p 4242 -e prod --clickhouse-url http://127.0.0.1:8123\n"
		    "  pymonitor -p 4242 4243 -e prod --enable gc py_stack --sqlite /var/lib/pymonitor.db\n"
		    "  pymonitor -p $(cat /run/gunicorn.pid) --children -e prod --sqlite /var/lib/pymonitor.db\n"
		    "  pymonitor --all -e staging --enable tcp_connect,tcp_loss --sqlite /var/tmp/net.db -d 60\n",
};

int main(int argc, char **argv)
{
	return monitor_main(&doc, trackers, sizeof(trackers) / sizeof(trackers[0]), argc, argv);
}
