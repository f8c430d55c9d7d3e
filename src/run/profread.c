#define _GNU_SOURCE
#include "profread.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbsinks.h"
#include "dbtable.h"
#include "log.h"
#include "opts.h"
#include "profrows.h"

#define SQLITE_PREFIX "sqlite:"

static bool is_http(const char *source)
{
	return !strncmp(source, "http://", 7) || !strncmp(source, "https://", 8);
}

int profread_check_source(const char *source)
{
	if (!strncmp(source, SQLITE_PREFIX, strlen(SQLITE_PREFIX)) && source[strlen(SQLITE_PREFIX)])
		return 0;
	if (is_http(source) && strlen(source) > 8)
		return 0;
	return opts_usage_error("--from %s: say sqlite:FILE or a ClickHouse http://HOST:PORT", source);
}

/* "-90s", "-30m", "-2h", "-1d": seconds back from now; -1 when arg is none of them. */
static int64_t relative_s(const char *arg)
{
	char *end;
	long long n;

	if (arg[0] != '-' || arg[1] < '0' || arg[1] > '9')
		return -1;
	n = strtoll(arg + 1, &end, 10);
	if (end[0] && end[1])
		return -1;
	switch (end[0]) {
	case 's': return n;
	case 'm': return n * 60;
	case 'h': return n * 3600;
	case 'd': return n * 86400;
	}
	return -1;
}

int profread_parse_time(const char *option, const char *arg, int64_t *out_us)
{
	int64_t now_us = dbtable_now_us();
	struct tm tm = { 0 };
	const char *p;
	int64_t back = relative_s(arg);
	double frac = 0;

	if (!strcmp(arg, "now")) {
		*out_us = now_us;
		return 0;
	}
	if (back >= 0) {
		*out_us = now_us - back * 1000000;
		return 0;
	}
	/* a date, then optionally a time (after 'T' or ' '), seconds, a fraction, 'Z' */
	p = strptime(arg, "%Y-%m-%d", &tm);
	if (p && (*p == 'T' || *p == ' ')) {
		const char *q = strptime(p + 1, "%H:%M", &tm);
		p = q && *q == ':' ? strptime(q, ":%S", &tm) : q;
		if (p && *p == '.') {
			char *end;
			frac = strtod(p, &end);
			p = end;
		}
	}
	if (p && *p == 'Z')
		p++;
	if (!p || *p)
		return opts_usage_error("--%s '%s': say an ISO 8601 UTC time (2026-12-07T09:00:00Z) or -30m, -2h, -1d",
					option, arg);
	*out_us = (int64_t)timegm(&tm) * 1000000 + (int64_t)(frac * 1e6);
	return 0;
}

void profread_init(struct profread_query *q, const struct profread_layout *layout)
{
	*q = (struct profread_query){ .layout = layout, .since_us = -1, .until_us = -1 };
}

int profread_option(struct profread_query *q, enum profread_opt which, const char *arg)
{
	switch (which) {
	case PROFREAD_FROM:
		q->source = arg;
		return profread_check_source(arg);
	case PROFREAD_HOST:
		q->host = arg;
		return 0;
	case PROFREAD_SINCE:
		return profread_parse_time("since", arg, &q->since_us);
	case PROFREAD_UNTIL:
		return profread_parse_time("until", arg, &q->until_us);
	}
	return -1;
}

int profread_check(struct profread_query *q, const struct common_opts *c)
{
	if (!q->source && (q->host || q->since_us >= 0 || q->until_us >= 0))
		return opts_usage_error("--host, --since and --until need --from");
	if (q->source && sinkopts_any_database(c->sink))
		return opts_usage_error("--from reads a database: not with --sqlite or --clickhouse-url");
	/* the rows' -e and -p (a live run's tag and targets) choose what is read */
	q->env = c->env;
	q->pids = c->pids;
	q->npids = c->npids;
	q->ch = c->sink;
	return 0;
}

/* The table of the layout's records and the dictionary's, from the sink's own schemas. */
static int table_names(const struct profread_layout *l, struct db_table *table, struct db_table *stacks)
{
	static const struct field none[] = { FIELD_END };
	const struct schema probe = { l->metric, SCHEMA_EVENT, none };
	const struct schema *sc = l->profile ? profrows_profile_of(&probe) : &probe;

	if (!sc || dbtable_init(table, sc) || dbtable_init(stacks, &profrows_stacks_schema)) {
		log_error("--from: no stored profile of %s records", l->metric);
		return -1;
	}
	return 0;
}

