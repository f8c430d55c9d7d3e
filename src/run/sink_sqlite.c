/*
 * The SQLite sink: the tables of dbtable.h in one database file, in WAL mode so it
 * can be queried while it is written, one transaction per batch (the runner's flush
 * after every poll ends it). Nothing is written before the run has begun: the open
 * only checks (read-only), and the database is set up at the first record or flush,
 * which come after every tracker started; a run that fails before leaves an existing
 * file byte for byte as it was, and makes none.
 *
 * Retention (--retain-days): a thread of its own, started with the setup, on a
 * connection of its own, deletes the rows older than the bound every hour in small
 * transactions (RETAIN_CHUNK rows), so the event loop's writes wait for at most one of
 * them and readers (WAL) for none.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dbsinks.h"
#include "dbtable.h"
#include "log.h"
#include "outfile.h"

#define MAX_TABLES 32
/* Rows per retention transaction. */
#define RETAIN_CHUNK 2000

struct retention {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
	unsigned long days;
	double interval_s;
	unsigned long deleted; /* in all, for the tests and the exit line */
};

struct sqlite_table {
	struct db_table t;
	sqlite3_stmt *insert;
	unsigned long rows;
};

struct sqlite_sink {
	struct sink base;
	sqlite3 *db;
	const char *path;
	bool in_txn;
	bool set_up; /* the database is open for writing, its tables made (setup) */
	unsigned long retain_days; /* --retain-days: the retention thread starts with setup */
	int failed; /* a write failed: results are lost from then on */
	int ntables;
	struct sqlite_table tables[MAX_TABLES];
	struct retention *retention; /* NULL: rows are kept */
};

static const char *sql_type(enum db_type t)
{
	switch (t) {
	case DB_INT:
	case DB_BOOL:
	case DB_MICROS:
	case DB_ID:
	case DB_COUNT:
		return "INTEGER";
	case DB_REAL:
		return "REAL";
	default:
		return "TEXT";
	}
}

static int exec(struct sqlite_sink *q, const char *sql)
{
	char *err = NULL;

	if (sqlite3_exec(q->db, sql, NULL, NULL, &err) == SQLITE_OK)
		return 0;
	log_error("SQLite database %s: %s (in: %.60s)", q->path, err ? err : sqlite3_errmsg(q->db), sql);
	sqlite3_free(err);
	return -1;
}

/* CREATE TABLE IF NOT EXISTS and the INSERT statement of one table. */
static int setup_table(struct sqlite_sink *q, struct sqlite_table *st)
{
	size_t cap = 256 + (size_t)st->t.ncols * 96;
	char *create = malloc(cap), *insert = malloc(cap);
	size_t a, b;
	int rc = -1;

	if (!create || !insert)
		goto out;
	a = (size_t)snprintf(create, cap, "CREATE TABLE IF NOT EXISTS \"%s\" (", st->t.name);
	b = (size_t)snprintf(insert, cap, "INSERT INTO \"%s\" VALUES (", st->t.name);
	for (int i = 0; i < st->t.ncols; i++) {
		const struct db_column *c = &st->t.cols[i];
		a += (size_t)snprintf(create + a, cap - a, "%s\"%s\" %s%s", i ? ", " : "", c->name,
				      sql_type(c->type), c->key ? " NOT NULL" : "");
		b += (size_t)snprintf(insert + b, cap - b, "%s?", i ? ", " : "");
	}
	snprintf(create + a, cap - a, ")");
	snprintf(insert + b, cap - b, ")");
	if (exec(q, create))
		goto out;
	/* the table's sort key (dbtable.h), the order the queries of pyebpf(7) use; time as time_us */
	a = (size_t)snprintf(create, cap, "CREATE INDEX IF NOT EXISTS \"%s_key\" ON \"%s\" (", st->t.name, st->t.name);
	for (const char *k = st->t.order_by; *k && a < cap;) {
		size_t n = strcspn(k, ", ");
		a += (size_t)snprintf(create + a, cap - a, "%s%.*s%s", k == st->t.order_by ? "" : ", ", (int)n, k,
				      n == 4 && !strncmp(k, "time", 4) ? "_us" : "");
		k += n + strspn(k + n, ", ");
	}
	if (a < cap)
		snprintf(create + a, cap - a, ")");
	if (exec(q, create))
		goto out;
	if (sqlite3_prepare_v2(q->db, insert, -1, &st->insert, NULL) != SQLITE_OK) {
		log_error("SQLite database %s: %s", q->path, sqlite3_errmsg(q->db));
		goto out;
	}
	rc = 0;
out:
	free(create);
	free(insert);
	return rc;
}

static struct sqlite_table *table_of(struct sqlite_sink *q, const struct schema *sc)
{
	for (int i = 0; i < q->ntables; i++)
		if (q->tables[i].t.schema == sc)
			return &q->tables[i];
	return NULL;
}

