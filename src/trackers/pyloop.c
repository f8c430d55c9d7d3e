/*
 * The pyloop tracker: what blocks the event loops of the target processes, for how
 * long, and where. From syscall tracepoints of the pollers, sched:sched_switch,
 * sched:sched_wakeup and a cpu-clock perf event only (bpf_text/pyloop.bpf.c): per
 * loop iteration of at least --min-ms (a stall) one record with its on-CPU, off-CPU
 * and run-queue time and the Python stacks that took it: the most sampled on-CPU
 * stack, the stack at the longest off-CPU period, and the top three. At the end and
 * every -i a row per loop thread (iterations, time in the poller and running, stalls,
 * iteration-time percentiles from lathist); -f / -o the stall stacks weighted by the
 * stall time.
 */
#include <bcc/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <linux/types.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonfmt.h"
#include "lathist.h"
#include "log.h"
#include "monitor.h"
#include "procinfo.h"
#include "profile.h"
#include "pyebpf_bpf.h"
#include "pyframes.h"
#include "pyloop.h"
#include "pytargets.h"
#include "pytasks.h"
#include "record.h"
#include "stackagg.h"
#include "summary.h"
#include "tpformat.h"
#include "tracefs.h"
#include "tracker.h"

extern const char pyloop_bpf_text[];

enum {
	MAX_TARGETS = 256,
	RING_PAGES = 256,
	MAX_PENDING = 256,     /* loop threads with samples of an iteration going on */
	MAX_STACKS_PER_ITER = 64, /* distinct sampled stacks kept per iteration */
	TOP_STACKS = 3,
	NO_LOOP_AFTER_MS = 2000, /* "no loop thread" is said this long after the start */
};

enum {
	OPT_FREQ = 'F',
	OPT_FOLDED = 'f',
	OPT_INTERVAL = 'i',
	OPT_OUTPUT = 'o',
	OPT_CHILDREN = OPT_TOOL_BASE,
	OPT_MIN_MS,
	OPT_NO_STACKS,
	OPT_FORMAT,
};

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_CHILDREN, 0, "children", NULL, "also trace the child processes of the -p pids (and new ones)" },
	{ OPT_MIN_MS, 0, "min-ms", "MS", "a stall is a loop iteration of at least MS (default 100)" },
	{ OPT_FREQ, 'F', "frequency", "HZ", "stack samples per second and CPU inside long iterations (default 199)" },
	{ OPT_NO_STACKS, 0, "no-stacks", NULL, "no Python stacks: no sampling, no walks (times only)" },
	{ OPT_FOLDED, 'f', "folded", NULL, "print the stall stacks folded, weighted by stall microseconds (FlameGraph input)" },
	{ OPT_INTERVAL, 'i', "interval", "SECONDS", "print the loop threads' table (with -f: the folded stacks since the last) every SECONDS" },
	PROFILE_OPT_ENTRIES(OPT_OUTPUT, OPT_FORMAT),
	OPT_ENTRIES_TRACKER_TAIL,
};

