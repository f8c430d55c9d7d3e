/*
 * pyloop: what blocks the event loops of the target processes. A loop thread is a
 * target thread that blocks in a poller (epoll_wait, epoll_pwait, epoll_pwait2, poll,
 * ppoll, select, pselect6: their syscall tracepoints only); one iteration runs from
 * the poller's return to the thread's next entry into the same poller (for epoll, the
 * same epoll fd: a poll() that a socket timeout makes inside a callback is part of
 * the iteration, counted as other_polls).
 *
 * Per loop thread (loops): the iteration going on, its off-CPU and run-queue time
 * from sched_switch / sched_wakeup, and totals; per (thread, lathist bucket) the
 * count of iterations that long (iter_hist). An iteration of at least MIN_NS is a
 * stall: a record when the poller is entered again, after the stack of its longest
 * off-CPU period (the Python stack walked at every voluntary switch-out inside an
 * iteration, py_pending, kept as py_block while it is the longest).
 * -DSAMPLE (the perf event program on_sample, -F Hz on every CPU): a sample of a
 * loop thread whose iteration has run for ARM_NS or more walks its Python stack and
 * sends it, keyed by the iteration's start; userspace keeps the samples of
 * iterations that end as stalls.
 *
 * Options: -DMIN_NS, -DARM_NS, -DSAMPLE, -DWALK_PYTHON, -DPY_MAX_DEPTH,
 * -DHAVE_EPOLL_PWAIT2 (the tracepoints exist), -DPYEBPF_RINGBUF_PAGES; offsets
 * -DOFF_* from BTF.
 */
// The build also checks the text with these options (src/bpf/bpfcheck.sh):
// bpfcheck: -p {pid} --no-stacks
/* only passed on to helpers: no kernel header needed (the built-in set has none) */
struct bpf_perf_event_data;

#include "pyloop.h"
#define PYEBPF_NCOUNTERS LOOP_CNT_MAX
#include "pyebpf.bpf.h"
#ifdef WALK_PYTHON
#include "python.bpf.h"
#endif

#ifndef MIN_NS
#define MIN_NS 100000000ULL
#endif
#ifndef ARM_NS
#define ARM_NS (MIN_NS / 10)
#endif

/* The target processes (host tgids), written by userspace. */
BPF_HASH(target_pids, u32, u8, 1024);
BPF_HASH(loops, u32, struct pyloop_thread, 4096);
BPF_HASH(iter_hist, struct pyloop_hist_key, u64, PYLOOP_HIST_MAX);
/*
 * 1 from when every program is attached until the run ends (set by userspace): an
 * iteration is measured only while the scheduler, the sampler and the pollers are all
 * seen (the runner detaches them one after the other), and records, losses and totals
 * read at the end agree.
 */
BPF_ARRAY(running, u32, 1);
#ifdef WALK_PYTHON
/* A zeroed stack to create py_pending entries from (never written). */
BPF_ARRAY(blank_stack, struct pyloop_stack, 1);
BPF_HASH(py_pending, u32, struct pyloop_stack, 1024);
BPF_HASH(py_block, u32, struct pyloop_stack, 1024);
BPF_PERCPU_ARRAY(scratch, struct pyloop_stack, 1);
#endif

static __always_inline bool is_stopped(void)
{
	u32 zero = 0, *v = running.lookup(&zero);

	return !v || !*v;
}

/* Only the frames filled in go out. */
static __always_inline u32 stack_size(struct pyloop_stack *s)
{
	u32 depth = s->py.depth, size;

	if (depth > PYLOOP_DEPTH_LIMIT)
		depth = PYLOOP_DEPTH_LIMIT;
	size = sizeof(*s) - sizeof(s->py.frames) + depth * sizeof(s->py.frames[0]);
	if (size > sizeof(*s))
		size = sizeof(*s);
	return size;
}

#ifdef WALK_PYTHON
/* The current thread's Python stack into s (map memory). */
static __always_inline void walk_python(struct pyloop_stack *s, u32 tgid, u32 tid)
{
	struct pywalk_config *cfg = py_config.lookup(&tgid);
	u64 tstate = 0;
	int st;

	s->py.depth = 0;
	s->py.status = PYWALK_ERR_CONFIG;
	s->py.asyncio.gen_frame = 0;
	if (!cfg)
		return;
	counter_add(LOOP_CNT_PY_WALKS, 1);
	st = py_find_tstate(cfg, tid, &tstate);
	if (!st) {
		st = py_walk_frames(cfg, tstate, s->py.frames, &s->py.depth);
		py_walk_asyncio(cfg, tstate, &s->py.asyncio);
	}
	s->py.status = st;
	if (st != PYWALK_COMPLETE && st != PYWALK_TRUNCATED && st != PYWALK_NO_THREAD)
		counter_add(LOOP_CNT_PY_ERRORS, 1);
}
#endif