/* The layout's columns, each as ", PREFIXcol"; NULL when out of memory. */
static char *col_list(const struct profread_layout *l, const char *prefix)
{
	char *cols = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&cols, &len);

	for (int i = 0; f && i < PROFREAD_COLS && l->cols[i]; i++)
		fprintf(f, ", %s%s", prefix, l->cols[i]);
	if (!f || fclose(f)) {
		free(cols);
		return NULL;
	}
	return cols;
}

static int ncols(const struct profread_layout *l)
{
	int n = 0;

	while (n < PROFREAD_COLS && l->cols[n])
		n++;
	return n;
}

/* " AND p.pid IN (1,2)" of q's pids, or ""; NULL when out of memory. */
static char *pid_list(const struct profread_query *q)
{
	char *pids = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&pids, &len);

	for (int i = 0; f && i < q->npids; i++)
		fprintf(f, "%s%d%s", i ? "," : " AND p.pid IN (", (int)q->pids[i], i == q->npids - 1 ? ")" : "");
	if (!f || fclose(f)) {
		free(pids);
		return NULL;
	}
	return pids;
}

static int sqlite_each(const struct profread_query *q, const char *path, profread_fn fn, void *ctx,
		       long long *rows)
{
	const struct profread_layout *l = q->layout;
	struct db_table table, stacks;
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char *sql = NULL, *pids = NULL, *cols = NULL;
	int r = -1, rc, n = ncols(l);

	if (table_names(l, &table, &stacks))
		return -1;
	if (!(pids = pid_list(q)) || !(cols = col_list(l, "p.")))
		goto out;
	/* a stack's dictionary rows repeat per day, env and host: the same text under one id */
	if ((l->sum ? asprintf(&sql,
			       "SELECT s.stack, sum(p.%s)%s FROM %s p"
			       " JOIN (SELECT DISTINCT stack_id, stack FROM %s) s ON s.stack_id = p.%s"
			       " WHERE (?1 IS NULL OR p.env = ?1) AND (?2 IS NULL OR p.host = ?2)"
			       " AND p.time_us >= ?3 AND p.time_us < ?4%s"
			       " GROUP BY s.stack%s ORDER BY min(p.time_us), s.stack",
			       l->weight, cols, table.name, stacks.name, l->stack, pids, cols)
		    : asprintf(&sql,
			       "SELECT s.stack, p.%s%s FROM %s p"
			       " JOIN (SELECT DISTINCT stack_id, stack FROM %s) s ON s.stack_id = p.%s"
			       " WHERE (?1 IS NULL OR p.env = ?1) AND (?2 IS NULL OR p.host = ?2)"
			       " AND p.time_us >= ?3 AND p.time_us < ?4%s ORDER BY p.time_us, s.stack",
			       l->weight, cols, table.name, stacks.name, l->stack, pids)) < 0) {
		sql = NULL;
		goto out;
	}
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		log_error("--from sqlite:%s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
		goto out;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		/* no such table or column, or not a database: not what a pyebpf sink writes */
		log_error("--from sqlite:%s: not the stored profile layout (tables %s and %s): %s", path,
			  table.name, stacks.name, sqlite3_errmsg(db));
		goto out;
	}
	if (q->env && q->env[0])
		sqlite3_bind_text(st, 1, q->env, -1, SQLITE_STATIC);
	if (q->host && q->host[0])
		sqlite3_bind_text(st, 2, q->host, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, q->since_us >= 0 ? q->since_us : 0);
	sqlite3_bind_int64(st, 4, q->until_us >= 0 ? q->until_us : INT64_MAX);
	*rows = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *stack = (const char *)sqlite3_column_text(st, 0);
		struct profread_row row = { .stack = stack ? stack : "", .weight = sqlite3_column_double(st, 1) };

		for (int i = 0; i < n; i++)
			row.col[i] = (const char *)sqlite3_column_text(st, 2 + i);
		++*rows;
		fn(ctx, &row);
	}
	if (rc != SQLITE_DONE)
		log_error("--from sqlite:%s: %s", path, sqlite3_errmsg(db));
	else
		r = 0;
out:
	if (!sql || !pids || !cols)
		log_error("--from: out of memory");
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(sql);
	free(pids);
	free(cols);
	return r;
}

