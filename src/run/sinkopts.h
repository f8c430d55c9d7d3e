/*
 * The database sink options every tool shares (--sqlite, --clickhouse-*, --ch-*,
 * --also-stdout): what they set, their entries in every tracker's option table, and
 * how every tracker's table ends. The sinks themselves: dbsinks.h, sink.h.
 */
#ifndef PYEBPF_SINKOPTS_H
#define PYEBPF_SINKOPTS_H

#include <stdbool.h>

#include "opts.h"

/* Ids of the sink options, apart from the other shared ones (opts.h) and the tools' own. */
enum {
	OPT_SQLITE = 1050,
	OPT_CH_URL,
	OPT_CH_USER,
	OPT_CH_PASSWORD,
	OPT_CH_PASSWORD_FILE,
	OPT_CH_DATABASE,
	OPT_CH_BATCH_SIZE,
	OPT_CH_FLUSH_INTERVAL,
	OPT_CH_QUEUE_MAX,
	OPT_ALSO_STDOUT,
	OPT_PROFILE_WINDOW,
	OPT_RAW_SAMPLES,
	OPT_RETAIN_DAYS,
	OPT_CH_CLUSTER,
};

#define OPT_ENTRIES_SINKS                                                                                   \
	{ OPT_SQLITE, 0, "sqlite", "FILE", "write every event into the SQLite database FILE (WAL mode)" },           \
	{ OPT_CH_URL, 0, "clickhouse-url", "URL", "write every event into ClickHouse at URL (http://HOST:PORT)" }, \
	{ OPT_CH_USER, 0, "clickhouse-user", "USER", "ClickHouse user (default: default)" },                     \
	{ OPT_CH_PASSWORD, 0, "clickhouse-password", "PASS", "ClickHouse password (hidden from ps; see also the next)" }, \
	{ OPT_CH_PASSWORD_FILE, 0, "clickhouse-password-file", "FILE", "read the ClickHouse password from FILE" }, \
	{ OPT_CH_DATABASE, 0, "clickhouse-database", "DB", "ClickHouse database of the tables (default: default)" }, \
	{ OPT_CH_CLUSTER, 0, "clickhouse-cluster", "NAME", "tables on every node of cluster NAME, written through a Distributed table" }, \
	{ OPT_CH_BATCH_SIZE, 0, "ch-batch-size", "N", "rows per ClickHouse insert (default 5000)" },              \
	{ OPT_CH_FLUSH_INTERVAL, 0, "ch-flush-interval", "SECONDS", "longest a row waits for its insert (default 30)" }, \
	{ OPT_CH_QUEUE_MAX, 0, "ch-queue-max", "N", "rows held while ClickHouse is away; beyond, dropped and counted (default 100000)" }, \
	{ OPT_PROFILE_WINDOW, 0, "profile-window", "SECONDS", "stack samples: one row per stack and thread per SECONDS (default 10)" }, \
	{ OPT_RAW_SAMPLES, 0, "raw-samples", NULL, "also a row per stack sample (table ebpf_py_stacks)" }, \
	{ OPT_RETAIN_DAYS, 0, "retain-days", "N", "delete rows older than N days (whole UTC days), every hour" }, \
	{ OPT_ALSO_STDOUT, 0, "also-stdout", NULL, "with a database: also print every record (JSON lines) on stdout" }

/* How every BPF tool's table ends, in the order --help and the man pages list them. */
#define OPT_ENTRIES_TRACKER_TAIL                                                          \
	OPT_ENTRY_ENV, OPT_ENTRY_DURATION, OPT_ENTRY_JSON, OPT_ENTRY_KHEADERS, OPT_ENTRY_EBPF, \
		OPT_ENTRIES_SINKS,                                                        \
		OPT_ENTRY_FIELDS, OPT_ENTRY_VERBOSE, OPT_ENTRY_HELP, OPT_ENTRY_VERSION, OPT_END
/* A tracker without BPF (text stays NULL): no --kernel-headers, no --ebpf. */
#define OPT_ENTRIES_TRACKER_TAIL_NO_BPF                                                   \
	OPT_ENTRY_ENV, OPT_ENTRY_DURATION, OPT_ENTRY_JSON, \
		OPT_ENTRIES_SINKS,                                                        \
		OPT_ENTRY_FIELDS, OPT_ENTRY_VERBOSE, OPT_ENTRY_HELP, OPT_ENTRY_VERSION, OPT_END

struct sink_opts {
	const char *sqlite;
	const char *ch_url;
	const char *ch_user;
	char *ch_password; /* a copy (the command line's is blanked) */
	const char *ch_password_file;
	const char *ch_database;
	const char *ch_cluster;
	unsigned long ch_batch_size;
	double ch_flush_interval_s;
	unsigned long ch_queue_max;
	bool also_stdout;
	double profile_window_s; /* aggregated profile rows (profrows.h) per this many seconds */
	bool raw_samples;        /* stack samples also as rows of their own */
	unsigned long retain_days; /* 0: keep everything */
};

/*
 * Retention (--retain-days): rows whose UTC day is more than days before today's go;
 * the bound is the start of that day, in microseconds since the epoch.
 */
long long sinkopts_retain_bound_us(unsigned long days, long long now_us);
/* Seconds between retention passes: 3600, or $PYEBPF_RETAIN_INTERVAL_S (the tests' knob). */
double sinkopts_retain_interval_s(void);

/* Defaults (a zeroed struct gets them at sinkopts_finish too). */
void sinkopts_init(struct sink_opts *o);
/*
 * One option: 1 when it is a sink option (handled), 0 when it is not (also when o is
 * NULL), -1 after a usage error. arg is the command line's own string: a password in
 * it is blanked. The parsers of src/run call it before the tool's own handler.
 */
int sinkopts_handle(struct sink_opts *o, int id, char *arg);
/* Whether any database sink is asked for (false when o is NULL). */
bool sinkopts_any_database(const struct sink_opts *o);

#endif