static const struct field stall_fields[] = {
	FIELD_METRIC,
	{ .name = "time", .type = FIELD_TIME, .meaning = "when the stall began: the poller's return that started the iteration" },
	FIELD_PID(1),
	FIELD_TID(2),
	FIELD_CONTAINER_PID,
	FIELD_CONTAINER_TID,
	FIELD_COMM(0),
	FIELD_THREAD_NAME(3),
	{ .name = "task", .type = FIELD_STR, .meaning = "the asyncio task of py_stack (its name): the most sampled one, or the one at the longest switch-out; empty when none" },
	{ .name = "task_coro", .type = FIELD_STR, .meaning = "that task's coroutine (qualified name), empty when none" },
	{ .name = "duration_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "the iteration: from the poller's return to the thread's next entry into it", COLUMN(4, "DUR_MS", 9), .fmt = "%9.3f" },
	{ .name = "on_cpu_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "of that, running on a CPU", COLUMN(5, "ON_MS", 9), .fmt = "%9.3f" },
	{ .name = "off_cpu_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "of that, off the CPU and not runnable (sleeping, blocked in a call)", COLUMN(6, "OFF_MS", 9), .fmt = "%9.3f" },
	{ .name = "runq_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "of that, runnable but waiting for a CPU (woken or preempted until running)", COLUMN(7, "RUNQ_MS", 8), .fmt = "%8.3f" },
	{ .name = "poller", .type = FIELD_STR, .meaning = "the loop's poller: epoll_wait, epoll_pwait, epoll_pwait2, poll, ppoll, select or pselect6" },
	{ .name = "py_frame", .type = FIELD_STR, .meaning = "the innermost frame of py_stack, \"func (file:line)\": what blocked the loop; empty when no stack was taken", COLUMN(8, "BLOCKED_BY", 0) },
	{ .name = "py_stack", .type = FIELD_STR, .meaning = "the Python stack that took the stall, root first, ';' between frames \"func (file:line)\": the most sampled on-CPU stack, or, when off-CPU and run-queue time dominate, the stack at the longest switch-out; empty when none was taken" },
	{ .name = "py_stack_samples", .type = FIELD_INT, .meaning = "samples of py_stack (0 when it is the switch-out stack)" },
	{ .name = "blocking_py_stack", .type = FIELD_STR, .meaning = "the Python stack when the thread left the CPU for its longest off-CPU period of the stall; empty when it never blocked" },
	{ .name = "top_stacks", .type = FIELD_ARRAY, .meaning = "up to 3 stacks with their estimated share of the stall, longest first: {stack, ms, share_pct, samples, kind: on_cpu (sampled) or blocked}" },
	{ .name = "iterations_before", .type = FIELD_INT, .meaning = "whole iterations of the loop since its previous stall (or since it was first seen)" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field thread_fields[] = {
	FIELD_METRIC,
	FIELD_PID(1),
	FIELD_TID(2),
	FIELD_THREAD_NAME(3),
	{ .name = "poller", .type = FIELD_STR, .meaning = "the loop's poller", COLUMN_LEFT(4, "POLLER", 12) },
	{ .name = "iterations", .type = FIELD_INT, .meaning = "whole iterations since the start (a return from the poller, then the next entry)", COLUMN(5, "ITERS", 9) },
	{ .name = "iterations_per_s", .type = FIELD_REAL, .unit = "1/s", .meaning = "iterations per second of tracing", COLUMN(6, "ITERS/S", 9), .fmt = "%9.1f" },
	{ .name = "poll_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "time in the poller (waiting for events)", COLUMN(7, "POLL_MS", 10), .fmt = "%10.1f" },
	{ .name = "run_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "time in iterations (running callbacks)", COLUMN(8, "RUN_MS", 10), .fmt = "%10.1f" },
	{ .name = "stalls", .type = FIELD_INT, .meaning = "iterations of at least --min-ms", COLUMN(9, "STALLS", 6) },
	{ .name = "p50_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "median iteration time (lathist, under 1.6% error)", COLUMN(10, "P50_MS", 8), .fmt = "%8.3f" },
	{ .name = "p99_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "99th percentile of the iteration time", COLUMN(11, "P99_MS", 8), .fmt = "%8.3f" },
	{ .name = "max_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "the longest iteration", COLUMN(12, "MAX_MS", 9), .fmt = "%9.3f" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field summary_fields[] = {
	FIELD_METRIC,
	PYLOOP_COUNTERS(PYEBPF_COUNTER_FIELD)
	{ .name = "unresolved_frames", .type = FIELD_INT, .meaning = "Python frames whose code object could not be read in user space" },
	FIELD_STACKS_OTHER,
	FIELD_LOST,
	FIELD_MISSED,
	FIELD_PROCESSES,
	FIELD_TARGETS,
	{ .name = "loop_threads", .type = FIELD_INT, .meaning = "threads seen in a poller" },
	FIELD_TOOL_CPU_MS,
	FIELD_ENV,
	FIELD_END,
};

static const struct counter_name counters[] = { PYLOOP_COUNTERS(PYEBPF_COUNTER_NAME) { 0, NULL, NULL } };

static const struct schema stall_schema = { "loop_stall", SCHEMA_EVENT, stall_fields };
static const struct schema thread_schema = { "loop_thread", SCHEMA_ROW, thread_fields };
static const struct schema summary_schema = { "pyloop_summary", SCHEMA_SUMMARY, summary_fields };
static const struct schema *const schemas[] = { &stall_schema, &thread_schema, &summary_schema, NULL };

static const char *const poller_names[PYLOOP_POLLER_MAX] = {
	[PYLOOP_EPOLL_WAIT] = "epoll_wait", [PYLOOP_EPOLL_PWAIT] = "epoll_pwait",
	[PYLOOP_EPOLL_PWAIT2] = "epoll_pwait2", [PYLOOP_POLL] = "poll", [PYLOOP_PPOLL] = "ppoll",
	[PYLOOP_SELECT] = "select", [PYLOOP_PSELECT6] = "pselect6",
};
/* Their x86_64 syscall numbers, as /proc/PID/task/TID/syscall shows a thread blocked in one. */
static const long poller_nrs[] = { 7, 23, 232, 270, 271, 281, 441 };

/* The stacks of the iteration going on in one loop thread (samples and its longest switch-out). */
struct pending {
	__u32 tid;              /* 0: free */
	__u64 iter_start;
	struct stackagg samples; /* stack -> self: samples */
	unsigned long long nsamples;
	char *block;            /* the BLOCK record's stack, NULL when none */
	__u64 block_ns;
	struct stackagg tasks;  /* "task\tcoro" of the samples -> self: samples */
	struct pytask_name block_task;
};

/* A target without a loop thread, said once. */
struct no_loop {
	pid_t pid;
	bool done; /* said, or a loop thread was seen */
};

struct pyloop {
	struct tracker base;
	unsigned long min_ms, freq;
	double interval_s;
	bool folded, no_stacks;
	struct profile_out out;
	struct stackagg profile;  /* -o: the run's stall stacks (self: stalls, total: ns) */
	struct stackagg folded_agg; /* -f: since the last report */
	struct pytargets targets;
	struct pyframes_text text;
	struct pending pending[MAX_PENDING];
	struct no_loop no_loop[MAX_TARGETS];
	int nno_loop;
	bool hist_direct;         /* pyloop_fine_index() is lathist's: counts go into its buckets */
	uint64_t start_ns, last_report_ns, next_no_loop_ns;
};

static void init(struct tracker *t)
{
	struct pyloop *o = (struct pyloop *)t;

	o->min_ms = 100;
	o->freq = 199;
	pytargets_init(&o->targets, MAX_TARGETS);
	o->targets.announce = true;
	stackagg_init(&o->profile);
	stackagg_limit(&o->profile, STACKAGG_MAX_STACKS);
	stackagg_init(&o->folded_agg);
	stackagg_limit(&o->folded_agg, STACKAGG_MAX_STACKS);
	for (int i = 0; i < MAX_PENDING; i++) {
		stackagg_init(&o->pending[i].samples);
		stackagg_init(&o->pending[i].tasks);
	}
}

static int option(struct tracker *t, int id, const char *arg)
{
	struct pyloop *o = (struct pyloop *)t;

	switch (id) {
	case OPT_CHILDREN:
		o->targets.children = true;
		return 0;
	case OPT_MIN_MS:
		return opts_parse_ulong("min-ms", arg, 1, 86400000, &o->min_ms);
	case OPT_FREQ:
		return opts_parse_ulong("frequency", arg, 1, 10000, &o->freq);
	case OPT_NO_STACKS:
		o->no_stacks = true;
		return 0;
	case OPT_FOLDED:
		o->folded = true;
		return 0;
	case OPT_INTERVAL:
		return opts_parse_seconds("interval", arg, &o->interval_s);
	case OPT_OUTPUT:
	case OPT_FORMAT:
		return profile_option(&o->out, id == OPT_FORMAT, arg);
	}
	return -1;
}

static int check(struct tracker *t)
{
	struct pyloop *o = (struct pyloop *)t;
	const struct common_opts *c = t->common;

	if (!c->print_ebpf && !c->print_fields && c->npids == 0)
		return opts_usage_error("give the processes to trace with -p PID");
	if (o->folded && c->json)
		return opts_usage_error("-f and -j exclude each other");
	if (o->no_stacks && (o->folded || o->out.path))
		return opts_usage_error("--no-stacks takes no stacks: not with -f or -o");
	return profile_check(&o->out);
}

/* Whether lathist puts each value where pyloop_fine_index() says (then BPF's counts go straight in). */
static bool fine_index_is_lathist(void)
{
	static const __u64 values[] = { 0, 63, 64, 65, 1000, 123456, 99999999, 100000000, 5000000000ull };
	struct lathist *h = calloc(1, sizeof(*h));
	bool ok = h != NULL;

	for (size_t i = 0; ok && i < sizeof(values) / sizeof(values[0]); i++) {
		__u32 b = pyloop_fine_index(values[i]);
		lathist_add(h, values[i]);
		ok = b < LATHIST_FINE_BUCKETS && h->fine[b] == 1;
		h->fine[b < LATHIST_FINE_BUCKETS ? b : 0] = 0;
	}
	free(h);
	return ok;
}

static int prepare(struct tracker *t)
{
	struct pyloop *o = (struct pyloop *)t;
	struct cflags *cf = &t->cflags;

	/* a tracefs we cannot read is said as such, not as missing fields */
	if (!t->common->print_ebpf && tracefs_ensure())
		return -1;
	if (!t->common->print_ebpf && (!tpformat_has_field("sched", "sched_switch", "prev_state") ||
				       !tpformat_has_field("sched", "sched_switch", "next_pid") ||
				       !tpformat_has_field("sched", "sched_wakeup", "pid") ||
				       !tpformat_has_field("syscalls", "sys_enter_epoll_wait", "epfd"))) {
		log_error("sched:sched_switch, sched:sched_wakeup or syscalls:sys_enter_epoll_wait lack the "
			  "fields this tool reads on this kernel (see their tracefs format files)");
		return -1;
	}
	/* targets are the keys of target_pids, not pid_filter */
	if (pytargets_cflags(cf, t->common, false, true))
		return -1;
	cflags_add(cf, "-DMIN_NS=%lluULL", (unsigned long long)o->min_ms * 1000000ull);
	/* samples from a tenth of --min-ms on: a healthy loop walks nothing */
	cflags_add(cf, "-DARM_NS=%lluULL", (unsigned long long)o->min_ms * 100000ull);
	cflags_add(cf, "-DPY_MAX_DEPTH=%d", PYLOOP_DEPTH_LIMIT);
	if (!o->no_stacks) {
		cflags_add(cf, "-DWALK_PYTHON");
		cflags_add(cf, "-DSAMPLE");
	}
	if (tpformat_has_field("syscalls", "sys_enter_epoll_pwait2", "epfd"))
		cflags_add(cf, "-DHAVE_EPOLL_PWAIT2");
	cflags_add(cf, "-DPYEBPF_RINGBUF_PAGES=%d", RING_PAGES);
	t->text = pyloop_bpf_text;
	o->hist_direct = fine_index_is_lathist();
	if (!t->common->print_ebpf &&
	    !pytargets_add_pids(&o->targets, t->common->pids, t->common->npids, PYTARGETS_ANY,
				o->no_stacks ? NULL : "its stalls have no Python stacks"))
		return tracker_no_targets(t);
	return 0;
}

static double ms(__u64 ns)
{
	return (double)ns / 1e6;
}

/* The pending slot of tid (a free one when it has none; NULL when all are taken). */
static struct pending *pending_of(struct pyloop *o, __u32 tid, bool create)
{
	struct pending *free_slot = NULL;

	for (int i = 0; i < MAX_PENDING; i++) {
		if (o->pending[i].tid == tid)
			return &o->pending[i];
		if (!o->pending[i].tid && !free_slot)
			free_slot = &o->pending[i];
	}
	if (free_slot && create)
		free_slot->tid = tid;
	return create ? free_slot : NULL;
}

static void pending_reset(struct pending *p, __u64 iter_start)
{
	stackagg_clear(&p->samples);
	stackagg_clear(&p->tasks);
	memset(&p->block_task, 0, sizeof(p->block_task));
	p->nsamples = 0;
	free(p->block);
	p->block = NULL;
	p->block_ns = 0;
	p->iter_start = iter_start;
}

/* A stack record's frames as a folded line (the text buffer's), or NULL when it has none. */
static const char *stack_text(struct pyloop *o, const struct pyloop_stack *s, int size)
{
	const size_t head = offsetof(struct pyloop_stack, py.frames);
	struct pytarget *pt;
	int depth;

	if (size < (int)head)
		return NULL;
	depth = pyframes_depth(s->py.depth, size, head);
	if (!depth)
		return NULL;
	pt = pytargets_find(&o->targets, (pid_t)s->task.pid);
	if (!pt || !pt->py)
		return NULL;
	return pyframes_text(&o->text, pt->py, s->py.frames, depth, s->py.status);
}

/* The asyncio task of a stack record's frames (pytargets_task_name). */
static void task_of_stack(struct pyloop *o, const struct pyloop_stack *s, int size, struct pytask_name *tk)
{
	const int head = offsetof(struct pyloop_stack, py.frames);
	struct pytarget *pt = size >= head ? pytargets_find(&o->targets, (pid_t)s->task.pid) : NULL;
	int depth = pt ? pyframes_depth(s->py.depth, size, head) : 0;

	pytargets_task_name(&o->targets, pt, &s->py.asyncio, s->py.frames, (uint32_t)depth, tk);
}

/* One more sample of its task ("name\tcoro", "\t" for none) in p->tasks. */
static void count_task(struct pyloop *o, struct pending *p, const struct pyloop_stack *s, int size)
{
	struct pytask_name tk;
	char key[sizeof(tk.name) + sizeof(tk.coro) + 2];
	struct stackagg_entry *e;
	int n;

	task_of_stack(o, s, size, &tk);
	n = snprintf(key, sizeof(key), "%s\t%s", tk.name, tk.coro);
	e = stackagg_get(&p->tasks, key, n < (int)sizeof(key) ? (size_t)n : sizeof(key) - 1);
	if (e)
		e->self++;
}

/* The stall's task: its most sampled one (on_cpu), or the longest switch-out's. */
static void stall_task(const struct pending *p, bool on_cpu, struct pytask_name *tk)
{
	const struct stackagg_entry *best = NULL;
	const char *tab;

	memset(tk, 0, sizeof(*tk));
	if (!p)
		return;
	if (!on_cpu) {
		*tk = p->block_task;
		return;
	}
	for (size_t i = 0; i < p->tasks.n; i++)
		if (!best || p->tasks.v[i].self > best->self)
			best = &p->tasks.v[i];
	if (!best || !(tab = strchr(best->key, '\t')))
		return;
	snprintf(tk->name, sizeof(tk->name), "%.*s", (int)(tab - best->key), best->key);
	snprintf(tk->coro, sizeof(tk->coro), "%s", tab + 1);
}

/* A sample or a block stack: kept with its iteration until that ends as a stall (or not). */
static void on_stack(struct pyloop *o, const struct pyloop_stack *s, int size)
{
	struct pending *p = pending_of(o, s->task.tid, true);
	const char *stack;
	struct stackagg_entry *e;

	if (!p)
		return;
	if (p->iter_start != s->iter_start)
		pending_reset(p, s->iter_start); /* an older iteration ended without a stall */
	stack = stack_text(o, s, size);
	if (!stack)
		stack = s->py.status == PYWALK_NO_THREAD ? "[no Python thread]" : "[no Python stack]";
	if (s->kind == PYLOOP_REC_BLOCK) {
		free(p->block);
		p->block = strdup(stack);
		p->block_ns = s->off_ns;
		task_of_stack(o, s, size, &p->block_task);
		return;
	}
	count_task(o, p, s, size);
	p->nsamples++;
	if (p->samples.n >= MAX_STACKS_PER_ITER && !stackagg_get(&p->samples, stack, strlen(stack)))
		stack = "[other stacks]";
	e = stackagg_get(&p->samples, stack, strlen(stack));
	if (e)
		e->self++;
}

struct candidate {
	const char *stack;
	double ms;
	long long samples;
	bool blocked;
};

static int by_ms(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;

	return x->ms < y->ms ? 1 : x->ms > y->ms ? -1 : 0;
}

/* -f, -o: the stall's time over its stacks (their estimated ms scaled to the duration), under the thread. */
static void fold_stall(struct pyloop *o, const char *thread, struct candidate *c, int n, __u64 dur_ns)
{
	struct pyframes_buf key = { 0 };
	double all = 0;
	char root[PYTHREAD_NAME_MAX];

	snprintf(root, sizeof(root), "%s", thread);
	for (char *q = root; *q; q++)
		if (*q == ';' || *q == ' ')
			*q = '_';
	for (int i = 0; i < n; i++)
		all += c[i].ms;
	for (int i = 0; i < (n ? n : 1); i++) {
		const char *stack = n ? c[i].stack : "[no stack]";
		long long w = n && all > 0 ? (long long)((double)dur_ns * c[i].ms / all) : (long long)dur_ns;
		size_t len = strlen(root) + strlen(stack) + 2;
		struct stackagg_entry *e;

		if (!n && i)
			break;
		if (key.cap < len) {
			char *p = realloc(key.p, len);
			if (!p)
				break;
			key.p = p;
			key.cap = len;
		}
		key.len = (size_t)snprintf(key.p, key.cap, "%s%s%s", root, stack[0] ? ";" : "", stack);
		if (o->folded && (e = stackagg_get(&o->folded_agg, key.p, key.len))) {
			e->self += 1;
			e->total += w;
		}
		if (o->out.path && (e = stackagg_get(&o->profile, key.p, key.len))) {
			e->self += 1;
			e->total += w;
		}
	}
	pyframes_buf_free(&key);
}

static void on_stall(struct pyloop *o, const struct pyloop_stall *s)
{
	__u64 dur = s->end_ns - s->task.ts_ns, off = s->off_ns, runq = s->runq_ns;
	__u64 on = dur > off + runq ? dur - off - runq : 0;
	struct pending *p = pending_of(o, s->task.tid, false);
	struct candidate cand[MAX_STACKS_PER_ITER + 2];
	const struct stackagg_entry **sorted = NULL;
	char thread[PYTHREAD_NAME_MAX];
	const char *py = "";
	struct pytask_name tk = { "", "" };
	long long py_samples = 0;
	int n = 0;
	json_t *r, *top;

	if (p && p->iter_start != s->task.ts_ns) {
		pending_reset(p, 0); /* stacks of another iteration */
		p->tid = 0;
		p = NULL;
	}
	if (p && p->nsamples)
		sorted = stackagg_sorted(&p->samples);
	for (size_t i = 0; sorted && i < p->samples.n && n < MAX_STACKS_PER_ITER; i++)
		cand[n++] = (struct candidate){ sorted[i]->key, ms(on) * (double)sorted[i]->self / (double)p->nsamples,
						sorted[i]->self, false };
	if (p && p->block)
		cand[n++] = (struct candidate){ p->block, ms(p->block_ns), 0, true };
	if (sorted && (on >= off + runq || !(p && p->block))) {
		py = sorted[0]->key;
		py_samples = sorted[0]->self;
		stall_task(p, true, &tk);
	} else if (p && p->block) {
		py = p->block;
		stall_task(p, false, &tk);
	}
	qsort(cand, (size_t)n, sizeof(cand[0]), by_ms);
	pytargets_thread_name(&o->targets, (pid_t)s->task.pid, (pid_t)s->task.tid, s->task.comm,
			      sizeof(s->task.comm), thread, sizeof(thread));
	r = json_object();
	json_set_str(r, "metric", stall_schema.metric);
	record_set_time(r, s->task.ts_ns);
	record_set_task(r, &s->task);
	json_set_str(r, "thread_name", thread);
	json_set_str(r, "task", tk.name);
	json_set_str(r, "task_coro", tk.coro);
	json_set_real(r, "duration_ms", ms(dur));
	json_set_real(r, "on_cpu_ms", ms(on));
	json_set_real(r, "off_cpu_ms", ms(off));
	json_set_real(r, "runq_ms", ms(runq));
	json_set_str(r, "poller", s->poller < PYLOOP_POLLER_MAX && poller_names[s->poller] ? poller_names[s->poller] : "?");
	json_set_str(r, "py_frame", strrchr(py, ';') ? strrchr(py, ';') + 1 : py);
	json_set_str(r, "py_stack", py);
	json_set_int(r, "py_stack_samples", py_samples);
	json_set_str(r, "blocking_py_stack", p && p->block ? p->block : "");
	top = json_array();
	for (int i = 0; i < n && i < TOP_STACKS; i++) {
		json_t *e = json_object(); /* not a record (keycheck.sh) */
		json_set_str(e, "stack", cand[i].stack);
		json_set_real(e, "ms", cand[i].ms);
		json_set_real(e, "share_pct", dur ? 100.0 * cand[i].ms / ms(dur) : 0);
		json_set_int(e, "samples", cand[i].samples);
		json_set_str(e, "kind", cand[i].blocked ? "blocked" : "on_cpu");
		json_array_append_new(top, e);
	}
	json_object_set_new(r, "top_stacks", top);
	json_set_int(r, "iterations_before", (json_int_t)s->iterations_before);
	if (o->folded || o->out.path)
		fold_stall(o, thread, cand, n, dur);
	if (o->folded)
		json_decref(r); /* -f: stdout is flame-graph input only */
	else
		sink_record(o->base.sink, &stall_schema, r);
	free(sorted);
	if (p) {
		pending_reset(p, 0);
		p->tid = 0;
	}
}

static void on_event(void *ctx, void *data, int size)
{
	struct pyloop *o = ctx;
	const __u32 *kind = (const __u32 *)((const char *)data + sizeof(struct task_head));

	if (size < (int)(sizeof(struct task_head) + sizeof(__u32)))
		return;
	if (*kind == PYLOOP_REC_STALL && size >= (int)sizeof(struct pyloop_stall))
		on_stall(o, data);
	else if (*kind == PYLOOP_REC_SAMPLE || *kind == PYLOOP_REC_BLOCK)
		on_stack(o, data, size);
}

/* The programs' running flag: 1 once everything is attached, 0 at the end. 0, or -1. */
static int set_running(struct pyloop *o, __u32 on)
{
	int fd = bpfprog_table_fd(o->base.prog, "running");
	__u32 zero = 0;

	if (fd < 0 || bpf_update_elem(fd, &zero, &on, BPF_ANY)) {
		log_error("cannot %s the BPF programs", on ? "start" : "stop");
		return -1;
	}
	return 0;
}

static int start(struct tracker *t)
{
	static const char *const names[] = { "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll",
					     "ppoll", "select", "pselect6" };
	struct pyloop *o = (struct pyloop *)t;
	struct bpfprog *p = t->prog;
	char tp[64];

	if (pytargets_start(&o->targets, o->no_stacks ? NULL : p))
		return -1;
	if (pytargets_set_pid_map(&o->targets, p, "target_pids"))
		return -1;
	snprintf(t->banner, sizeof(t->banner), "Tracing the event loops of %d process%s (stalls of %lu ms or more).",
		 o->targets.n, o->targets.n == 1 ? "" : "es", o->min_ms);
	o->start_ns = o->last_report_ns = time_mono_ns();
	o->next_no_loop_ns = o->start_ns + NO_LOOP_AFTER_MS * 1000000ull;
	if (bpfprog_open_ring_buffer(p, "events", on_event, o))
		return -1;
	/* the pollers end first (bpfprog_detach_later), so no stall ends after the scheduler is gone */
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(tp, sizeof(tp), "sys_enter_%s", names[i]);
		if (!strcmp(names[i], "epoll_pwait2") && !tpformat_has_field("syscalls", tp, "epfd"))
			continue;
		if (bpfprog_attach_tracepoint(p, "syscalls", tp))
			return -1;
		snprintf(tp, sizeof(tp), "sys_exit_%s", names[i]);
		if (bpfprog_attach_tracepoint(p, "syscalls", tp))
			return -1;
	}
	bpfprog_detach_later(p);
	if (bpfprog_attach_tracepoint(p, "sched", "sched_switch") ||
	    bpfprog_attach_tracepoint(p, "sched", "sched_wakeup"))
		return -1;
	if (!o->no_stacks &&
	    bpfprog_attach_perf_event(p, "on_sample", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, o->freq, -1))
		return -1;
	if (set_running(o, 1))
		return -1;
	if (!o->no_stacks)
		t->poll_ms = PYTASKS_POLL_MS; /* the task field (pytasks.h) */
	return 0;
}

/* The percentiles of tid's iterations from iter_hist's entries (keys/vals, n of them). */
static void thread_hist(struct pyloop *o, struct lathist *h, __u32 tid, const struct pyloop_thread *th,
			const struct pyloop_hist_key *keys, const __u64 *vals, size_t n)
{
	memset(h, 0, sizeof(*h));
	for (size_t i = 0; i < n; i++) {
		if (keys[i].tid != tid || keys[i].bucket >= LATHIST_FINE_BUCKETS)
			continue;
		if (o->hist_direct) {
			h->fine[keys[i].bucket] += vals[i];
			h->count += vals[i];
		} else {
			/* the bucket's lowest value, as lathist would be given it */
			unsigned b = keys[i].bucket;
			__u64 lo = b < 64 ? b : (__u64)(64 + (b & 63)) << ((b >> 6) - 1);
			for (__u64 k = 0; k < vals[i]; k++)
				lathist_add(h, lo);
		}
	}
	h->min_ns = th->min_ns;
	h->max_ns = th->max_ns;
}

/* One row per loop thread (when print); how many there are. */
static unsigned long long print_threads(struct pyloop *o, bool print)
{
	int fd = bpfprog_table_fd(o->base.prog, "loops"), hfd = bpfprog_table_fd(o->base.prog, "iter_hist");
	struct pyloop_hist_key *keys = malloc(PYLOOP_HIST_MAX * sizeof(*keys));
	__u64 *vals = malloc(PYLOOP_HIST_MAX * sizeof(*vals));
	struct lathist *h = malloc(sizeof(*h));
	double secs = (double)(time_mono_ns() - o->start_ns) / 1e9;
	char thread[PYTHREAD_NAME_MAX], comm[16];
	unsigned long long rows = 0;
	struct pyloop_thread th;
	size_t n = 0;
	__u32 key, next;
	bool first = true;

	if (fd < 0 || !keys || !vals || !h)
		goto out;
	while (print && hfd >= 0 && n < PYLOOP_HIST_MAX && !bpf_get_next_key(hfd, n ? &keys[n - 1] : NULL, &keys[n]))
		if (!bpf_lookup_elem(hfd, &keys[n], &vals[n]))
			n++;
	while (!bpf_get_next_key(fd, first ? NULL : &key, &next)) {
		json_t *r;
		first = false;
		key = next;
		if (bpf_lookup_elem(fd, &key, &th) || !th.polls)
			continue; /* seen returning only: not a loop yet */
		if (rows++, !print)
			continue;
		if (rows == 1)
			sink_table_begin(o->base.sink, &thread_schema, NULL);
		if (procinfo_comm((pid_t)th.pid, (pid_t)key, comm, sizeof(comm)))
			comm[0] = '\0';
		pytargets_thread_name(&o->targets, (pid_t)th.pid, (pid_t)key, comm, sizeof(comm), thread,
				      sizeof(thread));
		thread_hist(o, h, key, &th, keys, vals, n);
		r = json_object();
		json_set_str(r, "metric", thread_schema.metric);
		json_set_int(r, "pid", th.pid);
		json_set_int(r, "tid", key);
		json_set_str(r, "thread_name", thread);
		json_set_str(r, "poller", th.poller < PYLOOP_POLLER_MAX && poller_names[th.poller] ? poller_names[th.poller] : "?");
		json_set_int(r, "iterations", (json_int_t)th.iterations);
		json_set_real(r, "iterations_per_s", secs > 0 ? (double)th.iterations / secs : 0);
		json_set_real(r, "poll_ms", ms(th.poll_ns));
		json_set_real(r, "run_ms", ms(th.run_ns));
		json_set_int(r, "stalls", (json_int_t)th.stalls);
		json_set_real(r, "p50_ms", ms(lathist_percentile_ns(h, 50)));
		json_set_real(r, "p99_ms", ms(lathist_percentile_ns(h, 99)));
		json_set_real(r, "max_ms", ms(th.max_ns));
		sink_table_row(o->base.sink, &thread_schema, r);
	}
out:
	free(keys);
	free(vals);
	free(h);
	return rows;
}

/* -f: the folded stall stacks since the last time, "THREAD;STACK MICROSECONDS". */
static void print_folded(struct pyloop *o)
{
	FILE *f = sink_text(o->base.sink);

	for (size_t i = 0; f && i < o->folded_agg.n; i++)
		if (o->folded_agg.v[i].total >= 1000)
			fprintf(f, "%s %lld\n", o->folded_agg.v[i].key, o->folded_agg.v[i].total / 1000);
	if (f)
		fflush(f);
	stackagg_clear(&o->folded_agg);
}

/* Whether a thread of pid sits in a poller now (/proc/PID/task/TID/syscall): an idle loop. */
static bool blocked_in_poller(pid_t pid)
{
	char path[64], buf[64];
	struct dirent *d;
	bool found = false;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	while (dir && !found && (d = readdir(dir))) {
		FILE *f;
		long nr;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/syscall", (int)pid, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && sscanf(buf, "%ld", &nr) == 1)
			for (size_t i = 0; i < sizeof(poller_nrs) / sizeof(poller_nrs[0]); i++)
				found |= nr == poller_nrs[i];
		fclose(f);
	}
	if (dir)
		closedir(dir);
	return found;
}

/*
 * Every second from NO_LOOP_AFTER_MS on: a target with no thread seen in a poller and
 * none blocked in one is said once (its loop may start later: it stays traced).
 */
static void check_no_loop(struct pyloop *o)
{
	int fd = bpfprog_table_fd(o->base.prog, "loops");
	struct pyloop_thread th;
	__u32 key, next;
	bool first = true;

	for (int i = 0; i < o->targets.n && o->nno_loop < MAX_TARGETS; i++) {
		bool known = false;
		for (int j = 0; j < o->nno_loop && !known; j++)
			known = o->no_loop[j].pid == o->targets.v[i].pid;
		if (!known && !o->targets.v[i].exited)
			o->no_loop[o->nno_loop++] = (struct no_loop){ o->targets.v[i].pid, false };
	}
	while (fd >= 0 && !bpf_get_next_key(fd, first ? NULL : &key, &next)) {
		first = false;
		key = next;
		if (bpf_lookup_elem(fd, &key, &th))
			continue;
		for (int j = 0; j < o->nno_loop; j++)
			if (o->no_loop[j].pid == (pid_t)th.pid)
				o->no_loop[j].done = true;
	}
	for (int j = 0; j < o->nno_loop; j++) {
		struct pytarget *pt;

		if (o->no_loop[j].done)
			continue;
		o->no_loop[j].done = true;
		pt = pytargets_find(&o->targets, o->no_loop[j].pid);
		if (!pt || pt->exited || blocked_in_poller(o->no_loop[j].pid))
			continue;
		log_warn("pid %d: no event loop thread yet (no thread blocks in epoll_wait, poll or select); "
			 "still watching", (int)o->no_loop[j].pid);
	}
}

static int tick(struct tracker *t, uint64_t now_ns)
{
	struct pyloop *o = (struct pyloop *)t;

	t->done = pytargets_refresh(&o->targets, now_ns);
	if (!t->done && now_ns >= o->next_no_loop_ns) {
		o->next_no_loop_ns = now_ns + 1000000000ull;
		check_no_loop(o);
	}
	if (!t->done && o->interval_s && (double)(now_ns - o->last_report_ns) >= o->interval_s * 1e9) {
		o->last_report_ns = now_ns;
		if (o->folded)
			print_folded(o);
		else
			print_threads(o, true);
	}
	return 0;
}

static void stop_tracing(struct pyloop *o)
{
	if (set_running(o, 0))
		return;
	usleep(10000); /* programs running on other CPUs finish (they run for microseconds) */
	bpfprog_deliver(o->base.prog);
}

static void finish(struct tracker *t)
{
	struct pyloop *o = (struct pyloop *)t;
	unsigned long long nthreads;
	json_t *sum;

	stop_tracing(o);
	if (o->folded)
		print_folded(o);
	/* -f: stdout is flame-graph input only */
	nthreads = print_threads(o, !o->folded);
	sum = summary_begin(t, &summary_schema, counters);
	json_set_int(sum, "unresolved_frames", (json_int_t)o->text.unresolved);
	json_set_int(sum, "stacks_other", (json_int_t)(o->profile.other + o->folded_agg.other));
	record_set_targets(sum, o->targets.skipped, o->targets.exits);
	json_set_int(sum, "loop_threads", (json_int_t)nthreads);
	summary_end(t, &summary_schema, sum, o->targets.added);
	t->failed |= 0 != profile_write(&o->out, &o->profile, &(const struct profile_meta){
		.title = "pyloop: what stalled the event loops",
		.count_name = "stalls",
		.weight_name = "stall",
		.by_weight = true,
		.per_thread = true,
		.folded_us = true,
	});
}

static void destroy(struct tracker *t)
{
	struct pyloop *o = (struct pyloop *)t;

	pytargets_free(&o->targets);
	stackagg_free(&o->profile);
	stackagg_free(&o->folded_agg);
	for (int i = 0; i < MAX_PENDING; i++) {
		stackagg_free(&o->pending[i].samples);
		stackagg_free(&o->pending[i].tasks);
		free(o->pending[i].block);
	}
	pyframes_text_free(&o->text);
}

/* What pymonitor calls it (its table: ebpf_loop_stall), and its flag. */
static const struct monitor_entry monitor[] = {
	{ .name = "loop",
	  .needs_pids = true,
	  .flags = { { "loop-min-ms", "min-ms", "MS", "loop: only event-loop stalls of MS or more (default 100)" } } },
	{ 0 },
};

const struct tracker_ops pyloop_tracker = {
	.name = "pyloop",
	.size = sizeof(struct pyloop),
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
