/* pystack's sample record, shared by bpf_text/pystack.bpf.c and tools/pystack.c. */
#ifndef PYEBPF_PYSTACK_H
#define PYEBPF_PYSTACK_H

#include "pywalk.h"

/* Summary counters (per-CPU array "counters"). */
enum {
	PYSTACK_CNT_SAMPLES = 0, /* samples of target threads */
	PYSTACK_CNT_PYTHON,      /* ... with a Python stack */
	PYSTACK_CNT_IDLE,        /* ... on a thread without a Python thread state */
	PYSTACK_CNT_TRUNCATED,
	PYSTACK_CNT_ERRORS,
	PYSTACK_NCOUNTERS,
};

struct pystack_sample {
	__u64 time_ns;
	__u64 tstate;
	__u32 pid, tid;       /* host ids */
	__u32 ns_pid, ns_tid; /* ids in the target's PID namespace (0: unknown) */
	__u32 status;         /* enum pywalk_status */
	__u32 depth;          /* frames[] entries, innermost first */
	__u32 cpu;
	__u32 pad;
	char comm[16];
	struct pywalk_frame frames[PYWALK_DEPTH_LIMIT];
};

#endif
