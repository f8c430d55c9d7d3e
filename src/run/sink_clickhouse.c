/*
 * The ClickHouse sink: the tables of dbtable.h over HTTP, `INSERT INTO db.table
 * FORMAT JSONEachRow`, batches of --ch-batch-size rows or --ch-flush-interval
 * seconds, whichever comes first.
 *
 * The event loop only formats rows and queues batches; a sender thread of its own
 * posts them, so a slow or absent server never holds the loop up. Nothing is lost
 * silently: a batch that could not be sent stays queued and is retried with backoff
 * (0.1 s doubling to 2 s; what piled up meanwhile goes out in few inserts); when the
 * queued and pending rows reach --ch-queue-max, new rows are dropped and counted per
 * table. The counts are said at exit and, once the
 * server takes a batch again, written as rows of ebpf_dropped. A batch the server
 * rejects (a bad row rejects it whole) is dropped and counted too, with its reason.
 *
 * The dictionary of stacks (ebpf_stacks, profrows.h) is never dropped for a full
 * queue, and its batch goes into the queue before any other table's: the queue is
 * sent in order, so a row that names a stack_id lands after the stack's own row.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "dbsinks.h"
#include "dbtable.h"
#include "jsonfmt.h"
#include "log.h"
#include "profrows.h"
#include "record.h"

#define MAX_TABLES 32
/* The most nodes of a cluster whose tables are made and kept. */
#define MAX_NODES 64
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
/* The most one insert carries when queued batches of a table are sent together. */
#define MERGE_MAX_BYTES (64u << 20)
/* At exit, how long a server that is away gets to come back before what is queued is dropped. */
#define CLOSE_GRACE_MS 10000

static const struct field dropped_fields[] = {
	FIELD_METRIC,
	{ .name = "table", .type = FIELD_STR, .meaning = "the table whose rows were dropped" },
	{ .name = "dropped", .type = FIELD_INT,
	  .meaning = "rows dropped since the last such row (queue full or rejected)" },
	FIELD_TIME(0),
	FIELD_ENV,
	FIELD_END,
};
static const struct schema dropped_schema = { "dropped", SCHEMA_EVENT, dropped_fields };

struct ch_table {
	struct db_table t;
	char *buf; /* the batch being filled by the event loop: JSON lines */
	size_t len, cap;
	unsigned long rows;
	uint64_t first_ns; /* when its first row came */
	uint64_t batch_id; /* the batch_id of the rows in buf */
	bool has_batch_id; /* the table has the column (tables made before it have not) */
	/* under the sink's lock */
	unsigned long landed, dropped, dropped_reported;
};

struct ch_batch {
	struct ch_batch *next;
	struct ch_table *table;
	char *body;
	size_t len;
	unsigned long rows;
	unsigned long lines; /* rows in body (rows: those counted against --ch-queue-max) */
	uint64_t id;    /* its rows' batch_id */
	bool uncertain; /* an insert of it failed with no answer: it may have landed */
};

struct ch_sink {
	struct sink base;
	char url[1024];
	char *user, *password, *database;
	unsigned long batch_size, queue_max;
	uint64_t flush_ns;
	unsigned long pending; /* rows in the tables' batches being filled */
	int ntables;
	struct ch_table tables[MAX_TABLES];
	struct ch_table *dropped_table;
	struct ch_table *stacks_table; /* ebpf_stacks, or NULL */
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct ch_batch *head, *tail; /* the queue, oldest first */
	unsigned long queued;         /* rows in it */
	bool stopping;
	uint64_t stop_deadline_ns;
	bool away;                    /* the last attempt failed (said once per outage) */
	uint64_t next_batch_id;       /* the run's random upper 32 bits, then a count */
	/* --retain-days: by the sender thread, every retain_every_ns */
	unsigned long retain_days;
	uint64_t retain_every_ns, retain_next_ns;
	int version;                  /* the server's, major * 1000 + minor */
	char *cluster;                /* --clickhouse-cluster, or NULL */
	bool low_cardinality;         /* the server takes LowCardinality (18.16: as experimental) */
	bool low_cardinality_counts;  /* counts as LowCardinality(UInt32) (18.16, no codecs) */
	bool codecs;                  /* the server takes column codecs (19.x) */
	const char *url_params;       /* more settings for the next requests ("&name=value"), or NULL */
	int nnodes;                   /* the servers its tables live on (1 without a cluster) */
	char nodes[MAX_NODES][256];
};

static uint64_t now_ns(void)
{
	return time_mono_ns();
}

/* 32 random bits (getrandom; else the time and the pid). */
static uint32_t random_u32(void)
{
	uint32_t r;
	struct timespec ts;

	if (getrandom(&r, sizeof(r), 0) == sizeof(r))
		return r;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec ^ ((uint32_t)getpid() << 16);
}

struct reply {
	char text[512];
	size_t len;
};

static size_t on_reply(char *data, size_t size, size_t n, void *ctx)
{
	struct reply *r = ctx;
	size_t len = size * n, room = sizeof(r->text) - 1 - r->len;

	memcpy(r->text + r->len, data, len < room ? len : room);
	r->len += len < room ? len : room;
	r->text[r->len] = 0;
	return len;
}

