/*
 * pymonitor's machinery: several trackers in one process, chosen with --enable,
 * sharing -p, -e, the sinks and one event loop (runner_run_each: one that cannot
 * attach is a warning). The tool passes the list of trackers (trackers.h); each
 * tracker says in its ops (.monitor) what pymonitor calls it: its entries, each
 * an --enable word and the original monitor's flags mapped onto the tracker's own
 * long options.
 */
#ifndef PYEBPF_MONITOR_H
#define PYEBPF_MONITOR_H

#include "opts.h"
#include "tracker.h"

struct monitor_flag {
	const char *flag;   /* pymonitor's long option, e.g. "pystack-frequency" */
	const char *option; /* the tracker's long option it sets, e.g. "frequency"; NULL:
			     * what the tracker does anyway, accepted for the original's
			     * command lines */
	const char *arg;    /* metavariable, NULL for a flag */
	const char *help;
};

#define MONITOR_MAX_FLAGS 6

/* An --enable word of the tracker whose ops.monitor lists it (ending with a NULL name). */
struct monitor_entry {
	const char *name; /* the --enable word, e.g. "gc" */
	/*
	 * When entries share a tracker (tcp_accept, tcp_connect: tcphandshake): the event
	 * metric this one stands for; the tracker runs once, and the metrics of entries not
	 * enabled are left out. NULL: all of the tracker's records.
	 */
	const char *metric;
	bool needs_pids; /* the tracker traces -p pids only: left out with --all */
	struct monitor_flag flags[MONITOR_MAX_FLAGS]; /* ending with a NULL flag */
};

/*
 * Parses argv, runs the enabled ones of the n trackers into the sinks; the exit code.
 * The --enable words are the trackers' monitor entries, in this order; a tracker
 * without them (monitor NULL) is not offered.
 */
int monitor_main(const struct tool_doc *doc, const struct tracker_ops *const *trackers, int n, int argc,
		 char **argv);

#endif