/* One more iteration of ns in tid's histogram. */
static __always_inline void hist_add(u32 tid, u64 ns)
{
	struct pyloop_hist_key key = { .tid = tid, .bucket = pyloop_fine_index(ns) };
	u64 one = 1, *n = iter_hist.lookup(&key);

	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	if (iter_hist.insert(&key, &one))
		counter_add(LOOP_CNT_HIST_FULL, 1);
}

/* An off-CPU period inside the iteration ends: its times, and its stack when it is the longest. */
static __always_inline void period_end(struct pyloop_thread *t, u32 tid, u64 off, u64 runq)
{
	t->it_off_ns += off;
	t->it_runq_ns += runq;
	if (off > t->it_longest_off_ns) {
		t->it_longest_off_ns = off;
#ifdef WALK_PYTHON
		if (t->out_walked) {
			struct pyloop_stack *s = py_pending.lookup(&tid);

			if (s)
				py_block.update(&tid, s);
		}
#endif
	}
	t->out_ns = t->wake_ns = 0;
	t->out_walked = 0;
}

/* next is back on a CPU: the off-CPU period inside the iteration ends. */
static __always_inline void switch_in(u32 tid, u64 now)
{
	struct pyloop_thread *t = loops.lookup(&tid);

	if (!t || !t->out_ns)
		return;
	if (t->wake_ns && t->wake_ns >= t->out_ns)
		period_end(t, tid, t->wake_ns - t->out_ns, now - t->wake_ns);
	else
		period_end(t, tid, now - t->out_ns, 0);
}

/*
 * The thread runs (this is its context, now) but its period off the CPU never ended:
 * the kernel skipped the sched_switch that put it back (syscall tracepoint programs
 * may be preempted on this kernel, and a tracepoint that fires meanwhile on that CPU
 * is skipped as recursion). The period ends at its wakeup when one was seen (its
 * run-queue wait is then unknown: counted as running), else now (what it ran since
 * it came back is then counted off the CPU); its stack is the blocking one all the same.
 */
static __always_inline void switch_in_missed(struct pyloop_thread *t, u32 tid, u64 now)
{
	if (!t->out_ns)
		return;
	counter_add(LOOP_CNT_SWITCH_IN_MISSED, 1);
	if (t->wake_ns && t->wake_ns >= t->out_ns)
		period_end(t, tid, t->wake_ns - t->out_ns, 0);
	else if (now >= t->out_ns)
		period_end(t, tid, now - t->out_ns, 0);
	t->out_ns = t->wake_ns = 0;
	t->out_walked = 0;
}

/* The poller's entry: the end of the iteration going on (a stall when long). */
static __always_inline void poll_enter(void *ctx, u32 poller, s64 fd)
{
	u64 pid_tgid = bpf_get_current_pid_tgid(), now;
	u32 tgid = pid_tgid >> 32, tid = (u32)pid_tgid;
	struct pyloop_thread *t;
	u64 dur;

	if (is_stopped() || !target_pids.lookup(&tgid))
		return;
	t = loops.lookup(&tid);
	if (!t) {
		struct pyloop_thread blank = {};

		blank.pid = tgid;
		blank.poller = poller;
		blank.loop_fd = PYLOOP_IS_EPOLL(poller) ? fd : -1;
		if (loops.insert(&tid, &blank)) {
			counter_add(LOOP_CNT_UNTRACKED, 1);
			return;
		}
		t = loops.lookup(&tid);
		if (!t)
			return;
	}
	/*
	 * The loop's poller: the first seen, except that an epoll beats poll and select (a
	 * thread that polled a socket with a timeout before its loop started).
	 */
	if (PYLOOP_IS_EPOLL(poller) && !PYLOOP_IS_EPOLL(t->poller)) {
		t->poller = poller;
		t->loop_fd = fd;
		t->iter_start = 0; /* the iteration going on was measured against another poller */
	} else if (PYLOOP_IS_EPOLL(poller) != PYLOOP_IS_EPOLL(t->poller) ||
		   (!PYLOOP_IS_EPOLL(poller) && poller != t->poller)) {
		counter_add(LOOP_CNT_OTHER_POLLS, 1);
		return;
	} else if (PYLOOP_IS_EPOLL(poller)) {
		if (t->loop_fd < 0)
			t->loop_fd = fd; /* first seen returning: its fd is known now */
		else if (t->loop_fd != fd) {
			counter_add(LOOP_CNT_OTHER_POLLS, 1);
			return;
		}
		t->poller = poller;
	}
	counter_add(LOOP_CNT_POLLS, 1);
	now = bpf_ktime_get_ns();
	switch_in_missed(t, tid, now);
	t->polls += 1;
	t->in_poll = 1;
	t->poll_start = now;
	if (!t->iter_start)
		return;
	dur = now - t->iter_start;
	t->iterations += 1;
	t->since_stall += 1;
	t->run_ns += dur;
	if (!t->min_ns || dur < t->min_ns)
		t->min_ns = dur;
	if (dur > t->max_ns)
		t->max_ns = dur;
	hist_add(tid, dur);
	if (dur >= MIN_NS) {
		struct pyloop_stall s = {};

		counter_add(LOOP_CNT_STALLS, 1);
		t->stalls += 1;
#ifdef WALK_PYTHON
		if (t->it_longest_off_ns) {
			struct pyloop_stack *b = py_block.lookup(&tid);

			if (b && b->iter_start == t->iter_start) {
				b->kind = PYLOOP_REC_BLOCK;
				b->off_ns = t->it_longest_off_ns;
				emit_event(ctx, b, stack_size(b));
			}
		}
#endif
		task_head_fill(&s.task);
		s.task.ts_ns = t->iter_start;
		s.kind = PYLOOP_REC_STALL;
		s.poller = t->poller;
		s.end_ns = now;
		s.off_ns = t->it_off_ns;
		s.runq_ns = t->it_runq_ns;
		s.iterations_before = t->since_stall - 1;
		t->since_stall = 0;
		emit_event(ctx, &s, sizeof(s));
	}
	t->iter_start = 0;
}

