/*
 * pymonitor's machinery: several trackers in one process, chosen with --enable,
 * sharing -p, -e, the sinks and one event loop (runner_run_each: one that cannot
 * attach is a warning). The tool names its trackers in a table; a tracker joins by
 * one entry: its name, its ops, and the original monitor's flags mapped onto the
 * tracker's own long options.
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

struct monitor_entry {
	const char *name;              /* the --enable word, e.g. "gc" */
	const struct tracker_ops *ops;
	/*
	 * When entries share a tracker (tcp_accept, tcp_connect: tcphandshake): the event
	 * metric this one stands for; the tracker runs once, and the metrics of entries not
	 * enabled are left out. NULL: all of the tracker's records.
	 */
	const char *metric;
	bool needs_pids; /* the tracker traces -p pids only: left out with --all */
	struct monitor_flag flags[MONITOR_MAX_FLAGS]; /* ending with a NULL flag */
};

/* Parses argv, runs the enabled trackers into the sinks; the exit code. */
int monitor_main(const struct tool_doc *doc, const struct monitor_entry *entries, int n, int argc,
		 char **argv);

#endif
