/*
 * The BPF Python stack walker: finds the current thread's PyThreadState and walks its
 * frame chain, recording (code object, instruction) per frame. Works for CPython
 * 3.8-3.15 from a per-process struct pywalk_config that userspace (src/python/pyproc.c)
 * writes into py_config, keyed by host tgid. Line numbers and names are resolved
 * in userspace.
 *
 * Finding the tstate: on x86_64 glibc tstate->thread_id == pthread_self() == the
 * thread pointer == the task's fsbase, so the walker matches task->thread.fsbase
 * against the interpreter's thread list. That also finds threads that released the
 * GIL and threads started after the tool, on every version; a per-tid cache makes it
 * one read on later samples (pyebpf(7), CPYTHON INTERNALS).
 *
 * Needs -DOFF_TASK_THREAD_FSBASE (BTF: task_struct.thread.fsbase). Options:
 * -DPY_MAX_DEPTH (frames kept, default 128), -DPY_MAX_THREADS (threads searched).
 */
#ifndef PYEBPF_PYTHON_BPF_H
#define PYEBPF_PYTHON_BPF_H

#include "pywalk.h"

#ifndef PY_MAX_DEPTH
#define PY_MAX_DEPTH 128
#endif
#ifndef PY_MAX_THREADS
#define PY_MAX_THREADS 512
#endif
#define PY_MAX_INTERPS 4
/* shim frames take no slot, so allow a few more steps than frames kept */
#define PY_MAX_STEPS (PY_MAX_DEPTH + 16)

BPF_HASH(py_config, u32, struct pywalk_config, 1024);
BPF_HASH(py_tstate_cache, u32, u64, 65536);

/*
 * The walk reads each frame's fields (code, back, instr, owner) with one user read
 * over their span from the frame's start, and the code object's (ob_type,
 * co_firstlineno) with one read from ob_type on: every bpf_probe_read_user costs a
 * helper call (~0.1 us with this kernel's mitigations), the bytes in between almost
 * nothing. The spans are below PY_SPAN_MAX on every supported version (the frame's
 * owner ends at 72 bytes at most, co_firstlineno at 72), and lie inside the object
 * read, so a span read fails where reading its fields one by one would fail too.
 * There is no field-by-field fallback: the verifier checks both ways in each of the
 * walk's PY_MAX_STEPS iterations, which doubled the program's load time (about
 * 0.55 s more at start-up, for a path no valid frame takes).
 */
#define PY_SPAN_MAX 128
/*
 * Entries of 3.11-3.13's _current_tasks dict read (24 bytes each): a dict of 32 slots
 * holds 21, room for the current tasks of a dozen event loop threads; a task not met
 * there leaves its records unnamed (never named by guess).
 */
#define PY_DICT_ENTRIES 21
#define PY_DICT_READ 512
struct py_span_buf {
	u8 frame[PY_SPAN_MAX + 8];
	u8 code[PY_SPAN_MAX + 8];
	u8 dict[PY_DICT_READ];
	u64 gen_frame; /* the last walk's outermost generator-owned frame (py_walk_asyncio) */
	u32 step;      /* PY_LOOP's counter */
	u32 gen_index; /* its index in the walk's frames */
};
BPF_PERCPU_ARRAY(py_span, struct py_span_buf, 1);

static __always_inline struct py_span_buf *py_span_get(void)
{
	u32 zero = 0;

	return py_span.lookup(&zero);
}

/*
 * The walker's loops, PY_LOOP(var, max, sb) { ... }: for var from 0 while var < max,
 * sb the per-CPU scratch. The verifier walks a loop with a constant bound once per
 * iteration, as its counter differs each time: some 1,800 instructions for each of
 * the 144 frame steps and 55 for each of the 2,048 thread steps, most of a program's
 * load time. With -DPY_MAY_GOTO (kernels since 6.9 have the instruction; userspace
 * asks the kernel, src/bpf/kfeatures.c) the counter lives in map memory, whose
 * values the verifier does not track, and a may_goto instruction heads each
 * iteration. There the verifier stops as soon as an iteration starts in a state
 * within an earlier one's (it is then a loop like an iterator's), after a few
 * iterations. At run time may_goto leaves a loop only after millions of iterations
 * of one program run, so the loop runs exactly as the bounded one.
 */
#ifdef PY_MAY_GOTO
static __always_inline u32 py_loop_start(struct py_span_buf *sb)
{
	sb->step = 0;
	return 0;
}