/* The poller's return: a new iteration begins (also the first one seen of a thread blocked in it at start). */
static __always_inline void poll_exit(u32 poller)
{
	u64 pid_tgid = bpf_get_current_pid_tgid(), now;
	u32 tgid = pid_tgid >> 32, tid = (u32)pid_tgid;
	struct pyloop_thread *t;

	if (is_stopped() || !target_pids.lookup(&tgid))
		return;
	t = loops.lookup(&tid);
	now = bpf_ktime_get_ns();
	if (!t) {
		/* in the poller since before the start: its fd is learned at the next entry */
		struct pyloop_thread blank = {};

		blank.pid = tgid;
		blank.poller = poller;
		blank.loop_fd = -1;
		blank.iter_start = now;
		if (loops.insert(&tid, &blank))
			counter_add(LOOP_CNT_UNTRACKED, 1);
		return;
	}
	if (!t->in_poll) {
		/* another poller's return (counted at its entry), or the first of this thread's */
		if (!t->polls && poller == t->poller && !t->iter_start)
			t->iter_start = now;
		return;
	}
	t->in_poll = 0;
	t->poll_ns += now - t->poll_start;
	t->poll_start = 0;
	t->iter_start = now;
	t->out_ns = t->wake_ns = 0;
	t->it_off_ns = t->it_runq_ns = t->it_longest_off_ns = 0;
	t->out_walked = 0;
}

/*
 * The syscall tracepoints' records as the kernel lays them out for every syscall
 * (struct syscall_trace_enter: the 8-byte common header, the syscall number, then
 * the arguments as longs from byte 16; the format files say the same, e.g. epfd at
 * offset 16). Declared here rather than through TRACEPOINT_PROBE: libbcc's args
 * structs of ppoll, select, pselect6 and epoll_pwait name sigset_t and fd_set, which
 * the built-in header set does not have. The program names are the ones libbcc
 * attaches by (tracepoint__CAT__NAME), one pair per poller.
 */
struct pyloop_sys_enter {
	u64 common;
	s32 nr;
	s32 pad;
	u64 args[6];
};

int tracepoint__syscalls__sys_enter_epoll_wait(struct pyloop_sys_enter *args)
{
	poll_enter(args, PYLOOP_EPOLL_WAIT, (s64)(s32)args->args[0]);
	return 0;
}

int tracepoint__syscalls__sys_exit_epoll_wait(void *args)
{
	poll_exit(PYLOOP_EPOLL_WAIT);
	return 0;
}

int tracepoint__syscalls__sys_enter_epoll_pwait(struct pyloop_sys_enter *args)
{
	poll_enter(args, PYLOOP_EPOLL_PWAIT, (s64)(s32)args->args[0]);
	return 0;
}

int tracepoint__syscalls__sys_exit_epoll_pwait(void *args)
{
	poll_exit(PYLOOP_EPOLL_PWAIT);
	return 0;
}

#ifdef HAVE_EPOLL_PWAIT2
int tracepoint__syscalls__sys_enter_epoll_pwait2(struct pyloop_sys_enter *args)
{
	poll_enter(args, PYLOOP_EPOLL_PWAIT2, (s64)(s32)args->args[0]);
	return 0;
}

