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
	uint64_t next_check_ns;
};

void pidwatch_init(struct pidwatch *w, const pid_t *pids, int npids);
/*
 * Looks at the processes (at most every 200 ms: /proc reads are not free), says on
 * stderr which exited, and returns true when every watched process is gone (never
 * when none was watched).
 */
bool pidwatch_all_gone(struct pidwatch *w, uint64_t now_ns);

#endif