/* The counter's next value, or max to end the loop. */
static __always_inline u32 py_loop_next(struct py_span_buf *sb, u32 max)
{
	volatile u32 *step = &sb->step;
	u32 i = *step;

	/* may_goto out; clang 14 has no mnemonic for it, so the 8 bytes are spelled out */
	asm volatile goto("1: .byte 0xe5; .byte 0; .long ((%l[out] - 1b - 8) / 8) & 0xffff; .short 0"
			  :::: out);
	*step = i + 1;
	return i;
out:
	return max;
}

#define PY_LOOP(var, max, sb) for (u32 var = py_loop_start(sb); (var = py_loop_next(sb, max)) < (max);)
#else
#define PY_LOOP(var, max, sb) for (int var = 0; var < (max); var++)
#endif

static __always_inline int py_read(void *dst, u32 size, u64 addr)
{
	return bpf_probe_read_user(dst, size, (const void *)addr);
}

static __always_inline u64 py_current_fsbase(void)
{
	u64 fs = 0;

	bpf_probe_read_kernel(&fs, sizeof(fs), (const void *)(bpf_get_current_task() + OFF_TASK_THREAD_FSBASE));
	return fs;
}

/* The tstate of the current thread (host tid) into *out: 0, or an enum pywalk_status. */
static __always_inline int py_find_tstate(const struct pywalk_config *cfg, u32 tid, u64 *out)
{
	u64 fsbase = py_current_fsbase(), interp = 0, id, ts;
	u64 *cached = py_tstate_cache.lookup(&tid);

	if (!fsbase)
		return PYWALK_NO_THREAD;
	if (cached) {
		ts = *cached;
		id = 0;
		if (!py_read(&id, sizeof(id), ts + cfg->ts_thread_id) && id == fsbase) {
			*out = ts;
			return 0;
		}
	}
	struct py_span_buf *sb = py_span_get();

	if (!sb)
		return PYWALK_ERR_THREADS;
	if (py_read(&interp, sizeof(interp), cfg->runtime + cfg->rt_interp_head))
		return PYWALK_ERR_THREADS;
	for (int i = 0; i < PY_MAX_INTERPS; i++) {
		if (!interp)
			break;
		ts = 0;
		if (py_read(&ts, sizeof(ts), interp + cfg->interp_threads_head))
			return PYWALK_ERR_THREADS;
		u64 mark = 0;
		PY_LOOP(j, PY_MAX_THREADS, sb) {
			if (!ts)
				break;
			/* a list that runs in a cycle (a hostile target's): see py_walk_frames */
			if (ts == mark)
				return PYWALK_ERR_THREADS;
			if (!(j & (j + 1)))
				mark = ts;
			id = 0;
			if (py_read(&id, sizeof(id), ts + cfg->ts_thread_id))
				return PYWALK_ERR_THREADS;
			if (id == fsbase) {
				py_tstate_cache.update(&tid, &ts);
				*out = ts;
				return 0;
			}
			if (py_read(&ts, sizeof(ts), ts + cfg->ts_next))
				return PYWALK_ERR_THREADS;
		}
		if (py_read(&interp, sizeof(interp), interp + cfg->interp_next))
			return PYWALK_ERR_THREADS;
	}
	return PYWALK_NO_THREAD;
}

/*
 * task_head_fill() (pyebpf.bpf.h) for programs that run on every sample of a thread:
 * the namespace ids, seven kernel reads, come from a per-thread cache that one read
 * of task->thread_pid validates (a struct pid is the thread's for its whole life; a
 * reused tid has another one).
 */
struct py_ns_ids {
	u64 thread_pid;
	u32 tgid;
	u32 nspid;
	u32 nstid;
	u32 pad;
};
BPF_TABLE("lru_hash", u32, struct py_ns_ids, py_ns_cache, 16384);

static __always_inline void py_task_head_fill(struct task_head *h)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	const void *task = (const void *)bpf_get_current_task();
	u64 thread_pid = read_u64(task + OFF_TASK_THREAD_PID);
	u32 tid = (u32)pid_tgid;
	struct py_ns_ids *c = py_ns_cache.lookup(&tid);

	h->ts_ns = bpf_ktime_get_ns();
	h->pid = pid_tgid >> 32;
	h->tid = tid;
	if (c && c->thread_pid == thread_pid && c->tgid == h->pid) {
		h->nspid = c->nspid;
		h->nstid = c->nstid;
	} else {
		struct py_ns_ids n = { .thread_pid = thread_pid, .tgid = h->pid };

		current_ns_ids(&h->nspid, &h->nstid);
		n.nspid = h->nspid;
		n.nstid = h->nstid;
		py_ns_cache.update(&tid, &n);
	}
	bpf_get_current_comm(&h->comm, sizeof(h->comm));
}