int tracepoint__syscalls__sys_exit_epoll_pwait2(void *args)
{
	poll_exit(PYLOOP_EPOLL_PWAIT2);
	return 0;
}
#endif

int tracepoint__syscalls__sys_enter_poll(struct pyloop_sys_enter *args)
{
	poll_enter(args, PYLOOP_POLL, 0);
	return 0;
}

int tracepoint__syscalls__sys_exit_poll(void *args)
{
	poll_exit(PYLOOP_POLL);
	return 0;
}

int tracepoint__syscalls__sys_enter_ppoll(struct pyloop_sys_enter *args)
{
	poll_enter(args, PYLOOP_PPOLL, 0);
	return 0;
}

int tracepoint__syscalls__sys_exit_ppoll(void *args)
{
	poll_exit(PYLOOP_PPOLL);
	return 0;
}

int tracepoint__syscalls__sys_enter_select(struct pyloop_sys_enter *args)
{
	poll_enter(args, PYLOOP_SELECT, 0);
	return 0;
}

int tracepoint__syscalls__sys_exit_select(void *args)
{
	poll_exit(PYLOOP_SELECT);
	return 0;
}

int tracepoint__syscalls__sys_enter_pselect6(struct pyloop_sys_enter *args)
{
	poll_enter(args, PYLOOP_PSELECT6, 0);
	return 0;
}

int tracepoint__syscalls__sys_exit_pselect6(void *args)
{
	poll_exit(PYLOOP_PSELECT6);
	return 0;
}

/*
 * prev (the current task) leaves the CPU inside an iteration: a voluntary switch
 * (sleeping, blocked) walks its Python stack into py_pending; a preemption makes it
 * runnable from now on.
 */
static __always_inline void switch_out(s64 state, u64 now)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 tid = (u32)pid_tgid;
	struct pyloop_thread *t;

	if (!tid)
		return;
	t = loops.lookup(&tid);
	if (!t || !t->iter_start || t->in_poll)
		return;
	switch_in_missed(t, tid, now);
	t->out_ns = now;
	t->wake_ns = state ? 0 : now;
	t->out_walked = 0;
#ifdef WALK_PYTHON
	if (state) {
		struct pyloop_stack *s = py_pending.lookup(&tid), *z;
		u32 zero = 0;

		if (!s) {
			z = blank_stack.lookup(&zero);
			if (z)
				py_pending.insert(&tid, z);
			s = py_pending.lookup(&tid);
		}
		if (s) {
			s->task.ts_ns = now;
			s->task.pid = pid_tgid >> 32;
			s->task.tid = tid;
			s->iter_start = t->iter_start;
			walk_python(s, pid_tgid >> 32, tid);
			t->out_walked = 1;
		}
	}
#endif
}

TRACEPOINT_PROBE(sched, sched_switch)
{
	u64 now = bpf_ktime_get_ns();

	if (is_stopped())
		return 0;
	switch_out(args->prev_state, now);
	switch_in((u32)args->next_pid, now);
	return 0;
}

TRACEPOINT_PROBE(sched, sched_wakeup)
{
	u32 tid = (u32)args->pid;
	struct pyloop_thread *t;

	if (is_stopped())
		return 0;
	t = loops.lookup(&tid);
	if (t && t->out_ns && !t->wake_ns)
		t->wake_ns = bpf_ktime_get_ns();
	return 0;
}

#ifdef SAMPLE
/* A cpu-clock sample: a loop thread whose iteration has run ARM_NS or more sends its stack. */
int on_sample(struct bpf_perf_event_data *ctx)
{
	u64 pid_tgid = bpf_get_current_pid_tgid(), now;
	u32 tid = (u32)pid_tgid, zero = 0;
	struct pyloop_thread *t;
	struct pyloop_stack *s;

	if (!tid)
		return 0;
	t = loops.lookup(&tid);
	if (!t || !t->iter_start || t->in_poll)
		return 0;
	now = bpf_ktime_get_ns();
	if (now - t->iter_start < ARM_NS || is_stopped())
		return 0;
	s = scratch.lookup(&zero);
	if (!s)
		return 0;
	counter_add(LOOP_CNT_SAMPLES, 1);
	s->task.ts_ns = now;
	s->task.pid = pid_tgid >> 32;
	s->task.tid = tid;
	s->kind = PYLOOP_REC_SAMPLE;
	s->iter_start = t->iter_start;
	s->off_ns = 0;
	walk_python(s, pid_tgid >> 32, tid);
	emit_event(ctx, s, stack_size(s));
	return 0;
}
#endif
