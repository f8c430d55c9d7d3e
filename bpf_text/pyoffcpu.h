/* pyoffcpu's records and maps, shared by bpf_text/pyoffcpu.bpf.c and src/trackers/pyoffcpu.c. */
#ifndef PYEBPF_PYOFFCPU_H
#define PYEBPF_PYOFFCPU_H

#include "pyebpf.h"
#include "pywalk.h"

/* --max-stack-depth at most: the kernel's stack maps keep at most 127 frames (PERF_MAX_STACK_DEPTH). */
#define PYOFFCPU_DEPTH_LIMIT 127

/* prev_state bits of sched:sched_switch (its print fmt: S, D, T, t, X, Z, P, I; 0 is R). */
#define PYOFFCPU_STATE_S 0x1
#define PYOFFCPU_STATE_D 0x2
#define PYOFFCPU_STATE_DEAD 0x30 /* X, Z: the thread's last switch */
/* Not a sched_switch state: the period began with sched_wakeup_new (a new thread). */
#define PYOFFCPU_STATE_NEW (1 << 30)

/* The program's counters (pyebpf.h), the summary's first fields. */
#define PYOFFCPU_COUNTERS(X)                                                                                \
	X(OFFCPU_CNT_SWITCHES, "switches", "times a target thread left a CPU")                               \
	X(OFFCPU_CNT_LONG, "long", "off-CPU periods of at least --min-ms in the --state")                     \
	X(OFFCPU_CNT_UNTRACKED, "untracked", "periods not measured: the table of off-CPU threads was full")  \
	X(OFFCPU_CNT_KSTACK_ERR, "kernel_stack_errors", "kernel stacks not taken (stack table full or collision)") \
	X(OFFCPU_CNT_USTACK_ERR, "user_stack_errors", "user stacks not taken (stack table full, collision, or none)") \
	X(OFFCPU_CNT_PY_WALKS, "py_walks", "Python stacks walked (threads of CPython targets leaving a CPU)") \
	X(OFFCPU_CNT_PY_ERRORS, "py_errors", "of these, stacks whose thread list or frames could not be read") \
	X(OFFCPU_CNT_FOLD_FULL, "folded_dropped", "-f, -o: long periods not added, the folded table was full")
enum pyoffcpu_counter { PYOFFCPU_COUNTERS(PYEBPF_COUNTER_ID) OFFCPU_CNT_MAX };

/* A Python stack as taken when the thread left the CPU; also the values of py_stacks (-f). */
struct pyoffcpu_pystack {
	__u32 status; /* enum pywalk_status; PYWALK_ERR_CONFIG when not walked */
	__u32 depth;  /* frames[] entries, innermost first */
	__u64 gen_frame; /* outermost coroutine/generator frame (its asyncio task), 0: none */
	struct pywalk_frame frames[PYOFFCPU_DEPTH_LIMIT];
};

/*
 * One off-CPU period of a thread: kept per thread while it is off the CPU (offcpu map),
 * sent as a record when it is back after --min-ms (only the frames taken go out).
 */
struct pyoffcpu_event {
	struct task_head task; /* ts_ns: when it left the CPU; 0 while it runs */
	__u64 wake_ns;         /* when woken (0: no wakeup seen); the switch-out for R */
	__u64 run_ns;          /* when back on a CPU */
	__s64 prev_state;      /* sched_switch's prev_state, or PYOFFCPU_STATE_NEW */
	__s32 kstack, ustack;  /* ids in the stacks map; negative: not taken (-errno) */
	__u32 cpu;             /* the CPU it left */
	__u32 waker_tid;       /* the task running sched_wakeup (0: idle or unknown) */
	char waker_comm[16];
	struct pyoffcpu_pystack py;
};

/* Per thread, every period (whatever --min-ms, --state): the summary's per-thread rows. */
struct pyoffcpu_thread {
	__u32 pid;
	__u32 pad;
	__u64 off_ns;  /* off the CPU, from switch-out to switch-in */
	__u64 runq_ns; /* of that, runnable but waiting (woken or preempted until running) */
	__u64 periods; /* switch-ins (schedstat's third field counts them too) */
	__u64 long_periods;
	__u64 lost;    /* records of it lost: the buffer was full */
};

/* -f, -o: entries of the in-kernel table, its key and value. */
#define PYOFFCPU_FOLDED_MAX 16384
struct pyoffcpu_fold_key {
	__u32 pid, tid;
	__s32 kstack, ustack;
	__u64 py_hash; /* key into py_stacks; 0: no Python stack */
	char comm[16];
};
struct pyoffcpu_fold_val {
	__u64 ns;      /* off the CPU, added up */
	__u64 periods; /* how many periods (-o: pprof's count) */
};

#endif
