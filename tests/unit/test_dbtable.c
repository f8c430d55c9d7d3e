/* dbtable: table names, columns from a schema, rows as the database sinks write them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <sys/time.h>

#include "dbtable.h"
#include "profrows.h"

static const struct field sample_fields[] = {
	FIELD_METRIC,
	{ .name = "pid", .type = FIELD_INT, COLUMN(1, "PID", 7), .meaning = "a process id" },
	{ .name = "ok", .type = FIELD_BOOL, .meaning = "a flag" },
	{ .name = "start_time", .type = FIELD_TIME, .meaning = "when" },
	{ .name = "ms", .type = FIELD_REAL, .unit = "ms", .meaning = "how long" },
	{ .name = "stack", .type = FIELD_ARRAY, .meaning = "frames" },
	{ .name = "time", .type = FIELD_TIME, .meaning = "wall-clock time" },
	FIELD_ENV,
	FIELD_END,
};
static const struct schema sample = { "py_stack", SCHEMA_EVENT, sample_fields };
static const struct schema other = { "gc_pause", SCHEMA_EVENT, sample_fields };
static const struct schema summary = { "x_summary", SCHEMA_SUMMARY, sample_fields };

static void test_parse_time_us(void **state)
{
	(void)state;
	/* 2026-12-03T18:00:00Z is 1796320800 s after the epoch (date -u -d ... +%s) */
	assert_int_equal(dbtable_parse_time_us("2026-12-03T18:00:00.000001Z"), 1796320800000001ll);
	assert_int_equal(dbtable_parse_time_us("2026-12-03T18:00:00.5Z"), 1796320800500000ll);
	assert_int_equal(dbtable_parse_time_us("1970-01-01T00:00:00Z"), 0);
	assert_int_equal(dbtable_parse_time_us("2026-12-03 18:00:00"), -1);
	assert_int_equal(dbtable_parse_time_us("2026-12-03T18:00:00.000001"), -1);
	assert_int_equal(dbtable_parse_time_us(NULL), -1);
}

static void test_names_and_columns(void **state)
{
	static struct db_table t;
	const char *want[] = { "env", "host", "time", "time_us", "pid", "ok", "start_time", "start_time_us",
			       "ms", "stack" };

	(void)state;
	assert_int_equal(dbtable_init(&t, &sample), 0);
	assert_string_equal(t.name, "ebpf_py_stacks"); /* the original monitor's name */
	assert_int_equal(t.ncols, 10);
	for (int i = 0; i < t.ncols; i++)
		assert_string_equal(t.cols[i].name, want[i]);
	assert_true(t.cols[3].key && !t.cols[4].key);
	assert_int_equal(t.cols[6].type, DB_DATETIME);
	assert_int_equal(t.cols[7].type, DB_MICROS);
	assert_int_equal(dbtable_init(&t, &other), 0);
	assert_string_equal(t.name, "ebpf_gc_pause");
	assert_true(dbtable_wanted(&sample) && !dbtable_wanted(&summary));
}

/* The profile tables: sorted by time then stack, samples a count, no column null. */
static void test_profile_tables(void **state)
{
	static struct db_table t;
	const struct schema *profile = profrows_profile_of(&sample);
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:s, s:I, s:i}", "metric", "py_stack_profile", "time",
			      "2026-12-03T18:00:00Z", "window_end", "2026-12-03T18:00:10Z", "pid", 1, "tid", 2,
			      "container_pid", 1, "thread_name", "MainThread", "stack_id", (json_int_t)42, "samples", 7);
	json_t *row;
	int samples = -1, task = -1;

	(void)state;
	assert_non_null(profile);
	assert_int_equal(dbtable_init(&t, profile), 0);
	assert_string_equal(t.order_by, "env, host, time, stack_id");
	for (int i = 0; i < t.ncols; i++) {
		assert_true(t.cols[i].key);
		if (!strcmp(t.cols[i].name, "samples"))
			samples = i;
		if (!strcmp(t.cols[i].name, "task"))
			task = i;
	}
	assert_true(samples >= 0 && task >= 0);
	assert_int_equal(t.cols[samples].type, DB_COUNT);
	row = dbtable_row(&t, o, "h1");
	assert_string_equal(json_string_value(json_object_get(row, "task")), ""); /* none: "", not null */
	assert_int_equal(json_integer_value(json_object_get(row, "samples")), 7);
	assert_int_equal(json_integer_value(json_object_get(row, "window_end_us")), 1796320810000000ll);
	json_decref(row);
	json_decref(o);

	/* the dictionary: looked up by stack_id; a leaf file may be unknown (null) */
	assert_int_equal(dbtable_init(&t, &profrows_stacks_schema), 0);
	assert_string_equal(t.order_by, "env, host, stack_id, time");
	for (int i = 0; i < t.ncols; i++)
		if (!strcmp(t.cols[i].name, "leaf_file"))
			assert_false(t.cols[i].key);
}

static void test_row_values(void **state)
{
	static struct db_table t;
	json_t *o = json_pack("{s:s, s:i, s:b, s:s, s:f, s:[s,s], s:s}", "metric", "py_stack", "pid", 42, "ok", 1,
			      "start_time", "2026-12-03T18:00:00.000001Z", "ms", 1.5, "stack", "a", "b", "time",
			      "2026-12-03T18:00:01.000002Z");
	json_t *row;

	(void)state;
	dbtable_init(&t, &sample);
	row = dbtable_row(&t, o, "h1");
	assert_string_equal(json_string_value(json_object_get(row, "env")), ""); /* no -e: not null */
	assert_string_equal(json_string_value(json_object_get(row, "host")), "h1");
	assert_int_equal(json_integer_value(json_object_get(row, "time_us")), 1796320801000002ll);
	assert_int_equal(json_integer_value(json_object_get(row, "start_time_us")), 1796320800000001ll);
	assert_int_equal(json_integer_value(json_object_get(row, "ok")), 1);
	assert_string_equal(json_string_value(json_object_get(row, "stack")), "[\"a\",\"b\"]");
	assert_true(json_real_value(json_object_get(row, "ms")) == 1.5);
	assert_int_equal(json_object_size(row), 10);
	json_decref(row);

	/* absent fields are null; a record without time is stamped now */
	json_object_del(o, "time");
	json_object_del(o, "stack");
	json_object_set_new(o, "env", json_string("prod"));
	{
		struct timeval tv;
		int64_t now, us;
		gettimeofday(&tv, NULL);
		now = (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
		row = dbtable_row(&t, o, "h1");
		us = json_integer_value(json_object_get(row, "time_us"));
		assert_true(us >= now && us < now + 5000000);
	}
	assert_true(json_is_null(json_object_get(row, "stack")));
	assert_string_equal(json_string_value(json_object_get(row, "env")), "prod");
	json_decref(row);
	json_decref(o);
}

static void test_collect_each_event_schema_once(void **state)
{
	const struct schema *a[] = { &sample, &summary, NULL }, *b[] = { &other, &sample, NULL };
	const struct schema *const *lists[] = { a, b };
	const struct schema *out[8];

	(void)state;
	assert_int_equal(dbtable_collect(lists, 2, out, 8), 2);
	assert_ptr_equal(out[0], &sample);
	assert_ptr_equal(out[1], &other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_time_us),
		cmocka_unit_test(test_names_and_columns),
		cmocka_unit_test(test_row_values),
		cmocka_unit_test(test_profile_tables),
		cmocka_unit_test(test_collect_each_event_schema_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
