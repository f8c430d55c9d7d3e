/*
 * pyhandoff: how long a connection waits between the thread that takes it and the
 * thread that reads it, from syscall tracepoints only.
 *
 * Queued: accept()/accept4() returns fd in thread A, or thread A removes a
 * keep-alive socket from its epoll set (epoll_ctl(EPOLL_CTL_DEL, fd) returns 0), as gunicorn's
 * gthread main loop does before it submits the connection to its pool. Picked up:
 * the first read of that fd (read, readv, recvfrom, recvmsg) by thread B != A of the
 * same process. A first read by A itself means there was no handoff (uwsgi's threads
 * accept and read their own connections): counted, not emitted. The event goes out
 * when that read returns: a read of 0 bytes is the client's close handed over like a
 * request (a keep-alive connection the client ended), reported as HANDOFF_EOF. The struct file
 * behind the fd is remembered, so a closed and reused fd number never matches.
 *
 * Accept queue: the child socket's SYN_RECV -> ESTABLISHED (sock:inet_sock_set_state)
 * to the accept() that returns it, matched by struct sock address.
 *
 * Options: -DFILTER_PIDS, -DPYEBPF_RINGBUF_PAGES (pyebpf.bpf.h), -DFOLLOW_CHILDREN;
 * offsets -DOFF_* from BTF.
 */
// The build also checks the text with these options (src/bpf/bpfcheck.sh):
// bpfcheck: -p {pid} --children --min-ms 1
#include "pyhandoff.h"
#define PYEBPF_NCOUNTERS HANDOFF_CNT_MAX
#include "pyebpf.bpf.h"

#define TCP_ESTABLISHED 1
#define TCP_SYN_RECV 3
#define TCP_CLOSE 7
#define IPPROTO_TCP 6
#define EPOLL_CTL_DEL 2
#define S_IFMT 00170000
#define S_IFSOCK 0140000

struct fd_key {
	u32 tgid;
	u32 fd;
};

struct queued {
	u64 ts;
	u64 file;  /* struct file * behind the fd when it was queued */
	u32 tid;   /* the queuing thread */
	u8 path;   /* enum handoff_path */
	u8 pad[3];
	char comm[16];
};

BPF_TABLE("lru_hash", struct fd_key, struct queued, pending, 65536);
/* child sockets that are ESTABLISHED and not yet accepted: sock address -> time */
BPF_TABLE("lru_hash", u64, u64, established, 65536);
/* live processes only: an exiting one's counts go out as a handoff_proc_exit record */
BPF_HASH(procs, u32, struct handoff_proc_counts, 4096);
/* --children: processes forked by a traced process (and theirs), while they live */
BPF_HASH(children, u32, u8, 4096);

static __always_inline bool wanted(u32 tgid)
{
#ifdef FOLLOW_CHILDREN
	if (children.lookup(&tgid))
		return true;
#endif
	return pid_wanted(tgid);
}

static __always_inline struct handoff_proc_counts *proc_counts(u32 tgid)
{
	struct handoff_proc_counts zero = {};
	struct handoff_proc_counts *c = procs.lookup(&tgid);

	if (c)
		return c;
	procs.insert(&tgid, &zero);
	c = procs.lookup(&tgid);
	if (!c)
		counter_add(HANDOFF_CNT_PROCS_FULL, 1);
	return c;
}

static __always_inline bool file_is_socket(u64 file)
{
	const void *inode = (const void *)read_u64((const void *)file + OFF_FILE_F_INODE);
	u16 mode = 0;

	if (!inode)
		return false;
	bpf_probe_read_kernel(&mode, sizeof(mode), inode + OFF_INODE_I_MODE);
	return (mode & S_IFMT) == S_IFSOCK;
}

static __always_inline void queue_fd(u64 pid_tgid, u32 fd, u64 file, u8 path)
{
	struct fd_key k = { .tgid = pid_tgid >> 32, .fd = fd };
	struct queued q = { .ts = bpf_ktime_get_ns(), .file = file, .tid = (u32)pid_tgid, .path = path };

	bpf_get_current_comm(&q.comm, sizeof(q.comm));
	if (pending.update(&k, &q))
		counter_add(HANDOFF_CNT_MAP_FULL, 1);
}

/* accept()/accept4() returned fd: the accept-queue wait ends, a handoff may begin. */
static __always_inline void accepted(void *ctx, long fd, u8 via)
{
	u64 pid_tgid = bpf_get_current_pid_tgid(), file, sk, *est;
	u32 tgid = pid_tgid >> 32;
	struct handoff_proc_counts *c;
	struct handoff_event ev = {};

	if (fd < 0 || !wanted(tgid))
		return;
	file = current_fd_file(fd);
	if (!file)
		return;
	sk = file_sock(file);
	est = sk ? established.lookup(&sk) : 0;
	if (est) {
		ev.queued_ns = *est;
		established.delete(&sk);
		task_head_fill(&ev.task);
		ev.fd = fd;
		ev.path = HANDOFF_ACCEPT_QUEUE;
		ev.via = via;
		emit_event(ctx, &ev, sizeof(ev));
		c = proc_counts(tgid);
		if (c)
			__sync_fetch_and_add(&c->accepts, 1);
	}
	queue_fd(pid_tgid, fd, file, HANDOFF_ACCEPT);
}

/* A thread's handoff whose first read has not returned yet (the thread is in that read) */
BPF_HASH(reading, u64, struct handoff_event, 4096);