/* s as a ClickHouse string literal. */
static void put_literal(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('\'', f);
}

/*
 * The query of q for ClickHouse, as pyebpf(7)'s documented one (ANY JOIN for 18.16);
 * NULL when out of memory. An event's stack column is Nullable: a null is id 0, in no
 * dictionary row (the chance that a stack's hash is 0 is 2^-63).
 */
static char *ch_sql(const struct profread_query *q, const struct db_table *table, const struct db_table *stacks)
{
	const struct profread_layout *l = q->layout;
	char *sql = NULL, *pids = pid_list(q), *cols = col_list(l, "");
	size_t len = 0;
	FILE *f = pids && cols ? open_memstream(&sql, &len) : NULL;

	if (!f)
		goto out;
	if (l->sum)
		fprintf(f, "SELECT stack, sum(w)%s, min(time_us) AS first FROM", cols);
	else
		fprintf(f, "SELECT stack, w%s, time_us FROM", cols);
	fprintf(f, " (SELECT ifNull(%s, toUInt64(0)) AS sid, %s AS w%s, time_us FROM %s AS p"
		" WHERE time_us >= %" PRId64 " AND time_us < %" PRId64 "%s",
		l->stack, l->weight, cols, table->name, q->since_us >= 0 ? q->since_us : 0,
		q->until_us >= 0 ? q->until_us : INT64_MAX, pids);
	if (q->env && q->env[0])
		fputs(" AND env = ", f), put_literal(f, q->env);
	if (q->host && q->host[0])
		fputs(" AND host = ", f), put_literal(f, q->host);
	/*
	 * The subqueries named (26.x requires it). ANY LEFT JOIN, not ANY INNER: on
	 * newer servers (26.x) that keeps one left row per key too, which merges events. A row whose
	 * stack is not in the dictionary (or null) gets known = 0, and is left out.
	 */
	fprintf(f, ") AS rows ANY LEFT JOIN (SELECT stack_id AS sid, any(stack) AS stack, toUInt8(1) AS known FROM %s"
		" GROUP BY stack_id) AS dict USING sid WHERE known = 1", stacks->name);
	if (l->sum)
		fprintf(f, " GROUP BY stack%s ORDER BY first, stack", cols);
	else
		fputs(" ORDER BY time_us, stack", f);
	fputs(" FORMAT TabSeparated", f);
	if (fclose(f)) {
		free(sql);
		sql = NULL;
	}
out:
	free(pids);
	free(cols);
	return sql;
}

static size_t on_data(char *data, size_t size, size_t n, void *ctx)
{
	return fwrite(data, size, n, ctx) * size;
}

/* A TabSeparated field in place: its escapes undone; NULL for \N. */
static char *tsv_field(char *s)
{
	char *out = s;

	if (!strcmp(s, "\\N"))
		return NULL;
	for (char *p = s; *p; p++) {
		if (*p != '\\' || !p[1]) {
			*out++ = *p;
			continue;
		}
		switch (*++p) {
		case 'n': *out++ = '\n'; break;
		case 't': *out++ = '\t'; break;
		case 'r': *out++ = '\r'; break;
		case 'b': *out++ = '\b'; break;
		case 'f': *out++ = '\f'; break;
		case '0': *out++ = '\0'; break;
		default: *out++ = *p;
		}
	}
	*out = 0;
	return s;
}

/* The reply's rows to fn; 0, or -1 when a line is not the query's columns. */
static int ch_rows(const struct profread_layout *l, char *text, profread_fn fn, void *ctx, long long *rows)
{
	int want = 3 + ncols(l); /* stack, weight, the columns, the time */

	for (char *line = text, *next; line && *line; line = next) {
		char *col[3 + PROFREAD_COLS];
		int n = 0;

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		for (char *p = line; n < want; n++) {
			col[n] = p;
			p = strchr(p, '\t');
			if (!p) {
				n++;
				break;
			}
			*p++ = 0;
		}
		if (n != want)
			return -1;
		for (int i = 0; i < n; i++)
			col[i] = tsv_field(col[i]);
		struct profread_row row = { .stack = col[0] ? col[0] : "", .weight = col[1] ? strtod(col[1], NULL) : 0 };
		for (int i = 0; i < want - 3; i++)
			row.col[i] = col[2 + i];
		++*rows;
		fn(ctx, &row);
	}
	return 0;
}

