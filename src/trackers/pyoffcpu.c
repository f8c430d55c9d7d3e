/*
 * The pyoffcpu tracker: why threads of the target processes are not running. From
 * sched:sched_switch, sched:sched_wakeup and sched:sched_wakeup_new only (no kprobe):
 * per off-CPU period of at least --min-ms, one record with its time off the CPU, its
 * run-queue wait, its state and the kernel, user and Python stacks taken when the
 * thread left the CPU (bpf_text/pyoffcpu.bpf.c); or (-f) the same periods summed in
 * the kernel per (thread, kernel, user, Python stack) and printed as folded stacks.
 * -o FILE takes those sums too (with the records or with -f) and draws them, weighted
 * by the time off the CPU. At the end a row per thread with every period counted
 * (whatever --min-ms). With --from, the off_cpu events a database sink stored
 * (profread.h) are folded and drawn the same way instead, without BPF.
 */
#include <bcc/libbpf.h>
#include <errno.h>
#include <math.h>
#include <linux/types.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonfmt.h"
#include "log.h"
#include "procinfo.h"
#include "profile.h"
#include "profread.h"
#include "pyebpf_bpf.h"
#include "pyframes.h"
#include "pyoffcpu.h"
#include "pytargets.h"
#include "pytasks.h"
#include "record.h"
#include "summary.h"
#include "symbols.h"
#include "tpformat.h"
#include "tracefs.h"
#include "monitor.h"
#include "tracker.h"

extern const char pyoffcpu_bpf_text[];

enum { MAX_TARGETS = 256, RING_PAGES = 256, FRAME_NAME_MAX = 512 };
#define BURST_NS 250000000ull
#define READ_GAP_NS 20000000ull

enum {
	OPT_FOLDED = 'f',
	OPT_INTERVAL = 'i',
	OPT_CHILDREN = OPT_TOOL_BASE,
	OPT_MIN_MS,
	OPT_PY_MIN_MS,
	OPT_MAX_STACK_DEPTH,
	OPT_STATE,
	OPT_NO_PY,
	OPT_FORMAT,
	OPT_PER_TASK,
	OPT_FROM,
	OPT_HOST,
	OPT_SINCE,
	OPT_UNTIL,
	OPT_OUTPUT = 'o',
};

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_CHILDREN, 0, "children", NULL, "also trace the child processes of the -p pids (and new ones)" },
	{ OPT_MIN_MS, 0, "min-ms", "MS", "only periods off the CPU for at least MS (default 20; 0: all)" },
	{ OPT_PY_MIN_MS, 0, "py-min-ms", "MS", "Python stacks only in periods of at least MS (default 0)" },
	{ OPT_MAX_STACK_DEPTH, 0, "max-stack-depth", "N", "frames kept per stack, innermost first (default 20, max 127)" },
	{ OPT_STATE, 0, "state", "S|D|any", "only periods that began in this state (default any)" },
	{ OPT_NO_PY, 0, "no-py", NULL, "do not walk Python stacks (kernel and user stacks only)" },
	{ OPT_FOLDED, 'f', "folded", NULL, "print folded stacks with total microseconds (FlameGraph input)" },
	{ OPT_PER_TASK, 0, "per-task", NULL, "with -f or -o: the asyncio task's name as the root frame (task:NAME), not the thread's" },
	{ OPT_INTERVAL, 'i', "interval", "SECONDS", "print the per-thread table so far (with -f: the folded stacks since the last) every SECONDS" },
	PROFILE_OPT_ENTRIES(OPT_OUTPUT, OPT_FORMAT),
	PROFREAD_OPT_ENTRIES(OPT_FROM, OPT_HOST, OPT_SINCE, OPT_UNTIL),
	OPT_ENTRIES_TRACKER_TAIL,
};

