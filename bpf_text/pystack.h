/* pystack's sample record, shared by bpf_text/pystack.bpf.c and src/trackers/pystack.c. */
#ifndef PYEBPF_PYSTACK_H
#define PYEBPF_PYSTACK_H

#include "pyebpf.h"
#include "pywalk.h"

/* The program's counters (pyebpf.h), the summary's first fields. */
#define PYSTACK_COUNTERS(X)                                                                        \
	X(PYSTACK_CNT_SAMPLES, "samples", "samples that interrupted a target thread")               \
	X(PYSTACK_CNT_PYTHON, "python_stacks", "of these, samples with a Python stack")             \
	X(PYSTACK_CNT_IDLE, "idle", "samples of target threads without a Python thread state")      \
	X(PYSTACK_CNT_NO_FRAMES, "no_frames", "samples of a Python thread with no frame (starting, finishing)") \
	X(PYSTACK_CNT_TRUNCATED, "truncated", "stacks deeper than --max-depth")                     \
	X(PYSTACK_CNT_ERRORS, "errors", "samples whose thread list or frames could not be read")
enum pystack_counter { PYSTACK_COUNTERS(PYEBPF_COUNTER_ID) PYSTACK_CNT_MAX };

struct pystack_sample {
	struct task_head task; /* ts_ns: when the sample was taken */
	__u64 tstate;
	struct pywalk_asyncio asyncio; /* the asyncio task of the stack */
	__u32 status;          /* enum pywalk_status */
	__u32 depth;           /* frames[] entries, innermost first */
	__u32 cpu;
	__u32 pad;
	struct pywalk_frame frames[PYWALK_DEPTH_LIMIT];
};

#endif