static void bind(sqlite3_stmt *st, int i, json_t *v)
{
	if (json_is_integer(v))
		sqlite3_bind_int64(st, i, json_integer_value(v));
	else if (json_is_real(v))
		sqlite3_bind_double(st, i, json_real_value(v));
	else if (json_is_string(v))
		sqlite3_bind_text(st, i, json_string_value(v), (int)json_string_length(v), SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

static int setup(struct sqlite_sink *q);

static void sqlite_record(struct sink *s, const struct schema *sc, json_t *obj)
{
	struct sqlite_sink *q = (struct sqlite_sink *)s;
	struct sqlite_table *st = table_of(q, sc);
	json_t *row;
	const char *key;
	json_t *v;
	int i = 1;

	if (!st || q->failed || setup(q))
		return;
	if (!q->in_txn) {
		if (exec(q, "BEGIN")) {
			q->failed = 1;
			return;
		}
		q->in_txn = true;
	}
	if (!(row = dbtable_row(&st->t, obj, dbtable_host())))
		return;
	json_object_foreach(row, key, v)
	{
		(void)key;
		bind(st->insert, i++, v);
	}
	if (sqlite3_step(st->insert) != SQLITE_DONE) {
		log_error("SQLite database %s: writing into %s: %s", q->path, st->t.name, sqlite3_errmsg(q->db));
		q->failed = 1;
	} else
		st->rows++;
	sqlite3_reset(st->insert);
	json_decref(row);
}

static void sqlite_flush(struct sink *s)
{
	struct sqlite_sink *q = (struct sqlite_sink *)s;

	/* the runner flushes after every poll of a started run: its tables exist from then on */
	if (!q->failed)
		setup(q);
	if (!q->in_txn)
		return;
	q->in_txn = false;
	if (exec(q, "COMMIT"))
		q->failed = 1;
}

static int sqlite_status(struct sink *s)
{
	return ((struct sqlite_sink *)s)->failed ? -1 : 0;
}

static void retention_stop(struct sqlite_sink *q);

static int sqlite_close(struct sink *s)
{
	struct sqlite_sink *q = (struct sqlite_sink *)s;
	int rc;

	/* a run that never began writes nothing (setup is the first write) */
	if (q->set_up)
		sqlite_flush(s);
	retention_stop(q);
	for (int i = 0; i < q->ntables; i++) {
		if (q->tables[i].rows)
			log_info("sqlite: %s: %lu rows into %s", q->tables[i].t.name, q->tables[i].rows, q->path);
		sqlite3_finalize(q->tables[i].insert);
	}
	if (sqlite3_close(q->db) != SQLITE_OK && !q->failed) {
		log_error("SQLite database %s: %s", q->path, sqlite3_errmsg(q->db));
		q->failed = 1;
	}
	rc = q->failed ? -1 : 0;
	free(q);
	return rc;
}

/* The rows of table older than bound, in chunks from the oldest rowid on; how many. */
static unsigned long delete_older(struct sqlite_sink *q, sqlite3 *db, const char *table, long long bound)
{
	char sql[256];
	sqlite3_stmt *st = NULL;
	unsigned long n = 0;
	long long from = 0;

	snprintf(sql, sizeof(sql),
		 "DELETE FROM \"%s\" WHERE rowid IN (SELECT rowid FROM \"%s\" WHERE rowid > ?1 AND time_us < ?2 "
		 "ORDER BY rowid LIMIT %d) RETURNING rowid",
		 table, table, RETAIN_CHUNK);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		log_warn("SQLite database %s: retention of %s: %s", q->path, table, sqlite3_errmsg(db));
		return 0;
	}
	for (;;) {
		unsigned long chunk = 0;
		int rc;
		sqlite3_bind_int64(st, 1, from);
		sqlite3_bind_int64(st, 2, bound);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			long long id = sqlite3_column_int64(st, 0);
			if (id > from)
				from = id;
			chunk++;
		}
		sqlite3_reset(st);
		if (rc != SQLITE_DONE) {
			log_warn("SQLite database %s: retention of %s: %s", q->path, table, sqlite3_errmsg(db));
			break;
		}
		n += chunk;
		if (chunk < RETAIN_CHUNK)
			break;
	}
	sqlite3_finalize(st);
	return n;
}

