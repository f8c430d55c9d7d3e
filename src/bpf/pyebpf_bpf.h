/* The user-space half of bpf_text/pyebpf.bpf.h: the -D options it needs, its maps. */
#ifndef PYEBPF_PYEBPF_BPF_H
#define PYEBPF_PYEBPF_BPF_H

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
/* Puts the -p pids into pid_filter. -1 after an error. */
int pyebpf_bpf_set_pids(struct bpfprog *p, const struct common_opts *c);

#endif
