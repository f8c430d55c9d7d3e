/*
 * pygil's per-thread wait totals: pygil's BPF programs add each wait to its thread's
 * wait state (bpf_text/pygil.h), and a sweep reads every state back, hands on what each
 * thread's totals grew by, and frees the states of threads that ended.
 */
#ifndef PYEBPF_PYGIL_WAITS_H
#define PYEBPF_PYGIL_WAITS_H

#include <stdint.h>
#include <sys/types.h>

#include "bpfprog.h"

struct pygil_waits {
	struct pygil_wait_state *states; /* what a sweep read */
	int *where;                      /* their slots, -1: in the hash */
	uint32_t *slot_keys;
	struct wait_totals *seen, *next_seen; /* the last sweep's totals, by id; the next's */
	size_t nseen;
};

int pygil_waits_init(struct pygil_waits *w);
void pygil_waits_free(struct pygil_waits *w);

/* What a thread's totals grew by since the last sweep. */
typedef void (*pygil_waits_fn)(void *ctx, pid_t pid, pid_t tid, uint64_t wait_ns, uint64_t waits);

/* Every state in p's maps wait_slots and waiting: fn for each thread whose totals grew. */
void pygil_waits_sweep(struct pygil_waits *w, struct bpfprog *p, pygil_waits_fn fn, void *ctx);

#endif