/* The 8 (or fewer: u32, u8) bytes at off of a span buffer; off is masked into range. */
#define PY_SPAN_U64(buf, off) (*(u64 *)&(buf)[(off) & (PY_SPAN_MAX - 1)])
#define PY_SPAN_U32(buf, off) (*(u32 *)&(buf)[(off) & (PY_SPAN_MAX - 1)])
#define PY_SPAN_U8(buf, off) ((buf)[(off) & (PY_SPAN_MAX - 1)])

/*
 * A span size the verifier sees bounded: clang knows the spans are below PY_SPAN_MAX and
 * drops a plain mask, handing the helper a register whose bounds were lost when it was
 * spilled; the empty asm hides the value from clang, so the mask stays.
 */
static __always_inline u32 py_span_size(u32 span)
{
	asm volatile("" : "=r"(span) : "0"(span));
	return span & (PY_SPAN_MAX - 1);
}

static __always_inline u32 py_max32(u32 a, u32 b)
{
	return a > b ? a : b;
}

/*
 * A program may define PY_WALK_FIELD_BY_FIELD to read the fields one by one instead
 * (pygil, which walks two stacks in one run, does).
 */
/* Bytes from a frame's start that hold code, back, instr and owner (0: no span read). */
static __always_inline u32 py_frame_span(const struct pywalk_config *cfg)
{
#ifdef PY_WALK_FIELD_BY_FIELD
	return 0;
#endif
	u32 end = py_max32(cfg->frame_code + 8, cfg->frame_back + 8);

	/* instr is an int (f_lasti) before 3.11, a pointer after */
	end = py_max32(end, cfg->frame_instr + (cfg->kind == PYWALK_FRAMEOBJECT ? 4 : 8));
	if (cfg->frame_owner != PYWALK_NONE)
		end = py_max32(end, cfg->frame_owner + 1);
	return end < PY_SPAN_MAX ? end : 0;
}

/* Bytes from a code object's ob_type (offset 8) to the end of co_firstlineno. */
static __always_inline u32 py_code_span(const struct pywalk_config *cfg)
{
#ifdef PY_WALK_FIELD_BY_FIELD
	return 0;
#endif
	u32 end = cfg->co_firstlineno + 4;

	return end > 8 && end - 8 < PY_SPAN_MAX ? end - 8 : 0;
}

#ifndef PY_WALK_FIELD_BY_FIELD
/* One frame's fields, from a span read: 0, or an enum pywalk_status. */
static __always_inline int py_frame_fields(const struct pywalk_config *cfg, u8 *buf, u32 span,
					   u64 f, u64 *code, u64 *prev, u64 *instr, u8 *owner)
{
	if (py_read(buf, py_span_size(span), f))
		return PYWALK_ERR_FRAME;
	*code = PY_SPAN_U64(buf, cfg->frame_code);
	*prev = PY_SPAN_U64(buf, cfg->frame_back);
	*instr = cfg->kind == PYWALK_FRAMEOBJECT ? PY_SPAN_U32(buf, cfg->frame_instr)
						 : PY_SPAN_U64(buf, cfg->frame_instr);
	*owner = cfg->frame_owner != PYWALK_NONE ? PY_SPAN_U8(buf, cfg->frame_owner) : 0;
	return 0;
}

/* A code object's ob_type and co_firstlineno, from a span read: 0, or PYWALK_ERR_CODE. */
static __always_inline int py_code_fields(const struct pywalk_config *cfg, u8 *buf, u32 span,
					  u64 code, u64 *type, u32 *first)
{
	if (py_read(buf, py_span_size(span), code + 8))
		return PYWALK_ERR_CODE;
	*type = PY_SPAN_U64(buf, 0);
	*first = PY_SPAN_U32(buf, cfg->co_firstlineno - 8);
	return 0;
}
#else
/* One frame's fields, read one by one: 0, or an enum pywalk_status. */
static __always_inline int py_frame_fields(const struct pywalk_config *cfg, u8 *buf, u32 span,
					   u64 f, u64 *code, u64 *prev, u64 *instr, u8 *owner)
{
	*code = 0;
	*prev = 0;
	if (py_read(code, sizeof(*code), f + cfg->frame_code) ||
	    py_read(prev, sizeof(*prev), f + cfg->frame_back))
		return PYWALK_ERR_FRAME;
	*owner = 0;
	if (cfg->frame_owner != PYWALK_NONE && py_read(owner, sizeof(*owner), f + cfg->frame_owner))
		return PYWALK_ERR_FRAME;
	/* an unreadable instruction is not an error: the frame's line is then its first */
	*instr = 0;
	py_read(instr, cfg->kind == PYWALK_FRAMEOBJECT ? 4 : 8, f + cfg->frame_instr);
	return 0;
}

