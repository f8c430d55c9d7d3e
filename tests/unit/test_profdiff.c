/*
 * Differential profiles (src/pictures/profdiff.c) and stored ones read back
 * (src/run/profread.c): frames by function, the text diff's numbers against shares
 * worked out by hand, a folded baseline that is not folded text, the SVG's colours
 * and tooltips, the forms of a time, and samples and events written through the real
 * SQLite sink (dbsinks.c, profrows.c) read back with every filter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dbsinks.h"
#include "dbtable.h"
#include "profdiff.h"
#include "profile.h"
#include "profread.h"
#include "record.h"
#include "stackagg.h"

static void add(struct stackagg *a, const char *stack, long long n)
{
	profdiff_add(a, stack, strlen(stack), n);
}

static void test_frames_by_function(void **state)
{
	static const char *const cases[][2] = {
		{ "f (/a/b.py:12)", "f (/a/b.py)" },
		{ "f (/a/b.py)", "f (/a/b.py)" },                 /* already */
		{ "<module> (x.py:1)", "<module> (x.py)" },
		{ "[unknown] (libc.so:0)", "[unknown] (libc.so)" },
		{ "g (weird:name.py:7)", "g (weird:name.py)" },  /* the last colon */
		{ "f (a.py:)", "f (a.py:)" },                     /* no digits: kept */
		{ "h:12", "h:12" },                               /* no parentheses: kept */
		{ "[truncated]", "[truncated]" },
	};
	char buf[64];
	struct stackagg a;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = profdiff_function(cases[i][0], strlen(cases[i][0]), buf, sizeof(buf));
		assert_string_equal(buf, cases[i][1]);
		assert_int_equal(n, strlen(cases[i][1]));
	}
	/* cut to fit, NUL-terminated */
	assert_int_equal(profdiff_function("f (/a/b.py:12)", 14, buf, 5), 4);
	assert_string_equal(buf, "f (/");
	/* two lines of one function become one stack */
	stackagg_init(&a);
	profdiff_add(&a, "m (x.py:1);f (x.py:3)", 21, 2);
	profdiff_add(&a, "m (x.py:1);f (x.py:4)", 21, 5);
	assert_int_equal(a.n, 1);
	assert_string_equal(a.v[0].key, "m (x.py);f (x.py)");
	assert_int_equal(a.v[0].self, 7);
	stackagg_free(&a);
}

/* before: a 50, b 30, c 20 (of 100); after: a 50, b 90, c 20 (of 160), b also under a 0. */
static void test_text_diff_numbers(void **state)
{
	struct stackagg before, after;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	stackagg_init(&before);
	stackagg_init(&after);
	add(&before, "m (x.py:1);a (x.py:5);w (x.py:9)", 50);
	add(&before, "m (x.py:1);b (x.py:6);w (x.py:9)", 30);
	add(&before, "m (x.py:1);c (x.py:7);w (x.py:9)", 20);
	add(&before, "m (x.py:1);gone (x.py:8)", 0); /* no samples: no row */
	add(&after, "m (x.py:1);a (x.py:5);w (x.py:9)", 50);
	add(&after, "m (x.py:1);b (x.py:6);w (x.py:9)", 60);
	add(&after, "m (x.py:2);b (x.py:6);b (x.py:6);w (x.py:9)", 30); /* recursion: once */
	add(&after, "m (x.py:1);c (x.py:7);w (x.py:9)", 20);
	f = open_memstream(&text, &len);
	assert_int_equal(profdiff_write_text(f, &before, &after), 0);
	fclose(f);
	/* b: 30% → 56.25%; a: 50% → 31.25%; c: 20% → 12.5%; m and w: 100% both */
	assert_string_equal(text,
			    "# 100 samples before, 160 after; share of the samples with the function on the stack\n"
			    " BEFORE%   AFTER%    DELTA  FUNCTION (FILE)\n"
			    "  30.00%   56.25%   +26.25  b (x.py)\n"
			    "  50.00%   31.25%   -18.75  a (x.py)\n"
			    "  20.00%   12.50%    -7.50  c (x.py)\n"
			    " 100.00%  100.00%    +0.00  m (x.py)\n"
			    " 100.00%  100.00%    +0.00  w (x.py)\n");
	free(text);
	/* a function only in the baseline: after 0% */
	add(&before, "m (x.py:1);old (x.py:3)", 100);
	f = open_memstream(&text, &len);
	assert_int_equal(profdiff_write_text(f, &before, &after), 0);
	fclose(f);
	assert_non_null(strstr(text, "\n  50.00%    0.00%   -50.00  old (x.py)\n"));
	free(text);
	stackagg_free(&before);
	stackagg_free(&after);
}