static long request_at(struct ch_sink *c, CURL *h, const char *base, const char *query, const char *body,
		       size_t len, struct reply *reply);

/*
 * One request: query in the URL, body (may be NULL) posted. Returns the HTTP status,
 * or 0 when the server was not reached (reply->text says why).
 */
static long request(struct ch_sink *c, CURL *h, const char *query, const char *body, size_t len,
		    struct reply *reply)
{
	return request_at(c, h, c->url, query, body, len, reply);
}

/* The same at another server (base: http://HOST:PORT). */
static long request_at(struct ch_sink *c, CURL *h, const char *base, const char *query, const char *body,
		       size_t len, struct reply *reply)
{
	char *esc = curl_easy_escape(h, query, 0), *url;
	long status = 0;
	CURLcode rc;
	size_t n;

	reply->len = 0;
	reply->text[0] = 0;
	n = strlen(base) + strlen(esc ? esc : "") + strlen(c->database) + strlen(c->url_params ? c->url_params : "") + 64;
	if (!esc || !(url = malloc(n))) {
		curl_free(esc);
		snprintf(reply->text, sizeof(reply->text), "out of memory");
		return 0;
	}
	snprintf(url, n, "%s/?database=%s%s&query=%s", base, c->database, c->url_params ? c->url_params : "", esc);
	curl_free(esc);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_reply);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, reply);
	/* basic auth: the password never appears in a URL or a command line */
	curl_easy_setopt(h, CURLOPT_USERNAME, c->user);
	curl_easy_setopt(h, CURLOPT_PASSWORD, c->password ? c->password : "");
	rc = curl_easy_perform(h);
	free(url);
	if (rc != CURLE_OK) {
		snprintf(reply->text, sizeof(reply->text), "%s", curl_easy_strerror(rc));
		return 0;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	/* the server's message on one line, without control characters for the terminal */
	for (char *p = reply->text; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	return status;
}

/* A refusal that no retry can cure (bad rows, unknown column), as opposed to a server away. */
static bool rejected(long status)
{
	return status >= 400 && status != 502 && status != 503 && status != 504;
}

/*
 * Strings of few values (env, host, thread names, comms, leaf functions and files):
 * LowCardinality where the server has it; stacks, addresses and JSON text are not.
 */
static bool few_values(const struct db_column *col)
{
	static const char *const names[] = { "env", "host", "comm", "thread_name", "leaf_func", "leaf_file" };
	size_t n = strlen(col->name);

	if (col->type != DB_STRING)
		return false;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(col->name, names[i]))
			return true;
	return (n > 5 && !strcmp(col->name + n - 5, "_comm")) || (n > 12 && !strcmp(col->name + n - 12, "_thread_name"));
}

static const char *ch_type(const struct ch_sink *c, const struct db_column *col, char *buf, size_t len)
{
	const char *t = "String", *codec = "";

	switch (col->type) {
	case DB_INT:
		t = "Int64";
		break;
	case DB_REAL:
		t = "Float64";
		break;
	case DB_BOOL:
		t = "UInt8";
		break;
	case DB_DATETIME:
		t = "DateTime";
		codec = " CODEC(Delta, ZSTD(1))";
		break;
	case DB_MICROS:
		t = "UInt64";
		codec = " CODEC(Delta, ZSTD(1))";
		break;
	case DB_ID:
		t = "UInt64";
		codec = " CODEC(ZSTD(1))";
		break;
	case DB_COUNT:
		t = "UInt32";
		codec = " CODEC(T64, ZSTD(1))";
		break;
	case DB_STRING:
		codec = " CODEC(ZSTD(1))";
		break;
	}
	if (!c->codecs)
		codec = "";
	if (c->low_cardinality && few_values(col))
		snprintf(buf, len, col->key ? "LowCardinality(%s)" : "LowCardinality(Nullable(%s))", t);
	else if (col->type == DB_COUNT && c->low_cardinality_counts)
		snprintf(buf, len, "LowCardinality(%s)", t);
	else
		snprintf(buf, len, col->key ? "%s%s" : "Nullable(%s)%s", t, codec);
	return buf;
}

/* The MergeTree table t, named name, at the server base. */
static int create_merge_tree(struct ch_sink *c, CURL *h, const char *base, const struct db_table *t,
			     const char *name)
{
	size_t cap = 256 + (size_t)t->ncols * 128, a;
	char *sql = malloc(cap), type[96];
	struct reply reply;
	long status;

	if (!sql)
		return -1;
	a = (size_t)snprintf(sql, cap, "CREATE TABLE IF NOT EXISTS %s (", name);
	for (int i = 0; i < t->ncols; i++)
		a += (size_t)snprintf(sql + a, cap - a, "%s`%s` %s", i ? ", " : "", t->cols[i].name,
				      ch_type(c, &t->cols[i], type, sizeof(type)));
	/* which insert a row came in, for retries (resolve) */
	a += (size_t)snprintf(sql + a, cap - a, ", `batch_id` UInt64");
	/*
	 * --retain-days: partitions of a day, which the sender drops when they are older
	 * (18.16 has no TTL); servers with TTL (19.6+) also get the clause, which expires
	 * a row at the same bound (sinkopts.h: the start of the UTC day N days before
	 * today): once the UTC day after its own plus N days has begun.
	 */
	a += (size_t)snprintf(sql + a, cap - a, ") ENGINE = MergeTree() PARTITION BY %s ORDER BY (%s)",
			      c->retain_days ? "toDate(time)" : "toYYYYMM(time)", t->order_by);
	if (c->retain_days && c->version >= 19006)
		snprintf(sql + a, cap - a, " TTL toStartOfDay(time, 'UTC') + INTERVAL %lu DAY", c->retain_days + 1);
	status = request_at(c, h, base, sql, NULL, 0, &reply);
	free(sql);
	if (status == 200)
		return 0;
	log_error("ClickHouse at %s: cannot create table %s.%s: %s", base, c->database, name, reply.text);
	return -1;
}

