/*
 * BPF helpers every pyebpf program shares. Inlined into each tool's text at build
 * time. Kernel struct offsets arrive as -DOFF_* from BTF (src/bpf/kbtf.c), never from
 * headers.
 */
#ifndef PYEBPF_BPF_H
#define PYEBPF_BPF_H

#include "pyebpf.h"

/*
 * The one output of a program, and the records that did not fit in it. With
 * -DPYEBPF_RINGBUF_PAGES=N it is one ring buffer of N pages shared by all CPUs, whose
 * records come out in the order they were written; else per-CPU perf buffers.
 */
#ifdef PYEBPF_RINGBUF_PAGES
BPF_RINGBUF_OUTPUT(events, PYEBPF_RINGBUF_PAGES);
#else
BPF_PERF_OUTPUT(events);
#endif
BPF_PERCPU_ARRAY(events_lost, u64, 1);

/* True when the record went out (else it is counted in events_lost). */
static __always_inline bool emit_event(void *ctx, void *ev, u32 size)
{
	/* count here: the perf buffer reports its loss only when a later record fits */
#ifdef PYEBPF_RINGBUF_PAGES
	/* no wakeup from here: each one is an interrupt on this CPU; the reader polls */
	if (events.ringbuf_output(ev, size, BPF_RB_NO_WAKEUP) < 0) {
#else
	if (events.perf_submit(ctx, ev, size) < 0) {
#endif
		u32 zero = 0;
		u64 *n = events_lost.lookup(&zero);
		if (n)
			*n += 1;
		return false;
	}
	return true;
}

/* -p: the processes userspace put in pid_filter (-DFILTER_PIDS when there are any). */
BPF_HASH(pid_filter, u32, u8, 1024);

static __always_inline bool pid_wanted(u32 tgid)
{
#ifdef FILTER_PIDS
	return pid_filter.lookup(&tgid) != NULL;
#else
	return true;
#endif
}

static __always_inline u64 read_u64(const void *p)
{
	u64 v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), p);
	return v;
}

static __always_inline u32 read_u32(const void *p)
{
	u32 v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), p);
	return v;
}

/*
 * The current task's pid and tid in its own (innermost) PID namespace, as a
 * container sees them: task->thread_pid->numbers[level].nr, for the task and its
 * group leader. Offsets from kbtf_nsid_cflags().
 */
static __always_inline u32 task_ns_id(const void *task)
{
	const void *pid = (const void *)read_u64(task + OFF_TASK_THREAD_PID);
	u32 level;

	if (!pid)
		return 0;
	level = read_u32(pid + OFF_PID_LEVEL);
	if (level > 31)
		return 0;
	return read_u32(pid + OFF_PID_NUMBERS + (u64)level * SIZEOF_UPID + OFF_UPID_NR);
}

static __always_inline void current_ns_ids(u32 *nspid, u32 *nstid)
{
	const void *task = (const void *)bpf_get_current_task();
	const void *leader = (const void *)read_u64(task + OFF_TASK_GROUP_LEADER);

	*nstid = task_ns_id(task);
	*nspid = leader ? task_ns_id(leader) : 0;
}

/* Who runs now, and when. */
static __always_inline void task_head_fill(struct task_head *h)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();

	h->ts_ns = bpf_ktime_get_ns();
	h->pid = pid_tgid >> 32;
	h->tid = (u32)pid_tgid;
	current_ns_ids(&h->nspid, &h->nstid);
	bpf_get_current_comm(&h->comm, sizeof(h->comm));
}

/*
 * The program's counters: -DPYEBPF_NCOUNTERS=N (from its X-macro list) gives a per-CPU
 * array "counters" that counter_add() adds to without atomics; C sums the CPUs.
 */
#ifdef PYEBPF_NCOUNTERS
BPF_PERCPU_ARRAY(counters, u64, PYEBPF_NCOUNTERS);

static __always_inline void counter_add(u32 which, u64 n)
{
	u64 *v = counters.lookup(&which);

	if (v)
		*v += n;
}
#endif

/* The struct file behind fd in the current task: task->files->fdt->fd[fd]; 0 if none. */
static __always_inline u64 current_fd_file(long fd)
{
	const void *task = (const void *)bpf_get_current_task();
	const void *files = (const void *)read_u64(task + OFF_TASK_FILES);
	const void *fdt, *fdarr;

	if (!files || fd < 0 || fd > 1 << 20)
		return 0;
	fdt = (const void *)read_u64(files + OFF_FILES_FDT);
	if (!fdt || fd >= read_u32(fdt + OFF_FDTABLE_MAX_FDS))
		return 0;
	fdarr = (const void *)read_u64(fdt + OFF_FDTABLE_FD);
	return fdarr ? read_u64(fdarr + fd * 8) : 0;
}

/* A socket file's struct sock: file->private_data (a struct socket) ->sk. */
static __always_inline u64 file_sock(u64 file)
{
	const void *sock = (const void *)read_u64((const void *)file + OFF_FILE_PRIVATE_DATA);

	return sock ? read_u64(sock + OFF_SOCKET_SK) : 0;
}

/* The struct sock behind a socket fd of the current task (the caller knows it is a socket). */
static __always_inline u64 current_fd_sock(long fd)
{
	u64 file = current_fd_file(fd);

	return file ? file_sock(file) : 0;
}

#ifdef PYEBPF_FOLLOW_CHILDREN
/*
 * --children (-DPYEBPF_FOLLOW_CHILDREN, with OFF_TASK_PID and OFF_TASK_TGID from BTF, and
 * the program's counter ids PYEBPF_CNT_CHILDREN_FULL and PYEBPF_CNT_CHILDREN_EXITED): a
 * process that a wanted one forks is wanted too, in pid_filter with the value
 * PYEBPF_PID_CHILD (the -p pids have 1), until it exits. User space puts the running
 * descendants in at the start (pidwatch_follow_children).
 */
RAW_TRACEPOINT_PROBE(sched_process_fork)
{
	const void *child = (const void *)ctx->args[1];
	u32 pid = read_u32(child + OFF_TASK_PID), tgid = read_u32(child + OFF_TASK_TGID);
	u8 is_child = PYEBPF_PID_CHILD;

	if (pid != tgid || !pid_wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (pid_filter.update(&tgid, &is_child))
		counter_add(PYEBPF_CNT_CHILDREN_FULL, 1);
	return 0;
}

TRACEPOINT_PROBE(sched, sched_process_exit)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	u8 *v;

	if (!args->group_dead || !(v = pid_filter.lookup(&tgid)) || *v != PYEBPF_PID_CHILD)
		return 0;
	pid_filter.delete(&tgid);
	counter_add(PYEBPF_CNT_CHILDREN_EXITED, 1);
	return 0;
}
#endif

#endif
