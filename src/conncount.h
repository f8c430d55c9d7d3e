/*
 * Per-connection event counters, keyed by family and both endpoints: the end-of-run
 * table of which connections suffered, and how.
 */
#ifndef PYEBPF_CONNCOUNT_H
#define PYEBPF_CONNCOUNT_H

#include <stdint.h>

#define CONNCOUNT_KINDS 8

struct conncount_key {
	uint8_t saddr[16], daddr[16];
	uint16_t family, sport, dport;
};

struct conncount_entry {
	struct conncount_key key;
	uint32_t pid;  /* the last known owner; 0 when never known */
	char comm[16];
	uint64_t n[CONNCOUNT_KINDS]; /* meaning chosen by the caller */
	uint64_t first_seen;         /* order of appearance, for a stable listing */
};

struct conncount;

struct conncount *conncount_new(void);
void conncount_free(struct conncount *c);
/* The entry for key, created zeroed on first use; NULL only when memory runs out. */
struct conncount_entry *conncount_get(struct conncount *c, const struct conncount_key *key);
/* Entries in order of first appearance; valid until the next conncount_get. */
int conncount_list(struct conncount *c, struct conncount_entry ***out);

#endif
