/*
 * pyoffcpu: why threads of the target processes are not running, from the scheduler's
 * tracepoints only.
 *
 * sched_switch runs in the context of the task leaving the CPU (prev): for a target
 * thread it notes the time and state and takes its kernel stack, its user stack and
 * its Python stack (python.bpf.h) there, into the thread's offcpu entry.
 * sched_wakeup / sched_wakeup_new note when (and by whom) it was woken; a preempted
 * thread (state R) is runnable from the switch on. The sched_switch that puts it back
 * (next) ends the period: per-thread totals always; a record (events, -DRECORDS) and/or
 * a sum per (thread, kernel, user, Python stack) in the folded table (-DFOLDED) when it
 * was off for at least MIN_NS in the wanted state.
 *
 * Options: -DMIN_NS, -DSTATE_MASK (prev_state bits wanted; 0: any), -DFOLDED, -DRECORDS,
 * -DWALK_PYTHON, -DMAX_STACK_DEPTH, -DPY_MAX_DEPTH, -DPYEBPF_RINGBUF_PAGES; offsets
 * -DOFF_* from BTF.
 */
// The build also checks the text with these options (src/bpf/bpfcheck.sh):
// bpfcheck: -p {pid} -f
// bpfcheck: -p {pid} -o {tmp}/offcpu.txt
// bpfcheck: -p {pid} --no-py
#include "pyoffcpu.h"
#define PYEBPF_NCOUNTERS OFFCPU_CNT_MAX
#include "pyebpf.bpf.h"
#ifdef WALK_PYTHON
#include "python.bpf.h"
#endif

#ifndef MIN_NS
#define MIN_NS 20000000ULL
#endif
#ifndef STATE_MASK
#define STATE_MASK 0
#endif
#ifndef MAX_STACK_DEPTH
#define MAX_STACK_DEPTH 20
#endif

struct stack_ips {
	u64 ip[MAX_STACK_DEPTH];
};
BPF_TABLE("stacktrace", int, struct stack_ips, stacks, 16384);

/* The target processes (host tgids), written by userspace. */
BPF_HASH(target_pids, u32, u8, 1024);
/* Target threads off the CPU now (task.ts_ns != 0), by host tid. */
BPF_HASH(offcpu, u32, struct pyoffcpu_event, 8192);
BPF_HASH(threads, u32, struct pyoffcpu_thread, 8192);
/*
 * Set to 1 by userspace when the run ends: from then on nothing is counted or sent,
 * so that the records, the losses and the totals it reads agree.
 */
BPF_ARRAY(stopped, u32, 1);
/* A zeroed entry to create offcpu entries from (never written). */
BPF_ARRAY(blank, struct pyoffcpu_event, 1);
#ifdef FOLDED
BPF_HASH(folded, struct pyoffcpu_fold_key, struct pyoffcpu_fold_val, PYOFFCPU_FOLDED_MAX);
BPF_HASH(py_stacks, u64, struct pywalk_stack, 4096);
#endif

/* The offcpu entry of tid, created when missing; NULL when the table is full. */
static __always_inline struct pyoffcpu_event *offcpu_entry(u32 tid)
{
	struct pyoffcpu_event *v = offcpu.lookup(&tid), *z;
	u32 zero = 0;

	if (v)
		return v;
	z = blank.lookup(&zero);
	if (!z || offcpu.insert(&tid, z))
		return NULL;
	return offcpu.lookup(&tid);
}

static __always_inline void walk_python(struct pyoffcpu_event *v, u32 tgid, u32 tid)
{
	v->py.status = PYWALK_ERR_CONFIG;
	v->py.depth = 0;
	v->py.asyncio.gen_frame = 0;
#ifdef WALK_PYTHON
	struct pywalk_config *cfg = py_config.lookup(&tgid);
	u64 tstate = 0;
	int st;

	if (!cfg)
		return;
	counter_add(OFFCPU_CNT_PY_WALKS, 1);
	st = py_find_tstate(cfg, tid, &tstate);
	if (!st) {
		st = py_walk_frames(cfg, tstate, v->py.frames, &v->py.depth);
		py_walk_asyncio(cfg, tstate, &v->py.asyncio);
	}
	v->py.status = st;
	if (st != PYWALK_COMPLETE && st != PYWALK_TRUNCATED && st != PYWALK_NO_THREAD)
		counter_add(OFFCPU_CNT_PY_ERRORS, 1);
#endif
}