/* The table that holds t's rows on each server: t itself, or with a cluster t_local. */
static void local_name(const struct ch_sink *c, const struct db_table *t, char *buf, size_t len)
{
	snprintf(buf, len, c->cluster ? "%s_local" : "%s", t->name);
}

/*
 * t on the server, or with --clickhouse-cluster: t_local (MergeTree) on every node,
 * then on every node t itself as a Distributed table over them, sharded by host, so
 * that one host's rows stay on one shard (its dictionary of stacks with them) and any
 * node answers queries. No ON CLUSTER: that needs ZooKeeper on 18.16.
 */
static int create_table(struct ch_sink *c, CURL *h, const struct db_table *t)
{
	char local[96], sql[512];
	struct reply reply;

	local_name(c, t, local, sizeof(local));
	for (int i = 0; i < c->nnodes; i++)
		if (create_merge_tree(c, h, c->nodes[i], t, local))
			return -1;
	if (!c->cluster)
		return 0;
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE IF NOT EXISTS %s AS %s ENGINE = Distributed(%s, %s, %s, cityHash64(host))", t->name,
		 local, c->cluster, c->database, local);
	for (int i = 0; i < c->nnodes; i++) {
		long status = request_at(c, h, c->nodes[i], sql, NULL, 0, &reply);
		if (status != 200) {
			log_error("ClickHouse at %s: cannot create table %s.%s: %s", c->nodes[i], c->database, t->name,
				  reply.text);
			return -1;
		}
	}
	return 0;
}

/* Whether t (its public table, at the URL's server) has a batch_id column: tables made before have not. */
static bool has_batch_id(struct ch_sink *c, CURL *h, const struct db_table *t)
{
	char query[256];
	struct reply reply;

	snprintf(query, sizeof(query),
		 "SELECT count() FROM system.columns WHERE database = '%s' AND table = '%s' AND name = 'batch_id'",
		 c->database, t->name);
	return request(c, h, query, NULL, 0, &reply) == 200 && atoi(reply.text) == 1;
}

/*
 * --clickhouse-cluster: the nodes system.clusters lists for it, each reached over HTTP
 * at its host_address and the port of --clickhouse-url (every node listens for HTTP
 * on the same port). Without a cluster: the one server.
 */
static int find_nodes(struct ch_sink *c, CURL *h)
{
	char query[256], text[sizeof(((struct reply *)0)->text)], *save = NULL, *port, *hostp;
	const char *scheme_end = strstr(c->url, "://");
	struct reply reply;
	long status;

	snprintf(c->nodes[0], sizeof(c->nodes[0]), "%s", c->url);
	c->nnodes = 1;
	if (!c->cluster)
		return 0;
	hostp = strrchr(c->url, ']') ? strrchr(c->url, ']') : (char *)scheme_end + 3;
	port = strchr(hostp, ':');
	snprintf(query, sizeof(query),
		 "SELECT DISTINCT host_address FROM system.clusters WHERE cluster = '%s' FORMAT TSV", c->cluster);
	status = request(c, h, query, NULL, 0, &reply);
	if (status != 200 || !reply.text[0]) {
		log_error("ClickHouse at %s has no cluster '%s' in system.clusters (remote_servers)%s%.300s", c->url,
			  c->cluster, status == 200 ? "" : ": ", status == 200 ? "" : reply.text);
		return -1;
	}
	c->nnodes = 0;
	snprintf(text, sizeof(text), "%s", reply.text);
	for (char *addr = strtok_r(text, " ", &save); addr && c->nnodes < MAX_NODES; addr = strtok_r(NULL, " ", &save))
		snprintf(c->nodes[c->nnodes++], sizeof(c->nodes[0]), strchr(addr, ':') ? "%.*s[%s]%s" : "%.*s%s%s",
			 (int)(scheme_end + 3 - c->url), c->url, addr, port ? port : "");
	log_info("ClickHouse cluster %s: %d nodes", c->cluster, c->nnodes);
	return 0;
}

/*
 * Whether the server takes a temporary table of columns cols (in a session of its own:
 * HTTP has none otherwise), with c->url_params and then each of settings in turn:
 * the index of the settings that worked (kept in c->url_params), or -1 (url_params as
 * before).
 */
