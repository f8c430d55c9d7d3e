/* The user-space half of bpf_text/pyebpf.bpf.h: the -D options it needs, its maps. */
#ifndef PYEBPF_PYEBPF_BPF_H
#define PYEBPF_PYEBPF_BPF_H

#include <jansson.h>

#include "bpfprog.h"
#include "kbtf.h"
#include "opts.h"

/* Namespace-id offsets from BTF, and FILTER_PIDS when -p was given. -1 after an error. */
int pyebpf_bpf_cflags(struct kbtf *b, struct cflags *cf, const struct common_opts *c);
/*
 * A tracker's prepare: opens the kernel's BTF for pyebpf_bpf_cflags and the program's
 * own offsets (a table ending with a NULL macro). -1 after an error.
 */
int pyebpf_bpf_offsets_cflags(struct cflags *cf, const struct common_opts *c,
			      const struct kbtf_offset *offs);
/*
 * --children in pid_filter itself (pyebpf.bpf.h, PYEBPF_FOLLOW_CHILDREN): its -D option
 * and BTF offsets; then, compiled, its fork and exit programs attached. -1 after an error.
 */
int pyebpf_bpf_children_cflags(struct cflags *cf);
int pyebpf_bpf_attach_children(struct bpfprog *p);
/* Puts the -p pids into pid_filter. -1 after an error. */
int pyebpf_bpf_set_pids(struct bpfprog *p, const struct common_opts *c);
/* The same with n pids of a list (0: none, left out). */
int pyebpf_bpf_set_pid_list(struct bpfprog *p, const pid_t *pids, int n);

/* "lost" (emit_event's count, or the perf buffers') and "missed" (kernel skips) of p. */
void pyebpf_bpf_set_losses(json_t *o, struct bpfprog *p);

/* A program's counters (pyebpf.h): their names and meanings, from its X-macro list. */
struct counter_name {
	unsigned id;
	const char *name;
	const char *meaning;
};
#define PYEBPF_COUNTER_NAME(id, name, meaning) { id, name, meaning },

/* Each counter of names (ending with a NULL name), summed over CPUs, as a field of o. */
void pyebpf_bpf_set_counters(json_t *o, struct bpfprog *p, const struct counter_name *names);

#endif