/*
 * A new task's first wait for a CPU (sched_wakeup_new to its first run), by tid: it
 * counts for the thread only once its first switch-out shows that it is a thread of
 * a target (a forked child of a target is another process). LRU: children that are
 * not targets are forgotten.
 */
BPF_TABLE("lru_hash", u32, u64, new_waits, 1024);

/* tid's totals, created when missing (NULL when the table is full). */
static __always_inline struct pyoffcpu_thread *thread_totals(u32 tid, u32 tgid)
{
	struct pyoffcpu_thread *t = threads.lookup(&tid), blank_thread = {};

	if (t)
		return t;
	blank_thread.pid = tgid;
	threads.insert(&tid, &blank_thread);
	return threads.lookup(&tid);
}

/* prev leaves the CPU (this runs in its context). */
static __always_inline void switch_out(void *ctx, s64 state, u64 now)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 tgid = pid_tgid >> 32, tid = (u32)pid_tgid;
	struct pyoffcpu_event *v;

	if (tid == 0 || !target_pids.lookup(&tgid))
		return;
	if (state & PYOFFCPU_STATE_DEAD) {
		offcpu.delete(&tid);
		return;
	}
	counter_add(OFFCPU_CNT_SWITCHES, 1);
	v = offcpu.lookup(&tid);
	if (!v) {
		/* its first switch-out: a new thread's first wait counts now */
		u64 *wait = new_waits.lookup(&tid);
		struct pyoffcpu_thread *t;

		if (wait && (t = thread_totals(tid, tgid))) {
			t->off_ns += *wait;
			t->runq_ns += *wait;
			t->periods += 1;
		}
		if (wait)
			new_waits.delete(&tid);
		v = offcpu_entry(tid);
	}
	if (!v) {
		counter_add(OFFCPU_CNT_UNTRACKED, 1);
		return;
	}
	task_head_fill(&v->task);
	v->task.ts_ns = now;
	v->prev_state = state;
	v->wake_ns = state ? 0 : now; /* preempted: runnable from now on */
	v->waker_tid = 0;
	v->waker_comm[0] = 0;
	v->cpu = bpf_get_smp_processor_id();
	if (STATE_MASK && !(state & STATE_MASK)) {
		/* counted in the totals, never shown: no stacks needed */
		v->kstack = v->ustack = -1;
		v->py.status = PYWALK_ERR_CONFIG;
		v->py.depth = 0;
		v->py.asyncio.gen_frame = 0;
		return;
	}
	v->kstack = stacks.get_stackid(ctx, 0);
	if (v->kstack < 0)
		counter_add(OFFCPU_CNT_KSTACK_ERR, 1);
	v->ustack = stacks.get_stackid(ctx, BPF_F_USER_STACK);
	if (v->ustack < 0)
		counter_add(OFFCPU_CNT_USTACK_ERR, 1);
	walk_python(v, tgid, tid);
}

#ifdef FOLDED
/* The frames' identity (code object, instruction) as a key of py_stacks; 0 for none. */
static __always_inline u64 py_hash(struct pywalk_stack *py)
{
	u64 h = 14695981039346656037ULL;
	u32 depth = py->depth;

	if (!depth)
		return 0;
	/* unrolled, clang pairs frames and reads past the last one the verifier allows */
#pragma clang loop unroll(disable)
	for (int i = 0; i < MAX_STACK_DEPTH; i++) {
		if (i >= depth)
			break;
		h = (h ^ py->frames[i].code) * 1099511628211ULL;
		h = (h ^ py->frames[i].instr) * 1099511628211ULL;
	}
	h ^= py->status;
	return h ? h : 1;
}

