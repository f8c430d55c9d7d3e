/* pyloop's records and maps, shared by bpf_text/pyloop.bpf.c and src/trackers/pyloop.c. */
#ifndef PYEBPF_PYLOOP_H
#define PYEBPF_PYLOOP_H

#include "pyebpf.h"
#include "pywalk.h"

/* Python frames kept per stack, innermost first. */
#define PYLOOP_DEPTH_LIMIT 127

/* The pollers (the syscall tracepoints attached), as records name them (poller). */
enum pyloop_poller {
	PYLOOP_EPOLL_WAIT = 1,
	PYLOOP_EPOLL_PWAIT,
	PYLOOP_EPOLL_PWAIT2,
	PYLOOP_POLL,
	PYLOOP_PPOLL,
	PYLOOP_SELECT,
	PYLOOP_PSELECT6,
	PYLOOP_POLLER_MAX,
};
#define PYLOOP_IS_EPOLL(p) ((p) >= PYLOOP_EPOLL_WAIT && (p) <= PYLOOP_EPOLL_PWAIT2)

/* The program's counters (pyebpf.h), the summary's first fields. */
#define PYLOOP_COUNTERS(X)                                                                                  \
	X(LOOP_CNT_POLLS, "polls", "loop poller calls of target threads seen entering")                      \
	X(LOOP_CNT_OTHER_POLLS, "other_polls", "poller calls inside an iteration (another fd or kind than the loop's)") \
	X(LOOP_CNT_STALLS, "stalls", "iterations of at least --min-ms")                                        \
	X(LOOP_CNT_UNTRACKED, "untracked", "poller calls not followed: the table of loop threads was full")    \
	X(LOOP_CNT_HIST_FULL, "histogram_full", "iterations left out of the percentiles: the histogram table was full") \
	X(LOOP_CNT_SAMPLES, "samples", "stack samples taken in iterations longer than the sampling threshold") \
	X(LOOP_CNT_PY_WALKS, "py_walks", "Python stacks walked (samples, and switch-outs inside iterations)") \
	X(LOOP_CNT_PY_ERRORS, "py_errors", "of these, stacks whose thread list or frames could not be read") \
	X(LOOP_CNT_SWITCH_IN_MISSED, "switch_ins_missed", "off-CPU periods in iterations whose end the kernel did not report (ended at their wakeup, else when next seen)")
enum pyloop_counter { PYLOOP_COUNTERS(PYEBPF_COUNTER_ID) LOOP_CNT_MAX };

/* What a record is (after its task head). */
enum pyloop_kind {
	PYLOOP_REC_SAMPLE = 1, /* an on-CPU sample inside a long iteration */
	PYLOOP_REC_BLOCK = 2,  /* the stack at the iteration's longest off-CPU period (before its stall) */
	PYLOOP_REC_STALL = 3,  /* an iteration of at least MIN_NS */
};

/*
 * A Python stack: a sample, or the stack a thread left the CPU with inside an
 * iteration (py_pending), or the one of the iteration's longest off-CPU period
 * (py_block). Only the frames taken go out.
 */
struct pyloop_stack {
	struct task_head task; /* ts_ns: when taken; only pid and tid besides */
	__u32 kind;            /* enum pyloop_kind */
	__u32 status;          /* enum pywalk_status */
	__u64 iter_start;      /* the iteration it belongs to (its start, the stall's key) */
	__u64 off_ns;          /* BLOCK: that off-CPU period's length */
	__u32 depth;           /* frames[] entries, innermost first */
	__u32 pad;
	__u64 gen_frame;       /* outermost coroutine/generator frame (its asyncio task), 0: none */
	struct pywalk_frame frames[PYLOOP_DEPTH_LIMIT];
};

/* A stall: one iteration of at least MIN_NS, sent when the thread enters its poller again. */
struct pyloop_stall {
	struct task_head task; /* ts_ns: the iteration's start (the poller's return) */
	__u32 kind;            /* PYLOOP_REC_STALL */
	__u32 poller;          /* enum pyloop_poller: the loop's */
	__u64 end_ns;          /* the next poller entry */
	__u64 off_ns;          /* off the CPU, not runnable (sleeping, blocked) */
	__u64 runq_ns;         /* runnable, waiting for a CPU (woken or preempted until running) */
	__u64 iterations_before; /* iterations since the previous stall (or since first seen) */
};

/*
 * A loop thread, by host tid (loops): the thread's loop poller, the iteration going on
 * and its scheduling, and the totals userspace reads for the tables.
 */
struct pyloop_thread {
	__u64 iter_start;  /* the poller's last return; 0: in the poller, or not known yet */
	__u64 poll_start;  /* the poller's last entry; 0 when not in it */
	__u64 out_ns;      /* left the CPU inside the iteration; 0 while running */
	__u64 wake_ns;     /* woken (or preempted: runnable from the switch) */
	__u64 it_off_ns, it_runq_ns; /* the iteration's off-CPU and run-queue time so far */
	__u64 it_longest_off_ns;     /* its longest off-CPU period (the py_block stack's) */
	__u64 iterations;  /* whole iterations (a return, then the next entry) */
	__u64 polls;       /* loop poller entries */
	__u64 poll_ns;     /* in the poller (entry to return) */
	__u64 run_ns;      /* in iterations */
	__u64 stalls;
	__u64 since_stall; /* iterations since the last stall */
	__u64 min_ns, max_ns; /* of the iterations */
	__s64 loop_fd;     /* the epoll fd of an epoll loop; -1 while not known */
	__u32 pid;
	__u32 poller;      /* enum pyloop_poller of the loop; 0 before the first */
	__u32 in_poll;     /* in the loop's poller now (entry seen) */
	__u32 out_walked;  /* py_pending holds the stack of the current off-CPU period */
};

/* The iteration-time histogram: one count per (thread, lathist fine bucket). */
#define PYLOOP_HIST_MAX 65536
struct pyloop_hist_key {
	__u32 tid;
	__u32 bucket;
};

/*
 * lathist's fine bucket of v ns (64 per power of two: src/base/lathist.c), written
 * once for both sides: BPF counts per bucket, userspace puts the counts into a
 * struct lathist (checked against lathist_add at start-up). No loop, no clz
 * (BPF has neither cheaply).
 */
#define PYLOOP_SUB_BITS 6
static inline __u32 pyloop_fine_index(__u64 v)
{
	__u64 x = v;
	__u32 e = 0;

	if (v < (1u << PYLOOP_SUB_BITS))
		return (__u32)v;
	if (x >> 32) { x >>= 32; e += 32; }
	if (x >> 16) { x >>= 16; e += 16; }
	if (x >> 8) { x >>= 8; e += 8; }
	if (x >> 4) { x >>= 4; e += 4; }
	if (x >> 2) { x >>= 2; e += 2; }
	if (x >> 1) { e += 1; }
	return ((e - PYLOOP_SUB_BITS + 1) << PYLOOP_SUB_BITS) +
	       (__u32)((v >> (e - PYLOOP_SUB_BITS)) & ((1u << PYLOOP_SUB_BITS) - 1));
}

#endif