static int probe(struct ch_sink *c, CURL *h, const char *cols, const char *const *settings, size_t n)
{
	const char *before = c->url_params;
	char params[256], sql[256];
	struct reply reply;

	snprintf(sql, sizeof(sql), "CREATE TEMPORARY TABLE pyebpf_probe (%s) ENGINE = Memory", cols);
	for (size_t i = 0; i < n; i++) {
		snprintf(params, sizeof(params), "%s%s&session_id=pyebpf-probe-%ld-%zu", before ? before : "",
			 settings[i], (long)getpid(), i);
		c->url_params = params;
		if (request(c, h, sql, NULL, 0, &reply) == 200) {
			/* kept for every request: a string of this file's, or the one before */
			c->url_params = i ? settings[i] : before;
			return (int)i;
		}
	}
	c->url_params = before;
	return -1;
}

/*
 * What the server takes, for the columns of create_merge_tree:
 *  - LowCardinality strings: 18.16 only with allow_experimental_low_cardinality_type
 *    (then passed along with every request); a server that knows neither gets plain
 *    strings;
 *  - column codecs (19.x): then counts as T64 + ZSTD, times as Delta + ZSTD, stack ids
 *    and long strings as ZSTD;
 *  - else LowCardinality(UInt32) for counts (18.16): small counts as one-byte indexes.
 */
static void probe_types(struct ch_sink *c, CURL *h)
{
	static const char *const lc[] = { "", "&allow_experimental_low_cardinality_type=1" };
	static const char *const plain[] = { "" };

	c->url_params = NULL;
	c->low_cardinality = probe(c, h, "s LowCardinality(Nullable(String))", lc, 2) >= 0;
	c->codecs = probe(c, h,
			  "t DateTime CODEC(Delta, ZSTD(1)), n UInt32 CODEC(T64, ZSTD(1)), "
			  "s Nullable(String) CODEC(ZSTD(1))",
			  plain, 1) >= 0;
	c->low_cardinality_counts = c->low_cardinality && !c->codecs &&
				    probe(c, h, "n LowCardinality(UInt32)", plain, 1) >= 0;
}

/* Start-up: the server answers, takes the user and the password, has the database. */
static int check_server(struct ch_sink *c, CURL *h)
{
	struct reply reply;
	long status = request(c, h, "SELECT version()", NULL, 0, &reply);
	int major = 0, minor = 0;

	if (status == 200) {
		if (sscanf(reply.text, "%d.%d", &major, &minor) == 2)
			c->version = major * 1000 + minor;
		return 0;
	}
	if (!status)
		log_error("cannot reach ClickHouse at %s: %s", c->url, reply.text);
	else if (strstr(reply.text, "Code: 192") || strstr(reply.text, "Code: 193") ||
		 strstr(reply.text, "Code: 516") || status == 401 || status == 403)
		log_error("ClickHouse at %s refused user '%s' (wrong user or password?): %s", c->url, c->user,
			  reply.text);
	else if (strstr(reply.text, "Code: 81"))
		log_error("ClickHouse at %s has no database '%s': %s", c->url, c->database, reply.text);
	else
		log_error("ClickHouse at %s answered HTTP %ld: %s", c->url, status, reply.text);
	return -1;
}

/*
 * Appends a row (ClickHouse's DateTime as seconds since the epoch) to t's batch, with
 * the batch's id (a new one for the first row of a batch).
 */
static int append_row(struct ch_sink *c, struct ch_table *t, json_t *row)
{
	char *line;
	size_t n;

	if (!t->len)
		t->batch_id = __atomic_fetch_add(&c->next_batch_id, 1, __ATOMIC_RELAXED);
	if (t->has_batch_id)
		json_object_set_new(row, "batch_id", json_integer((json_int_t)t->batch_id));

	for (int i = 0; i < t->t.ncols; i++)
		if (t->t.cols[i].type == DB_DATETIME) {
			json_t *v = json_object_get(row, t->t.cols[i].name);
			if (json_is_string(v))
				json_object_set_new(row, t->t.cols[i].name,
						    json_integer(dbtable_parse_time_us(json_string_value(v)) / 1000000));
		}
	if (!(line = json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))))
		return -1;
	n = strlen(line);
	if (t->len + n + 2 > t->cap) {
		size_t cap = (t->cap ? t->cap * 2 : 65536) + n;
		char *b = realloc(t->buf, cap);
		if (!b) {
			free(line);
			return -1;
		}
		t->buf = b;
		t->cap = cap;
	}
	memcpy(t->buf + t->len, line, n);
	t->len += n;
	t->buf[t->len++] = '\n';
	free(line);
	return 0;
}

/* Caller holds the lock. */
static void enqueue(struct ch_sink *c, struct ch_batch *b)
{
	b->next = NULL;
	if (c->tail)
		c->tail->next = b;
	else
		c->head = b;
	c->tail = b;
	c->queued += b->rows;
	pthread_cond_signal(&c->wake);
}

