/* stackagg and pyframes_folded: counts, first-seen order, top order, recursion, clearing, folded text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyframes.h"
#include "stackagg.h"

static void add(struct stackagg *a, const char *key)
{
	stackagg_add_stack(a, key, strlen(key));
}

static void test_folded_counts_in_first_seen_order(void **state)
{
	struct stackagg a;
	char key[32];

	(void)state;
	stackagg_init(&a);
	/* enough keys to grow the table several times */
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 5000; i++) {
			snprintf(key, sizeof(key), "main;f%d", i);
			add(&a, key);
		}
	assert_int_equal(a.n, 5000);
	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "main;f%d", i);
		assert_string_equal(a.v[i].key, key);
		assert_int_equal(a.v[i].self, 3);
	}
	/* a key that is a prefix of another is another key */
	add(&a, "main;f1");
	add(&a, "main;f");
	assert_int_equal(a.n, 5001);
	assert_int_equal(a.v[1].self, 4);
	assert_int_equal(a.v[5000].self, 1);
	stackagg_clear(&a);
	assert_int_equal(a.n, 0);
	add(&a, "main;f1");
	assert_int_equal(a.n, 1);
	assert_int_equal(a.v[0].self, 1);
	stackagg_free(&a);
}

/* One sample of frames, innermost first. */
static void sample(struct stackagg *a, const char *const *frames)
{
	stackagg_begin_sample(a);
	for (int i = 0; frames[i]; i++)
		stackagg_add_frame(a, frames[i], strlen(frames[i]), i == 0);
}

static void test_top_counts_recursion_once_and_sorts(void **state)
{
	static const char *const s1[] = { "leaf", "rec", "rec", "rec", "main", NULL };
	static const char *const s2[] = { "rec", "rec", "main", NULL };
	static const char *const s3[] = { "b", "main", NULL };
	static const char *const s4[] = { "a", "main", NULL };
	const struct stackagg_entry **top;
	struct stackagg a;

	(void)state;
	stackagg_init(&a);
	sample(&a, s1);
	sample(&a, s2);
	sample(&a, s3);
	sample(&a, s4);
	top = stackagg_sorted(&a);
	assert_non_null(top);
	assert_int_equal(a.n, 5);
	/* self desc, total desc, then key: rec (1,2), a (1,1), b (1,1), leaf (1,1), main (0,4) */
	assert_string_equal(top[0]->key, "rec");
	assert_int_equal(top[0]->self, 1);
	assert_int_equal(top[0]->total, 2);
	assert_string_equal(top[1]->key, "a");
	assert_string_equal(top[2]->key, "b");
	assert_string_equal(top[3]->key, "leaf");
	assert_string_equal(top[4]->key, "main");
	assert_int_equal(top[4]->self, 0);
	assert_int_equal(top[4]->total, 4);
	free(top);
	stackagg_free(&a);
}

static void loc(struct pycode_loc *l, const char *func, const char *file, int line)
{
	memset(l, 0, sizeof(*l));
	snprintf(l->func, sizeof(l->func), "%s", func);
	snprintf(l->file, sizeof(l->file), "%s", file);
	l->line = line;
}

static void test_folded_text(void **state)
{
	struct pyframes_buf b = { 0 };
	struct pycode_loc locs[3];

	(void)state;
	loc(&locs[0], "leaf", "a;b.py", 3); /* innermost */
	loc(&locs[1], "mid", "", 0);
	loc(&locs[2], "<module>", "m.py", 9);
	assert_string_equal(pyframes_folded(&b, NULL, locs, 3, PYWALK_COMPLETE),
			    "<module> (m.py:9);mid;leaf (a,b.py:3)");
	assert_string_equal(pyframes_folded(&b, "my thread;1", locs, 1, PYWALK_TRUNCATED),
			    "my_thread_1;[truncated];leaf (a,b.py:3)");
	assert_string_equal(pyframes_folded(&b, NULL, locs, 0, PYWALK_ERR_FRAME), "[error]");
	assert_string_equal(pyframes_folded(&b, NULL, locs, 0, PYWALK_COMPLETE), "");
	assert_string_equal(pyframes_folded(&b, "t", locs, 0, PYWALK_COMPLETE), "t");
	assert_string_equal(pyframes_marker(PYWALK_ERR_CODE, true), "[unknown: code object unreadable]");
	assert_null(pyframes_marker(PYWALK_COMPLETE, true));
	pyframes_buf_free(&b);
}

/* The one escaping, as pyoffcpu's thread roots and native frames use it. */
static void test_fold_escape(void **state)
{
	char root[] = "my thread;1", frame[] = "f<a;b> (libx.so)", part[] = "a;b;c";

	(void)state;
	pyframes_fold_escape(root, sizeof(root), PYFRAMES_FOLD_ROOT);
	assert_string_equal(root, "my_thread_1");
	pyframes_fold_escape(frame, sizeof(frame), PYFRAMES_FOLD_FRAME);
	assert_string_equal(frame, "f<a,b> (libx.so)");
	pyframes_fold_escape(part, 3, PYFRAMES_FOLD_FRAME); /* n bytes at most */
	assert_string_equal(part, "a,b;c");
}

/* pygc -o: each stack counted once per pause and weighted by its length. */
static void test_weighted_stacks(void **state)
{
	struct stackagg a;

	(void)state;
	stackagg_init(&a);
	stackagg_add_weighted(&a, "main;f", 6, 1500);
	stackagg_add_weighted(&a, "main;g", 6, 20);
	stackagg_add_weighted(&a, "main;f", 6, 500);
	assert_int_equal(a.n, 2);
	assert_int_equal(a.v[0].self, 2);
	assert_int_equal(a.v[0].total, 2000);
	assert_int_equal(a.v[1].self, 1);
	assert_int_equal(a.v[1].total, 20);
	stackagg_free(&a);
}

/* A limited table: new keys past the limit all count in "[other]", and how many is kept. */
static void test_limit_counts_the_rest_in_other(void **state)
{
	struct stackagg a;
	char key[32];

	(void)state;
	stackagg_init(&a);
	stackagg_limit(&a, 100);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 1000; i++) {
			snprintf(key, sizeof(key), "main;f%d", i);
			stackagg_add_weighted(&a, key, strlen(key), 10);
		}
	assert_int_equal(a.n, 101);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(a.v[i].self, 2);
		assert_int_equal(a.v[i].total, 20);
	}
	assert_string_equal(a.v[100].key, STACKAGG_OTHER);
	assert_int_equal(a.v[100].self, 2 * 900);
	assert_int_equal(a.v[100].total, 2 * 900 * 10);
	assert_int_equal(a.other, 2 * 900);
	/* clearing forgets the entries, keeps the limit and the count */
	stackagg_clear(&a);
	for (int i = 0; i < 150; i++) {
		snprintf(key, sizeof(key), "g%d", i);
		stackagg_add_stack(&a, key, strlen(key));
	}
	assert_int_equal(a.n, 101);
	assert_int_equal(a.other, 2 * 900 + 50);
	stackagg_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_folded_counts_in_first_seen_order),
		cmocka_unit_test(test_top_counts_recursion_once_and_sorts),
		cmocka_unit_test(test_folded_text),
		cmocka_unit_test(test_fold_escape),
		cmocka_unit_test(test_weighted_stacks),
		cmocka_unit_test(test_limit_counts_the_rest_in_other),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