static void *retainer(void *arg)
{
	struct sqlite_sink *q = arg;
	struct retention *r = q->retention;
	sqlite3 *db = NULL;

	if (sqlite3_open_v2(q->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		log_warn("SQLite database %s: no retention: %s", q->path, db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, 60000);
	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		long long bound = sinkopts_retain_bound_us(r->days, dbtable_now_us());
		unsigned long n = 0;
		struct timespec ts;

		pthread_mutex_unlock(&r->lock);
		for (int i = 0; i < q->ntables; i++)
			n += delete_older(q, db, q->tables[i].t.name, bound);
		if (n) {
			time_t sec = (time_t)(bound / 1000000);
			struct tm tm;
			gmtime_r(&sec, &tm);
			log_info("sqlite: retention: %lu rows before %04d-%02d-%02d deleted from %s", n,
				 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, q->path);
		}
		pthread_mutex_lock(&r->lock);
		r->deleted += n;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)r->interval_s;
		ts.tv_nsec += (long)((r->interval_s - (double)(time_t)r->interval_s) * 1e9);
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		while (!r->stop && pthread_cond_timedwait(&r->wake, &r->lock, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&r->lock);
	sqlite3_close(db);
	return NULL;
}

int sink_sqlite_retain(struct sink *s, unsigned long days)
{
	((struct sqlite_sink *)s)->retain_days = days;
	return 0;
}

/* The retention thread, once the database is set up (it opens the file setup made). */
static int retention_start(struct sqlite_sink *q)
{
	struct retention *r = calloc(1, sizeof(*r));
	sigset_t all, old;
	int rc;

	if (!r)
		return -1;
	r->days = q->retain_days;
	r->interval_s = sinkopts_retain_interval_s();
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	q->retention = r;
	/* signals stay with the event loop's thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&r->thread, NULL, retainer, q);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		log_error("cannot start the SQLite retention thread");
		q->retention = NULL;
		pthread_mutex_destroy(&r->lock);
		pthread_cond_destroy(&r->wake);
		free(r);
		return -1;
	}
	return 0;
}

static void retention_stop(struct sqlite_sink *q)
{
	struct retention *r = q->retention;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->wake);
	free(r);
	q->retention = NULL;
}

static void nothing(struct sink *s, const struct schema *sc, json_t *obj)
{
	(void)s, (void)sc, (void)obj;
}

static void no_table(struct sink *s, const struct schema *sc, const char *title)
{
	(void)s, (void)sc, (void)title;
}

static const struct sink_ops sqlite_ops = {
	.record = sqlite_record,
	.table_begin = no_table,
	.table_row = nothing,
	.summary = nothing,
	.flush = sqlite_flush,
	.status = sqlite_status,
	.close = sqlite_close,
};

/* The database opened for writing in WAL mode, its tables made: once, at the run's first write. */
static int setup(struct sqlite_sink *q)
{
	char *mode = NULL;
	sqlite3_stmt *st;

	if (q->set_up)
		return 0;
	q->set_up = true;
	if (sqlite3_open_v2(q->path, &q->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
		log_error("cannot open the SQLite database %s: %s", q->path, q->db ? sqlite3_errmsg(q->db) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(q->db, 5000);
	/* WAL: readers see the last committed batch while the next one is written */
	if (exec(q, "PRAGMA journal_mode=WAL") || exec(q, "PRAGMA synchronous=NORMAL"))
		goto fail;
	if (sqlite3_prepare_v2(q->db, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		mode = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	if (!mode || strcmp(mode, "wal")) {
		log_error("SQLite database %s: cannot use WAL mode (journal mode is %s)", q->path, mode ? mode : "?");
		goto fail;
	}
	free(mode);
	for (int i = 0; i < q->ntables; i++)
		if (setup_table(q, &q->tables[i]))
			goto fail;
	if (q->retain_days && retention_start(q))
		goto fail;
	return 0;
fail:
	free(mode);
	q->failed = 1;
	return -1;
}

/*
 * What setup will meet, read-only: a file there must be a database whose tables of
 * these names have as many columns as their records; with no file, its directory must
 * take one. 0, or -1 after saying what is wrong.
 */
static int check(struct sqlite_sink *q)
{
	sqlite3 *db = NULL;
	struct stat sb;
	int rc = -1;

	if (stat(q->path, &sb) != 0) {
		if (errno == ENOENT && outfile_check(q->path) == 0)
			return 0;
		log_error("cannot open the SQLite database %s: %s", q->path, strerror(errno));
		return -1;
	}
	if (outfile_check(q->path)) {
		log_error("cannot open the SQLite database %s: %s", q->path, strerror(errno));
		return -1;
	}
	if (sqlite3_open_v2(q->path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, "PRAGMA schema_version", NULL, NULL, NULL) != SQLITE_OK) {
		log_error("cannot open the SQLite database %s: %s", q->path, db ? sqlite3_errmsg(db) : "out of memory");
		goto out;
	}
	for (int i = 0; i < q->ntables; i++) {
		char sql[300];
		sqlite3_stmt *st;
		int cols = 0;

		snprintf(sql, sizeof(sql), "PRAGMA table_info(\"%s\")", q->tables[i].t.name);
		if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
			goto out;
		while (sqlite3_step(st) == SQLITE_ROW)
			cols++;
		sqlite3_finalize(st);
		if (cols && cols != q->tables[i].t.ncols) {
			log_error("SQLite database %s: table %s has %d columns, not the %d of its records", q->path,
				  q->tables[i].t.name, cols, q->tables[i].t.ncols);
			goto out;
		}
	}
	rc = 0;
out:
	sqlite3_close(db);
	return rc;
}

struct sink *sink_sqlite_open(const char *path, const struct schema *const *schemas, int n)
{
	struct sqlite_sink *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->base.ops = &sqlite_ops;
	q->path = path;
	for (int i = 0; i < n && q->ntables < MAX_TABLES; i++) {
		if (dbtable_init(&q->tables[q->ntables].t, schemas[i])) {
			log_error("record %s has too many fields for a table", schemas[i]->metric);
			goto fail;
		}
		q->ntables++;
	}
	if (check(q))
		goto fail;
	return &q->base;
fail:
	free(q);
	return NULL;
}
