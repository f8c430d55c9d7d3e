/*
 * A tracker is one kind of tracing: its options, its BPF text, what it attaches,
 * how it decodes records, its tables and summary. It keeps all of its state in its
 * own struct (which begins with struct tracker), so several trackers, or several
 * instances of one, run in one process under one runner (runner.h).
 *
 * The runner calls, in this order: init, option (per option), check, prepare; then
 * compiles text with cflags (when prepare set text), calls start, then tick after
 * every poll until the run ends, drains the buffers, calls finish and destroy.
 *
 * The contract: name, size, options, schemas, prepare and start are mandatory;
 * every other member may be NULL, and then nothing is done in its place (no option
 * of its own is accepted without option). The callers (tracker.c, runner.c,
 * monitor.c) call a mandatory one unconditionally and test every other one.
 */
#ifndef PYEBPF_TRACKER_H
#define PYEBPF_TRACKER_H

#include <stdbool.h>
#include <stdint.h>

#include "bpfprog.h"
#include "opts.h"
#include "schema.h"
#include "sinkopts.h"
#include "sink.h"

struct tracker;
struct monitor_entry;

struct tracker_ops {
	/* Mandatory. */
	const char *name;                    /* e.g. "tcphandshake" */
	size_t size;                         /* of the tracker's struct */
	const struct opt *options;           /* its option table, the shared tail included */
	const struct schema *const *schemas; /* every record it emits, NULL-terminated */
	/*
	 * May be NULL. The BPF runtime that compiles and reads its text (&bpfprog_runtime),
	 * or NULL for a tracker without BPF: it needs no privileges, its prepare leaves
	 * text NULL, and it is ticked by the timeout alone (poll_ms: how long until it
	 * wants its next tick).
	 */
	const struct bpfprog_runtime *bpf;
	/*
	 * May be NULL. What pymonitor calls it (monitor.h): its --enable words and the
	 * original monitor's flags, ending with a NULL name; NULL: not in pymonitor.
	 */
	const struct monitor_entry *monitor;
	/* May be NULL (the struct is zeroed). Defaults. */
	void (*init)(struct tracker *t);
	/*
	 * May be NULL when options has none of its own. One of its options (id from its
	 * option table); 0, or -1 after a usage error.
	 */
	int (*option)(struct tracker *t, int id, const char *arg);
	/* May be NULL. After all options: 0, or -1 after a usage error (the tool exits 2). */
	int (*check)(struct tracker *t);
	/*
	 * Mandatory. Inspects targets and sets text and cflags (text stays NULL for a
	 * tracker without BPF). 0, or -1 after an error message.
	 */
	int (*prepare)(struct tracker *t);
	/*
	 * Mandatory. prog is compiled (or NULL without text): fill maps, open buffers,
	 * attach, set banner. 0, or -1 after an error message.
	 */
	int (*start)(struct tracker *t);
	/*
	 * May be NULL (then it is never done before the deadline or a signal). After every
	 * poll, with CLOCK_MONOTONIC now: refresh targets, print -i tables, set done. -1: fatal.
	 */
	int (*tick)(struct tracker *t, uint64_t now_ns);
	/* May be NULL. Everything is drained: end-of-run tables and the summary. */
	void (*finish)(struct tracker *t);
	/* May be NULL. Frees what it holds (not the struct: tracker_free does). */
	void (*destroy)(struct tracker *t);
};

struct tracker {
	const struct tracker_ops *ops;
	const struct common_opts *common; /* -p, -e, -j, --kernel-headers of the run */
	struct sink *sink;                /* where its records go: the run's one sink, set by the runner */
	const char *text;                 /* its BPF text, set by prepare */
	struct cflags cflags;             /* -D options for the compile, set by prepare */
	struct bpfprog *prog;             /* compiled from text by the runner */
	int poll_ms;                      /* the longest a buffered record may wait (default 100) */
	bool done;                        /* every target it traced has exited */
	bool failed;                      /* finish could not write a result: the run fails */
	bool stored;                      /* set by check: it draws stored records, no BPF runs (no privileges) */
	uint64_t cpu_start_us;            /* the process's CPU time when start returned (summary.h) */
	char banner[160];                 /* what start says it traces, e.g. "Tracing TCP handshakes." */
};

/* A new tracker of ops with its defaults (init), or NULL when out of memory. */
struct tracker *tracker_new(const struct tracker_ops *ops, const struct common_opts *common);
/* One of t's own options (ops->option): 0, or -1 after a usage error or without option. */
int tracker_option(struct tracker *t, int id, const char *arg);
/*
 * A tool's command line into t (its own options) and common (the shared ones), then
 * its check. 0, or -1 after a usage error message (the tool exits 2).
 */
int tracker_parse_args(struct tracker *t, const struct tool_doc *doc, struct common_opts *common,
		       int argc, char **argv);
/* destroy, then the parts every tracker has. */
void tracker_free(struct tracker *t);

/*
 * The check of a tracker that traces -p processes only and may print folded stacks
 * (folded: its -f): -p is required (unless --ebpf or --fields), and -f excludes -j.
 * 0, or -1 after a usage error.
 */
int tracker_check_pids_folded(const struct tracker *t, bool folded);

/*
 * A prepare that found none of the -p pids left to trace (each said skipped): says so,
 * naming the tracker, and returns -1 (the tool exits 1; pymonitor runs without it).
 */
int tracker_no_targets(const struct tracker *t);

#endif
