/* profrows: samples become per-window rows with counts, stacks a dictionary written first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dbtable.h"
#include "profrows.h"

static const struct field sample_fields[] = {
	{ .name = "metric", .type = FIELD_STR, .meaning = "m" },
	{ .name = "time", .type = FIELD_TIME, .meaning = "t" },
	{ .name = "pid", .type = FIELD_INT, .meaning = "p" },
	FIELD_END,
};
static const struct schema py_stack = { "py_stack", SCHEMA_EVENT, sample_fields };
static const struct schema other = { "gc_pause", SCHEMA_EVENT, sample_fields };

static json_t *sample(const char *time, int tid, const char *thread, const char *stack)
{
	return json_pack("{s:s, s:s, s:i, s:i, s:i, s:s, s:s, s:s, s:s}", "metric", "py_stack", "time", time, "pid", 7,
			 "tid", tid, "container_pid", 7, "thread_name", thread, "task", "", "stack", stack, "env",
			 "prod");
}

struct got {
	json_t *rows; /* [metric, obj] pairs in the order handed out */
};

static void collect(void *ctx, const struct schema *sc, json_t *obj)
{
	struct got *g = ctx;

	json_array_append_new(g->rows, json_pack("[s, O]", sc->metric, obj));
}

static void test_stack_id_is_stable_and_positive(void **state)
{
	(void)state;
	/* FNV-1a 64 of "" is its offset basis; its top bit cleared */
	assert_int_equal(profrows_stack_id(""), (int64_t)(0xcbf29ce484222325ULL & INT64_MAX));
	/* of "a": 0xaf63dc4c8601ec8c, known from the FNV reference values */
	assert_int_equal(profrows_stack_id("a"), (int64_t)(0xaf63dc4c8601ec8cULL & INT64_MAX));
	assert_true(profrows_stack_id("f (x.py:1);g (x.py:2)") >= 0);
	assert_true(profrows_stack_id("f (x.py:1);g (x.py:2)") != profrows_stack_id("f (x.py:1);g (x.py:3)"));
}

static void test_kinds(void **state)
{
	const struct schema *p = profrows_profile_of(&py_stack);

	(void)state;
	assert_non_null(p);
	assert_string_equal(p->metric, "py_stack_profile");
	assert_null(profrows_profile_of(&other));
	assert_true(profrows_is_profile(p));
	assert_true(profrows_is_profile(&profrows_stacks_schema));
	assert_false(profrows_is_profile(&py_stack));
}

