/*
 * pytargets: the -p pids a tracker is given, when some of them cannot be traced: a
 * pid that is gone, or a process that is not CPython (this test binary).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/wait.h>
#include <unistd.h>

#include "pytargets.h"

/* A pid that was a process a moment ago. */
static pid_t gone_pid(void)
{
	pid_t child = fork();

	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	return child;
}

static void cpython_only_skips_both(void **state)
{
	struct pytargets ts;
	pid_t pids[] = { getpid(), gone_pid() };

	(void)state;
	pytargets_init(&ts, 16);
	assert_int_equal(pytargets_add_pids(&ts, pids, 2, PYTARGETS_CPYTHON, NULL), 0);
	assert_int_equal(ts.skipped, 2);
	assert_int_equal(ts.n, 0);
	assert_int_equal(ts.watched, 0);
	pytargets_free(&ts);
}

static void any_process_keeps_the_live_one(void **state)
{
	struct pytargets ts;
	pid_t pids[] = { gone_pid(), getpid(), getpid() };

	(void)state;
	pytargets_init(&ts, 16);
	assert_int_equal(pytargets_add_pids(&ts, pids, 3, PYTARGETS_ANY, "no Python stacks"), 2);
	assert_int_equal(ts.skipped, 1);
	assert_int_equal(ts.n, 1);
	assert_true(ts.v[0].root && ts.v[0].watched && !ts.v[0].py);
	assert_int_equal(ts.alive, 1);
	/* it is alive: no exit */
	assert_false(pytargets_refresh(&ts, 1));
	assert_int_equal(ts.exits, 0);
	pytargets_free(&ts);
}

/* --children: a process that is not CPython stays, as the root whose children are followed. */
static void children_keep_a_root_that_is_not_python(void **state)
{
	struct pytargets ts;
	pid_t self = getpid();

	(void)state;
	pytargets_init(&ts, 16);
	ts.children = true;
	assert_int_equal(pytargets_add_pids(&ts, &self, 1, PYTARGETS_CPYTHON, NULL), 1);
	assert_int_equal(ts.skipped, 0);
	assert_true(ts.v[0].root && !ts.v[0].py);
	pytargets_free(&ts);
}

/* A child that exits is counted and leaves the set; the root stays. */
static void an_exited_child_leaves_the_set(void **state)
{
	struct pytargets ts;
	pid_t self = getpid(), child;
	int fds[2];
	char c;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(fds[1]);
		if (read(fds[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[0]);
	pytargets_init(&ts, 16);
	ts.children = true;
	assert_int_equal(pytargets_add_pids(&ts, &self, 1, PYTARGETS_ANY, NULL), 1);
	assert_false(pytargets_refresh(&ts, 1));
	assert_int_equal(ts.n, 2); /* the child, unwatched (not CPython) */
	assert_non_null(pytargets_find(&ts, child));
	close(fds[1]);
	waitpid(child, NULL, 0);
	/* gone and unwatched: it goes at the next scan for children */
	assert_false(pytargets_refresh(&ts, 3000000000ull));
	assert_int_equal(ts.exits, 0);
	assert_int_equal(ts.n, 1);
	assert_null(pytargets_find(&ts, child));
	assert_non_null(pytargets_find(&ts, self));
	pytargets_free(&ts);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cpython_only_skips_both),
		cmocka_unit_test(any_process_keeps_the_live_one),
		cmocka_unit_test(children_keep_a_root_that_is_not_python),
		cmocka_unit_test(an_exited_child_leaves_the_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
