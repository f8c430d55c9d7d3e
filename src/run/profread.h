/*
 * Reading stored stacks back (pystack, pyoffcpu and pygil --from): the rows a database
 * sink wrote of one table (profrows.h: pystack's aggregated ebpf_py_stack_profile,
 * pyoffcpu's ebpf_off_cpu events, pygil's ebpf_gil_wait events), each naming its stack
 * by a stack_id resolved in the dictionary ebpf_stacks, chosen by env, host, pids and
 * a time range. A layout names the table, its stack column, its weight column and the
 * other columns a tool wants; the rows are summed per stack and those columns, or
 * handed out one by one. The source is "sqlite:FILE" or a ClickHouse server's
 * http://HOST:PORT (the sink's user, password and database options); each is one
 * function below profread_each(). Times on the command line are ISO 8601 (UTC) or
 * relative to now ("-1h").
 */
#ifndef PYEBPF_PROFREAD_H
#define PYEBPF_PROFREAD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "opts.h"
#include "sinkopts.h"

/* The option table entries of a tool that reads stored profiles, in this order. */
#define PROFREAD_OPT_ENTRIES(from_id, host_id, since_id, until_id)                                      \
	{ from_id, 0, "from", "SOURCE", "draw stored records, not live ones: sqlite:FILE or ClickHouse http://HOST:PORT" }, \
	{ host_id, 0, "host", "NAME", "with --from: the rows of host NAME only (default: every host)" },       \
	{ since_id, 0, "since", "TIME", "with --from: rows from TIME on (ISO 8601 UTC, or -30m, -2h, -1d; default: all)" }, \
	{ until_id, 0, "until", "TIME", "with --from: rows before TIME (default: all)" }

/* Columns a layout hands out besides the stack and the weight, at most. */
enum { PROFREAD_COLS = 6 };

/* What is read: a table, its stack and weight columns, the columns wanted. */
struct profread_layout {
	const char *metric; /* the records ("py_stack", "off_cpu", "gil_wait"), their table by dbtable.h */
	bool profile;       /* their aggregated table (profrows.h), not their event table */
	const char *stack;  /* the column of the stack's id: "stack_id", "py_stack_id", ... */
	const char *weight; /* the weight column: "samples", "duration_ms" */
	bool sum;           /* rows summed per stack and cols (the first stored first), else each row in time order */
	const char *cols[PROFREAD_COLS + 1]; /* NULL-terminated: "pid", "thread_name", ... */
	const char *what;   /* what a row is, in "no py_stack samples stored": "samples", "events" */
};

/* Which rows: NULL/empty and -1 mean any. */
struct profread_query {
	const char *source; /* "sqlite:FILE" or ClickHouse's "http://HOST:PORT" (NULL: no --from) */
	const struct sink_opts *ch; /* ClickHouse: --clickhouse-user, -password(-file), -database */
	const struct profread_layout *layout;
	const char *env, *host;
	const pid_t *pids;
	int npids;
	int64_t since_us, until_us; /* rows (a profile's windows) that begin in [since, until) */
};

/* One stored row with a stack (rows without one, or with one not in the dictionary, are left out). */
struct profread_row {
	const char *stack; /* folded, root first */
	double weight;     /* the weight column's value, or the sum of it */
	const char *col[PROFREAD_COLS]; /* the layout's cols, as text; NULL when null */
};

typedef void (*profread_fn)(void *ctx, const struct profread_row *r);

/* q of layout, nothing chosen yet. */
void profread_init(struct profread_query *q, const struct profread_layout *layout);
/* The options of PROFREAD_OPT_ENTRIES, in that order. */
enum profread_opt { PROFREAD_FROM, PROFREAD_HOST, PROFREAD_SINCE, PROFREAD_UNTIL };
/* One of them into q; 0, or -1 after a usage error. */
int profread_option(struct profread_query *q, enum profread_opt which, const char *arg);
/*
 * After the options: --host, --since and --until need --from, which reads a database
 * (not with --sqlite or --clickhouse-url); the rows' env and pids are the run's -e and
 * -p, its ClickHouse options the sink's. 0, or -1 after a usage error.
 */
int profread_check(struct profread_query *q, const struct common_opts *c);
/* Whether source names a source this module reads; 0, or -1 after a usage error. */
int profread_check_source(const char *source);
/*
 * A time of the command line ("2026-12-07T09:00:00Z", "2026-12-07 09:00", "2026-12-07",
 * "-90s", "-30m", "-2h", "-1d", "now") in microseconds since the epoch; 0, or -1 after
 * a usage error naming option.
 */
int profread_parse_time(const char *option, const char *arg, int64_t *out_us);
/*
 * Every stored row of q to fn; how many to *rows. 0; -1 after saying why (unreadable,
 * an unknown table layout, no rows in the range).
 */
int profread_each(const struct profread_query *q, profread_fn fn, void *ctx, long long *rows);

#endif
