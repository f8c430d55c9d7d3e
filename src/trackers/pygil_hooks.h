/*
 * pygil's hooks on one interpreter binary: the futex syscall tracepoints (no hook on
 * the binary at all), uprobes on take_gil and its clones (builds with a symbol
 * table), or on the default pthread_cond_timedwait of the target's libc.
 */
#ifndef PYEBPF_PYGIL_HOOKS_H
#define PYEBPF_PYGIL_HOOKS_H

#include <stdbool.h>
#include <stddef.h>

#include "pyhooks.h"

enum pygil_hook { PYGIL_HOOK_FUTEX, PYGIL_HOOK_TAKE_GIL, PYGIL_HOOK_CONDVAR };

/*
 * Plans hook on t (what a struct pyhook_planner's plan does, with its returns);
 * children: on the file for every process, the children's too (filtered in BPF).
 */
int pygil_hooks_plan(enum pygil_hook hook, bool children, struct pyhook_plan *plan,
		     const struct pyhook_target *t, char *how, size_t howlen);

#endif