static void test_windows_counts_and_dictionary_first(void **state)
{
	struct profrows *p = profrows_new(10);
	struct got g = { json_array() };
	const char *s1 = "<module> (w.py:10);a (w.py:6);work (w.py:4)", *s2 = "<module> (w.py:10);b (w.py:7)";
	/* 2026-12-07T06:00:00Z */
	int64_t t0 = dbtable_parse_time_us("2026-12-07T06:00:00Z");
	json_t *o, *row;
	unsigned long samples, rows, stacks;
	int sum = 0;
	size_t i;

	(void)state;
	/* window [0, 10): s1 x3 on tid 7, s1 x1 on tid 8, s2 x2 on tid 7; window [10, 20): s1 x1 */
	const struct {
		const char *time;
		int tid;
		const char *stack;
	} in[] = {
		{ "2026-12-07T06:00:01.000000Z", 7, s1 }, { "2026-12-07T06:00:02.500000Z", 7, s1 },
		{ "2026-12-07T06:00:09.999999Z", 7, s1 }, { "2026-12-07T06:00:03.000000Z", 8, s1 },
		{ "2026-12-07T06:00:04.000000Z", 7, s2 }, { "2026-12-07T06:00:05.000000Z", 7, s2 },
		{ "2026-12-07T06:00:10.000000Z", 7, s1 },
	};
	for (i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		o = sample(in[i].time, in[i].tid, in[i].tid == 7 ? "MainThread" : "worker", in[i].stack);
		profrows_add(p, &py_stack, o);
		json_decref(o);
	}
	/* 1 s after the first window's end, with a 2 s lag: dictionary rows only */
	profrows_emit(p, t0 + 11000000, 2000000, false, collect, &g);
	assert_int_equal(json_array_size(g.rows), 2);
	json_array_foreach(g.rows, i, row)
		assert_string_equal(json_string_value(json_array_get(row, 0)), "stacks");
	o = json_array_get(json_array_get(g.rows, 0), 1);
	assert_int_equal(json_integer_value(json_object_get(o, "stack_id")), profrows_stack_id(s1));
	assert_string_equal(json_string_value(json_object_get(o, "leaf_func")), "work");
	assert_string_equal(json_string_value(json_object_get(o, "leaf_file")), "w.py");
	assert_int_equal(json_integer_value(json_object_get(o, "leaf_line")), 4);
	assert_int_equal(json_integer_value(json_object_get(o, "depth")), 3);
	assert_string_equal(json_string_value(json_object_get(o, "time")), "2026-12-07T06:00:01.000000Z");
	assert_string_equal(json_string_value(json_object_get(o, "env")), "prod");
	/* the first window's three rows, not the second's */
	json_array_clear(g.rows);
	profrows_emit(p, t0 + 12000000, 2000000, false, collect, &g);
	assert_int_equal(json_array_size(g.rows), 3);
	json_array_foreach(g.rows, i, row)
	{
		o = json_array_get(row, 1);
		assert_string_equal(json_string_value(json_array_get(row, 0)), "py_stack_profile");
		assert_string_equal(json_string_value(json_object_get(o, "time")), "2026-12-07T06:00:00.000000Z");
		assert_string_equal(json_string_value(json_object_get(o, "window_end")), "2026-12-07T06:00:10.000000Z");
		int tid = (int)json_integer_value(json_object_get(o, "tid"));
		int64_t id = json_integer_value(json_object_get(o, "stack_id"));
		int n = (int)json_integer_value(json_object_get(o, "samples"));
		assert_int_equal(n, tid == 8 ? 1 : id == profrows_stack_id(s1) ? 3 : 2);
		assert_string_equal(json_string_value(json_object_get(o, "thread_name")), tid == 8 ? "worker" : "MainThread");
		sum += n;
	}
	assert_int_equal(sum, 6);
	/* a late sample of an emitted window: a row of its own, nothing lost */
	o = sample("2026-12-07T06:00:08.000000Z", 7, "MainThread", s1);
	profrows_add(p, &py_stack, o);
	json_decref(o);
	json_array_clear(g.rows);
	profrows_emit(p, t0 + 12000000, 2000000, true, collect, &g);
	assert_int_equal(json_array_size(g.rows), 2);
	profrows_counts(p, &samples, &rows, &stacks);
	assert_int_equal(samples, 8);
	assert_int_equal(rows, 5);
	assert_int_equal(stacks, 2);
	json_decref(g.rows);
	profrows_free(p);
}

static void test_next_day_writes_the_dictionary_again(void **state)
{
	struct profrows *p = profrows_new(10);
	struct got g = { json_array() };
	json_t *o;

	(void)state;
	o = sample("2026-12-07T23:59:59.000000Z", 7, "MainThread", "[truncated];f (x.py:3)");
	profrows_add(p, &py_stack, o);
	json_decref(o);
	o = sample("2026-12-08T00:00:01.000000Z", 7, "MainThread", "[truncated];f (x.py:3)");
	profrows_add(p, &py_stack, o);
	json_decref(o);
	profrows_emit(p, 0, 0, true, collect, &g);
	/* two dictionary rows (one per day), then two rows */
	assert_int_equal(json_array_size(g.rows), 4);
	o = json_array_get(json_array_get(g.rows, 1), 1);
	assert_string_equal(json_string_value(json_object_get(o, "time")), "2026-12-08T00:00:01.000000Z");
	/* a marker is no frame */
	assert_int_equal(json_integer_value(json_object_get(o, "depth")), 1);
	assert_string_equal(json_string_value(json_object_get(o, "leaf_func")), "f");
	json_decref(g.rows);
	profrows_free(p);
}