/* The batch being filled into the queue (after the dictionary's: its rows come first). */
static void hand_over(struct ch_sink *c, struct ch_table *t)
{
	struct ch_batch *b;

	if (c->stacks_table && t != c->stacks_table)
		hand_over(c, c->stacks_table);
	if (!t->rows)
		return;
	if (!(b = calloc(1, sizeof(*b)))) {
		pthread_mutex_lock(&c->lock);
		t->dropped += t->rows;
		pthread_mutex_unlock(&c->lock);
	} else {
		b->table = t;
		b->body = t->buf;
		b->len = t->len;
		b->rows = b->lines = t->rows;
		b->id = t->batch_id;
		pthread_mutex_lock(&c->lock);
		enqueue(c, b);
		pthread_mutex_unlock(&c->lock);
		t->buf = NULL;
		t->len = t->cap = 0;
	}
	c->pending -= t->rows;
	t->rows = 0;
}

static struct ch_table *table_of(struct ch_sink *c, const struct schema *sc)
{
	for (int i = 0; i < c->ntables; i++)
		if (c->tables[i].t.schema == sc)
			return &c->tables[i];
	return NULL;
}

static void ch_record(struct sink *s, const struct schema *sc, json_t *obj)
{
	struct ch_sink *c = (struct ch_sink *)s;
	struct ch_table *t = table_of(c, sc);
	unsigned long queued;
	json_t *row;

	if (!t)
		return;
	pthread_mutex_lock(&c->lock);
	queued = c->queued;
	if (queued + c->pending >= c->queue_max && t != c->stacks_table) {
		t->dropped++;
		pthread_mutex_unlock(&c->lock);
		return;
	}
	pthread_mutex_unlock(&c->lock);
	row = dbtable_row(&t->t, obj, dbtable_host());
	if (!row || append_row(c, t, row)) {
		pthread_mutex_lock(&c->lock);
		t->dropped++;
		pthread_mutex_unlock(&c->lock);
	} else {
		if (!t->rows++)
			t->first_ns = now_ns();
		c->pending++;
	}
	json_decref(row);
	if (t->rows >= c->batch_size)
		hand_over(c, t);
}

static void ch_flush(struct sink *s)
{
	struct ch_sink *c = (struct ch_sink *)s;
	uint64_t now = now_ns();

	/* ebpf_dropped's batch is the sender thread's own: not touched here */
	for (int i = 0; i < c->ntables; i++)
		if (&c->tables[i] != c->dropped_table && c->tables[i].rows &&
		    now - c->tables[i].first_ns >= c->flush_ns)
			hand_over(c, &c->tables[i]);
}

/* Caller holds the lock: a row of ebpf_dropped per table with drops not yet written. */
static void queue_drop_report(struct ch_sink *c)
{
	struct ch_table *d = c->dropped_table;
	struct ch_batch *b;
	char now[40];

	for (int i = 0; i < c->ntables; i++) {
		struct ch_table *t = &c->tables[i];
		json_t *o, *row;

		if (t == d || t->dropped == t->dropped_reported)
			continue;
		o = json_object();
		json_set_str(o, "metric", "dropped");
		json_set_str(o, "table", t->t.name);
		json_set_int(o, "dropped", (json_int_t)(t->dropped - t->dropped_reported));
		time_format_mono_ns(now_ns(), now, sizeof(now));
		json_set_str(o, "time", now);
		if (c->base.env)
			json_set_str(o, "env", c->base.env);
		row = dbtable_row(&d->t, o, dbtable_host());
		if (row && !append_row(c, d, row)) {
			t->dropped_reported = t->dropped;
			d->rows++;
		}
		json_decref(row);
		json_decref(o);
	}
	if (!d->rows || !(b = calloc(1, sizeof(*b))))
		return;
	b->table = d;
	b->id = d->batch_id;
	b->body = d->buf;
	b->len = d->len;
	b->rows = 0; /* reports do not count against --ch-queue-max */
	b->lines = d->rows;
	d->buf = NULL;
	d->len = d->cap = 0;
	d->rows = 0;
	enqueue(c, b);
}

static void free_batch(struct ch_batch *b)
{
	free(b->body);
	free(b);
}

/* Caller holds the lock: the batch after prev (NULL: the oldest) is done (landed or dropped). */
static void unlink_batch(struct ch_sink *c, struct ch_batch *prev, bool landed)
{
	struct ch_batch *b = prev ? prev->next : c->head;

	if (prev)
		prev->next = b->next;
	else
		c->head = b->next;
	if (c->tail == b)
		c->tail = prev;
	c->queued -= b->rows;
	if (b->table != c->dropped_table) {
		if (landed)
			b->table->landed += b->rows;
		else
			b->table->dropped += b->rows;
	}
	free_batch(b);
}

static void dequeue(struct ch_sink *c, bool landed)
{
	unlink_batch(c, NULL, landed);
}

static void wait_ms(struct ch_sink *c, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&c->wake, &c->lock, &ts);
}

/*
 * --retain-days on one server: drops the partitions of table whose newest row is older
 * than the bound (whole days; with monthly partitions, of tables made before, whole
 * months). Said on stderr when something was dropped.
 */