/* A code object's ob_type and co_firstlineno, read one by one: 0, or PYWALK_ERR_CODE. */
static __always_inline int py_code_fields(const struct pywalk_config *cfg, u8 *buf, u32 span,
					  u64 code, u64 *type, u32 *first)
{
	*type = 0;
	*first = 0;
	if (cfg->pycode_type && py_read(type, sizeof(*type), code + 8))
		return PYWALK_ERR_CODE;
	if (cfg->pycode_type && *type != cfg->pycode_type)
		return 0; /* not code: the caller skips the frame */
	if (py_read(first, sizeof(*first), code + cfg->co_firstlineno))
		return PYWALK_ERR_CODE;
	return 0;
}
#endif

/* _PyInterpreterFrame.owner of a generator's or coroutine's own frame (3.11-3.15). */
#define PY_FRAME_OWNED_BY_GENERATOR 1

/*
 * Walks tstate's frames, innermost first, into frames[0..*depth). Returns
 * PYWALK_COMPLETE, PYWALK_TRUNCATED or an error (frames read so far are kept).
 * depth must point into map memory (the per-CPU scratch): the verifier does not
 * track values there, so the paths through a frame (shim or not) end in equal
 * states and the loop is verified in linear, not exponential, time.
 */
static __always_inline int py_walk_frames(const struct pywalk_config *cfg, u64 tstate,
					  struct pywalk_frame *frames, u32 *depth)
{
	volatile u32 *vdepth = depth;
	u64 f = 0, code, prev, type, ip, mark = 0;
	u32 n, lasti, first, zero = 0, fspan, cspan;
	struct py_span_buf *buf = py_span.lookup(&zero);
	u8 owner;
	int err;

	*vdepth = 0;
	if (!buf)
		return PYWALK_ERR_FRAME;
	buf->gen_frame = 0;
	fspan = py_frame_span(cfg);
	cspan = py_code_span(cfg);
#ifndef PY_WALK_FIELD_BY_FIELD
	if (!fspan || !cspan)
		return PYWALK_ERR_CONFIG; /* a layout no supported version has */
#endif
	if (cfg->ts_cframe != PYWALK_NONE) {
		u64 cframe = 0;
		if (py_read(&cframe, sizeof(cframe), tstate + cfg->ts_cframe))
			return PYWALK_ERR_FRAME;
		if (cframe && py_read(&f, sizeof(f), cframe + cfg->cframe_current))
			return PYWALK_ERR_FRAME;
	} else if (py_read(&f, sizeof(f), tstate + cfg->ts_frame)) {
		return PYWALK_ERR_FRAME;
	}
	PY_LOOP(i, PY_MAX_STEPS, buf) {
		if (!f)
			break;
		/*
		 * A chain that runs in a cycle (a hostile or corrupt target: tests/targets/
		 * hostile.py) is an error, not a deep stack: the frame of step 2^k - 1 is kept
		 * (Brent), so a cycle is met again within twice its length plus its start.
		 */
		if (f == mark)
			return PYWALK_ERR_FRAME;
		if (!(i & (i + 1)))
			mark = f;
		n = *vdepth;
		if (n >= PY_MAX_DEPTH)
			break;
		err = py_frame_fields(cfg, buf->frame, fspan, f, &code, &prev, &ip, &owner);
		if (err)
			return err;
		code &= ~(u64)cfg->code_tag_mask;
		if (cfg->frame_owner != PYWALK_NONE && owner == PY_FRAME_OWNED_BY_GENERATOR) {
			buf->gen_frame = f;
			buf->gen_index = n; /* where its frame goes (a coroutine's code is code) */
		}
		if (cfg->frame_owner != PYWALK_NONE && owner >= cfg->owner_shim_min)
			goto next; /* interpreter entry (shim) frame */
		if (!code)
			goto next;
		err = py_code_fields(cfg, buf->code, cspan, code, &type, &first);
		if (err)
			return err;
		if (cfg->pycode_type && type != cfg->pycode_type)
			goto next; /* 3.13+: f_executable of a shim is None */
		if (cfg->kind == PYWALK_FRAMEOBJECT)
			lasti = (u32)ip;
		else
			lasti = ip ? (u32)((ip - code - cfg->co_code_adaptive) / 2) : 0;
		if (n < PY_MAX_DEPTH) {
			frames[n].code = code;
			frames[n].instr = lasti;
			frames[n].firstlineno = first;
			*vdepth = n + 1;
		}
next:
		f = prev;
	}
	return f ? PYWALK_TRUNCATED : PYWALK_COMPLETE;
}