/* The first line of a server's message, without control characters. */
static const char *first_line(char *text)
{
	text[strcspn(text, "\r\n")] = 0;
	return text;
}

static int ch_each(const struct profread_query *q, profread_fn fn, void *ctx, long long *rows)
{
	const struct sink_opts *o = q->ch;
	struct db_table table, stacks;
	char *sql = NULL, *url = NULL, *reply = NULL, *password = NULL;
	size_t len = 0;
	FILE *f = NULL;
	CURL *h = NULL;
	CURLcode rc;
	long status = 0;
	int r = -1;

	*rows = 0;
	if (table_names(q->layout, &table, &stacks))
		return -1;
	if (sink_clickhouse_password(o, &password))
		return -1;
	if (!(sql = ch_sql(q, &table, &stacks)) ||
	    asprintf(&url, "%s%s?database=%s", q->source, q->source[strlen(q->source) - 1] == '/' ? "" : "/",
		     o && o->ch_database ? o->ch_database : "default") < 0 ||
	    !(f = open_memstream(&reply, &len)) || !(h = curl_easy_init())) {
		log_error("--from: out of memory");
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 120000L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, sql);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
	/* basic auth, as the sink: the password never appears in a URL */
	curl_easy_setopt(h, CURLOPT_USERNAME, o && o->ch_user ? o->ch_user : "default");
	curl_easy_setopt(h, CURLOPT_PASSWORD, password ? password : "");
	rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (fclose(f)) {
		f = NULL;
		log_error("--from: out of memory");
		goto out;
	}
	f = NULL;
	if (rc != CURLE_OK)
		log_error("--from %s: ClickHouse not reached: %s", q->source, curl_easy_strerror(rc));
	else if (status != 200 && (strstr(reply, "Code: 192") || strstr(reply, "Code: 193") ||
				   strstr(reply, "Code: 516") || status == 401 || status == 403)) /* as the sink says */
		log_error("--from %s: ClickHouse refused user '%s' (wrong user or password?): %s", q->source,
			  o && o->ch_user ? o->ch_user : "default", first_line(reply));
	else if (status != 200 && strstr(reply, "Code: 81"))
		log_error("--from %s: ClickHouse has no database '%s': %s", q->source,
			  o && o->ch_database ? o->ch_database : "default", first_line(reply));
	else if (status != 200)
		log_error("--from %s: not the stored profile layout (tables %s and %s): %s", q->source, table.name,
			  stacks.name, first_line(reply));
	else if (ch_rows(q->layout, reply, fn, ctx, rows))
		log_error("--from %s: ClickHouse's reply is not rows of the query's columns", q->source);
	else
		r = 0;
out:
	if (f)
		fclose(f);
	if (h)
		curl_easy_cleanup(h);
	free(sql);
	free(url);
	free(reply);
	free(password);
	return r;
}

/* One condition of a query, for the message that it had nothing: " (env e" then ", since T". */
static void say(FILE *f, bool *first, const char *name, const char *value)
{
	fprintf(f, "%s%s %s", *first ? " (" : ", ", name, value);
	*first = false;
}

static void say_time(FILE *f, bool *first, const char *name, int64_t us)
{
	char iso[40];

	if (us < 0)
		return;
	dbtable_format_time_us(us, iso, sizeof(iso));
	say(f, first, name, iso);
}

int profread_each(const struct profread_query *q, profread_fn fn, void *ctx, long long *rows)
{
	char what[512] = "", pid[16];
	bool first = true;
	FILE *f;

	if (is_http(q->source) ? ch_each(q, fn, ctx, rows)
			       : sqlite_each(q, q->source + strlen(SQLITE_PREFIX), fn, ctx, rows))
		return -1;
	if (*rows > 0)
		return 0;
	f = fmemopen(what, sizeof(what) - 1, "w");
	if (f) {
		if (q->env && q->env[0])
			say(f, &first, "env", q->env);
		if (q->host && q->host[0])
			say(f, &first, "host", q->host);
		for (int i = 0; i < q->npids; i++) {
			snprintf(pid, sizeof(pid), "%d", (int)q->pids[i]);
			say(f, &first, "pid", pid);
		}
		say_time(f, &first, "since", q->since_us);
		say_time(f, &first, "until", q->until_us);
		fputs(first ? "" : ")", f);
		fclose(f);
	}
	log_error("--from %s: no %s %s stored%s", q->source, q->layout->metric, q->layout->what, what);
	return -1;
}