static void retain_table(struct ch_sink *c, CURL *h, const char *base, const char *table, long long bound_s)
{
	char query[512], ids[4096], *save = NULL;
	struct reply reply;
	long status;

	snprintf(query, sizeof(query),
		 "SELECT partition_id FROM system.parts WHERE database = '%s' AND table = '%s' AND active "
		 "GROUP BY partition_id HAVING max(max_time) < toDateTime(%lld) FORMAT TSV",
		 c->database, table, bound_s);
	status = request_at(c, h, base, query, NULL, 0, &reply);
	if (status != 200) {
		log_warn("ClickHouse at %s: retention of %s: HTTP %ld: %.200s", base, table, status, reply.text);
		return;
	}
	/* the ids on one line (request() made the newlines spaces) */
	snprintf(ids, sizeof(ids), "%s", reply.text);
	for (char *id = strtok_r(ids, " ", &save); id; id = strtok_r(NULL, " ", &save)) {
		snprintf(query, sizeof(query), "ALTER TABLE %s DROP PARTITION ID '%s'", table, id);
		status = request_at(c, h, base, query, NULL, 0, &reply);
		if (status == 200)
			log_info("ClickHouse at %s: retention: partition %s of %s dropped", base, id, table);
		else
			log_warn("ClickHouse at %s: retention: dropping partition %s of %s: HTTP %ld: %.200s", base, id,
				 table, status, reply.text);
	}
}

/* One retention pass over every table. */
static void retain(struct ch_sink *c, CURL *h)
{
	struct timespec now;
	long long bound_s;

	clock_gettime(CLOCK_REALTIME, &now);
	bound_s = sinkopts_retain_bound_us(c->retain_days, (long long)now.tv_sec * 1000000) / 1000000;
	char local[96];

	for (int n = 0; n < c->nnodes; n++)
		for (int i = 0; i < c->ntables; i++) {
			local_name(c, &c->tables[i].t, local, sizeof(local));
			retain_table(c, h, c->nodes[n], local, bound_s);
		}
}

/* The most uncertain batches one check asks about (their answer fits a reply). */
#define CHECK_MAX 12

/*
 * The head of the queue failed before with no answer (uncertain): a crash between the
 * server's commit and its answer leaves it there already. Asks for the rows of each
 * batch_id among the uncertain batches of its table at the head of the queue: all of
 * a batch's rows → it landed (dequeued as such, never sent twice); none → it is sent
 * again; some (an insert is written as a part per partition and per block of rows,
 * so a crash can land part of it) → those are deleted (ALTER TABLE ... DELETE, on the
 * local tables of every node with a cluster: a mutation of the parts that exist then,
 * so the batch sent again after it stays) and it is sent again. Caller holds the lock,
 * released during the requests. Returns 0, or -1 when the server did not answer.
 */
