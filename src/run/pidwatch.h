/* The -p processes of a tracker that follows them by pid only: which are still alive. */
#ifndef PYEBPF_PIDWATCH_H
#define PYEBPF_PIDWATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

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
 * Looks at the processes (at most every 200 ms: /proc reads are not free), says on
 * stderr which exited, and returns true when every watched process is gone (never
 * when none was watched).
 */
bool pidwatch_all_gone(struct pidwatch *w, uint64_t now_ns);

#endif
