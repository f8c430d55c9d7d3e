/*
 * pygil: one event per GIL wait of a target thread, from one of three hook sets
 * (src/trackers/pygil.c; -DFUTEX_HOOK picks the first, else userspace plans one of
 * the others per interpreter binary):
 *  - the futex syscalls the GIL's waiters block in (tracepoints, the default): take_gil
 *    loops on pthread_cond_timedwait(&gil->cond) while the GIL is locked, and that
 *    sleeps in futex() on a word inside the cond. The first such futex() begins the
 *    wait; the return that finds locked == 0 ends it (the holder dropped the GIL and
 *    woke it), last_holder then being the thread that dropped it. A return that finds
 *    it still locked (the 5 ms timeout of a forced switch) may be the end too: the
 *    waiter may find the GIL free before it sleeps again. So such a wait stays open
 *    with its tentative end; sleeping again with the switch counter 2 or more past it
 *    means it took the GIL in between (its own switch, then another's), and the wait
 *    is reported as ended then. No trap into the process, nothing added to the time
 *    gil->mutex is held;
 *  - uprobe + uretprobe on take_gil and its compiler clones (builds with a symbol
 *    table): a call that finds the GIL locked is a wait; the holder is the GIL's
 *    last_holder when it began;
 *  - uprobe + uretprobe on libc's pthread_cond_timedwait, kept only when its first
 *    argument is the GIL's cond: the first call begins the wait; the return that finds
 *    locked == 0 ends it (it comes back with gil->mutex held, under which locked
 *    changes).
 * target_of() gives each target's GIL address (pygil.h: target_slots, gil_targets).
 * Options: -DMIN_NS (report waits of at least this), -DSTACKS (walk the waiter's stack
 * and the holder's from its thread state, python.bpf.h) with -DPY_MIN_NS (only for waits
 * of at least this); offsets -DOFF_* from BTF.
 */
// The build also checks the text with these options (src/bpf/bpfcheck.sh):
// bpfcheck: --no-stacks --min-wait-ms 0 --hook take_gil
// bpfcheck: --py-min-ms 1
#include "pygil.h"
#define PYEBPF_NCOUNTERS PYGIL_CNT_MAX
#include "pyebpf.bpf.h"
#ifdef STACKS
#define PY_MAX_DEPTH PYGIL_DEPTH
#define PY_WALK_FIELD_BY_FIELD /* two walks per run: see python.bpf.h */
#include "python.bpf.h"
#define RECORD_EV(r) (&(r)->ev)
typedef struct pygil_stack_event record_t;
#else
#define RECORD_EV(r) (r)
typedef struct pygil_event record_t;
#endif

/* A wait's record as it is sent: size bytes of rec. */
struct built {
	u32 size;
	u32 pad;
	record_t rec;
};
BPF_PERCPU_ARRAY(scratch, struct built, 1);

/* x86_64 struct pt_regs (uapi layout) as u64 words: rdi, the first argument */
#define REG_DI 14

BPF_HASH(gil_targets, u32, struct pygil_target, 1024);
BPF_ARRAY(target_slots, struct pygil_target, PYGIL_TARGET_SLOTS);
BPF_ARRAY(wait_slots, struct pygil_wait_state, PYGIL_WAIT_SLOTS);
/* the others, by thread (pid_tgid); LRU: userspace frees ended threads' only every second */
BPF_TABLE("lru_hash", u64, struct pygil_wait_state, waiting, 8192);

/* The target process tgid, NULL: not one. */
static __always_inline struct pygil_target *target_of(u32 tgid)
{
	u32 slot = tgid % PYGIL_TARGET_SLOTS;
	struct pygil_target *t = target_slots.lookup(&slot);

	if (!t || !tgid)
		return NULL;
	if (t->tgid == tgid)
		return t;
	return t->tgid == PYGIL_SLOT_SHARED ? gil_targets.lookup(&tgid) : NULL;
}

/* The GIL's words the hooks need, read in one go (the offsets of pygil.h). */
struct gil_words {
	u64 last_holder;
	s32 locked;
	u32 pad;
	u64 switch_number;
};
_Static_assert(__builtin_offsetof(struct gil_words, locked) == PYGIL_OFF_LOCKED - PYGIL_OFF_LAST_HOLDER &&
		       __builtin_offsetof(struct gil_words, switch_number) ==
			       PYGIL_OFF_SWITCH_NUMBER - PYGIL_OFF_LAST_HOLDER,
	       "struct gil_words follows struct _gil_runtime_state");

static __always_inline void gil_read(const struct pygil_target *t, struct gil_words *g)
{
	if (bpf_probe_read_user(g, sizeof(*g), (const void *)(t->gil + PYGIL_OFF_LAST_HOLDER)) != 0)
		__builtin_memset(g, 0, sizeof(*g)); /* locked 0: no wait begins, any open one ends */
}