static int resolve(struct ch_sink *c, CURL *h)
{
	struct ch_batch *batch[CHECK_MAX];
	unsigned long got[CHECK_MAX] = { 0 };
	struct ch_table *t = c->head->table;
	char query[512 + CHECK_MAX * 24], text[sizeof(((struct reply *)0)->text)], *save = NULL, *tok;
	struct reply reply;
	size_t a;
	int n = 0;

	for (struct ch_batch *x = c->head; x && x->table == t && x->uncertain && n < CHECK_MAX; x = x->next)
		batch[n++] = x;
	if (!t->has_batch_id) {
		/* a table made before batch ids: sent again (a duplicate if it had landed) */
		for (int i = 0; i < n; i++)
			batch[i]->uncertain = false;
		return 0;
	}
	a = (size_t)snprintf(query, sizeof(query), "SELECT batch_id, count() FROM %s WHERE batch_id IN (", t->t.name);
	for (int i = 0; i < n; i++)
		a += (size_t)snprintf(query + a, sizeof(query) - a, "%s%llu", i ? ", " : "",
				      (unsigned long long)batch[i]->id);
	snprintf(query + a, sizeof(query) - a, ") GROUP BY batch_id FORMAT TSV");
	pthread_mutex_unlock(&c->lock);
	if (!h || request(c, h, query, NULL, 0, &reply) != 200) {
		pthread_mutex_lock(&c->lock);
		return -1;
	}
	/* "id count" pairs (request() made tabs and newlines spaces) */
	snprintf(text, sizeof(text), "%s", reply.text);
	for (tok = strtok_r(text, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		unsigned long long id = strtoull(tok, NULL, 10);
		const char *count = strtok_r(NULL, " ", &save);
		for (int i = 0; i < n && count; i++)
			if (batch[i]->id == id)
				got[i] = strtoul(count, NULL, 10);
	}
	for (int i = 0; i < n; i++) {
		char local[96];
		if (!got[i] || got[i] >= batch[i]->lines)
			continue;
		log_warn("ClickHouse: %lu of %lu rows of a batch of %s had landed before the server failed: "
			 "deleted, the batch is sent again", got[i], batch[i]->lines, t->t.name);
		local_name(c, &t->t, local, sizeof(local));
		snprintf(query, sizeof(query), "ALTER TABLE %s DELETE WHERE batch_id = %llu", local,
			 (unsigned long long)batch[i]->id);
		for (int k = 0; k < c->nnodes; k++)
			if (request_at(c, h, c->nodes[k], query, NULL, 0, &reply) != 200) {
				log_warn("ClickHouse at %s: %.300s", c->nodes[k], reply.text);
				pthread_mutex_lock(&c->lock);
				return -1;
			}
		got[i] = 0;
	}
	pthread_mutex_lock(&c->lock);
	/* the batches are still queued in that order: only this thread takes them out */
	for (int i = 0; i < n; i++) {
		struct ch_batch *prev = NULL;
		batch[i]->uncertain = false;
		if (!got[i])
			continue;
		for (struct ch_batch *x = c->head; x != batch[i]; x = x->next)
			prev = x;
		unlink_batch(c, prev, true);
	}
	return 0;
}

static void *sender(void *arg)
{
	struct ch_sink *c = arg;
	CURL *h = curl_easy_init();
	unsigned backoff = BACKOFF_MIN_MS;
	char query[256];
	struct reply reply;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct ch_batch *b;
		unsigned long rows;
		size_t len;
		char *body;
		long status;
		int k;

		if (c->retain_days && now_ns() >= c->retain_next_ns && !c->stopping) {
			pthread_mutex_unlock(&c->lock);
			if (h)
				retain(c, h);
			pthread_mutex_lock(&c->lock);
			c->retain_next_ns = now_ns() + c->retain_every_ns;
			continue;
		}
		while (!c->head && !c->stopping && !c->retain_days)
			pthread_cond_wait(&c->wake, &c->lock);
		if (!c->head && !c->stopping && c->retain_days) {
			/* nothing to send: wait for rows or the next retention pass */
			uint64_t left = c->retain_next_ns - now_ns();
			wait_ms(c, left > 1000000000ull ? 1000 : (unsigned)(left / 1000000) + 1);
			continue;
		}
		if (!c->head || (c->stopping && now_ns() >= c->stop_deadline_ns))
			break;
		if (c->head->uncertain) {
			if (!resolve(c, h))
				continue;
			wait_ms(c, backoff);
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		b = c->head;
		/*
		 * What piled up while the server was away goes out in few inserts: the queued
		 * batches of the head's table that follow it (each insert is a part to merge).
		 */
		k = 0;
		len = 0;
		rows = 0;
		for (struct ch_batch *x = b; x && x->table == b->table && (x == b || !x->uncertain) &&
					     len + x->len <= MERGE_MAX_BYTES;
		     x = x->next) {
			k++;
			len += x->len;
			rows += x->rows;
		}
		pthread_mutex_unlock(&c->lock);
		/* the batches stay queued, unchanged, until this thread dequeues them */
		body = b->body;
		if (k > 1 && (body = malloc(len))) {
			size_t at = 0;
			struct ch_batch *x = b;
			for (int i = 0; i < k; i++, x = x->next) {
				memcpy(body + at, x->body, x->len);
				at += x->len;
			}
		} else {
			k = 1;
			body = b->body;
			len = b->len;
			rows = b->rows;
		}
		snprintf(query, sizeof(query), "INSERT INTO %s FORMAT JSONEachRow", b->table->t.name);
		status = h ? request(c, h, query, body, len, &reply) : 0;
		if (body != b->body)
			free(body);
		pthread_mutex_lock(&c->lock);
		if (status == 200) {
			if (c->away)
				log_info("ClickHouse at %s is back", c->url);
			c->away = false;
			backoff = BACKOFF_MIN_MS;
			for (int i = 0; i < k; i++)
				dequeue(c, true);
			queue_drop_report(c);
			continue;
		}
		if (status && rejected(status)) {
			log_warn("ClickHouse rejected %lu rows of %s (dropped): HTTP %ld: %.300s", rows,
				 b->table->t.name, status, reply.text);
			for (int i = 0; i < k; i++)
				dequeue(c, false);
			continue;
		}
		if (!c->away)
			log_warn("ClickHouse at %s is away (%s); rows are kept (up to --ch-queue-max %lu) and retried",
				 c->url, reply.text, c->queue_max);
		c->away = true;
		/* it may have landed all the same: asked before it is sent again (resolve) */
		for (struct ch_batch *x = b; k-- > 0; x = x->next)
			x->uncertain = true;
		wait_ms(c, backoff);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	pthread_mutex_unlock(&c->lock);
	curl_easy_cleanup(h);
	return NULL;
}

static int ch_status(struct sink *s)
{
	(void)s;
	return 0; /* a server away is no reason to stop tracing: rows are kept or counted */
}

static int ch_close(struct sink *s)
{
	struct ch_sink *c = (struct ch_sink *)s;
	unsigned long lost = 0;

	for (int i = 0; i < c->ntables; i++)
		if (&c->tables[i] != c->dropped_table)
			hand_over(c, &c->tables[i]);
	if (c->started) {
		pthread_mutex_lock(&c->lock);
		c->stopping = true;
		c->stop_deadline_ns = now_ns() + CLOSE_GRACE_MS * 1000000ull;
		pthread_cond_signal(&c->wake);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->thread, NULL);
	}
	/* what is still queued could not be sent: dropped */
	while (c->head)
		dequeue(c, false);
	for (int i = 0; i < c->ntables; i++) {
		struct ch_table *t = &c->tables[i];
		if (t == c->dropped_table)
			continue;
		if (t->landed || t->dropped)
			fprintf(stderr, "%s: clickhouse: %s: landed=%lu dropped=%lu\n", log_progname, t->t.name,
				t->landed, t->dropped);
		lost += t->dropped;
		free(t->buf);
	}
	free(c->dropped_table->buf);
	if (lost)
		log_warn("ClickHouse: %lu rows dropped in all (counted per table above)", lost);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->wake);
	free(c->user);
	free(c->password);
	free(c->database);
	free(c->cluster);
	free(c);
	return 0;
}

