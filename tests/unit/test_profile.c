/*
 * src/pictures: -o FILE's format from the name, and a 10,000-unique-stack profile
 * (depth 16, user, library and stdlib files, every stack equally often: the worst
 * case for the flame graph's size) written in every format in under a second each,
 * the SVG under 5 MB. Times are CPU times (a loaded machine stretches wall time).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "profile.h"
#include "stackagg.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* the machine may be busy: CPU time */
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_format_from_name(void **state)
{
	static const struct {
		const char *name;
		enum profile_format format;
	} cases[] = {
		{ "x.svg", PROFILE_SVG },
		{ "x.speedscope.json", PROFILE_SPEEDSCOPE },
		{ "x.pb.gz", PROFILE_PPROF },
		{ "x.txt", PROFILE_FOLDED },
	};
	char dir[] = "/tmp/pyebpf-profile-XXXXXX", path[256];
	struct profile_out o;

	(void)state;
	assert_non_null(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&o, 0, sizeof(o));
		snprintf(path, sizeof(path), "%s/%s", dir, cases[i].name);
		assert_int_equal(profile_option(&o, false, path), 0);
		assert_int_equal(profile_check(&o), 0);
		assert_int_equal(o.format, cases[i].format);
		unlink(path);
	}
	memset(&o, 0, sizeof(o));
	snprintf(path, sizeof(path), "%s/x.json", dir);
	profile_option(&o, false, path);
	assert_int_equal(profile_check(&o), -1); /* a name that says nothing needs --format */
	assert_int_equal(profile_option(&o, true, "pprof"), 0);
	assert_int_equal(profile_check(&o), 0);
	assert_int_equal(o.format, PROFILE_PPROF);
	assert_int_equal(profile_option(&o, true, "png"), -1);
	unlink(path);
	/* a file that cannot be written is an error before the run, not after it */
	memset(&o, 0, sizeof(o));
	snprintf(path, sizeof(path), "%s/no/such/dir.svg", dir);
	profile_option(&o, false, path);
	assert_int_equal(profile_check(&o), -1);
	rmdir(dir);
}

/* Stack i: a shared trunk, then branches by the digits of i, then its own leaves. */
static void big_profile(struct stackagg *a)
{
	static const char *const files[] = { "/srv/app/views.py", "/usr/lib/python3.11/json/encoder.py",
					     "/usr/lib/python3/dist-packages/requests/models.py" };
	char key[4096];

	for (int i = 0; i < 10000; i++) {
		int n = snprintf(key, sizeof(key), "MainThread;<module> (/srv/app/main.py:1);serve (/srv/app/main.py:40)");
		for (int level = 0, v = i; level < 13; level++, v /= 3)
			n += snprintf(key + n, sizeof(key) - (size_t)n, ";handler_%d_%d (%s:%d)", level,
				      level < 8 ? v % 3 : i, files[(level + v) % 3], 10 * level + 1);
		stackagg_add_stack(a, key, (size_t)n);
	}
	assert_int_equal(a->n, 10000);
}

static void test_ten_thousand_stacks(void **state)
{
	static const char *const names[] = { "big.svg", "big.speedscope.json", "big.pb.gz", "big.txt" };
	const struct profile_meta meta = {
		.title = "test", .count_name = "samples", .weight_name = "cpu", .period_ns = 10101010, .per_thread = true,
	};
	char dir[] = "/tmp/pyebpf-profile-XXXXXX", path[256];
	struct stackagg a;
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	stackagg_init(&a);
	big_profile(&a);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct profile_out o = { 0 };
		double t0, took;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		profile_option(&o, false, path);
		assert_int_equal(profile_check(&o), 0);
		t0 = now_s();
		assert_int_equal(profile_write(&o, &a, &meta), 0);
		took = now_s() - t0;
		assert_int_equal(stat(path, &st), 0);
		printf("   %s: %.3f s, %lld bytes\n", names[i], took, (long long)st.st_size);
#if defined(__SANITIZE_ADDRESS__)
		if (i == 0)
			printf("   (ASan build: the times are not checked; they are the sanitizer's)\n");
#else
		assert_true(took < 1.0);
#endif
		assert_true(st.st_size > 10000);
		if (i == 0)
			assert_true(st.st_size < 5 * 1024 * 1024);
		unlink(path);
	}
	rmdir(dir);
	stackagg_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_from_name),
		cmocka_unit_test(test_ten_thousand_stacks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
