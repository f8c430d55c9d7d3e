/* lathist: percentiles within the bucket error of exact ones, log2 rows, edge values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lathist.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* nearest rank, as lathist defines it */
static uint64_t exact(const uint64_t *sorted, size_t n, double p)
{
	size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999999);
	return sorted[(rank ? rank : 1) - 1];
}

static void test_percentiles_close_to_exact(void **state)
{
	enum { N = 100003 }; /* prime, as BCC's tests like */
	struct lathist *h = calloc(1, sizeof(*h));
	uint64_t *v = malloc(N * sizeof(*v));
	static const double ps[] = { 1, 10, 50, 90, 99, 99.9 };
	uint64_t x = 88172645463325252ull;

	(void)state;
	for (size_t i = 0; i < N; i++) {
		/* xorshift: waits from 1 ns to about 4 s, spread over many octaves */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		v[i] = (x % 4000000000ull) >> (x % 31);
		lathist_add(h, v[i]);
	}
	qsort(v, N, sizeof(*v), cmp_u64);
	assert_int_equal(h->count, N);
	assert_int_equal(h->min_ns, v[0]);
	assert_int_equal(h->max_ns, v[N - 1]);
	assert_int_equal(lathist_percentile_ns(h, 100), v[N - 1]);
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		uint64_t want = exact(v, N, ps[i]), got = lathist_percentile_ns(h, ps[i]);
		double err = want ? (double)(got > want ? got - want : want - got) / (double)want : 0;
		assert_true(err <= 1.0 / 64 || (want < 64 && got == want));
	}
	free(v);
	free(h);
}

static void test_small_and_huge_values(void **state)
{
	struct lathist *h = calloc(1, sizeof(*h));

	(void)state;
	assert_int_equal(lathist_percentile_ns(h, 50), 0);
	lathist_add(h, 0);
	lathist_add(h, 63);
	lathist_add(h, UINT64_MAX);
	assert_int_equal(lathist_percentile_ns(h, 1), 0);
	assert_int_equal(lathist_percentile_ns(h, 50), 63);
	assert_int_equal(lathist_percentile_ns(h, 100), UINT64_MAX);
	assert_true(lathist_percentile_ns(h, 99) > UINT64_MAX / 2);
	free(h);
}

static void test_log2_rows(void **state)
{
	struct lathist *h = calloc(1, sizeof(*h));
	char buf[4096] = "";
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

	(void)state;
	lathist_add(h, 1500000); /* 1500 us: 1024 -> 2047 */
	lathist_add(h, 1600000);
	lathist_add(h, 5000000); /* 5000 us: 4096 -> 8191 */
	lathist_print_log2(h, f);
	fclose(f);
	assert_non_null(strstr(buf, "1024 -> 2047 : 2         |****************************************|"));
	assert_non_null(strstr(buf, "2048 -> 4095 : 0 "));
	assert_non_null(strstr(buf, "4096 -> 8191 : 1         |********************"));
	assert_null(strstr(buf, "512 -> 1023"));
	free(h);
}

static void test_log2_rows_in_ms(void **state)
{
	struct lathist *h = calloc(1, sizeof(*h));
	char buf[4096] = "";
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

	(void)state;
	lathist_add(h, 1500000); /* 1.5 ms: 1.024 -> 2.047 */
	lathist_add(h, 3000);    /* 3 us: 0.002 -> 0.003 */
	lathist_print_log2_ms(h, f);
	fclose(f);
	assert_non_null(strstr(buf, "msecs : count"));
	assert_non_null(strstr(buf, "1.024 -> 2.047 : 1         |****************************************|"));
	assert_non_null(strstr(buf, "0.002 -> 0.003 : 1 "));
	assert_non_null(strstr(buf, "0.512 -> 1.023 : 0 "));
	assert_null(strstr(buf, "usecs"));
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_percentiles_close_to_exact),
		cmocka_unit_test(test_small_and_huge_values),
		cmocka_unit_test(test_log2_rows),
		cmocka_unit_test(test_log2_rows_in_ms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
