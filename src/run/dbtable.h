/*
 * The shape of a database table, from a record schema: what the ClickHouse and the
 * SQLite sinks share. One table per event metric (ebpf_<metric>, with the names the
 * original monitor used), its columns:
 *
 *   env, host, time, time_us   the key (env: "" without -e; host: this machine's name)
 *   every other schema field   in schema order; "metric" is the table itself
 *
 * A time field becomes two columns: NAME (the second, a ClickHouse DateTime; ISO
 * text in SQLite) and NAME_us (microseconds since the epoch), as ClickHouse 18.16
 * has no DateTime64. Arrays and objects are their JSON text. A field a record lacks
 * is null (ClickHouse ignores DEFAULT for omitted JSONEachRow fields, so every row
 * names every column).
 */
#ifndef PYEBPF_DBTABLE_H
#define PYEBPF_DBTABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "schema.h"

/*
 * DB_ID: a stack_id, never negative (ClickHouse UInt64, SQLite INTEGER). DB_COUNT: a
 * profile row's samples, a small count (ClickHouse UInt32, SQLite INTEGER).
 */
enum db_type { DB_STRING, DB_INT, DB_REAL, DB_BOOL, DB_DATETIME, DB_MICROS, DB_ID, DB_COUNT };

struct db_column {
	char name[64];
	enum db_type type;
	const char *field; /* the record's key */
	bool key;          /* env, host, time, time_us (and every column of a profile table): never null */
	bool stack_id;     /* the stack_id of the field's stack text (column NAME_id, profrows.h) */
};

#define DB_MAX_COLUMNS 96

struct db_table {
	const struct schema *schema;
	char name[64];
	/*
	 * The sort key: "env, host, time"; the profile tables (profrows.h) "env, host,
	 * time, stack_id" (their queries take a host's or an env's time range; a window's
	 * rows then lie together and each window's list of stacks is much like the last,
	 * which compresses); the dictionary of stacks "env, host, stack_id, time".
	 */
	const char *order_by;
	int ncols;
	struct db_column cols[DB_MAX_COLUMNS];
};

/* Only event records go into tables (rows and summaries stay on stdout/stderr). */
bool dbtable_wanted(const struct schema *sc);
/* The table of sc; 0, or -1 when it has too many columns. */
int dbtable_init(struct db_table *t, const struct schema *sc);
/*
 * obj as a row: an object with every column in order. DB_DATETIME values are the
 * record's ISO text (each sink converts), DB_MICROS integers. host: gethostname's.
 */
json_t *dbtable_row(const struct db_table *t, json_t *obj, const char *host);
/* Microseconds since the epoch of an ISO 8601 UTC time ("...T..:..:..[.ffffff]Z"), or -1. */
int64_t dbtable_parse_time_us(const char *iso);
/* Now, in microseconds since the epoch. */
int64_t dbtable_now_us(void);
/* us (microseconds since the epoch) as the ISO text of a time field. */
void dbtable_format_time_us(int64_t us, char *buf, size_t len);
/* This machine's name, for the host column. */
const char *dbtable_host(void);
/* The event schemas of every tracker (NULL-terminated lists), each once; returns how many. */
int dbtable_collect(const struct schema *const *const *lists, int nlists, const struct schema **out, int max);

#endif