static void nothing(struct sink *s, const struct schema *sc, json_t *obj)
{
	(void)s, (void)sc, (void)obj;
}

static void no_table(struct sink *s, const struct schema *sc, const char *title)
{
	(void)s, (void)sc, (void)title;
}

static const struct sink_ops ch_ops = {
	.record = ch_record,
	.table_begin = no_table,
	.table_row = nothing,
	.summary = nothing,
	.flush = ch_flush,
	.status = ch_status,
	.close = ch_close,
};

int sink_clickhouse_password(const struct sink_opts *o, char **out)
{
	const char *env = getenv("CLICKHOUSE_PASSWORD");
	char line[1024];
	FILE *f;

	*out = NULL;
	if (o->ch_password)
		return (*out = strdup(o->ch_password)) ? 0 : -1;
	if (o->ch_password_file) {
		if (!(f = fopen(o->ch_password_file, "r"))) {
			log_error("cannot read --clickhouse-password-file %s: %s", o->ch_password_file, strerror(errno));
			return -1;
		}
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		fclose(f);
		line[strcspn(line, "\r\n")] = 0;
		return (*out = strdup(line)) ? 0 : -1;
	}
	if (env)
		return (*out = strdup(env)) ? 0 : -1;
	return 0;
}

static bool plain_name(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

struct sink *sink_clickhouse_open(const struct sink_opts *o, const struct schema *const *schemas, int n)
{
	struct ch_sink *c = calloc(1, sizeof(*c));
	sigset_t all, old;
	CURL *h = NULL;
	size_t len;

	if (!c)
		return NULL;
	c->base.ops = &ch_ops;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	snprintf(c->url, sizeof(c->url), "%s", o->ch_url);
	len = strlen(c->url);
	while (len && c->url[len - 1] == '/')
		c->url[--len] = 0;
	c->user = strdup(o->ch_user ? o->ch_user : "default");
	c->database = strdup(o->ch_database ? o->ch_database : "default");
	c->batch_size = o->ch_batch_size;
	c->queue_max = o->ch_queue_max;
	c->flush_ns = (uint64_t)(o->ch_flush_interval_s * 1e9);
	c->retain_days = o->retain_days;
	/* batch ids: unlike those of other runs and hosts (the upper bits), then counted */
	c->next_batch_id = (((uint64_t)random_u32() & 0x7fffffffu) << 32) | 1;
	if (o->ch_cluster && !(c->cluster = strdup(o->ch_cluster)))
		goto fail;
	c->retain_every_ns = (uint64_t)(sinkopts_retain_interval_s() * 1e9);
	if (!c->user || !c->database || sink_clickhouse_password(o, &c->password))
		goto fail;
	if (!plain_name(c->database)) {
		log_error("invalid --clickhouse-database '%s': letters, digits and _ only", c->database);
		goto fail;
	}
	if (c->cluster && !plain_name(c->cluster)) {
		log_error("invalid --clickhouse-cluster '%s': letters, digits and _ only", c->cluster);
		goto fail;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) || !(h = curl_easy_init())) {
		log_error("cannot initialize libcurl");
		goto fail;
	}
	if (check_server(c, h) || find_nodes(c, h))
		goto fail;
	probe_types(c, h);
	for (int i = 0; i < n && c->ntables < MAX_TABLES - 1; i++) {
		if (dbtable_init(&c->tables[c->ntables].t, schemas[i])) {
			log_error("record %s has too many fields for a table", schemas[i]->metric);
			goto fail;
		}
		if (schemas[i] == &profrows_stacks_schema)
			c->stacks_table = &c->tables[c->ntables];
		if (create_table(c, h, &c->tables[c->ntables].t))
			goto fail;
		c->tables[c->ntables].has_batch_id = has_batch_id(c, h, &c->tables[c->ntables].t);
		c->ntables++;
	}
	c->dropped_table = &c->tables[c->ntables];
	dbtable_init(&c->dropped_table->t, &dropped_schema);
	if (create_table(c, h, &c->dropped_table->t))
		goto fail;
	c->dropped_table->has_batch_id = has_batch_id(c, h, &c->dropped_table->t);
	c->ntables++;
	curl_easy_cleanup(h);
	h = NULL;
	/* signals stay with the event loop's thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	c->started = pthread_create(&c->thread, NULL, sender, c) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!c->started) {
		log_error("cannot start the ClickHouse sender thread");
		goto fail;
	}
	return &c->base;
fail:
	curl_easy_cleanup(h);
	free(c->user);
	free(c->password);
	free(c->database);
	free(c->cluster);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->wake);
	free(c);
	return NULL;
}
