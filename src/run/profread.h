/*
 * Reading stored profiles back (pystack --from): the aggregated profile rows a
 * database sink wrote (profrows.h: ebpf_py_stack_profile, its stacks in ebpf_stacks),
 * chosen by env, host, pids and a time range, summed per stack and thread. The
 * source is "sqlite:FILE" or a ClickHouse server's http://HOST:PORT (the sink's user,
 * password and database options); each is one function below profread_each(). Times on the command line are ISO 8601 (UTC) or
 * relative to now ("-1h").
 */
#ifndef PYEBPF_PROFREAD_H
#define PYEBPF_PROFREAD_H

#include <stdint.h>
#include <sys/types.h>

#include "sinkopts.h"

/* The option table entries of a tool that reads stored profiles, in this order. */
#define PROFREAD_OPT_ENTRIES(from_id, host_id, since_id, until_id)                                      \
	{ from_id, 0, "from", "SOURCE", "draw stored samples, not live ones: sqlite:FILE or ClickHouse http://HOST:PORT" }, \
	{ host_id, 0, "host", "NAME", "with --from: the rows of host NAME only (default: every host)" },       \
	{ since_id, 0, "since", "TIME", "with --from: windows from TIME on (ISO 8601 UTC, or -30m, -2h, -1d; default: all)" }, \
	{ until_id, 0, "until", "TIME", "with --from: windows before TIME (default: all)" }

/* Which rows: NULL/empty and -1 mean any. */
struct profread_query {
	const char *source; /* "sqlite:FILE" or ClickHouse's "http://HOST:PORT" */
	const struct sink_opts *ch; /* ClickHouse: --clickhouse-user, -password(-file), -database */
	const char *metric; /* the sampled records: "py_stack" */
	const char *env, *host;
	const pid_t *pids;
	int npids;
	int64_t since_us, until_us; /* windows that begin in [since, until) */
};

/* One stack of one thread, with its samples summed over the range. */
struct profread_row {
	const char *stack; /* folded, root first */
	long long pid, tid;
	const char *thread_name, *task;
	long long samples;
};

typedef void (*profread_fn)(void *ctx, const struct profread_row *r);

/* Whether source names a source this module reads; 0, or -1 after a usage error. */
int profread_check_source(const char *source);
/*
 * A time of the command line ("2026-12-07T09:00:00Z", "2026-12-07 09:00", "2026-12-07",
 * "-90s", "-30m", "-2h", "-1d", "now") in microseconds since the epoch; 0, or -1 after
 * a usage error naming option.
 */
int profread_parse_time(const char *option, const char *arg, int64_t *out_us);
/*
 * Every stored row of q to fn; the samples in all to *samples. 0; -1 after saying why
 * (unreadable, an unknown table layout, no samples in the range).
 */
int profread_each(const struct profread_query *q, profread_fn fn, void *ctx, long long *samples);

#endif