/* Thread id's wait state, NULL: it has none. */
static __always_inline struct pygil_wait_state *wait_of(u64 id)
{
	u32 slot = (u32)id % PYGIL_WAIT_SLOTS;
	struct pygil_wait_state *w = wait_slots.lookup(&slot);

	if (w && w->id == id)
		return w;
	return waiting.lookup(&id);
}

/*
 * Thread id's open wait (its process's target in *t), NULL: none. The target is asked
 * first: for the other processes of the host that is one array lookup, where their wait
 * state would be a hash lookup that finds nothing (every return hook runs for them).
 */
static __always_inline struct pygil_wait_state *open_wait(u64 id, struct pygil_target **t)
{
	struct pygil_wait_state *w;

	*t = target_of(id >> 32);
	if (!*t || !(w = wait_of(id)) || !w->start_ns)
		return NULL;
	return w;
}

/*
 * Thread id (its state w, NULL: none yet) begins a wait on a GIL held by holder. A
 * thread without a state takes its slot if the slot is free. (Two threads of one slot
 * beginning their first waits at the same instant could both take it: one's totals
 * would be mixed with the other's. Their tids would differ by a multiple of
 * PYGIL_WAIT_SLOTS.)
 */
static __always_inline void wait_begin(u64 id, struct pygil_wait_state *w, u64 holder)
{
	u32 slot = (u32)id % PYGIL_WAIT_SLOTS;
	u64 now = bpf_ktime_get_ns();

	if (!w && (w = wait_slots.lookup(&slot)) && w->id)
		w = NULL; /* another thread's */
	if (w) {
		w->id = id;
		w->start_ns = now;
		w->holder = holder;
		w->tentative_ns = 0;
	} else {
		struct pygil_wait_state fresh = { .id = id, .start_ns = now, .holder = holder };
		if (waiting.update(&id, &fresh) != 0)
			counter_add(PYGIL_CNT_MAP_FULL, 1);
	}
}

/* A wait of ns ended: into the thread's totals. True when it is long enough to report. */
static __always_inline bool count_wait(struct pygil_wait_state *w, u64 ns)
{
	w->wait_ns += ns;
	w->waits += 1;
#ifdef MIN_NS
	if (ns < MIN_NS) {
		counter_add(PYGIL_CNT_SHORT, 1);
		return false;
	}
#endif
	return true;
}

/*
 * The record of a wait from start to now, held by holder, into the scratch (NULL when
 * it has no room): the waiter's stack as it is now, the holder's from its thread state.
 */
static __always_inline struct built *build(const struct pygil_target *t, u64 id, u64 start, u64 now,
					   u64 holder, u64 switch_number, u32 source)
{
	u32 zero = 0;
	struct built *b = scratch.lookup(&zero);
	struct pygil_event *ev;
#ifdef STACKS
	u32 tgid = id >> 32, depth;
	struct pywalk_config *cfg;
	record_t *s;
	u64 tstate = 0;
	int st;
#endif

	if (!b)
		return NULL;
	ev = RECORD_EV(&b->rec);
	task_head_fill(&ev->task);
	ev->start_ns = start;
	ev->end_ns = now;
	ev->holder = holder;
	ev->switch_number = switch_number;
	ev->holder_ns_tid = 0;
	if (holder && t->ts_native_tid != PYWALK_NONE) {
		u64 tid = 0;
		bpf_probe_read_user(&tid, sizeof(tid), (const void *)(holder + t->ts_native_tid));
		ev->holder_ns_tid = (u32)tid;
	}
	ev->source = source;
	b->size = sizeof(b->rec);
#ifdef STACKS
	s = &b->rec;
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
	b->size = sizeof(*s) - sizeof(s->holder) + (depth & (PYGIL_DEPTH - 1)) * sizeof(s->holder[0]);
	if (depth >= PYGIL_DEPTH || b->size > sizeof(*s))
		b->size = sizeof(*s);
#endif
	return b;
}

static __always_inline void send(void *ctx, struct built *b)
{
	u32 size = b->size;

	if (size > sizeof(b->rec))
		size = sizeof(b->rec);
	emit_event(ctx, &b->rec, size);
}

/* The wait w of thread id ended now: counted, and reported when long enough. */
static __always_inline int wait_end(void *ctx, const struct pygil_target *t, u64 id,
				    struct pygil_wait_state *w, u64 holder, u64 switch_number, u32 source)
{
	u64 now = bpf_ktime_get_ns(), start = w->start_ns;
	struct built *b;

	w->start_ns = 0;
	w->tentative_ns = 0;
	if (count_wait(w, now - start) && (b = build(t, id, start, now, holder, switch_number, source)))
		send(ctx, b);
	return 0;
}