static __always_inline void fold(struct pyoffcpu_event *v, u64 ns)
{
	struct pyoffcpu_fold_key key = {};
	struct pyoffcpu_fold_val one = { .ns = ns, .periods = 1 }, *total;

	key.pid = v->task.pid;
	key.tid = v->task.tid;
	key.kstack = v->kstack;
	key.ustack = v->ustack;
	key.py_hash = py_hash(&v->py);
	__builtin_memcpy(key.comm, v->task.comm, sizeof(key.comm));
	if (key.py_hash)
		py_stacks.insert(&key.py_hash, &v->py);
	total = folded.lookup(&key);
	if (!total && folded.insert(&key, &one) == 0)
		return;
	if (!total)
		total = folded.lookup(&key); /* another CPU inserted it */
	if (!total) {
		counter_add(OFFCPU_CNT_FOLD_FULL, 1);
		return;
	}
	__sync_fetch_and_add(&total->ns, ns);
	__sync_fetch_and_add(&total->periods, 1);
}
#endif

/* next is back on a CPU: the end of its period. */
static __always_inline void switch_in(void *ctx, u32 tid, u64 now)
{
	struct pyoffcpu_event *v = offcpu.lookup(&tid);
	struct pyoffcpu_thread *t;
	u64 off, runq;
	bool wanted;

	if (!v || !v->task.ts_ns)
		return;
	off = now - v->task.ts_ns;
	runq = v->wake_ns ? now - v->wake_ns : 0;
	if (v->prev_state == PYOFFCPU_STATE_NEW) {
		new_waits.update(&tid, &runq);
		offcpu.delete(&tid);
		return;
	}
	v->run_ns = now;
	wanted = off >= MIN_NS && (!STATE_MASK || (v->prev_state & STATE_MASK));
	t = thread_totals(tid, v->task.pid);
	if (t) {
		t->pid = v->task.pid;
		t->off_ns += off;
		t->runq_ns += runq;
		t->periods += 1;
		t->long_periods += wanted;
	}
	if (wanted) {
		counter_add(OFFCPU_CNT_LONG, 1);
#ifdef FOLDED
		fold(v, off);
#endif
#ifdef RECORDS
		u32 size = sizeof(*v) - sizeof(v->py.frames);
		u32 depth = v->py.depth;

		if (depth > PYOFFCPU_DEPTH_LIMIT)
			depth = PYOFFCPU_DEPTH_LIMIT;
		size += depth * sizeof(v->py.frames[0]);
		if (size > sizeof(*v))
			size = sizeof(*v);
		if (!emit_event(ctx, v, size) && t)
			t->lost += 1;
#endif
	}
	v->task.ts_ns = 0;
}

static __always_inline bool is_stopped(void)
{
	u32 zero = 0, *v = stopped.lookup(&zero);

	return !v || *v;
}

TRACEPOINT_PROBE(sched, sched_switch)
{
	u64 now = bpf_ktime_get_ns();

	if (is_stopped())
		return 0;
	switch_out(args, args->prev_state, now);
	switch_in(args, (u32)args->next_pid, now);
	return 0;
}

/*
 * The woken thread's first wakeup of the period, and the task that ran
 * sched_wakeup: in an interrupt (a timer, a device) that is the task it interrupted
 * (the tracepoint's context does not say which; the idle task is reported as none).
 */
static __always_inline void woken(u32 tid)
{
	struct pyoffcpu_event *v = offcpu.lookup(&tid);

	if (!v || !v->task.ts_ns || v->wake_ns)
		return;
	v->wake_ns = bpf_ktime_get_ns();
	v->waker_tid = (u32)bpf_get_current_pid_tgid();
	bpf_get_current_comm(&v->waker_comm, sizeof(v->waker_comm));
}

TRACEPOINT_PROBE(sched, sched_wakeup)
{
	if (is_stopped())
		return 0;
	woken((u32)args->pid);
	return 0;
}

/* A new thread of a target: runnable from now until its first run (schedstat counts that wait too). */
TRACEPOINT_PROBE(sched, sched_wakeup_new)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32, tid = (u32)args->pid;
	struct pyoffcpu_event *v;

	if (is_stopped() || !target_pids.lookup(&tgid))
		return 0;
	v = offcpu_entry(tid);
	if (!v) {
		counter_add(OFFCPU_CNT_UNTRACKED, 1);
		return 0;
	}
	v->task.ts_ns = v->wake_ns = bpf_ktime_get_ns();
	v->task.pid = tgid;
	v->task.tid = tid;
	v->prev_state = PYOFFCPU_STATE_NEW;
	v->kstack = v->ustack = -1;
	v->py.depth = 0;
	v->py.asyncio.gen_frame = 0;
	return 0;
}
