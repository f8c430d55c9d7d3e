/*
 * pystack: on every cpu-clock sample of a target process, walk the current thread's
 * Python stack (python.bpf.h) and send it to userspace, which turns code objects
 * into names and lines. Targets and their CPython layouts are in py_config.
 */
/* only passed on to helpers: no kernel header needed (the built-in set has none) */
struct bpf_perf_event_data;

#include "pystack.h"
#define PYEBPF_NCOUNTERS PYSTACK_CNT_MAX
#include "pyebpf.bpf.h"
#include "python.bpf.h"

BPF_PERCPU_ARRAY(scratch, struct pystack_sample, 1);

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
	counter_add(PYSTACK_CNT_SAMPLES, 1);
	py_task_head_fill(&s->task);
	s->cpu = bpf_get_smp_processor_id();
	st = py_find_tstate(cfg, tid, &tstate);
	s->tstate = tstate;
	s->depth = 0;
	s->asyncio.gen_frame = 0;
	if (!st) {
		st = py_walk_frames(cfg, tstate, s->frames, &s->depth);
		py_walk_asyncio(cfg, tstate, &s->asyncio);
	}
	s->status = st;
	depth = s->depth;
	/*
	 * A thread state without frames (a thread starting, or the interpreter freeing its
	 * objects after the last frame returned) is not a Python stack: counted, not sent.
	 */
	if (st == PYWALK_COMPLETE && depth == 0) {
		counter_add(PYSTACK_CNT_NO_FRAMES, 1);
		return 0;
	}
	if (st == PYWALK_COMPLETE || st == PYWALK_TRUNCATED)
		counter_add(PYSTACK_CNT_PYTHON, 1);
	if (st == PYWALK_TRUNCATED)
		counter_add(PYSTACK_CNT_TRUNCATED, 1);
	else if (st == PYWALK_NO_THREAD)
		counter_add(PYSTACK_CNT_IDLE, 1);
	else if (st != PYWALK_COMPLETE)
		counter_add(PYSTACK_CNT_ERRORS, 1);
	/* only the frames filled in go out */
	size = sizeof(*s) - sizeof(s->frames) + (depth & (PYWALK_DEPTH_LIMIT - 1)) * sizeof(s->frames[0]);
	if (depth >= PYWALK_DEPTH_LIMIT)
		size = sizeof(*s);
	if (size > sizeof(*s))
		size = sizeof(*s);
	emit_event(ctx, s, size);
	return 0;
}