static char *write_tmp(const char *body)
{
	static char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/pyebpf-profdiff-XXXXXX");
	close(mkstemp(path));
	f = fopen(path, "w");
	fputs(body, f);
	fclose(f);
	return path;
}

static void test_baseline_files(void **state)
{
	static const char *const bad[] = {
		"{\"$schema\": \"speedscope\"}\n",           /* JSON */
		"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", /* gzip (pprof) */
		"a;b 3\nno count here\n",                   /* the second line */
		"a;b -3\n",
		"",                                          /* no samples */
		"a;b 0\n",
	};
	struct stackagg a;
	char *path;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		stackagg_init(&a);
		path = write_tmp(bad[i]);
		assert_int_equal(profdiff_read_folded(path, &a), -1);
		unlink(path);
		stackagg_free(&a);
	}
	stackagg_init(&a);
	path = write_tmp("m (x.py:1);f (x.py:3) 4\r\nm (x.py:1);f (x.py:9) 6\nm (x.py:1) 1\n");
	assert_int_equal(profdiff_read_folded(path, &a), 0);
	unlink(path);
	assert_int_equal(a.n, 2);
	assert_string_equal(a.v[0].key, "m (x.py);f (x.py)");
	assert_int_equal(a.v[0].self, 10);
	assert_int_equal(profdiff_read_folded("/nonexistent/x.txt", &a), -1);
	stackagg_free(&a);
}

/* The SVG: the grown frame red, the shrunk one blue, tooltips with both shares; the baseline-only path listed. */
static void test_diff_svg(void **state)
{
	const struct profile_meta meta = { .title = "t", .count_name = "samples", .weight_name = "cpu", .period_ns = 1 };
	struct profile_out o = { .diff = true };
	struct stackagg before, after;
	char *path = write_tmp(""), svg[8192];
	FILE *f;
	size_t n;

	(void)state;
	stackagg_init(&before);
	stackagg_init(&after);
	add(&before, "m (x.py:1);a (x.py:5)", 50);
	add(&before, "m (x.py:1);b (x.py:6)", 50);
	add(&before, "m (x.py:1);old (x.py:6)", 100);
	stackagg_add_stack(&after, "m (x.py:1);a (x.py:5)", 21);
	for (int i = 0; i < 3; i++)
		stackagg_add_stack(&after, "m (x.py:1);b (x.py:6)", 21);
	strcat(path, ".svg");
	assert_int_equal(profile_option(&o, false, path), 0);
	assert_int_equal(profile_check(&o), 0);
	assert_int_equal(profile_write_diff(&o, &after, &before, &meta), 0);
	f = fopen(path, "r");
	n = fread(svg, 1, sizeof(svg) - 1, f);
	svg[n] = 0;
	fclose(f);
	unlink(path);
	/* a: 25% → 25%: unchanged; b: 25% → 75%: +50, the largest (full red); m: 50% → 100% */
	assert_non_null(strstr(svg, "<title>b (x.py)\nbefore 25.00%, after 75.00%, difference +50.00 points</title>"
				    "<rect x=\"305.00\""));
	assert_non_null(strstr(svg, "height=\"15\" fill=\"#ff3232\"/><text x=\"308.00\""));
	assert_non_null(strstr(svg, "<title>a (x.py)\nbefore 25.00%, after 25.00%, difference +0.00 points</title>"));
	assert_non_null(strstr(svg, "<title>all\nbefore 100.00%, after 100.00%, difference +0.00 points</title>"));
	assert_non_null(strstr(svg, "Only in the baseline (its share before):</text>"));
	assert_non_null(strstr(svg, ">50.00%  m (x.py);old (x.py)</text>"));
	assert_non_null(strstr(svg, "4 samples, against 200 in the baseline"));
	stackagg_free(&before);
	stackagg_free(&after);
	/* the other formats do not draw differences */
	o = (struct profile_out){ .diff = true };
	assert_int_equal(profile_option(&o, false, "/tmp/x.pb.gz"), 0);
	assert_int_equal(profile_check(&o), -1);
}

