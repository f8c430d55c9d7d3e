#define _GNU_SOURCE
#include "profread.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbtable.h"
#include "log.h"
#include "opts.h"
#include "profrows.h"

#define SQLITE_PREFIX "sqlite:"

int profread_check_source(const char *source)
{
	if (!strncmp(source, SQLITE_PREFIX, strlen(SQLITE_PREFIX)) && source[strlen(SQLITE_PREFIX)])
		return 0;
	return opts_usage_error("--from %s: say sqlite:FILE", source);
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

/* The table of q->metric's aggregated rows and the dictionary's, from the sink's own schemas. */
static int table_names(const char *metric, struct db_table *profile, struct db_table *stacks)
{
	static const struct field none[] = { FIELD_END };
	const struct schema probe = { metric, SCHEMA_EVENT, none };
	const struct schema *sc = profrows_profile_of(&probe);

	if (!sc || dbtable_init(profile, sc) || dbtable_init(stacks, &profrows_stacks_schema)) {
		log_error("--from: no stored profile of %s records", metric);
		return -1;
	}
	return 0;
}

static int sqlite_each(const struct profread_query *q, const char *path, profread_fn fn, void *ctx,
		       long long *samples)
{
	struct db_table profile, stacks;
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char *sql = NULL, *pids = NULL;
	size_t len = 0;
	FILE *f;
	int r = -1, rc;

	if (table_names(q->metric, &profile, &stacks))
		return -1;
	f = open_memstream(&pids, &len);
	for (int i = 0; f && i < q->npids; i++)
		fprintf(f, "%s%d", i ? "," : "", (int)q->pids[i]);
	if (!f || fclose(f))
		goto out;
	/* a stack's dictionary rows repeat per day, env and host: the same text under one id */
	if (asprintf(&sql,
		     "SELECT s.stack, p.pid, p.tid, p.thread_name, p.task, sum(p.samples) FROM %s p"
		     " JOIN (SELECT DISTINCT stack_id, stack FROM %s) s USING (stack_id)"
		     " WHERE (?1 IS NULL OR p.env = ?1) AND (?2 IS NULL OR p.host = ?2)"
		     " AND p.time_us >= ?3 AND p.time_us < ?4%s%s%s"
		     " GROUP BY s.stack, p.pid, p.tid, p.thread_name, p.task ORDER BY min(p.time_us), s.stack",
		     profile.name, stacks.name, q->npids ? " AND p.pid IN (" : "", q->npids ? pids : "",
		     q->npids ? ")" : "") < 0) {
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
			  profile.name, stacks.name, sqlite3_errmsg(db));
		goto out;
	}
	if (q->env && q->env[0])
		sqlite3_bind_text(st, 1, q->env, -1, SQLITE_STATIC);
	if (q->host && q->host[0])
		sqlite3_bind_text(st, 2, q->host, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, q->since_us >= 0 ? q->since_us : 0);
	sqlite3_bind_int64(st, 4, q->until_us >= 0 ? q->until_us : INT64_MAX);
	*samples = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *stack = (const char *)sqlite3_column_text(st, 0);
		const char *thread = (const char *)sqlite3_column_text(st, 3), *task = (const char *)sqlite3_column_text(st, 4);
		struct profread_row row = {
			.stack = stack ? stack : "",
			.pid = sqlite3_column_int64(st, 1),
			.tid = sqlite3_column_int64(st, 2),
			.thread_name = thread ? thread : "",
			.task = task ? task : "",
			.samples = sqlite3_column_int64(st, 5),
		};
		*samples += row.samples;
		fn(ctx, &row);
	}
	if (rc != SQLITE_DONE)
		log_error("--from sqlite:%s: %s", path, sqlite3_errmsg(db));
	else
		r = 0;
out:
	if (!sql || !pids)
		log_error("--from: out of memory");
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(sql);
	free(pids);
	return r;
}

/* What a range was, for the message that it had nothing. */
static void say_range(FILE *f, const char *name, int64_t us)
{
	char iso[40];

	if (us < 0)
		return;
	dbtable_format_time_us(us, iso, sizeof(iso));
	fprintf(f, " %s %s", name, iso);
}

int profread_each(const struct profread_query *q, profread_fn fn, void *ctx, long long *samples)
{
	char what[512] = "";
	FILE *f;

	if (sqlite_each(q, q->source + strlen(SQLITE_PREFIX), fn, ctx, samples))
		return -1;
	if (*samples > 0)
		return 0;
	f = fmemopen(what, sizeof(what) - 1, "w");
	if (f) {
		if (q->env && q->env[0])
			fprintf(f, " env %s", q->env);
		if (q->host && q->host[0])
			fprintf(f, " host %s", q->host);
		for (int i = 0; i < q->npids; i++)
			fprintf(f, " pid %d", (int)q->pids[i]);
		say_range(f, "since", q->since_us);
		say_range(f, "until", q->until_us);
		fclose(f);
	}
	log_error("--from %s: no %s samples stored for%s", q->source, q->metric, what[0] ? what : " any row");
	return -1;
}
