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
	if (py_read(&interp, sizeof(interp), cfg->runtime + cfg->rt_interp_head))
		return PYWALK_ERR_THREADS;
	for (int i = 0; i < PY_MAX_INTERPS; i++) {
		if (!interp)
			break;
		ts = 0;
		if (py_read(&ts, sizeof(ts), interp + cfg->interp_threads_head))
			return PYWALK_ERR_THREADS;
		for (int j = 0; j < PY_MAX_THREADS; j++) {
			if (!ts)
				break;
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
	u64 f = 0, code, prev, type, ip;
	u32 n, lasti, first;
	u8 owner;

	*vdepth = 0;
	if (cfg->ts_cframe != PYWALK_NONE) {
		u64 cframe = 0;
		if (py_read(&cframe, sizeof(cframe), tstate + cfg->ts_cframe))
			return PYWALK_ERR_FRAME;
		if (cframe && py_read(&f, sizeof(f), cframe + cfg->cframe_current))
			return PYWALK_ERR_FRAME;
	} else if (py_read(&f, sizeof(f), tstate + cfg->ts_frame)) {
		return PYWALK_ERR_FRAME;
	}
	for (int i = 0; i < PY_MAX_STEPS; i++) {
		if (!f)
			break;
		n = *vdepth;
		if (n >= PY_MAX_DEPTH)
			break;
		code = 0;
		prev = 0;
		if (py_read(&code, sizeof(code), f + cfg->frame_code) ||
		    py_read(&prev, sizeof(prev), f + cfg->frame_back))
			return PYWALK_ERR_FRAME;
		code &= ~(u64)cfg->code_tag_mask;
		if (cfg->frame_owner != PYWALK_NONE) {
			owner = 0;
			if (py_read(&owner, sizeof(owner), f + cfg->frame_owner))
				return PYWALK_ERR_FRAME;
			if (owner >= cfg->owner_shim_min)
				goto next; /* interpreter entry (shim) frame */
		}
		if (!code)
			goto next;
		if (cfg->pycode_type) {
			type = 0;
			if (py_read(&type, sizeof(type), code + 8))
				return PYWALK_ERR_CODE;
			if (type != cfg->pycode_type)
				goto next; /* 3.13+: f_executable of a shim is None */
		}
		first = 0;
		if (py_read(&first, sizeof(first), code + cfg->co_firstlineno))
			return PYWALK_ERR_CODE;
		if (cfg->kind == PYWALK_FRAMEOBJECT) {
			lasti = 0;
			py_read(&lasti, sizeof(lasti), f + cfg->frame_instr);
		} else {
			ip = 0;
			py_read(&ip, sizeof(ip), f + cfg->frame_instr);
			lasti = ip ? (u32)((ip - code - cfg->co_code_adaptive) / 2) : 0;
		}
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

#endif
