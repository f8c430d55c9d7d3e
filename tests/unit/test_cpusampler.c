/*
 * cpusampler: the periods it draws keep the mean rate. Each re-draw restarts the timer
 * (the next sample a whole new period later), so a window of W with period p holds
 * floor(W / p) samples: simulated over many windows drawn as cpusampler draws them,
 * the rate must come out at -F within 2%, at rates from 1 Hz to 10 kHz.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "cpusampler.h"

static double simulated_rate(double hz, uint64_t seed)
{
	uint64_t w0 = cpusampler_window_ns(hz), x = seed, samples = 0;
	double t = 0;

	for (int i = 0; i < 20011; i++) {
		double u1, u2, w;
		uint64_t p;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		u1 = (double)(x >> 11) / (double)(1ull << 53);
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		u2 = (double)(x >> 11) / (double)(1ull << 53);
		w = (double)w0 * (0.5 + u1);
		p = cpusampler_period_ns(hz, (uint64_t)w, u2);
		samples += (uint64_t)(w / (double)p);
		t += w;
	}
	return (double)samples / (t / 1e9);
}

static void test_mean_rate_is_kept(void **state)
{
	static const double rates[] = { 1, 19, 97, 99, 199, 499, 999, 4999, 10000 };

	(void)state;
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		double r = simulated_rate(rates[i], 88172645463325252ull + i);
		assert_true(fabs(r / rates[i] - 1) < 0.02);
	}
}

static void test_periods_spread_around_the_mean(void **state)
{
	uint64_t w = cpusampler_window_ns(199);
	double lo = 1e9 / (double)cpusampler_period_ns(199, w, 0.0);
	double hi = 1e9 / (double)cpusampler_period_ns(199, w, 0.999999);

	(void)state;
	/* +-30% of the compensated rate, and windows of several periods */
	assert_true(lo < 0.75 * 199 && hi > 1.25 * 199);
	assert_true(w >= 50000000ull && (double)w >= 8e9 / 199);
	assert_true(cpusampler_period_ns(1e6, w, 0.5) == 10000); /* the kernel's floor */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mean_rate_is_kept),
		cmocka_unit_test(test_periods_spread_around_the_mean),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