static const struct field event_fields[] = {
	FIELD_METRIC,
	{ .name = "time", .type = FIELD_TIME, .meaning = "when the thread left the CPU" },
	FIELD_PID(1),
	FIELD_TID(2),
	FIELD_CONTAINER_PID,
	FIELD_CONTAINER_TID,
	FIELD_COMM(0),
	FIELD_THREAD_NAME(3),
	FIELD_TASK,
	FIELD_TASK_CORO,
	{ .name = "duration_ms", .type = FIELD_REAL, .unit = "ms", COLUMN(4, "DUR_MS", 9), .fmt = "%9.3f",
	  .meaning = "off the CPU: from leaving it until running again" },
	{ .name = "off_cpu_ms", .type = FIELD_REAL, .unit = "ms",
	  .meaning = "from leaving the CPU until woken (all of it when no wakeup was seen)" },
	{ .name = "runq_ms", .type = FIELD_REAL, .unit = "ms", COLUMN(5, "RUNQ_MS", 8), .fmt = "%8.3f",
	  .meaning = "from the wakeup (or the preemption) until running; null when no wakeup was seen" },
	{ .name = "prev_state", .type = FIELD_STR, COLUMN_LEFT(6, "ST", 3),
	  .meaning = "the state it left the CPU in: S, D, R (preempted), ..." },
	{ .name = "cpu", .type = FIELD_INT, .meaning = "the CPU it left" },
	{ .name = "waker_tid", .type = FIELD_INT,
	  .meaning = "the thread running when it was woken (in an interrupt: the one interrupted); null for the idle task or no wakeup" },
	{ .name = "waker_comm", .type = FIELD_STR, .meaning = "that thread's comm; null when unknown" },
	{ .name = "kernel_stack", .type = FIELD_ARRAY, .meaning = "kernel frames, innermost first, \"func [kernel]\"" },
	{ .name = "user_stack", .type = FIELD_ARRAY,
	  .meaning = "native user frames, innermost first, \"func [module]\"" },
	{ .name = "py_stack", .type = FIELD_STR, COLUMN(7, "PY_STACK", 0),
	  .meaning = "Python frames, root first, ';' between them, each \"func (file:line)\"" },
	{ .name = "py_stack_depth", .type = FIELD_INT, .meaning = "frames in py_stack" },
	{ .name = "py_status", .type = FIELD_STR,
	  .meaning = "complete, truncated, not_python, off (--no-py), short (--py-min-ms), no_python_thread, or error: why" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field thread_fields[] = {
	FIELD_METRIC,
	FIELD_PID(1),
	FIELD_TID(2),
	FIELD_THREAD_NAME(3),
	{ .name = "off_cpu_ms", .type = FIELD_REAL, .unit = "ms", COLUMN(4, "OFF_MS", 11), .fmt = "%11.3f",
	  .meaning = "total time off the CPU, every period" },
	{ .name = "runq_ms", .type = FIELD_REAL, .unit = "ms", COLUMN(5, "RUNQ_MS", 10), .fmt = "%10.3f",
	  .meaning = "of that, time runnable waiting for a CPU (schedstat's run_delay)" },
	{ .name = "periods", .type = FIELD_INT, COLUMN(6, "PERIODS", 8),
	  .meaning = "times it came back on a CPU (schedstat's third field)" },
	{ .name = "count", .type = FIELD_INT, COLUMN(7, "COUNT", 7),
	  .meaning = "of these, periods of at least --min-ms in the --state" },
	{ .name = "lost", .type = FIELD_INT, COLUMN(8, "LOST", 6),
	  .meaning = "records of it lost because the output buffer was full" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field summary_fields[] = {
	FIELD_METRIC,
	PYOFFCPU_COUNTERS(PYEBPF_COUNTER_FIELD)
	{ .name = "unresolved_frames", .type = FIELD_INT,
	  .meaning = "Python frames whose code object could not be read in user space" },
	FIELD_STACKS_OTHER,
	FIELD_LOST,
	FIELD_MISSED,
	{ .name = "dropped", .type = FIELD_INT,
	  .meaning = "records read but not decoded: they came faster than they could be (a storm)" },
	FIELD_PROCESSES,
	FIELD_TARGETS,
	{ .name = "threads", .type = FIELD_INT, .meaning = "target threads seen coming back on a CPU" },
	FIELD_TOOL_CPU_MS,
	FIELD_ENV,
	FIELD_END,
};

static const struct counter_name counters[] = { PYOFFCPU_COUNTERS(PYEBPF_COUNTER_NAME) { 0, NULL, NULL } };

static const struct schema event_schema = { "off_cpu", SCHEMA_EVENT, event_fields };
static const struct schema thread_schema = { "off_cpu_thread", SCHEMA_ROW, thread_fields };
static const struct schema summary_schema = { "pyoffcpu_summary", SCHEMA_SUMMARY, summary_fields };
static const struct schema *const schemas[] = { &event_schema, &thread_schema, &summary_schema, NULL };
/* --from: every stored off_cpu event, its Python stack by id (profrows.h), its native stacks as JSON */
enum { STORED_THREAD, STORED_TASK, STORED_KERNEL, STORED_USER };
static const struct profread_layout stored_layout = {
	.metric = "off_cpu", .stack = "py_stack_id", .weight = "duration_ms",
	.cols = { "thread_name", "task", "kernel_stack", "user_stack", NULL }, .what = "events",
};

struct pyoffcpu {
	struct tracker base;
	unsigned long min_ms, py_min_ms, max_depth;
	double interval_s;
	unsigned state_mask; /* prev_state bits wanted, 0: any */
	bool folded, no_py;
	bool per_task;            /* folded in userspace from the records, under their tasks */
	struct stackagg task_agg; /* --per-task -f: since the last report (self: periods, total: ns) */
	struct profile_out out;   /* -o: the folded table's sums of the whole run */
	struct stackagg profile;  /* stack -> self: periods, total: nanoseconds off the CPU */
	struct pytargets targets;
	struct symbols *syms;
	struct pyframes_text text;
	uint64_t burst_ns, last_event_ns; /* when the current read of the ring began; its last record */
	unsigned long long dropped;       /* records read but not decoded */
	uint64_t last_report_ns;
	struct profread_query from; /* --from: the stored events drawn (source NULL: live ones) */
	long long stored;           /* events read back */
	const char *tracing_option; /* the last option that only tracing takes (not --from) */
};

static void init(struct tracker *t)
{
	struct pyoffcpu *o = (struct pyoffcpu *)t;

	profread_init(&o->from, &stored_layout);
	o->min_ms = 20;
	o->max_depth = 20;
	pytargets_init(&o->targets, MAX_TARGETS);
	o->targets.announce = true;
	stackagg_init(&o->profile);
	stackagg_limit(&o->profile, STACKAGG_MAX_STACKS);
	stackagg_init(&o->task_agg);
	stackagg_limit(&o->task_agg, STACKAGG_MAX_STACKS);
}

static int option(struct tracker *t, int id, const char *arg)
{
	struct pyoffcpu *o = (struct pyoffcpu *)t;
	static const struct {
		int id;
		const char *name;
	} tracing[] = { { OPT_CHILDREN, "--children" }, { OPT_MIN_MS, "--min-ms" }, { OPT_PY_MIN_MS, "--py-min-ms" },
			{ OPT_MAX_STACK_DEPTH, "--max-stack-depth" }, { OPT_STATE, "--state" }, { OPT_NO_PY, "--no-py" },
			{ OPT_INTERVAL, "-i" } };

	for (size_t i = 0; i < sizeof(tracing) / sizeof(tracing[0]); i++)
		if (tracing[i].id == id)
			o->tracing_option = tracing[i].name;
	switch (id) {
	case OPT_CHILDREN:
		o->targets.children = true;
		return 0;
	case OPT_MIN_MS:
		return opts_parse_ulong("min-ms", arg, 0, 86400000, &o->min_ms);
	case OPT_PY_MIN_MS:
		return opts_parse_ulong("py-min-ms", arg, 0, 86400000, &o->py_min_ms);
	case OPT_MAX_STACK_DEPTH:
		return opts_parse_ulong("max-stack-depth", arg, 1, PYOFFCPU_DEPTH_LIMIT, &o->max_depth);
	case OPT_STATE:
		if (!strcmp(arg, "S"))
			o->state_mask = PYOFFCPU_STATE_S;
		else if (!strcmp(arg, "D"))
			o->state_mask = PYOFFCPU_STATE_D;
		else if (!strcmp(arg, "any"))
			o->state_mask = 0;
		else
			return opts_usage_error("--state: S, D or any, not \"%s\"", arg);
		return 0;
	case OPT_NO_PY:
		o->no_py = true;
		return 0;
	case OPT_FOLDED:
		o->folded = true;
		return 0;
	case OPT_PER_TASK:
		o->per_task = true;
		return 0;
	case OPT_INTERVAL:
		return opts_parse_seconds("interval", arg, &o->interval_s);
	case OPT_OUTPUT:
	case OPT_FORMAT:
		return profile_option(&o->out, id == OPT_FORMAT, arg);
	case OPT_FROM:
	case OPT_HOST:
	case OPT_SINCE:
	case OPT_UNTIL:
		return profread_option(&o->from, (enum profread_opt)(id - OPT_FROM), arg);
	}
	return -1;
}

/* --from: stored events, drawn as -f or -o draws them; no targets (-p chooses rows). */
static int check_stored(struct pyoffcpu *o)
{
	if (profread_check(&o->from, o->base.common))
		return -1;
	if (!o->from.source)
		return 0;
	if (!o->folded && !o->out.path)
		return opts_usage_error("--from draws the stored events' stacks: say -f or -o FILE");
	if (o->folded && o->base.common->json)
		return opts_usage_error("-f and -j exclude each other");
	if (o->tracing_option)
		return opts_usage_error("--from draws stored events: not with %s, which sets how to trace", o->tracing_option);
	o->base.stored = true;
	return 0;
}

static int check(struct tracker *t)
{
	struct pyoffcpu *o = (struct pyoffcpu *)t;

	if (check_stored(o))
		return -1;
	if (!o->from.source && tracker_check_pids_folded(t, o->folded))
		return -1;
	if (o->per_task && !o->folded && !o->out.path)
		return opts_usage_error("--per-task needs -f/--folded or -o");
	if (o->per_task && o->no_py)
		return opts_usage_error("--per-task needs the Python stacks: not with --no-py");
	return profile_check(&o->out);
}

static int prepare(struct tracker *t)
{
	struct pyoffcpu *o = (struct pyoffcpu *)t;
	struct cflags *cf = &t->cflags;

	if (o->from.source)
		return 0; /* stored events: no BPF, no targets */
	/* a tracefs we cannot read is said as such, not as missing fields */
	if (!t->common->print_ebpf && tracefs_ensure())
		return -1;
	/* the records' layout follows these fields: a kernel without them is named, not misread */
	if (!t->common->print_ebpf && (!tpformat_has_field("sched", "sched_switch", "prev_state") ||
				       !tpformat_has_field("sched", "sched_switch", "next_pid") ||
				       !tpformat_has_field("sched", "sched_wakeup", "pid"))) {
		log_error("sched:sched_switch or sched:sched_wakeup lacks prev_state, next_pid or pid "
			  "on this kernel (see its tracefs format files)");
		return -1;
	}
	/* targets are the keys of target_pids, not pid_filter */
	if (pytargets_cflags(cf, t->common, false, true))
		return -1;
	cflags_add(cf, "-DMIN_NS=%lluULL", (unsigned long long)o->min_ms * 1000000ull);
	cflags_add(cf, "-DSTATE_MASK=%u", o->state_mask);
	cflags_add(cf, "-DMAX_STACK_DEPTH=%lu", o->max_depth);
	cflags_add(cf, "-DPY_MAX_DEPTH=%lu", o->max_depth);
	if (!o->no_py)
		cflags_add(cf, "-DWALK_PYTHON");
	/*
	 * -o sums the periods in the kernel as -f does: no record lost, whatever else is
	 * printed. --per-task sums them here from the records instead: a period's task is
	 * read when the thread leaves the CPU (pytargets_task_name), not at the end.
	 */
	if ((o->folded || o->out.path) && !o->per_task)
		cflags_add(cf, "-DFOLDED");
	if (!o->folded || o->per_task) {
		cflags_add(cf, "-DRECORDS");
		cflags_add(cf, "-DPYEBPF_RINGBUF_PAGES=%d", RING_PAGES);
	}
	t->text = pyoffcpu_bpf_text;
	if (!t->common->print_ebpf &&
	    !pytargets_add_pids(&o->targets, t->common->pids, t->common->npids, PYTARGETS_ANY,
				o->no_py ? NULL : "its py_stack stays empty (kernel and user stacks are still taken)"))
		return tracker_no_targets(t);
	return 0;
}

/* The frames of stack id (innermost first) into ips; how many (0 when it is gone or id < 0). */
static int read_stack(struct pyoffcpu *o, int id, __u64 *ips)
{
	int fd = bpfprog_table_fd(o->base.prog, "stacks");
	int n = 0;

	if (id < 0 || fd < 0)
		return 0;
	memset(ips, 0, PYOFFCPU_DEPTH_LIMIT * sizeof(*ips));
	if (bpf_lookup_elem(fd, &id, ips))
		return 0;
	while (n < (int)o->max_depth && ips[n])
		n++;
	return n;
}

/*
 * read_stack() for a kernel stack, from the scheduler on. When the tracepoint has more
 * than one probe (an ftrace event enabled anywhere registers one of its own on
 * sched_switch), the kernel calls them through __traceiter_sched_switch, which then
 * stands first: tracing's frame, not the task's.
 */
static int read_kernel_stack(struct pyoffcpu *o, int id, __u64 *ips)
{
	char name[FRAME_NAME_MAX];
	int n = read_stack(o, id, ips);

	if (n > 1) {
		symbols_resolve(o->syms, SYMBOLS_KERNEL_PID, ips[0], name, sizeof(name));
		if (!strncmp(name, "__traceiter_", 12)) {
			memmove(ips, ips + 1, (size_t)(n - 1) * sizeof(*ips));
			n--;
		}
	}
	return n;
}

static json_t *stack_array(struct pyoffcpu *o, pid_t pid, int id, bool kernel)
{
	__u64 ips[PYOFFCPU_DEPTH_LIMIT];
	char name[FRAME_NAME_MAX];
	int n = kernel ? read_kernel_stack(o, id, ips) : read_stack(o, id, ips);
	json_t *a = json_array();

	for (int i = 0; i < n; i++) {
		symbols_frame_name(o->syms, pid, ips[i], name, sizeof(name));
		json_array_append_new(a, json_string(name));
	}
	return a;
}

/* sched_switch's prev_state as its print fmt writes it (the letters of the set bits, or R). */
static void state_name(__s64 state, char *buf, size_t len)
{
	static const char letters[] = "SDTtXZPI";
	size_t n = 0;

	for (int i = 0; letters[i] && n + 2 < len; i++)
		if (state & (1 << i)) {
			if (n)
				buf[n++] = '|';
			buf[n++] = letters[i];
		}
	if (!n && len > 1)
		buf[n++] = 'R';
	buf[n < len ? n : len - 1] = '\0';
}

static double ms(__u64 ns)
{
	return (double)ns / 1e6;
}

/* What python_stack() returns for a stack it resolved (any other status: nothing to show). */
static const char py_walked[] = "walked";

/* The Python stack of a period folded into *text (py_walked), or why there is none. */
static const char *python_stack(struct pyoffcpu *o, struct pytarget *pt, const struct pywalk_stack *py,
				int depth, bool shown, int *out_depth, const char **text)
{
	*out_depth = 0;
	*text = "";
	if (o->no_py)
		return "off";
	if (!pt || !pt->py)
		return "not_python";
	if (!shown)
		return "short";
	if (py->status != PYWALK_COMPLETE && py->status != PYWALK_TRUNCATED && !depth)
		return pywalk_status_name(py->status);
	*text = pyframes_text(&o->text, pt->py, py->frames, depth, py->status);
	*out_depth = depth;
	return py_walked;
}

/* A stack's native frames as -f folds them, ";user...;kernel...", from the outermost. */
static void write_native(struct pyoffcpu *o, FILE *f, pid_t pid, int ustack, int kstack)
{
	char name[FRAME_NAME_MAX];
	__u64 ips[PYOFFCPU_DEPTH_LIMIT];
	int n;

	/* native frames come innermost first: printed from the outermost */
	n = read_stack(o, ustack, ips);
	for (int i = n - 1; i >= 0; i--) {
		symbols_frame_name(o->syms, pid, ips[i], name, sizeof(name));
		pyframes_fold_escape(name, sizeof(name), PYFRAMES_FOLD_FRAME);
		fprintf(f, ";%s", name);
	}
	n = read_kernel_stack(o, kstack, ips);
	for (int i = n - 1; i >= 0; i--) {
		symbols_frame_name(o->syms, pid, ips[i], name, sizeof(name));
		fprintf(f, ";%s", name);
	}
}

/*
 * --per-task: a period's stack, "task:NAME;python...;user...;kernel...", added to
 * task_agg (-f) and the profile (-o): self counts periods, total nanoseconds.
 */
static void fold_task_period(struct pyoffcpu *o, const struct pyoffcpu_event *e, const char *task,
			     const char *py, __u64 ns)
{
	char buf[PYTASK_NAME_MAX + 8], root[PYTASK_NAME_MAX + 8], *stack = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&stack, &len);
	struct stackagg *aggs[2] = { o->folded ? &o->task_agg : NULL, o->out.path ? &o->profile : NULL };

	if (!m)
		return;
	snprintf(root, sizeof(root), "%s", pytasks_root(task, buf, sizeof(buf)));
	pyframes_fold_escape(root, sizeof(root), PYFRAMES_FOLD_ROOT);
	fputs(root, m);
	if (py[0])
		fprintf(m, ";%s", py);
	write_native(o, m, (pid_t)e->task.pid, e->ustack, e->kstack);
	if (!fclose(m))
		for (int i = 0; i < 2; i++) {
			struct stackagg_entry *a = aggs[i] ? stackagg_get(aggs[i], stack, len) : NULL;
			if (a) {
				a->self += 1;
				a->total += (long long)ns;
			}
		}
	free(stack);
}

static void on_event(void *ctx, void *data, int size)
{
	struct pyoffcpu *o = ctx;
	const struct pyoffcpu_event *e = data;
	const size_t head = offsetof(struct pyoffcpu_event, py.frames);
	char thread[PYTHREAD_NAME_MAX], state[32];
	struct pytask_name task;
	struct pytarget *pt;
	const char *status, *py_stack;
	json_t *r;
	int depth;
	__u64 dur = e->run_ns - e->task.ts_ns;
	uint64_t now;

	if (size < (int)head)
		return;
	/*
	 * A storm of records can come faster than they are decoded, and the ring is read
	 * until it is empty: past BURST_NS of one read the rest are counted, not decoded,
	 * so the read ends (and the run can end). Within a read records follow each other
	 * within microseconds; a gap of READ_GAP_NS means a new read.
	 */
	now = time_mono_ns();
	if (now - o->last_event_ns > READ_GAP_NS)
		o->burst_ns = now;
	o->last_event_ns = now;
	if (now - o->burst_ns > BURST_NS) {
		o->dropped++;
		return;
	}
	depth = e->py.depth ? pyframes_depth(e->py.depth, size, head) : 0;
	pt = pytargets_thread_name(&o->targets, (pid_t)e->task.pid, (pid_t)e->task.tid, e->task.comm,
				   sizeof(e->task.comm), thread, sizeof(thread));
	pytargets_task_name(&o->targets, pt, &e->py.asyncio, e->py.frames, (uint32_t)depth, &task);
	status = python_stack(o, pt, &e->py, depth, dur >= o->py_min_ms * 1000000ull, &depth, &py_stack);
	if (o->per_task)
		fold_task_period(o, e, task.name, py_stack, dur);
	if (o->folded)
		return; /* --per-task -f: the records only feed the folded stacks */
	r = json_object();
	json_set_str(r, "metric", event_schema.metric);
	record_set_time(r, e->task.ts_ns);
	record_set_task(r, &e->task);
	json_set_str(r, "thread_name", thread);
	json_set_str(r, "task", task.name);
	json_set_str(r, "task_coro", task.coro);
	json_set_real(r, "duration_ms", ms(dur));
	json_set_real(r, "off_cpu_ms", ms((e->wake_ns ? e->wake_ns : e->run_ns) - e->task.ts_ns));
	if (e->wake_ns)
		json_set_real(r, "runq_ms", ms(e->run_ns - e->wake_ns));
	else
		json_object_set_new(r, "runq_ms", json_null());
	state_name(e->prev_state, state, sizeof(state));
	json_set_str(r, "prev_state", state);
	json_set_int(r, "cpu", e->cpu);
	record_set_int_or_null(r, "waker_tid", e->waker_tid, e->waker_tid != 0);
	if (e->waker_tid)
		json_set_strn(r, "waker_comm", e->waker_comm, strnlen(e->waker_comm, sizeof(e->waker_comm)));
	else
		json_object_set_new(r, "waker_comm", json_null());
	json_object_set_new(r, "kernel_stack", stack_array(o, (pid_t)e->task.pid, e->kstack, true));
	json_object_set_new(r, "user_stack", stack_array(o, (pid_t)e->task.pid, e->ustack, false));
	json_set_str(r, "py_stack", py_stack);
	json_set_int(r, "py_stack_depth", depth);
	json_set_str(r, "py_status", status == py_walked ? pywalk_status_name(e->py.status) : status);
	sink_record(o->base.sink, &event_schema, r);
}

/* --from: a stored stack array's frames (JSON text, innermost first) as -f folds them, from the outermost. */
static void write_stored_native(FILE *f, const char *json, bool escape)
{
	json_t *a = json ? json_loads(json, 0, NULL) : NULL;
	char name[FRAME_NAME_MAX];

	for (size_t i = json_array_size(a); i > 0; i--) {
		snprintf(name, sizeof(name), "%s", json_string_value(json_array_get(a, i - 1)) ?: "");
		if (escape)
			pyframes_fold_escape(name, sizeof(name), PYFRAMES_FOLD_FRAME);
		fprintf(f, ";%s", name);
	}
	json_decref(a);
}

/*
 * --from: one stored event as the live run folds its period (write_stack, or
 * fold_task_period with --per-task): "thread;python...;user...;kernel...", self one
 * period, total its time off the CPU. A record's duration_ms has three decimals
 * (jsonfmt.h): a stack's stored time is its periods' whole microseconds added up, the
 * live one its nanoseconds added up, so they differ by up to half a microsecond per period.
 */
static void add_stored(void *ctx, const struct profread_row *r)
{
	struct pyoffcpu *o = ctx;
	char root[PYTASK_NAME_MAX + PYTHREAD_NAME_MAX + 8], buf[PYTASK_NAME_MAX + 8], *stack = NULL;
	const char *thread = r->col[STORED_THREAD] ? r->col[STORED_THREAD] : "";
	size_t len = 0;
	FILE *m = open_memstream(&stack, &len);
	struct stackagg_entry *e;

	if (!m)
		return;
	snprintf(root, sizeof(root), "%s", o->per_task ? pytasks_root(r->col[STORED_TASK] ?: "", buf, sizeof(buf)) : thread);
	pyframes_fold_escape(root, sizeof(root), PYFRAMES_FOLD_ROOT);
	fputs(root, m);
	if (r->stack[0])
		fprintf(m, ";%s", r->stack);
	/* user frames are escaped as frames, kernel ones need not be (write_native) */
	write_stored_native(m, r->col[STORED_USER], true);
	write_stored_native(m, r->col[STORED_KERNEL], false);
	if (!fclose(m) && (e = stackagg_get(&o->profile, stack, len))) {
		e->self += 1;
		e->total += llround(r->weight * 1e6);
	}
	o->stored++;
	free(stack);
}

static int start(struct tracker *t)
{
	struct pyoffcpu *o = (struct pyoffcpu *)t;
	struct bpfprog *p = t->prog;
	long long rows;

	if (o->from.source) {
		t->done = true;
		return profread_each(&o->from, add_stored, o, &rows);
	}
	o->syms = symbols_open(0);
	if (!o->syms || pytargets_start(&o->targets, o->no_py ? NULL : p))
		return -1;
	symbols_load_kernel(o->syms); /* every period has a kernel stack: its names now */
	if (pytargets_set_pid_map(&o->targets, p, "target_pids"))
		return -1;
	snprintf(t->banner, sizeof(t->banner), "Tracing off-CPU periods of %d process%s%s.",
		 o->targets.n, o->targets.n == 1 ? "" : "es", o->folded ? " (folded)" : "");
	o->last_report_ns = time_mono_ns();
	if ((!o->folded || o->per_task) && bpfprog_open_ring_buffer(p, "events", on_event, o))
		return -1;
	if (bpfprog_attach_tracepoint(p, "sched", "sched_switch") ||
	    bpfprog_attach_tracepoint(p, "sched", "sched_wakeup") ||
	    bpfprog_attach_tracepoint(p, "sched", "sched_wakeup_new"))
		return -1;
	if (!o->no_py)
		t->poll_ms = PYTASKS_POLL_MS; /* the task field (pytasks.h) */
	return 0;
}

/* A key's stack as -f folds it, "thread;python...;user...;kernel...", root first. */
static void write_stack(struct pyoffcpu *o, FILE *f, const struct pyoffcpu_fold_key *k, int py_fd,
			struct pywalk_stack *py)
{
	char thread[PYTHREAD_NAME_MAX];
	__u64 py_hash = k->py_hash;
	struct pytarget *pt;

	pt = pytargets_thread_name(&o->targets, (pid_t)k->pid, (pid_t)k->tid, k->comm, sizeof(k->comm),
				   thread, sizeof(thread));
	pyframes_fold_escape(thread, sizeof(thread), PYFRAMES_FOLD_ROOT);
	fputs(thread, f);
	if (k->py_hash && pt && pt->py && py_fd >= 0 && !bpf_lookup_elem(py_fd, &py_hash, py)) {
		int depth = pyframes_depth(py->depth, sizeof(*py), offsetof(struct pywalk_stack, frames));
		const char *text = pyframes_text(&o->text, pt->py, py->frames, depth, py->status);
		if (depth)
			fprintf(f, ";%s", text);
	}
	write_native(o, f, (pid_t)k->pid, k->ustack, k->kstack);
}

/*
 * One key's sums: with -f a line "STACK MICROSECONDS" (none under 1 us), with -o
 * into the run's profile (the -f lines of every interval added up).
 */
static void take_key(struct pyoffcpu *o, FILE *out, const struct pyoffcpu_fold_key *k,
		     const struct pyoffcpu_fold_val *v, int py_fd, struct pywalk_stack *py)
{
	char *stack = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&stack, &len);
	struct stackagg_entry *e;

	if (!m)
		return;
	write_stack(o, m, k, py_fd, py);
	if (fclose(m)) {
		free(stack);
		return;
	}
	if (out && v->ns >= 1000)
		fprintf(out, "%s %llu\n", stack, (unsigned long long)(v->ns / 1000));
	if (o->out.path && (e = stackagg_get(&o->profile, stack, len))) {
		e->self += (long long)v->periods;
		e->total += (long long)v->ns;
	}
	free(stack);
}

/* -f, -o: the folded table so far, printed (-f) and kept (-o), then emptied (counting starts afresh). */
static void take_folded(struct pyoffcpu *o)
{
	int fd = bpfprog_table_fd(o->base.prog, "folded");
	int py_fd = bpfprog_table_fd(o->base.prog, "py_stacks");
	struct pywalk_stack *py = malloc(sizeof(*py));
	struct pyoffcpu_fold_key *keys = malloc(PYOFFCPU_FOLDED_MAX * sizeof(*keys));
	struct pyoffcpu_fold_val *totals = malloc(PYOFFCPU_FOLDED_MAX * sizeof(*totals));
	FILE *f = o->folded ? sink_text(o->base.sink) : NULL;
	size_t n = 0, taken = 0;

	if (fd >= 0 && py && keys && totals && (f || !o->folded)) {
		/*
		 * The keys first (deleting while walking would restart bpf_get_next_key),
		 * then each one read and deleted at once, and only then the slow part, the
		 * names: what the programs add meanwhile goes to the next report.
		 */
		while (n < PYOFFCPU_FOLDED_MAX && !bpf_get_next_key(fd, n ? &keys[n - 1] : NULL, &keys[n]))
			n++;
		for (size_t i = 0; i < n; i++)
			if (!bpf_lookup_elem(fd, &keys[i], &totals[taken]) && !bpf_delete_elem(fd, &keys[i]))
				keys[taken] = keys[i], taken++;
		for (size_t i = 0; i < taken; i++)
			take_key(o, f, &keys[i], &totals[i], py_fd, py);
	}
	/* --per-task -f: what the records added since the last report (none under 1 us) */
	for (size_t i = 0; f && i < o->task_agg.n; i++)
		if (o->task_agg.v[i].total >= 1000)
			fprintf(f, "%s %lld\n", o->task_agg.v[i].key, o->task_agg.v[i].total / 1000);
	stackagg_clear(&o->task_agg);
	if (f)
		fflush(f);
	free(totals);
	free(keys);
	free(py);
}

/* One row per thread that left a CPU (when print), in the order of the map; how many threads. */
static unsigned long long print_threads(struct pyoffcpu *o, bool print)
{
	int fd = bpfprog_table_fd(o->base.prog, "threads");
	struct pyoffcpu_thread th;
	char thread[PYTHREAD_NAME_MAX], comm[16];
	unsigned long long n = 0;
	__u32 key, next;
	bool first = true;

	if (fd < 0)
		return 0;
	while (!bpf_get_next_key(fd, first ? NULL : &key, &next)) {
		json_t *r;
		first = false;
		key = next;
		if (bpf_lookup_elem(fd, &key, &th))
			continue;
		if (n++, !print)
			continue;
		if (n == 1)
			sink_table_begin(o->base.sink, &thread_schema, NULL);
		if (procinfo_comm((pid_t)th.pid, (pid_t)key, comm, sizeof(comm)))
			comm[0] = '\0';
		pytargets_thread_name(&o->targets, (pid_t)th.pid, (pid_t)key, comm, sizeof(comm), thread,
				      sizeof(thread));
		r = json_object();
		json_set_str(r, "metric", thread_schema.metric);
		json_set_int(r, "pid", th.pid);
		json_set_int(r, "tid", key);
		json_set_str(r, "thread_name", thread);
		json_set_real(r, "off_cpu_ms", ms(th.off_ns));
		json_set_real(r, "runq_ms", ms(th.runq_ns));
		json_set_int(r, "periods", (json_int_t)th.periods);
		json_set_int(r, "count", (json_int_t)th.long_periods);
		json_set_int(r, "lost", (json_int_t)th.lost);
		sink_table_row(o->base.sink, &thread_schema, r);
	}
	return n;
}

static int tick(struct tracker *t, uint64_t now_ns)
{
	struct pyoffcpu *o = (struct pyoffcpu *)t;

	if (o->from.source)
		return 0; /* stored events: all read at the start */
	/* a poll has ended: the next record begins a new read, however soon (PYTASKS_POLL_MS) */
	o->last_event_ns = 0;
	t->done = pytargets_refresh(&o->targets, now_ns);
	if (!t->done && o->interval_s && (double)(now_ns - o->last_report_ns) >= o->interval_s * 1e9) {
		o->last_report_ns = now_ns;
		if (o->folded || o->out.path)
			take_folded(o); /* -o alone: the table does not fill up in a long run */
		if (!o->folded)
			print_threads(o, true);
	}
	return 0;
}

/*
 * The programs stay attached until the end: stopped makes them do nothing, then the
 * records still in the ring are read, so that records, losses and totals agree.
 */
static void stop_tracing(struct pyoffcpu *o)
{
	int fd = bpfprog_table_fd(o->base.prog, "stopped");
	__u32 zero = 0, one = 1;

	if (fd < 0 || bpf_update_elem(fd, &zero, &one, BPF_ANY))
		return;
	usleep(10000); /* programs running on other CPUs finish (they run for microseconds) */
	bpfprog_deliver(o->base.prog);
}

static const struct profile_meta profile_meta = {
	.title = "pyoffcpu: where threads wait off the CPU",
	.count_name = "periods",
	.weight_name = "off_cpu",
	.by_weight = true,
	.per_thread = true,
	.folded_us = true,
};

/* --from: -f's lines (as the live run's, none under 1 us) and -o's picture of the stored events. */
static void finish_stored(struct pyoffcpu *o)
{
	FILE *f = o->folded ? sink_text(o->base.sink) : NULL;

	for (size_t i = 0; f && i < o->profile.n; i++)
		if (o->profile.v[i].total >= 1000)
			fprintf(f, "%s %lld\n", o->profile.v[i].key, o->profile.v[i].total / 1000);
	if (f)
		fflush(f);
	o->base.failed |= 0 != profile_write(&o->out, &o->profile, &profile_meta);
	log_info("read %lld off_cpu events from %s", o->stored, o->from.source);
}

static void finish(struct tracker *t)
{
	struct pyoffcpu *o = (struct pyoffcpu *)t;
	unsigned long long nthreads;
	json_t *sum;

	if (o->from.source) {
		finish_stored(o);
		return;
	}
	stop_tracing(o);
	/* -f: stdout is flame-graph input only; the rows would be lines it cannot read */
	if (o->folded || o->out.path)
		take_folded(o);
	nthreads = print_threads(o, !o->folded);
	sum = summary_begin(t, &summary_schema, counters);
	json_set_int(sum, "unresolved_frames", (json_int_t)o->text.unresolved);
	json_set_int(sum, "stacks_other", (json_int_t)o->profile.other);
	json_set_int(sum, "dropped", (json_int_t)o->dropped);
	record_set_targets(sum, o->targets.skipped, o->targets.exits);
	json_set_int(sum, "threads", (json_int_t)nthreads);
	summary_end(t, &summary_schema, sum, o->targets.added);
	t->failed |= 0 != profile_write(&o->out, &o->profile, &profile_meta);
}

static void destroy(struct tracker *t)
{
	struct pyoffcpu *o = (struct pyoffcpu *)t;

	pytargets_free(&o->targets);
	stackagg_free(&o->profile);
	stackagg_free(&o->task_agg);
	pyframes_text_free(&o->text);
	if (o->syms)
		symbols_close(o->syms);
}

/* What pymonitor calls it, and the original monitor's flags as its own options. */
static const struct monitor_entry monitor[] = {
	{ .name = "offcpu",
	  .needs_pids = true,
	  .flags = { { "offcpu-min-total-ms", "min-ms", "MS", "offcpu: only periods off the CPU of MS or more (default 20)" },
		     { "offcpu-max-stack-depth", "max-stack-depth", "N", "offcpu: frames kept per stack (default 20)" },
		     { "offcpu-py-enable", NULL, NULL, "offcpu: the Python stack (always walked)" },
		     { "offcpu-py-min-ms", "py-min-ms", "MS", "offcpu: Python stacks only of periods of MS or more" } } },
	{ 0 },
};

const struct tracker_ops pyoffcpu_tracker = {
	.name = "pyoffcpu",
	.size = sizeof(struct pyoffcpu),
	.bpf = &bpfprog_runtime,
	.options = options,
	.schemas = schemas,
	.monitor = monitor,
	.init = init,
	.option = option,
	.check = check,
	.prepare = prepare,
	.start = start,
	.tick = tick,
	.finish = finish,
	.destroy = destroy,
};