static void test_times(void **state)
{
	int64_t us, now = dbtable_now_us();

	(void)state;
	assert_int_equal(profread_parse_time("since", "2026-12-07T09:00:00Z", &us), 0);
	assert_int_equal(us, INT64_C(1796634000) * 1000000);
	assert_int_equal(profread_parse_time("since", "2026-12-07 09:00:00", &us), 0);
	assert_int_equal(us, INT64_C(1796634000) * 1000000);
	assert_int_equal(profread_parse_time("since", "2026-12-07T09:00", &us), 0);
	assert_int_equal(us, INT64_C(1796634000) * 1000000);
	assert_int_equal(profread_parse_time("since", "2026-12-07T09:00:00.250000Z", &us), 0);
	assert_int_equal(us, INT64_C(1796634000) * 1000000 + 250000);
	assert_int_equal(profread_parse_time("since", "2026-12-07", &us), 0);
	assert_int_equal(us, INT64_C(1796601600) * 1000000);
	assert_int_equal(profread_parse_time("since", "-2h", &us), 0);
	assert_true(llabs((long long)(now - 7200 * INT64_C(1000000) - us)) < 5000000);
	assert_int_equal(profread_parse_time("since", "-30m", &us), 0);
	assert_true(llabs((long long)(now - 1800 * INT64_C(1000000) - us)) < 5000000);
	assert_int_equal(profread_parse_time("since", "-1d", &us), 0);
	assert_true(llabs((long long)(now - 86400 * INT64_C(1000000) - us)) < 5000000);
	assert_int_equal(profread_parse_time("since", "now", &us), 0);
	assert_true(llabs((long long)(now - us)) < 5000000);
	for (const char *const *bad = (const char *const[]){ "yesterday", "-2w", "-h", "2026-12-07T", "2026-13-01",
							     "2026-12-07T09:00:00+01:00", "", NULL };
	     *bad; bad++)
		assert_int_equal(profread_parse_time("since", *bad, &us), -1);
	assert_int_equal(profread_check_source("sqlite:/x.db"), 0);
	assert_int_equal(profread_check_source("sqlite:"), -1);
	assert_int_equal(profread_check_source("/x.db"), -1);
}

struct seen {
	struct stackagg stacks; /* "pid tid thread task stack" -> samples */
};

static void seen_row(void *ctx, const struct profread_row *r)
{
	struct seen *g = ctx;
	char key[512];
	int n = snprintf(key, sizeof(key), "%s %s %s %s %s", r->col[0], r->col[1], r->col[2], r->col[3], r->stack);

	stackagg_get(&g->stacks, key, (size_t)n)->self += (long long)r->weight;
}

/* The samples read back, -1 after an error. */
static long long read_back(const struct profread_query *q, struct seen *g)
{
	long long rows = -1, samples = 0;

	stackagg_clear(&g->stacks);
	if (profread_each(q, seen_row, g, &rows))
		return -1;
	for (size_t i = 0; i < g->stacks.n; i++)
		samples += g->stacks.v[i].self;
	return samples;
}

static const struct profread_layout samples_layout = {
	.metric = "py_stack", .profile = true, .stack = "stack_id", .weight = "samples", .sum = true,
	.cols = { "pid", "tid", "thread_name", "task", NULL }, .what = "samples",
};

/* The database db (and its WAL files) and the directory path. */
static void remove_db(const char *path, char *db, size_t size)
{
	unlink(db);
	snprintf(db + strlen(db), size - strlen(db), "-wal");
	unlink(db);
	db[strlen(db) - 4] = 0;
	snprintf(db + strlen(db), size - strlen(db), "-shm");
	unlink(db);
	rmdir(path);
}

