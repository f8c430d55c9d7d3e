/* The -p processes of a tracker that follows them by pid only: which are still alive. */
#ifndef PYEBPF_PIDWATCH_H
#define PYEBPF_PIDWATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpfprog.h"
#include "opts.h"

struct pidwatch {
	pid_t pids[MAX_PIDS]; /* 0 once gone */
	int npids, nalive;
	unsigned long long skipped; /* pids that were gone at the start (skipped_targets) */
	unsigned long long exits;   /* pids that exited since (exited_targets) */
	uint64_t next_check_ns;
};

/*
 * The pids that are there: one that is gone is skipped with one warning
 * (pytargets_say_skipped) and counted. How many are watched (0 with pids given: none
 * is left to trace).
 */
int pidwatch_init(struct pidwatch *w, const pid_t *pids, int npids);
/*
 * --children: the running descendants of the watched pids into the BPF hash map (u32
 * pid -> u8 value) of p, which the program keeps from then on. 0, or -1 after an error.
 */
int pidwatch_follow_children(const struct pidwatch *w, struct bpfprog *p, const char *map, unsigned char value);
/*
 * Looks at the processes (at most every 200 ms: /proc reads are not free), says on
 * stderr which exited, and returns true when every watched process is gone (never
 * when none was watched).
 */
bool pidwatch_all_gone(struct pidwatch *w, uint64_t now_ns);

#endif