/*
 * 3.11-3.13: the task of coro among the values of the _current_tasks dict (the current
 * task of each running loop; its keys are loops, so its entries are the general kind:
 * hash, key, value), or 0. The layout of PyDictObject and PyDictKeysObject is the same
 * in the three versions (pyebpf(7), CPYTHON INTERNALS).
 */
static __always_inline u64 py_current_task_of(const struct pywalk_config *cfg, struct py_span_buf *buf,
					       u64 coro)
{
	u64 keys = 0, task, c;
	s64 n;
	u32 size;
	u8 log2_index_bytes;

	if (py_read(&keys, sizeof(keys), cfg->current_tasks + 32) || !keys)
		return 0;
	if (py_read(buf->dict, 32, keys))
		return 0;
	log2_index_bytes = buf->dict[9];
	n = *(s64 *)&buf->dict[24]; /* dk_nentries */
	if (buf->dict[10] != 0 || log2_index_bytes > 30 || n <= 0)
		return 0;
	if (n > PY_DICT_ENTRIES)
		n = PY_DICT_ENTRIES;
	size = (u32)n * 24; /* below PY_DICT_READ: the mask only shows the verifier so */
	asm volatile("" : "=r"(size) : "0"(size));
	if (py_read(buf->dict, size & (PY_DICT_READ - 1), keys + 32 + (1ULL << log2_index_bytes)))
		return 0;
	for (int i = 0; i < PY_DICT_ENTRIES; i++) {
		if (i >= n)
			break;
		task = *(u64 *)&buf->dict[(i * 24 + 16) & (PY_DICT_READ - 1)];
		c = 0;
		if (task && !py_read(&c, sizeof(c), task + cfg->task_coro) && c == coro)
			return task;
	}
	return 0;
}

/*
 * The asyncio task of the last py_walk_frames of this CPU (tstate's walk), read now:
 * the task whose coroutine owns the walk's outermost coroutine frame (the task's
 * coroutine object holds that frame at gi_iframe), found as the current task of the
 * thread's loop (3.14+: tstate's running task; 3.11-3.13: the _current_tasks dict),
 * with its name object's first bytes. Userspace names the task from these, so that
 * a task which ends before the record is read is named too.
 */
static __always_inline void py_walk_asyncio(const struct pywalk_config *cfg, u64 tstate,
					    struct pywalk_asyncio *out)
{
	u32 zero = 0;
	struct py_span_buf *buf = py_span.lookup(&zero);
	u64 coro, task = 0, c = 0;
	u32 first;

	out->task = out->name = 0;
	out->name_len = out->looked = 0;
	out->gen_frame = buf ? buf->gen_frame : 0;
	out->gen_index = buf ? buf->gen_index : 0;
	if (!buf || !out->gen_frame || cfg->task_coro == PYWALK_NONE)
		return;
	coro = out->gen_frame - cfg->gen_iframe;
	out->looked = 1;
	if (cfg->ts_running_task != PYWALK_NONE)
		py_read(&task, sizeof(task), tstate + cfg->ts_running_task);
	else if (cfg->current_tasks)
		task = py_current_task_of(cfg, buf, coro);
	if (!task || py_read(&c, sizeof(c), task + cfg->task_coro) || c != coro)
		return;
	out->task = task;
	if (py_read(&out->name, sizeof(out->name), task + cfg->task_name) || !out->name)
		return;
	/*
	 * Up to the end of its page first: a read fails as a whole when any page it touches
	 * is not in memory, and the page after a new object often is not (an arena's pages
	 * come in as they are first written). The rest only when the object goes on there.
	 */
	first = 4096 - (u32)(out->name & 4095);
	if (first > PYWALK_NAME_RAW)
		first = PYWALK_NAME_RAW;
	asm volatile("" : "=r"(first) : "0"(first));
	if (first > PYWALK_NAME_RAW || py_read(out->name_raw, first, out->name))
		return;
	out->name_len = first;
	if (first < PYWALK_NAME_RAW &&
	    !py_read(out->name_raw + first, PYWALK_NAME_RAW - first, out->name + first))
		out->name_len = PYWALK_NAME_RAW;
}

#endif
