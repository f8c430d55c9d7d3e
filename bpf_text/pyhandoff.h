/* pyhandoff: the event record and per-process counters, shared by the BPF text and tools/pyhandoff.c. */
#ifndef PYEBPF_PYHANDOFF_H
#define PYEBPF_PYHANDOFF_H

/* How the connection came to wait. */
enum handoff_path {
	HANDOFF_ACCEPT = 1,       /* accept4() returned it in one thread, another thread read it */
	HANDOFF_EPOLL_DEL = 2,    /* epoll_ctl(EPOLL_CTL_DEL) on a keep-alive connection, then another thread read it */
	HANDOFF_ACCEPT_QUEUE = 3, /* ESTABLISHED in the kernel, then the application's accept() */
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
	__u64 queued_ns;      /* bpf_ktime_get_ns() when the wait began */
	__u64 pickup_ns;      /* ... and when it ended (syscall entry of the first read) */
	__u32 pid;            /* host tgid */
	__u32 worker_tid;     /* the thread that picked the connection up (host tid) */
	__u32 main_tid;       /* the thread that queued it; 0 for accept_queue (the kernel queued it) */
	__u32 nspid, nstid;   /* pid and worker tid in the process's own PID namespace */
	__u32 fd;
	__u8 path;            /* enum handoff_path */
	__u8 via;             /* enum handoff_via */
	__u8 pad[6];
	char worker_comm[16];
	char main_comm[16];
};

/* Per process: which server model its syscalls showed (read at exit from "procs"). */
struct handoff_proc_counts {
	__u64 handoffs;       /* queued in one thread, first read in another */
	__u64 same_thread;    /* queued and first read by the same thread: no handoff */
	__u64 accepts;        /* accept()s whose ESTABLISHED time was known */
	__u64 stale;          /* the fd pointed to another file when read: reused, no event */
};

/* Indexes into the "counters" array: things that did not go as planned. */
enum handoff_counter {
	HANDOFF_CNT_MAP_FULL = 0, /* a tracking map was full */
	HANDOFF_CNT_CHILDREN_FULL = 1, /* --children: a new child could not be followed */
	HANDOFF_CNT_MAX = 2,
};

#endif