/* The first read of a queued fd: a handoff when another thread of the process reads it. */
static __always_inline void read_fd(void *ctx, long fd, u8 via)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	struct fd_key k = { .tgid = pid_tgid >> 32, .fd = fd };
	struct handoff_proc_counts *c;
	struct handoff_event ev = {};
	struct queued *q;

	if (fd < 0 || fd > 0x7fffffff || !wanted(k.tgid))
		return;
	q = pending.lookup(&k);
	if (!q)
		return;
	c = proc_counts(k.tgid);
	if (q->tid == (u32)pid_tgid) {
		if (c)
			__sync_fetch_and_add(&c->same_thread, 1);
		pending.delete(&k);
		return;
	}
	if (current_fd_file(fd) != q->file) {
		/* the fd was closed and reused (close_range, dup2, ...) since it was queued */
		if (c)
			__sync_fetch_and_add(&c->stale, 1);
		pending.delete(&k);
		return;
	}
	task_head_fill(&ev.task);
	ev.queued_ns = q->ts;
	ev.main_tid = q->tid;
	ev.fd = fd;
	ev.path = q->path;
	ev.via = via;
	__builtin_memcpy(ev.main_comm, q->comm, sizeof(ev.main_comm));
	pending.delete(&k);
	if (reading.update(&pid_tgid, &ev))
		counter_add(HANDOFF_CNT_MAP_FULL, 1);
}

/* That read returned: 0 bytes is end of file, the client's close and no request. */
static __always_inline void read_done(void *ctx, long ret)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	struct handoff_event *ev = reading.lookup(&pid_tgid);
	struct handoff_proc_counts *c;

	if (!ev)
		return;
	c = proc_counts(pid_tgid >> 32);
	if (ret == 0)
		ev->path = HANDOFF_EOF;
	if (c && ret == 0)
		__sync_fetch_and_add(&c->closes, 1);
	else if (c)
		__sync_fetch_and_add(&c->handoffs, 1);
	emit_event(ctx, ev, sizeof(*ev));
	reading.delete(&pid_tgid);
}

TRACEPOINT_PROBE(syscalls, sys_exit_accept4)
{
	accepted(args, args->ret, VIA_ACCEPT4);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_accept)
{
	accepted(args, args->ret, VIA_ACCEPT);
	return 0;
}

/* epoll_ctl(EPOLL_CTL_DEL) of a socket, until it returns: only a removal that worked hands off */
struct epoll_del {
	u64 file;
	u32 fd;
};
BPF_HASH(epoll_dels, u64, struct epoll_del, 4096);

TRACEPOINT_PROBE(syscalls, sys_enter_epoll_ctl)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	struct epoll_del d = { .fd = args->fd };

	if (args->op != EPOLL_CTL_DEL || args->fd < 0 || !wanted(pid_tgid >> 32))
		return 0;
	d.file = current_fd_file(d.fd);
	if (d.file && file_is_socket(d.file))
		epoll_dels.update(&pid_tgid, &d);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_epoll_ctl)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	struct epoll_del *d = epoll_dels.lookup(&pid_tgid);

	if (!d)
		return 0;
	if (args->ret == 0)
		queue_fd(pid_tgid, d->fd, d->file, HANDOFF_EPOLL_DEL);
	epoll_dels.delete(&pid_tgid);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_read)
{
	read_fd(args, args->fd, VIA_READ);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_readv)
{
	read_fd(args, args->fd, VIA_READV);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_recvfrom)
{
	read_fd(args, args->fd, VIA_RECVFROM);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_recvmsg)
{
	read_fd(args, args->fd, VIA_RECVMSG);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_read)
{
	read_done(args, args->ret);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_readv)
{
	read_done(args, args->ret);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_recvfrom)
{
	read_done(args, args->ret);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_recvmsg)
{
	read_done(args, args->ret);
	return 0;
}

/* A closed fd is no longer queued (its number may come back for another file). */
TRACEPOINT_PROBE(syscalls, sys_enter_close)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	struct fd_key k = { .tgid = pid_tgid >> 32, .fd = args->fd };

	if (wanted(k.tgid))
		pending.delete(&k);
	return 0;
}

TRACEPOINT_PROBE(sock, inet_sock_set_state)
{
	u64 sk = (u64)args->skaddr, now;

	if (args->protocol != IPPROTO_TCP)
		return 0;
	if (args->oldstate == TCP_SYN_RECV && args->newstate == TCP_ESTABLISHED) {
		now = bpf_ktime_get_ns();
		if (established.update(&sk, &now))
			counter_add(HANDOFF_CNT_MAP_FULL, 1);
	} else if (args->newstate == TCP_CLOSE) {
		established.delete(&sk);
	}
	return 0;
}

/*
 * A process ended: its counts go out (the map keeps live processes only), and with
 * --children it is no longer followed.
 */
TRACEPOINT_PROBE(sched, sched_process_exit)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct handoff_proc_exit e = { .pid = tgid };
	struct handoff_proc_counts *c;

	if (!args->group_dead)
		return 0;
#ifdef FOLLOW_CHILDREN
	if (children.delete(&tgid) == 0)
		counter_add(HANDOFF_CNT_CHILDREN_EXITED, 1);
#endif
	c = procs.lookup(&tgid);
	if (!c)
		return 0;
	e.counts = *c;
	emit_event(args, &e, sizeof(e)); /* one that does not fit is counted as lost */
	procs.delete(&tgid);
	return 0;
}

#ifdef FOLLOW_CHILDREN
/* A traced process forked: follow the new process (not new threads: tgid != pid). */
RAW_TRACEPOINT_PROBE(sched_process_fork)
{
	const void *child = (const void *)ctx->args[1];
	u32 pid = read_u32(child + OFF_TASK_PID), tgid = read_u32(child + OFF_TASK_TGID);
	u8 one = 1;

	if (pid != tgid || !wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (children.update(&tgid, &one))
		counter_add(HANDOFF_CNT_CHILDREN_FULL, 1);
	return 0;
}
#endif
