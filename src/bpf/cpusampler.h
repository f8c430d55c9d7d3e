/*
 * A sampler that fires at random instants around a mean rate: a cpu-clock perf event
 * per CPU whose period is re-drawn (PERF_EVENT_IOC_PERIOD), each CPU's at random, for
 * each window of a few periods. A fixed period locks onto anything periodic in the
 * target (a loop whose iteration takes about a period, the scheduler's tick): its
 * samples then fall on the same places of the loop, and shares come out points off.
 * Re-drawing restarts the timer at an instant that does not depend on the target, with
 * a period that differs from the last, so every sample's place in the loop is random.
 */
#ifndef PYEBPF_CPUSAMPLER_H
#define PYEBPF_CPUSAMPLER_H

#include <stdint.h>

#include "bpfprog.h"

enum { CPUSAMPLER_MAX_CPUS = 256 };

struct cpusampler {
	double hz;                              /* the mean rate per CPU */
	uint64_t window_ns;                     /* mean time between re-draws */
	uint64_t late_ns;                       /* how late re-draws come, on average (ticks are late) */
	int n;
	int fds[CPUSAMPLER_MAX_CPUS];
	uint64_t next_ns;                       /* when the periods are re-drawn next */
	uint64_t rng;                           /* xorshift64 state */
	unsigned long long redraws, failed;     /* failed: ioctls refused */
};

/*
 * The period for a window of window_ns, given u in [0, 1): a rate drawn uniformly within
 * CPUSAMPLER_SPREAD of (hz + 1 / (2 window)). A re-draw throws away the part of the
 * period that had run (the next sample comes a whole new period after it): half a
 * period per window on average, which the higher rate makes up for.
 */
uint64_t cpusampler_period_ns(double hz, uint64_t window_ns, double u);
#define CPUSAMPLER_SPREAD 0.3

/* The mean window for hz: 8 periods, and no less than 50 ms (each re-draw is an IPI per CPU). */
uint64_t cpusampler_window_ns(double hz);

/* Attaches fn on every CPU at hz (mean); seed: any number (e.g. the time). 0 or -1. */
int cpusampler_attach(struct cpusampler *s, struct bpfprog *p, const char *fn, double hz, uint64_t seed,
		      uint64_t now_ns);

/* Re-draws the periods when their window ended; returns the ms until the next is due (>= 1). */
int cpusampler_tick(struct cpusampler *s, uint64_t now_ns);

#endif
