/*
 * Counting stacks and functions between two reports: for folded output, how often
 * each whole stack was seen; for a top table, per function the samples it was the
 * innermost frame of and the samples it was anywhere in (once per sample, so that
 * recursion does not count twice). One hash table of string keys, entries kept in
 * the order they were first seen.
 */
#ifndef PYEBPF_STACKAGG_H
#define PYEBPF_STACKAGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stackagg_entry {
	char *key;        /* NUL-terminated */
	long long self;   /* folded: times the stack was seen; top: samples it was innermost in */
	long long total;  /* top: samples it was on the stack of */
	uint64_t hash;
	unsigned long long sample; /* the last sample that counted it in total */
};

struct stackagg {
	struct stackagg_entry *v; /* in first-seen order */
	size_t n, cap;
	uint32_t *slots;          /* open addressing: entry index + 1, 0 when free */
	size_t nslots;            /* a power of two, at least twice n */
	unsigned long long sample;
	size_t max;               /* distinct keys kept at most (0: no limit); see stackagg_limit */
	unsigned long long other; /* adds counted in STACKAGG_OTHER since init (not cleared) */
};

/*
 * The key that takes every new key once a limited table is full: the stacks a run
 * keeps are then bounded, and what did not fit is still counted, under this name.
 */
#define STACKAGG_OTHER "[other]"
/* The limit of the tables trackers keep for a whole run (-o profiles, folded/top views). */
#define STACKAGG_MAX_STACKS 20000

void stackagg_init(struct stackagg *a);
/* At most max distinct keys (plus STACKAGG_OTHER); 0: no limit (the default). */
void stackagg_limit(struct stackagg *a, size_t max);
void stackagg_free(struct stackagg *a);
/* Forgets every entry (the memory is kept for the next interval). */
void stackagg_clear(struct stackagg *a);

/*
 * The entry of key (len bytes), added with zero counts when new; NULL when out of
 * memory. A new key of a full limited table gets the STACKAGG_OTHER entry (and counts
 * in other).
 */
struct stackagg_entry *stackagg_get(struct stackagg *a, const char *key, size_t len);

/* Folded: one more sample of the stack key. */
void stackagg_add_stack(struct stackagg *a, const char *key, size_t len);
/* Folded with a weight (nanoseconds of a pause...): self counts the stack, total adds weight. */
void stackagg_add_weighted(struct stackagg *a, const char *key, size_t len, long long weight);
/* Top: a new sample begins; then each of its frames' functions, innermost first. */
void stackagg_begin_sample(struct stackagg *a);
void stackagg_add_frame(struct stackagg *a, const char *key, size_t len, bool innermost);

/*
 * The entries as a top table orders them: self, then total, descending, then by key.
 * A new array (free it) of a->n pointers, or NULL when out of memory or empty.
 */
const struct stackagg_entry **stackagg_sorted(const struct stackagg *a);

#endif
