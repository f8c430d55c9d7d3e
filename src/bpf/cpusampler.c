#include "cpusampler.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/ioctl.h>

#include "log.h"

static uint64_t next_random(struct cpusampler *s)
{
	uint64_t x = s->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return s->rng = x;
}

/* uniform in [0, 1) */
static double uniform(struct cpusampler *s)
{
	return (double)(next_random(s) >> 11) / (double)(1ull << 53);
}

uint64_t cpusampler_period_ns(double hz, uint64_t window_ns, double u)
{
	double rate = (hz + 1e9 / (2.0 * (double)window_ns)) * (1.0 + CPUSAMPLER_SPREAD * (2.0 * u - 1.0));
	double ns = 1e9 / rate;

	/* the kernel's floor for a cpu-clock period */
	return ns < 10000 ? 10000 : (uint64_t)ns;
}

uint64_t cpusampler_window_ns(double hz)
{
	double w = 8e9 / hz;

	return w < 50e6 ? 50000000ull : (uint64_t)w;
}

/* A new period for every CPU, for a window of 1/2 to 3/2 of the mean from now. */
static void redraw(struct cpusampler *s, uint64_t now_ns)
{
	uint64_t w = (uint64_t)((double)s->window_ns * (0.5 + uniform(s)));

	s->next_ns = now_ns + w;
	for (int i = 0; i < s->n; i++) {
		uint64_t period = cpusampler_period_ns(s->hz, w + s->late_ns, uniform(s));

		if (ioctl(s->fds[i], PERF_EVENT_IOC_PERIOD, &period) < 0) {
			if (!s->failed++)
				log_warn("changing the sampling period failed: %s (samples keep a fixed period)",
					 strerror(errno));
			continue;
		}
		s->redraws++;
	}
}

int cpusampler_attach(struct cpusampler *s, struct bpfprog *p, const char *fn, double hz, uint64_t seed,
		      uint64_t now_ns)
{
	memset(s, 0, sizeof(*s));
	s->hz = hz;
	s->window_ns = cpusampler_window_ns(hz);
	s->rng = seed | 1;
	s->n = bpfprog_attach_cpu_clock(p, fn, (uint64_t)(1e9 / hz), s->fds, CPUSAMPLER_MAX_CPUS);
	if (s->n < 0)
		return -1;
	redraw(s, now_ns);
	return 0;
}

int cpusampler_tick(struct cpusampler *s, uint64_t now_ns)
{
	if (now_ns >= s->next_ns) {
		/* how late ticks come, smoothed: the window runs that much longer */
		s->late_ns = (7 * s->late_ns + (now_ns - s->next_ns)) / 8;
		redraw(s, now_ns);
	}
	return (int)((s->next_ns - now_ns) / 1000000) + 1;
}