static void test_read_sqlite(void **state)
{
	static const struct field fields[] = {
		FIELD_METRIC,
		{ .name = "time", .type = FIELD_TIME, .meaning = "t" },
		FIELD_PID(0),
		FIELD_TID(0),
		FIELD_THREAD_NAME(0),
		{ .name = "task", .type = FIELD_STR, .meaning = "t" },
		{ .name = "stack", .type = FIELD_STR, .meaning = "s" },
		FIELD_ENV,
		FIELD_END,
	};
	static const struct schema sample = { "py_stack", SCHEMA_EVENT, fields };
	static const struct schema *const list[] = { &sample, NULL };
	const struct schema *const *lists[] = { list };
	/* time (s after t0), pid, env, stack: 3 windows of 10 s */
	static const struct {
		int s, pid;
		const char *env, *stack;
	} samples[] = {
		{ 1, 10, "prod", "m (x.py:1);f (x.py:3)" }, { 2, 10, "prod", "m (x.py:1);f (x.py:3)" },
		{ 3, 10, "prod", "m (x.py:1);g (x.py:7)" }, { 12, 10, "prod", "m (x.py:1);f (x.py:3)" },
		{ 13, 11, "prod", "m (x.py:1);f (x.py:3)" }, { 25, 10, "canary", "m (x.py:1);g (x.py:7)" },
	};
	char path[] = "/tmp/pyebpf-profread-XXXXXX", db[64], source[80], iso[40];
	struct sink_opts so = { .sqlite = db, .profile_window_s = 10 };
	struct common_opts c = { .sink = &so };
	int64_t t0 = (dbtable_now_us() / 10000000 - 100) * 10000000; /* a window's start, 1000 s ago */
	pid_t pid11 = 11;
	struct profread_query q;
	struct seen g;
	struct sink *sink;

	(void)state;
	assert_non_null(mkdtemp(path));
	snprintf(db, sizeof(db), "%s/p.db", path);
	snprintf(source, sizeof(source), "sqlite:%s", db);
	profread_init(&q, &samples_layout);
	q.source = source;
	sink = sinks_open(&c, lists, 1);
	assert_non_null(sink);
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		json_t *o = json_object();
		dbtable_format_time_us(t0 + samples[i].s * INT64_C(1000000), iso, sizeof(iso));
		json_object_set_new(o, "metric", json_string("py_stack"));
		json_object_set_new(o, "time", json_string(iso));
		json_object_set_new(o, "pid", json_integer(samples[i].pid));
		json_object_set_new(o, "tid", json_integer(samples[i].pid));
		json_object_set_new(o, "thread_name", json_string("MainThread"));
		json_object_set_new(o, "task", json_string(""));
		json_object_set_new(o, "stack", json_string(samples[i].stack));
		json_object_set_new(o, "env", json_string(samples[i].env));
		sink_record(sink, &sample, o);
	}
	assert_int_equal(sink_close(sink), 0);
	stackagg_init(&g.stacks);
	/* everything: per stack and thread */
	assert_int_equal(read_back(&q, &g), 6);
	assert_int_equal(stackagg_get(&g.stacks, "10 10 MainThread  m (x.py:1);f (x.py:3)", 39)->self, 3);
	assert_int_equal(stackagg_get(&g.stacks, "10 10 MainThread  m (x.py:1);g (x.py:7)", 39)->self, 2);
	assert_int_equal(stackagg_get(&g.stacks, "11 11 MainThread  m (x.py:1);f (x.py:3)", 39)->self, 1);
	/* env, pid, host */
	q.env = "prod";
	assert_int_equal(read_back(&q, &g), 5);
	q.pids = &pid11;
	q.npids = 1;
	assert_int_equal(read_back(&q, &g), 1);
	q.host = dbtable_host();
	assert_int_equal(read_back(&q, &g), 1);
	q.host = "elsewhere";
	assert_int_equal(read_back(&q, &g), -1); /* nothing: said, an error */
	profread_init(&q, &samples_layout);
	q.source = source;
	/* windows that begin in [since, until): the second alone */
	q.since_us = t0 + 10000000;
	q.until_us = t0 + 20000000;
	assert_int_equal(read_back(&q, &g), 2);
	q.until_us = t0 + 20000001; /* the third window begins before: in */
	assert_int_equal(read_back(&q, &g), 3);
	q.since_us = t0 + 10000001; /* the second window begins before: out */
	assert_int_equal(read_back(&q, &g), 1);
	q.until_us = t0 + 20000000;
	assert_int_equal(read_back(&q, &g), -1);
	/* not this layout, not a database */
	snprintf(source, sizeof(source), "sqlite:%s/none.db", path);
	assert_int_equal(read_back(&q, &g), -1);
	snprintf(source, sizeof(source), "sqlite:/etc/passwd");
	assert_int_equal(read_back(&q, &g), -1);
	stackagg_free(&g.stacks);
	remove_db(path, db, sizeof(db));
}

