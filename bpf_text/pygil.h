/* pygil: the records and per-process settings shared by the BPF text and src/trackers/pygil.c. */
#ifndef PYEBPF_PYGIL_H
#define PYEBPF_PYGIL_H

#include "pyebpf.h"
#include "pywalk.h"

/*
 * struct _gil_runtime_state of GIL builds, x86_64, the same from 3.8 to 3.15
 * (Include/internal/pycore_gil.h; pyebpf(7), CPYTHON INTERNALS).
 */
#define PYGIL_OFF_LAST_HOLDER 8    /* PyThreadState *: stays set after a release */
#define PYGIL_OFF_LOCKED 16        /* int: 1 held, 0 free, -1 not created yet */
#define PYGIL_OFF_SWITCH_NUMBER 24 /* unsigned long: holder changes so far */
#define PYGIL_OFF_COND 32          /* pthread_cond_t the waiters time out on */
#define PYGIL_COND_SIZE 48         /* sizeof(pthread_cond_t), glibc x86_64: its futex words are inside */

/* Frames kept per stack (waiter and holder): the walker's -DPY_MAX_DEPTH. */
#define PYGIL_DEPTH 128

/*
 * One target process: in map gil_targets, keyed by host tgid, and again in
 * target_slots[tgid % PYGIL_TARGET_SLOTS] unless another target has that slot (then
 * its tgid there is PYGIL_SLOT_SHARED: look in gil_targets). Every futex call on the
 * host asks whether it is a target's, and an array slot answers without hashing: on a
 * GIL ping-pong the map lookups were most of pygil's cost (pygil(8), OVERHEAD).
 */
struct pygil_target {
	__u64 gil;             /* address of its main interpreter's _gil_runtime_state */
	__u32 ts_native_tid;   /* tstate->native_thread_id (3.11+), else PYWALK_NONE */
	__u32 tgid;            /* whose it is (in target_slots; 0: a free slot) */
};
#define PYGIL_TARGET_SLOTS 4096
#define PYGIL_SLOT_SHARED 0xffffffffu

/* Which hook measured a wait. */
enum pygil_source {
	PYGIL_SRC_TAKE_GIL = 1, /* entry and return of take_gil (builds with symbols) */
	PYGIL_SRC_CONDVAR = 2,  /* libc's timed wait on the GIL's condition variable */
	PYGIL_SRC_FUTEX = 3,    /* the futex sleeps of that timed wait (syscall tracepoints) */
};

/* The program's counters (pyebpf.h). */
#define PYGIL_COUNTERS(X)                                                                         \
	X(PYGIL_CNT_MAP_FULL, "map_full", "waits not followed because the tracking map was full") \
	X(PYGIL_CNT_SHORT, "short_waits", "waits shorter than --min-wait-ms (not reported)")
enum pygil_counter { PYGIL_COUNTERS(PYEBPF_COUNTER_ID) PYGIL_CNT_MAX };

/*
 * A thread's wait state, kept from its first wait on (start_ns 0 between waits): in
 * wait_slots[tid % PYGIL_WAIT_SLOTS] when that slot was free (id 0) as the thread began
 * its first wait, else in the hash waiting, by pid_tgid. Its totals only grow: userspace
 * reads them every second for the per-thread table, counting what grew since, and frees
 * the states of threads that ended (a state is never handed to another thread, so
 * nothing it counted is lost). Every futex return of a target thread looks for the
 * state: an array slot is the cheaper lookup (as target_slots).
 */
struct pygil_wait_state {
	__u64 id;           /* whose (pid_tgid); 0: a free slot */
	__u64 start_ns;     /* when its wait began, 0: not waiting */
	__u64 holder;       /* take_gil: last_holder when its wait began (the others read it at the end) */
	__u64 tentative_ns; /* futex: back from a sleep with the GIL still locked, else 0 */
	__u64 switch_seen;  /* ... and gil->switch_number then */
	__u64 wait_ns;      /* all its waits so far */
	__u64 waits;
};
#define PYGIL_WAIT_SLOTS 8192

struct pygil_event {
	struct task_head task; /* the waiter; ts_ns: when the wait ended */
	__u64 start_ns;        /* bpf_ktime_get_ns() when the wait began */
	__u64 end_ns;          /* ... and ended (the GIL was taken) */
	__u64 holder;          /* the holder's PyThreadState (0: none seen) */
	__u64 switch_number;   /* gil->switch_number when the wait ended */
	__u32 holder_ns_tid;   /* its native_thread_id (3.11+, the target's namespace), else 0 */
	__u32 source;          /* enum pygil_source */
};

/* With stacks: the event, the waiter's frames (all PYGIL_DEPTH sent), then the holder's. */
struct pygil_stack_event {
	struct pygil_event ev;
	__u32 waiter_status, waiter_depth; /* enum pywalk_status; frames filled, innermost first */
	__u32 holder_status, holder_depth;
	struct pywalk_frame waiter[PYGIL_DEPTH];
	struct pywalk_frame holder[PYGIL_DEPTH]; /* only holder_depth of them are sent */
};

#endif
