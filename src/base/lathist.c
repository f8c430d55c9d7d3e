#include "lathist.h"

#include <math.h>
#include <stdbool.h>

#define SUB_BITS 6
#define SUB (1u << SUB_BITS)

static unsigned fine_index(uint64_t v)
{
	unsigned e;

	if (v < SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v); /* >= SUB_BITS */
	return ((e - SUB_BITS + 1) << SUB_BITS) + (unsigned)((v >> (e - SUB_BITS)) & (SUB - 1));
}

/* The lowest value of bucket i and its width. */
static void fine_bounds(unsigned i, uint64_t *lo, uint64_t *width)
{
	unsigned e;

	if (i < SUB) {
		*lo = i, *width = 1;
		return;
	}
	e = (i >> SUB_BITS) + SUB_BITS - 1;
	*width = 1ull << (e - SUB_BITS);
	*lo = (uint64_t)(SUB + (i & (SUB - 1))) << (e - SUB_BITS);
}

void lathist_add(struct lathist *h, uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b = 0;

	while (us > 1 && b < LATHIST_LOG2_BUCKETS - 1) {
		us >>= 1;
		b++;
	}
	h->log2_us[b]++;
	h->fine[fine_index(ns)]++;
	if (!h->count || ns < h->min_ns)
		h->min_ns = ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
	h->count++;
}

uint64_t lathist_percentile_ns(const struct lathist *h, double p)
{
	uint64_t rank, seen = 0, lo, width, v;

	if (!h->count)
		return 0;
	if (p >= 100)
		return h->max_ns;
	rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
	/* the extremes are known exactly: no bucket rounding for them */
	if (rank <= 1)
		return h->min_ns;
	if (rank >= h->count)
		return h->max_ns;
	for (unsigned i = 0; i < LATHIST_FINE_BUCKETS; i++) {
		seen += h->fine[i];
		if (seen < rank)
			continue;
		fine_bounds(i, &lo, &width);
		v = lo + width / 2;
		if (v < h->min_ns)
			v = h->min_ns;
		if (v > h->max_ns)
			v = h->max_ns;
		return v;
	}
	return h->max_ns;
}

/* The rows, with bucket bounds in us or (ms) in ms with three decimals: the same buckets. */
static void print_log2(const struct lathist *h, FILE *f, bool ms)
{
	static const char stars[] = "****************************************";
	uint64_t max = 0;
	int low = -1, top = -1;

	for (int b = 0; b < LATHIST_LOG2_BUCKETS; b++)
		if (h->log2_us[b]) {
			if (low < 0)
				low = b;
			top = b;
			if (h->log2_us[b] > max)
				max = h->log2_us[b];
		}
	fprintf(f, "%20s : %-9s %s\n", ms ? "msecs" : "usecs", "count", "distribution");
	for (int b = low; b >= 0 && b <= top; b++) {
		unsigned long long lo = b ? 1ull << b : 0, hi = (1ull << (b + 1)) - 1;
		int n = (int)(h->log2_us[b] * 40 / max);
		char range[48];

		if (ms)
			snprintf(range, sizeof(range), "%llu.%03llu -> %llu.%03llu", lo / 1000, lo % 1000,
				 hi / 1000, hi % 1000);
		else
			snprintf(range, sizeof(range), "%llu -> %llu", lo, hi);
		fprintf(f, "%20s : %-9llu |%-40.*s|\n", range, (unsigned long long)h->log2_us[b], n,
			stars);
	}
}

void lathist_print_log2(const struct lathist *h, FILE *f)
{
	print_log2(h, f, false);
}

void lathist_print_log2_ms(const struct lathist *h, FILE *f)
{
	print_log2(h, f, true);
}