/* An event's fields: a holder stack column (stored as its id) and a time in ms. */
static const struct field event_fields[] = {
	FIELD_METRIC,
	{ .name = "time", .type = FIELD_TIME, .meaning = "t" },
	FIELD_PID(0),
	FIELD_THREAD_NAME(0),
	{ .name = "duration_ms", .type = FIELD_REAL, .meaning = "d" },
	{ .name = "holder_py_stack", .type = FIELD_STR, .meaning = "s" },
	FIELD_ENV,
	FIELD_END,
};

struct event_rows {
	int n;
	char line[8][128];
};

static void event_row(void *ctx, const struct profread_row *r)
{
	struct event_rows *e = ctx;

	if (e->n < 8)
		snprintf(e->line[e->n++], sizeof(e->line[0]), "%s %s %.3f", r->col[0] ? r->col[0] : "(null)", r->stack,
			 r->weight);
}

/*
 * Event rows read one by one (pyoffcpu's and pygil's layouts): in time order, each
 * weight as stored, a null stack left out, the pid filter and an empty range.
 */
static void test_read_events(void **state)
{
	static const struct schema event = { "unit_wait", SCHEMA_EVENT, event_fields };
	static const struct schema *const list[] = { &event, NULL };
	const struct schema *const *lists[] = { list };
	static const struct profread_layout layout = {
		.metric = "unit_wait", .stack = "holder_py_stack_id", .weight = "duration_ms",
		.cols = { "thread_name", NULL }, .what = "events",
	};
	/* s after t0, pid, thread, ms, holder stack (NULL: none) */
	static const struct {
		int s, pid;
		const char *thread;
		double ms;
		const char *stack;
	} events[] = {
		{ 3, 10, "b", 2.5, "m (x.py:1);f (x.py:3)" }, { 1, 10, "a", 1.25, "m (x.py:1);f (x.py:3)" },
		{ 2, 11, "c", 7.125, NULL },                   { 4, 11, "c", 0.001, "" },
	};
	char path[] = "/tmp/pyebpf-profread-XXXXXX", db[64], source[80], iso[40];
	struct sink_opts so = { .sqlite = db };
	struct common_opts c = { .sink = &so };
	int64_t t0 = dbtable_now_us() - INT64_C(100000000);
	pid_t pid11 = 11;
	struct profread_query q;
	struct event_rows got = { 0 };
	long long rows = 0;
	struct sink *sink;

	(void)state;
	assert_non_null(mkdtemp(path));
	snprintf(db, sizeof(db), "%s/e.db", path);
	snprintf(source, sizeof(source), "sqlite:%s", db);
	sink = sinks_open(&c, lists, 1);
	assert_non_null(sink);
	for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
		json_t *o = json_object();
		dbtable_format_time_us(t0 + events[i].s * INT64_C(1000000), iso, sizeof(iso));
		json_object_set_new(o, "metric", json_string("unit_wait"));
		json_object_set_new(o, "time", json_string(iso));
		json_object_set_new(o, "pid", json_integer(events[i].pid));
		json_object_set_new(o, "thread_name", json_string(events[i].thread));
		json_object_set_new(o, "duration_ms", json_real(events[i].ms));
		json_object_set_new(o, "holder_py_stack", events[i].stack ? json_string(events[i].stack) : json_null());
		json_object_set_new(o, "env", json_string("prod"));
		sink_record(sink, &event, o);
	}
	assert_int_equal(sink_close(sink), 0);
	profread_init(&q, &layout);
	q.source = source;
	assert_int_equal(profread_each(&q, event_row, &got, &rows), 0);
	assert_int_equal(rows, 3);
	assert_string_equal(got.line[0], "a m (x.py:1);f (x.py:3) 1.250");
	assert_string_equal(got.line[1], "b m (x.py:1);f (x.py:3) 2.500");
	assert_string_equal(got.line[2], "c  0.001");
	q.pids = &pid11;
	q.npids = 1;
	got.n = 0;
	assert_int_equal(profread_each(&q, event_row, &got, &rows), 0);
	assert_int_equal(rows, 1);
	assert_string_equal(got.line[0], "c  0.001");
	q.since_us = t0 + 5000000;
	assert_int_equal(profread_each(&q, event_row, &got, &rows), -1);
	remove_db(path, db, sizeof(db));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frames_by_function),
		cmocka_unit_test(test_text_diff_numbers),
		cmocka_unit_test(test_baseline_files),
		cmocka_unit_test(test_diff_svg),
		cmocka_unit_test(test_times),
		cmocka_unit_test(test_read_sqlite),
		cmocka_unit_test(test_read_events),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
