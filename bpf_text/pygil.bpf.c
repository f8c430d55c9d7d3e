/*
 * pygil: one event per GIL wait of a target thread, from one of two hook sets that
 * userspace picks per interpreter binary (src/trackers/pygil.c):
 *  - uprobe + uretprobe on take_gil and its compiler clones (builds with a symbol
 *    table): a call that finds the GIL locked is a wait; the holder is the GIL's
 *    last_holder when it began;
 *  - uprobe + uretprobe on libc's pthread_cond_timedwait, kept only when its first
 *    argument is the GIL's cond (stripped builds): take_gil loops on that timed wait
 *    while the GIL is locked, with gil->mutex held around each check. The first call
 *    begins the wait; the return that finds locked == 0 ends it (the thread takes the
 *    GIL next, under the same mutex), and last_holder then is the thread that dropped it.
 * gil_targets gives each target's GIL address (tgid key; no entry: not a target).
 * Options: -DMIN_NS (report waits of at least this), -DSTACKS (walk the waiter's stack
 * and the holder's from its thread state, python.bpf.h) with -DPY_MIN_NS (only for waits
 * of at least this); offsets -DOFF_* from BTF.
 */
#include "pygil.h"
#define PYEBPF_NCOUNTERS PYGIL_CNT_MAX
#include "pyebpf.bpf.h"
#ifdef STACKS
#define PY_MAX_DEPTH PYGIL_DEPTH
#define PY_WALK_FIELD_BY_FIELD /* two walks per run: see python.bpf.h */
#include "python.bpf.h"
BPF_PERCPU_ARRAY(scratch, struct pygil_stack_event, 1);
#endif

/* x86_64 struct pt_regs (uapi layout) as u64 words: rdi, the first argument */
#define REG_DI 14

struct wait_state {
	u64 start_ns;
	u64 holder; /* last_holder seen while waiting */
};

BPF_HASH(gil_targets, u32, struct pygil_target, 1024);
/* waits in progress, by thread (pid_tgid) */
BPF_HASH(waiting, u64, struct wait_state, 8192);
/* every wait's time, by thread, for the per-thread table (userspace reads and clears it) */
BPF_HASH(thread_waits, u64, struct pygil_thread_waits, 8192);

static __always_inline u64 gil_word(const struct pygil_target *t, u32 off)
{
	u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)(t->gil + off));
	return v;
}

static __always_inline void wait_begin(const struct pygil_target *t, u64 id, u64 holder)
{
	struct wait_state w = { bpf_ktime_get_ns(), holder };

	if (waiting.update(&id, &w) != 0)
		counter_add(PYGIL_CNT_MAP_FULL, 1);
}

static __always_inline void count_wait(u64 id, u64 ns)
{
	struct pygil_thread_waits zero = {}, *tw = thread_waits.lookup_or_try_init(&id, &zero);

	if (tw) {
		tw->wait_ns += ns;
		tw->waits += 1;
	}
}

static __always_inline int wait_end(struct pt_regs *ctx, const struct pygil_target *t, u64 id,
				    const struct wait_state *w, u64 holder, u32 source)
{
	u64 now = bpf_ktime_get_ns(), start = w->start_ns;
	struct pygil_event *ev;
#ifdef STACKS
	u32 zero = 0, tgid = id >> 32, size, depth;
	struct pygil_stack_event *s = scratch.lookup(&zero);
	struct pywalk_config *cfg;
	u64 tstate = 0;
	int st;
#else
	struct pygil_event one = {};
#endif

	waiting.delete(&id);
	count_wait(id, now - start);
#ifdef MIN_NS
	if (now - start < MIN_NS) {
		counter_add(PYGIL_CNT_SHORT, 1);
		return 0;
	}
#endif
#ifdef STACKS
	if (!s)
		return 0;
	ev = &s->ev;
#else
	ev = &one;
#endif
	task_head_fill(&ev->task);
	ev->start_ns = start;
	ev->end_ns = now;
	ev->holder = holder;
	ev->switch_number = gil_word(t, PYGIL_OFF_SWITCH_NUMBER);
	ev->holder_ns_tid = 0;
	if (holder && t->ts_native_tid != PYWALK_NONE) {
		u64 tid = 0;
		bpf_probe_read_user(&tid, sizeof(tid), (const void *)(holder + t->ts_native_tid));
		ev->holder_ns_tid = (u32)tid;
	}
	ev->source = source;
#ifdef STACKS
	s->waiter_depth = 0;
	s->holder_depth = 0;
	s->waiter_status = PYWALK_ERR_CONFIG;
	s->holder_status = PYWALK_NO_THREAD;
	cfg = py_config.lookup(&tgid);
#ifdef PY_MIN_NS
	if (now - start < PY_MIN_NS)
		cfg = NULL; /* too short for stacks: an event without frames */
#endif
	if (cfg) {
		st = py_find_tstate(cfg, (u32)id, &tstate);
		if (!st)
			st = py_walk_frames(cfg, tstate, s->waiter, &s->waiter_depth);
		s->waiter_status = st;
		if (holder)
			s->holder_status = py_walk_frames(cfg, holder, s->holder, &s->holder_depth);
	}
	depth = s->holder_depth;
	/* the waiter's frames in full, the holder's filled ones */
	size = sizeof(*s) - sizeof(s->holder) + (depth & (PYGIL_DEPTH - 1)) * sizeof(s->holder[0]);
	if (depth >= PYGIL_DEPTH || size > sizeof(*s))
		size = sizeof(*s);
	emit_event(ctx, s, size);
#else
	emit_event(ctx, ev, sizeof(*ev));
#endif
	return 0;
}

/* take_gil(): the whole call is the wait */
int take_entry(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct pygil_target *t = gil_targets.lookup(&tgid);

	/* a free GIL is taken at once: no wait (the condvar path sees none either) */
	if (!t || (s32)gil_word(t, PYGIL_OFF_LOCKED) != 1)
		return 0;
	wait_begin(t, id, gil_word(t, PYGIL_OFF_LAST_HOLDER));
	return 0;
}

int take_return(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct wait_state *w = waiting.lookup(&id);
	struct pygil_target *t = gil_targets.lookup(&tgid);

	if (!w || !t)
		return 0;
	return wait_end(ctx, t, id, w, w->holder, PYGIL_SRC_TAKE_GIL);
}

/* pthread_cond_timedwait(cond, mutex, abstime) on the GIL's cond: the first call begins the wait */
int cond_entry(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct pygil_target *t = gil_targets.lookup(&tgid);

	if (!t || ((const u64 *)ctx)[REG_DI] != t->gil + PYGIL_OFF_COND || waiting.lookup(&id))
		return 0;
	wait_begin(t, id, 0);
	return 0;
}

/* Back with gil->mutex held: locked cannot change until take_gil checks it */
int cond_return(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct wait_state *w = waiting.lookup(&id);
	struct pygil_target *t;
	u64 holder;

	if (!w || !(t = gil_targets.lookup(&tgid)))
		return 0;
	holder = gil_word(t, PYGIL_OFF_LAST_HOLDER);
	if ((s32)gil_word(t, PYGIL_OFF_LOCKED) != 0) {
		w->holder = holder; /* still held: waits again */
		return 0;
	}
	return wait_end(ctx, t, id, w, holder, PYGIL_SRC_CONDVAR);
}
