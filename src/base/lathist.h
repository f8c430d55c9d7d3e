/*
 * Latency distribution in bounded memory: a BCC-style log2 histogram for people, and
 * log-linear buckets (64 per power of two, under 1.6% relative error) for
 * percentiles, so a tool can run for days at thousands of events per second without
 * keeping every value.
 */
#ifndef PYEBPF_LATHIST_H
#define PYEBPF_LATHIST_H

#include <stdint.h>
#include <stdio.h>

#define LATHIST_LOG2_BUCKETS 40
#define LATHIST_FINE_BUCKETS 3776 /* values up to 2^64 ns at 64 sub-buckets per octave */

struct lathist {
	uint64_t count;
	uint64_t min_ns, max_ns;
	uint64_t log2_us[LATHIST_LOG2_BUCKETS]; /* [k]: floor(log2(us)) == k (0 and 1 us in [0]) */
	uint64_t fine[LATHIST_FINE_BUCKETS];
};

/* Zeroed memory is an empty histogram (calloc it: it is about 30 KB). */
void lathist_add(struct lathist *h, uint64_t ns);
/*
 * The p-th percentile (0-100, nearest rank), in ns: the middle of the bucket holding
 * it, within [min, max]; the first and last ranks give min and max exactly. 0 when
 * empty.
 */
uint64_t lathist_percentile_ns(const struct lathist *h, double p);
/* "usecs : count distribution" rows from the first to the last non-empty bucket. */
void lathist_print_log2(const struct lathist *h, FILE *f);
/* The same buckets in ms ("msecs : ...", bounds such as 1.024 -> 2.047). */
void lathist_print_log2_ms(const struct lathist *h, FILE *f);

#endif
