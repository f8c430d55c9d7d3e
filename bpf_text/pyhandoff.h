/* pyhandoff: the event record and per-process counters, shared by the BPF text and src/trackers/pyhandoff.c. */
#ifndef PYEBPF_PYHANDOFF_H
#define PYEBPF_PYHANDOFF_H

#include "pyebpf.h"

/* How the connection came to wait. */
enum handoff_path {
	HANDOFF_ACCEPT = 1,       /* accept4() returned it in one thread, another thread read it */
	HANDOFF_EPOLL_DEL = 2,    /* epoll_ctl(EPOLL_CTL_DEL) on a keep-alive connection, then another thread read it */
	HANDOFF_ACCEPT_QUEUE = 3, /* ESTABLISHED in the kernel, then the application's accept() */
	HANDOFF_EOF = 4,          /* accept or epoll_del, then the other thread's first read got 0
				     bytes: the client had closed (no request) */
};

/* The syscall that ended the wait. */
enum handoff_via {
	VIA_READ = 1,
	VIA_READV = 2,
	VIA_RECVFROM = 3, /* also recv(): glibc implements it with recvfrom on x86_64 */
	VIA_RECVMSG = 4,
	VIA_ACCEPT = 5,
	VIA_ACCEPT4 = 6,
};

struct handoff_event {
	/*
	 * The thread that picked the connection up (the worker), when it did (ts_ns: the
	 * syscall entry of the first read, or the accept's return).
	 */
	struct task_head task;
	__u64 queued_ns;      /* bpf_ktime_get_ns() when the wait began */
	__u32 main_tid;       /* the thread that queued it; 0 for accept_queue (the kernel queued it) */
	__u32 fd;
	__u8 path;            /* enum handoff_path */
	__u8 via;             /* enum handoff_via */
	__u8 pad[6];
	char main_comm[16];
};

/*
 * Per process: which server model its syscalls showed, in "procs" while the process
 * lives (read at the end), then in a handoff_proc_exit record.
 */
struct handoff_proc_counts {
	__u64 handoffs;       /* queued in one thread, first read in another */
	__u64 same_thread;    /* queued and first read by the same thread: no handoff */
	__u64 accepts;        /* accept()s whose ESTABLISHED time was known */
	__u64 stale;          /* the fd pointed to another file when read: reused, no event */
	__u64 closes;         /* handed to another thread whose first read got end of file */
};

/*
 * A process with counts exited: its entry leaves "procs" (which holds live processes
 * only, so that exited workers never fill it) and its counts come in the ring buffer
 * with the events, told apart by their size.
 */
struct handoff_proc_exit {
	__u32 pid;
	__u32 pad;
	struct handoff_proc_counts counts;
};

/* The program's counters (pyebpf.h): things that did not go as planned. */
#define HANDOFF_COUNTERS(X)                                                                  \
	X(HANDOFF_CNT_MAP_FULL, "map_full", "waits not followed because a tracking map was full") \
	X(HANDOFF_CNT_PROCS_FULL, "procs_full",                                                 \
	  "counts in no handoff_process record: 4096 live processes had counts already")         \
	X(HANDOFF_CNT_CHILDREN_FULL, "children_not_followed",                                   \
	  "--children: new child processes that could not be followed")                          \
	X(HANDOFF_CNT_CHILDREN_EXITED, "children_exited", "--children: followed children that exited")
enum handoff_counter { HANDOFF_COUNTERS(PYEBPF_COUNTER_ID) HANDOFF_CNT_MAX };

#endif
