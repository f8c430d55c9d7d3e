/*
 * pystack: on every cpu-clock sample of a target process, walk the current thread's
 * Python stack (python.bpf.h) and send it to userspace, which turns code objects
 * into names and lines. Targets and their CPython layouts are in py_config.
 */
/* only passed on to helpers: no kernel header needed (the built-in set has none) */
struct bpf_perf_event_data;

#include "pyebpf.bpf.h"
#include "pystack.h"
#include "python.bpf.h"

BPF_PERCPU_ARRAY(scratch, struct pystack_sample, 1);
BPF_PERCPU_ARRAY(counters, u64, PYSTACK_NCOUNTERS);

static __always_inline void count(u32 which)
{
	u64 *n = counters.lookup(&which);

	if (n)
		*n += 1;
}

int on_sample(struct bpf_perf_event_data *ctx)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 tgid = pid_tgid >> 32, tid = (u32)pid_tgid, zero = 0, depth, size;
	struct pywalk_config *cfg = py_config.lookup(&tgid);
	struct pystack_sample *s;
	u64 tstate = 0;
	int st;

	if (!cfg)
		return 0;
	s = scratch.lookup(&zero);
	if (!s)
		return 0;
	count(PYSTACK_CNT_SAMPLES);
	s->time_ns = bpf_ktime_get_ns();
	s->pid = tgid;
	s->tid = tid;
	current_ns_ids(&s->ns_pid, &s->ns_tid);
	s->cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(s->comm, sizeof(s->comm));
	st = py_find_tstate(cfg, tid, &tstate);
	s->tstate = tstate;
	s->depth = 0;
	if (!st)
		st = py_walk_frames(cfg, tstate, s->frames, &s->depth);
	s->status = st;
	depth = s->depth;
	if (st == PYWALK_COMPLETE || st == PYWALK_TRUNCATED)
		count(PYSTACK_CNT_PYTHON);
	if (st == PYWALK_TRUNCATED)
		count(PYSTACK_CNT_TRUNCATED);
	else if (st == PYWALK_NO_THREAD)
		count(PYSTACK_CNT_IDLE);
	else if (st != PYWALK_COMPLETE)
		count(PYSTACK_CNT_ERRORS);
	/* only the frames filled in go out */
	size = sizeof(*s) - sizeof(s->frames) + (depth & (PYWALK_DEPTH_LIMIT - 1)) * sizeof(s->frames[0]);
	if (depth >= PYWALK_DEPTH_LIMIT)
		size = sizeof(*s);
	if (size > sizeof(*s))
		size = sizeof(*s);
	emit_event(ctx, s, size);
	return 0;
}
