/*
 * Database sinks (--sqlite, --clickhouse-url) and the sink a run writes into: stdout
 * alone, or the databases (and stdout with --also-stdout) together. Databases take
 * the event records, one table each (dbtable.h); tables, rows and summaries stay on
 * stdout/stderr as before.
 */
#ifndef PYEBPF_DBSINKS_H
#define PYEBPF_DBSINKS_H

#include "opts.h"
#include "sinkopts.h"
#include "schema.h"
#include "sink.h"

/* The tables of schemas (event schemas) in the SQLite file path; NULL after an error message. */
struct sink *sink_sqlite_open(const char *path, const struct schema *const *schemas, int n);
/* --retain-days: a thread deletes the rows of s older than days, every hour; 0 or -1 (said). */
int sink_sqlite_retain(struct sink *s, unsigned long days);
/*
 * ClickHouse at o->ch_url: checks the server, the user and the database, creates the
 * tables; NULL after an error message. Rows go out in batches from a thread of its own.
 */
struct sink *sink_clickhouse_open(const struct sink_opts *o, const struct schema *const *schemas, int n);
/*
 * The ClickHouse password into *out (NULL: none): --clickhouse-password, else the
 * first line of --clickhouse-password-file, else $CLICKHOUSE_PASSWORD. 0, or -1 (said).
 */
int sink_clickhouse_password(const struct sink_opts *o, char **out);

/*
 * The sink of a run whose trackers emit the schemas of lists (each NULL-terminated):
 * stdout, or with a database option the databases (and stdout when --also-stdout).
 * With a database, records are JSON (c->json is set: pystack then emits samples).
 * NULL after an error message (exit 1).
 */
struct sink *sinks_open(struct common_opts *c, const struct schema *const *const *lists, int nlists);

#endif