static const struct field gil_fields[] = {
	{ .name = "metric", .type = FIELD_STR, .meaning = "m" },
	{ .name = "pid", .type = FIELD_INT, .meaning = "p" },
	{ .name = "duration_ms", .type = FIELD_REAL, .meaning = "d" },
	{ .name = "holder_tid", .type = FIELD_INT, .meaning = "h" },
	{ .name = "holder_thread_name", .type = FIELD_STR, .meaning = "h" },
	{ .name = "waiter_py_stack", .type = FIELD_STR, .meaning = "w" },
	{ .name = "holder_py_stack", .type = FIELD_STR, .meaning = "h" },
	{ .name = "time", .type = FIELD_TIME, .meaning = "t" },
	FIELD_END,
};
static const struct schema gil_wait = { "gil_wait", SCHEMA_EVENT, gil_fields };

static void test_weighted_events_and_stack_columns(void **state)
{
	struct profrows *p = profrows_new(10);
	struct got g = { json_array() };
	struct db_table t;
	json_t *o, *row;
	int found = 0;

	(void)state;
	assert_true(profrows_wanted(&gil_wait));
	assert_false(profrows_is_sample(&gil_wait));
	assert_true(profrows_is_sample(&py_stack));
	/* the event table names its stacks by id */
	assert_int_equal(dbtable_init(&t, &gil_wait), 0);
	for (int i = 0; i < t.ncols; i++)
		found += !strcmp(t.cols[i].name, "waiter_py_stack_id") || !strcmp(t.cols[i].name, "holder_py_stack_id");
	assert_int_equal(found, 2);
	for (int i = 0; i < 3; i++) {
		o = json_pack("{s:s, s:i, s:f, s:i, s:s, s:s, s:s, s:s}", "metric", "gil_wait", "pid", 7, "duration_ms",
			      1.5 + i, "holder_tid", 8, "holder_thread_name", "spin", "waiter_py_stack", "w (x.py:1)",
			      "holder_py_stack", "h (x.py:2)", "time", "2026-12-07T06:00:01.000000Z");
		profrows_add(p, &gil_wait, o);
		if (!i) {
			row = dbtable_row(&t, o, "h");
			assert_int_equal(json_integer_value(json_object_get(row, "holder_py_stack_id")),
					 profrows_stack_id("h (x.py:2)"));
			json_decref(row);
		}
		json_decref(o);
	}
	profrows_emit(p, 0, 0, true, collect, &g);
	/* two dictionary rows (the waiter's, the holder's), one profile row: 3 waits, 7.5 ms */
	assert_int_equal(json_array_size(g.rows), 3);
	o = json_array_get(json_array_get(g.rows, 2), 1);
	assert_string_equal(json_string_value(json_array_get(json_array_get(g.rows, 2), 0)), "gil_holder_profile");
	assert_int_equal(json_integer_value(json_object_get(o, "samples")), 3);
	assert_int_equal(json_integer_value(json_object_get(o, "weight_us")), 7500);
	assert_int_equal(json_integer_value(json_object_get(o, "tid")), 8);
	assert_string_equal(json_string_value(json_object_get(o, "thread_name")), "spin");
	assert_int_equal(json_integer_value(json_object_get(o, "stack_id")), profrows_stack_id("h (x.py:2)"));
	json_decref(g.rows);
	profrows_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stack_id_is_stable_and_positive),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_windows_counts_and_dictionary_first),
		cmocka_unit_test(test_next_day_writes_the_dictionary_again),
		cmocka_unit_test(test_weighted_events_and_stack_columns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