/* take_gil(): the whole call is the wait */
int take_entry(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct pygil_target *t = target_of(tgid);
	struct gil_words g;

	if (!t)
		return 0;
	gil_read(t, &g);
	/* a free GIL is taken at once: no wait (the condvar path sees none either) */
	if (g.locked != 1)
		return 0;
	wait_begin(id, wait_of(id), g.last_holder);
	return 0;
}

int take_return(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	struct pygil_target *t;
	struct pygil_wait_state *w = open_wait(id, &t);
	struct gil_words g;

	if (!w)
		return 0;
	gil_read(t, &g);
	return wait_end(ctx, t, id, w, w->holder, g.switch_number, PYGIL_SRC_TAKE_GIL);
}

/* pthread_cond_timedwait(cond, mutex, abstime) on the GIL's cond: the first call begins the wait */
int cond_entry(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct pygil_target *t = target_of(tgid);
	struct pygil_wait_state *w;

	if (!t || ((const u64 *)ctx)[REG_DI] != t->gil + PYGIL_OFF_COND)
		return 0;
	w = wait_of(id);
	if (!w || !w->start_ns)
		wait_begin(id, w, 0);
	return 0;
}

/* Back with gil->mutex held: locked cannot change until take_gil checks it */
int cond_return(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	struct pygil_target *t;
	struct pygil_wait_state *w = open_wait(id, &t);
	struct gil_words g;

	if (!w)
		return 0;
	gil_read(t, &g);
	if (g.locked != 0)
		return 0; /* still held: waits again */
	return wait_end(ctx, t, id, w, g.last_holder, g.switch_number, PYGIL_SRC_CONDVAR);
}

#ifdef FUTEX_HOOK
#define FUTEX_WAIT 0
#define FUTEX_WAIT_BITSET 9
#define FUTEX_CMD_MASK 0x7f /* without FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256) */

/* The record of a wait with a tentative end, built then (stacks as they were then). */
BPF_TABLE("lru_hash", u64, struct built, pending, 1024);

/* A target thread sleeps on a futex word inside the GIL's cond. */
TRACEPOINT_PROBE(syscalls, sys_enter_futex)
{
	u64 id = bpf_get_current_pid_tgid(), addr = (u64)args->uaddr, cond;
	u32 tgid = id >> 32;
	int cmd = args->op & FUTEX_CMD_MASK;
	struct pygil_target *t = target_of(tgid);
	struct pygil_wait_state *w;
	struct gil_words g;
	struct built *b;

	if (!t)
		return 0;
	cond = t->gil + PYGIL_OFF_COND;
	if (addr < cond || addr >= cond + PYGIL_COND_SIZE || (cmd != FUTEX_WAIT && cmd != FUTEX_WAIT_BITSET))
		return 0;
	w = wait_of(id);
	if (w && w->start_ns && !w->tentative_ns)
		return 0; /* sleeps again in the same wait */
	if (w && w->start_ns) {
		u64 start = w->start_ns, end = w->tentative_ns;
		/* a pending record exists only for a wait long enough to report (sys_exit_futex) */
		bool pend = true;
#ifdef MIN_NS
		pend = end - start >= MIN_NS;
#endif

		gil_read(t, &g);
		if (g.switch_number - w->switch_seen < 2) {
			w->tentative_ns = 0; /* still the same wait */
			if (pend)
				pending.delete(&id);
			return 0;
		}
		/* it took the GIL since that return (and lost it again): the wait ended there */
		if (count_wait(w, end - start) && (b = pending.lookup(&id)))
			send(args, b);
		if (pend)
			pending.delete(&id);
	}
	/* the GIL is not read here: its holder is read at each return (sys_exit_futex) */
	wait_begin(id, w, 0);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_futex)
{
	u64 id = bpf_get_current_pid_tgid(), now, start;
	struct pygil_target *t;
	struct pygil_wait_state *w = open_wait(id, &t);
	struct gil_words g;
	struct built *b;

	/* a thread in a GIL sleep has an open wait without a tentative end */
	if (!w || w->tentative_ns)
		return 0;
	gil_read(t, &g);
	if (g.locked == 0)
		return wait_end(args, t, id, w, g.last_holder, g.switch_number, PYGIL_SRC_FUTEX);
	/* still locked (a timeout): the end, unless it sleeps again before taking it */
	now = bpf_ktime_get_ns();
	start = w->start_ns;
	w->tentative_ns = now;
	w->switch_seen = g.switch_number;
#ifdef MIN_NS
	if (now - start < MIN_NS)
		return 0;
#endif
	if ((b = build(t, id, start, now, g.last_holder, g.switch_number, PYGIL_SRC_FUTEX)))
		pending.update(&id, b);
	return 0;
}
#endif
