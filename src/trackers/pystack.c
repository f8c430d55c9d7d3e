/*
 * The pystack tracker: where CPU goes in CPython processes, in Python frames. Samples
 * every thread of the target processes at -F Hz with a cpu-clock perf event, walks
 * the Python frame chain in BPF (bpf_text/python.bpf.h) and resolves names and lines
 * in userspace (src/pyproc.h). Output: a top table (default), folded stacks (-f) or
 * one record per sample (-j). With --from it draws stored samples instead (profread.h),
 * without BPF; with --baseline, the difference against another profile (profdiff.h).
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <linux/types.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpusampler.h"
#include "log.h"
#include "jsonfmt.h"
#include "pyebpf_bpf.h"
#include "pyframes.h"
#include "pystack.h"
#include "profdiff.h"
#include "profile.h"
#include "profread.h"
#include "pytargets.h"
#include "pytasks.h"
#include "record.h"
#include "stackagg.h"
#include "topview.h"
#include "monitor.h"
#include "summary.h"
#include "tracker.h"

extern const char pystack_bpf_text[];

/*
 * Target processes at most (--children can add many); without -p every process of the
 * host is looked at once and kept (CPython or not, so it is not opened again).
 */
enum { MAX_TARGETS = 256, MAX_HOST_PROCESSES = 65536 };

/* The letters first; every long-only option from OPT_TOOL_BASE (after 'o', 'p' would be -p's id). */
enum {
	OPT_FREQ = 'F',
	OPT_FOLDED = 'f',
	OPT_INTERVAL = 'i',
	OPT_OUTPUT = 'o',
	OPT_CHILDREN = OPT_TOOL_BASE,
	OPT_PER_THREAD,
	OPT_MAX_DEPTH,
	OPT_LINES,
	OPT_TOP,
	OPT_FORMAT,
	OPT_ASYNC,
	OPT_PER_TASK,
	OPT_FROM,
	OPT_HOST,
	OPT_SINCE,
	OPT_UNTIL,
	OPT_BASELINE,
	OPT_BASELINE_SINCE,
	OPT_BASELINE_UNTIL,
	OPT_BASELINE_ENV,
};

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_FREQ, 'F', "frequency", "HZ", "samples per second and CPU (default 99)" },
	{ OPT_CHILDREN, 0, "children", NULL, "also sample the child processes of the -p pids (and new ones)" },
	{ OPT_FOLDED, 'f', "folded", NULL, "print folded stacks (FlameGraph input) instead of the top table" },
	{ OPT_PER_THREAD, 0, "per-thread", NULL, "with -f or -o: the thread name as the root frame" },
	{ OPT_PER_TASK, 0, "per-task", NULL, "with -f or -o: the asyncio task's name as the root frame (task:NAME)" },
	{ OPT_ASYNC, 0, "async", NULL, "sample every asyncio task, running or waiting, its await chain (3.11+)" },
	{ OPT_LINES, 0, "lines", NULL, "with -f or -o: a frame per line (default: per function, its def line)" },
	PROFILE_OPT_ENTRIES(OPT_OUTPUT, OPT_FORMAT),
	{ OPT_TOP, 0, "top", NULL, "a live view like top(1), redrawn every second or -i SECONDS (q quits)" },
	{ OPT_INTERVAL, 'i', "interval", "SECONDS", "print the table (or folded stacks) every SECONDS" },
	{ OPT_MAX_DEPTH, 0, "max-depth", "N", "frames kept per stack, innermost first (default 128, max 256)" },
	PROFREAD_OPT_ENTRIES(OPT_FROM, OPT_HOST, OPT_SINCE, OPT_UNTIL),
	{ OPT_BASELINE, 0, "baseline", "FILE", "with -f or -o: the difference against FILE (before): folded, .pb.gz or .speedscope.json" },
	{ OPT_BASELINE_SINCE, 0, "baseline-since", "TIME", "with --from: the baseline is the stored range from TIME" },
	{ OPT_BASELINE_UNTIL, 0, "baseline-until", "TIME", "with --from: ... until TIME" },
	{ OPT_BASELINE_ENV, 0, "baseline-env", "NAME", "with --from: the baseline is the stored rows of env NAME (the profile's: -e)" },
	OPT_ENTRIES_TRACKER_TAIL,
};

/* -j: one per sample (there are no columns of samples: without -j, tables or folded text). */
static const struct field sample_fields[] = {
	FIELD_METRIC,
	{ .name = "time", .type = FIELD_TIME, .meaning = "when the sample was taken" },
	FIELD_PID(0),
	FIELD_TID(0),
	FIELD_CONTAINER_PID,
	FIELD_CONTAINER_TID,
	FIELD_COMM(0),
	FIELD_THREAD_NAME(0),
	FIELD_TASK,
	FIELD_TASK_CORO,
	{ .name = "stack", .type = FIELD_STR,
	  .meaning = "the frames, root first, ';' between them, each \"qualname (file:line)\"" },
	{ .name = "stack_depth", .type = FIELD_INT, .meaning = "frames in stack, without the markers" },
	{ .name = "leaf_func", .type = FIELD_STR, .meaning = "the innermost frame's qualified name" },
	{ .name = "leaf_file", .type = FIELD_STR, .meaning = "the innermost frame's file; null when unknown" },
	{ .name = "leaf_line", .type = FIELD_INT,
	  .meaning = "the innermost frame's current line; null when it has none or is unknown" },
	{ .name = "status", .type = FIELD_STR, .meaning = "complete, truncated, or error: with the reason" },
	FIELD_ENV,
	FIELD_END,
};

/* --async -j: one per task per sample. */
static const struct field task_fields[] = {
	FIELD_METRIC,
	{ .name = "time", .type = FIELD_TIME, .meaning = "when the tasks were read" },
	FIELD_PID(0),
	FIELD_CONTAINER_PID,
	{ .name = "task", .type = FIELD_STR, .meaning = "the task's name (create_task(name=...), else Task-N)" },
	{ .name = "task_coro", .type = FIELD_STR, .meaning = "the task's coroutine (qualified name)" },
	{ .name = "task_state", .type = FIELD_STR, .meaning = "running (its coroutine executes) or waiting" },
	{ .name = "awaited_by", .type = FIELD_STR, .meaning = "the task awaiting it (gather, TaskGroup, await), empty when none" },
	{ .name = "stack", .type = FIELD_STR, .meaning = "its await chain continued by its awaiters', root first, ';' between frames, each \"qualname (file:line)\"" },
	{ .name = "stack_depth", .type = FIELD_INT, .meaning = "frames in stack" },
	{ .name = "leaf_func", .type = FIELD_STR, .meaning = "the innermost frame's qualified name (where the task waits or runs)" },
	{ .name = "leaf_file", .type = FIELD_STR, .meaning = "the innermost frame's file; null when unknown" },
	{ .name = "leaf_line", .type = FIELD_INT, .meaning = "the innermost frame's current line; null when it has none or is unknown" },
	FIELD_ENV,
	FIELD_END,
};

/*
 * A row of the top table: a function of one process. Its columns are
 * "%7s %7s %8s %8s %7s  %s": PID's width takes the second space before FUNCTION
 * (header and format end with a blank).
 */
static const struct field function_fields[] = {
	FIELD_METRIC,
	{ .name = "own_pct", .type = FIELD_REAL, .unit = "%", COLUMN(1, "%OWN", 7), .fmt = "%6.2f%%",
	  .meaning = "share of the samples with it as the innermost frame" },
	{ .name = "total_pct", .type = FIELD_REAL, .unit = "%", COLUMN(2, "%TOTAL", 7), .fmt = "%6.2f%%",
	  .meaning = "share of the samples with it anywhere on the stack" },
	{ .name = "own", .type = FIELD_INT, COLUMN(3, "OWN", 8), .meaning = "samples with it as the innermost frame" },
	{ .name = "total", .type = FIELD_INT, COLUMN(4, "TOTAL", 8),
	  .meaning = "samples with it on the stack (once per sample)" },
	{ .name = "pid", .type = FIELD_INT, COLUMN(5, "PID ", 8), .fmt = "%7" JSON_INTEGER_FORMAT " ",
	  .meaning = "the process it ran in (host pid)" },
	{ .name = "function", .type = FIELD_STR, COLUMN(6, "FUNCTION (FILE:LINE)", 0),
	  .meaning = "qualname (file:line of its def)" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field summary_fields[] = {
	FIELD_METRIC,
	PYSTACK_COUNTERS(PYEBPF_COUNTER_FIELD)
	{ .name = "unresolved_frames", .type = FIELD_INT,
	  .meaning = "frames whose code object could not be read in user space" },
	FIELD_STACKS_OTHER,
	{ .name = "task_samples", .type = FIELD_INT, .meaning = "--async: task stacks sampled" },
	{ .name = "torn_reads", .type = FIELD_INT, .meaning = "tasks (or task lists) left out because they changed while read" },
	FIELD_LOST,
	FIELD_MISSED,
	{ .name = "processes", .type = FIELD_INT,
	  .meaning = "CPython processes sampled (with --children, children too)" },
	FIELD_TARGETS,
	FIELD_ENV,
	FIELD_END,
};

static const struct counter_name counters[] = { PYSTACK_COUNTERS(PYEBPF_COUNTER_NAME) { 0, NULL, NULL } };

static const struct schema sample_schema = { "py_stack", SCHEMA_EVENT, sample_fields };
static const struct schema task_schema = { "py_task", SCHEMA_EVENT, task_fields };
static const struct schema function_schema = { "py_function", SCHEMA_ROW, function_fields };
static const struct schema summary_schema = { "pystack_summary", SCHEMA_SUMMARY, summary_fields };
/* --from: the aggregated rows of the samples (profrows.h), summed per stack and thread */
enum { STORED_PID, STORED_TID, STORED_THREAD, STORED_TASK };
static const struct profread_layout stored_layout = {
	.metric = "py_stack", .profile = true, .stack = "stack_id", .weight = "samples", .sum = true,
	.cols = { "pid", "tid", "thread_name", "task", NULL }, .what = "samples",
};
static const struct schema *const schemas[] = { &sample_schema, &task_schema, &function_schema, &summary_schema,
						 NULL };

struct pystack {
	struct tracker base;
	unsigned long freq, max_depth;
	bool max_depth_set;
	double interval_s;
	bool folded, per_thread, lines, top;
	bool async, per_task;
	struct pytasks_snapshot tasks; /* --async: the last read of a process's tasks */
	uint64_t next_async_ns;
	unsigned long long task_samples, torn_reads;
	pid_t *unsupported;            /* pids told their version has no task support */
	int nunsupported;
	struct pywalk_frame task_frames[PYWALK_DEPTH_LIMIT];
	struct profile_out out;
	struct stackagg profile;  /* -o: the stacks of the whole run */
	struct pytargets targets;
	struct cpusampler sampler; /* random instants at -F Hz on average */
	struct stackagg agg;      /* folded stacks, or the top table's functions */
	struct pyframes_buf text; /* a sample's stack */
	unsigned long long interval_samples, unresolved_frames;
	unsigned tables;          /* top tables printed so far */
	bool top_tty;             /* --top on a terminal (else periodic tables) */
	uint64_t last_report_ns, start_ns;
	struct pycode_loc locs[PYWALK_DEPTH_LIMIT]; /* a sample's frames, innermost first */
	struct profread_query from;    /* --from: the stored samples drawn (source NULL: live ones) */
	struct profread_query before;  /* --baseline-since/--baseline-until: the baseline's range */
	const char *baseline_file;     /* --baseline FILE */
	const char *baseline_env;      /* --baseline-env NAME */
	bool stored_baseline;          /* the baseline is stored rows (a range, an env) */
	bool diff;                     /* against a baseline: by function (profdiff.h) */
	struct stackagg baseline;      /* its stacks, by function */
	long long stored, stored_before; /* samples read back */
};

static void init(struct tracker *t)
{
	struct pystack *ps = (struct pystack *)t;

	ps->freq = 99;
	ps->max_depth = 128;
	pytargets_init(&ps->targets, MAX_TARGETS);
	ps->targets.announce = true;
	stackagg_init(&ps->agg);
	stackagg_init(&ps->profile);
	stackagg_limit(&ps->agg, STACKAGG_MAX_STACKS);
	stackagg_limit(&ps->profile, STACKAGG_MAX_STACKS);
	stackagg_init(&ps->baseline);
	profread_init(&ps->from, &stored_layout);
	ps->before = ps->from;
}

static int option(struct tracker *t, int id, const char *arg)
{
	struct pystack *ps = (struct pystack *)t;

	switch (id) {
	case OPT_FREQ:
		return opts_parse_ulong("frequency", arg, 1, 10000, &ps->freq);
	case OPT_INTERVAL:
		return opts_parse_seconds("interval", arg, &ps->interval_s);
	case OPT_MAX_DEPTH:
		ps->max_depth_set = true;
		return opts_parse_ulong("max-depth", arg, 1, PYWALK_DEPTH_LIMIT, &ps->max_depth);
	case OPT_CHILDREN:
		ps->targets.children = true;
		return 0;
	case OPT_FOLDED:
		ps->folded = true;
		return 0;
	case OPT_PER_THREAD:
		ps->per_thread = true;
		return 0;
	case OPT_LINES:
		ps->lines = true;
		return 0;
	case OPT_ASYNC:
		ps->async = true;
		return 0;
	case OPT_PER_TASK:
		ps->per_task = true;
		return 0;
	case OPT_TOP:
		ps->top = true;
		return 0;
	case OPT_OUTPUT:
	case OPT_FORMAT:
		return profile_option(&ps->out, id == OPT_FORMAT, arg);
	case OPT_FROM:
	case OPT_HOST:
	case OPT_SINCE:
	case OPT_UNTIL:
		return profread_option(&ps->from, (enum profread_opt)(id - OPT_FROM), arg);
	case OPT_BASELINE:
		ps->baseline_file = arg;
		return 0;
	case OPT_BASELINE_SINCE:
		return profread_parse_time("baseline-since", arg, &ps->before.since_us);
	case OPT_BASELINE_UNTIL:
		return profread_parse_time("baseline-until", arg, &ps->before.until_us);
	case OPT_BASELINE_ENV:
		ps->baseline_env = arg;
		return 0;
	}
	return -1;
}

/* --from and --baseline: what goes with what. */
static int check_stored(struct pystack *ps)
{
	const struct common_opts *c = ps->base.common;
	bool range = ps->before.since_us >= 0 || ps->before.until_us >= 0;

	if (!ps->from.source && (ps->from.host || ps->from.since_us >= 0 || ps->from.until_us >= 0 || range ||
				 ps->baseline_env))
		return opts_usage_error("--host, --since, --until, --baseline-since/-until and --baseline-env need --from");
	/* (stored stacks are as deep as the run that took them kept them) */
	if (ps->from.source && (ps->top || ps->targets.children || ps->async || ps->interval_s || ps->max_depth_set))
		return opts_usage_error("--from draws stored samples: not with --top, --children, --async, --max-depth or -i");
	ps->before.source = ps->from.source;
	if (profread_check(&ps->from, c) || profread_check(&ps->before, c))
		return -1;
	if (ps->baseline_file && (range || ps->baseline_env))
		return opts_usage_error("--baseline FILE or --baseline-since/-until/-env, not both");
	ps->stored_baseline = range || ps->baseline_env;
	if (ps->baseline_env) {
		/* env against env: the profile's range unless the baseline has its own */
		ps->before.env = ps->baseline_env;
		if (!range) {
			ps->before.since_us = ps->from.since_us;
			ps->before.until_us = ps->from.until_us;
		}
	}
	ps->diff = ps->baseline_file || ps->stored_baseline;
	if (ps->diff && !ps->folded && !ps->out.path)
		return opts_usage_error("--baseline needs -f (the text diff) or -o FILE.svg");
	if (ps->diff && (ps->per_thread || ps->per_task))
		return opts_usage_error("--baseline compares functions: not with --per-thread or --per-task");
	ps->out.diff = ps->diff;
	ps->base.stored = ps->from.source != NULL;
	return 0;
}

static int check(struct tracker *t)
{
	struct pystack *ps = (struct pystack *)t;
	const struct common_opts *c = t->common;

	if (ps->targets.children && c->npids == 0)
		return opts_usage_error("--children needs -p (the parent processes to follow)");
	if (check_stored(ps))
		return -1;
	if (profile_check(&ps->out))
		return -1;
	if ((ps->per_thread || ps->lines || ps->per_task) && !ps->folded && !ps->out.path)
		return opts_usage_error("--per-thread, --per-task and --lines need -f/--folded or -o");
	if (ps->per_thread && ps->per_task)
		return opts_usage_error("--per-thread and --per-task exclude each other");
	if (ps->async && ps->per_thread)
		return opts_usage_error("--async samples tasks: not with --per-thread");
	if (ps->folded && c->json)
		return opts_usage_error("-f and -j exclude each other");
	if (ps->top && (ps->folded || c->json))
		return opts_usage_error("--top shows the table: not with -f or -j");
	/* speedscope's profiles are per thread */
	ps->per_thread |= ps->out.format == PROFILE_SPEEDSCOPE;
	return 0;
}

/* BTF offsets and settings as -D options; then the -p targets (a wrong pid fails before the compile). */
static int prepare(struct tracker *t)
{
	struct pystack *ps = (struct pystack *)t;

	if (ps->baseline_file && profdiff_read(ps->baseline_file, &ps->baseline))
		return -1;
	if (ps->from.source)
		return 0; /* stored samples: no BPF, no targets */
	/* targets are the keys of py_config, not pid_filter */
	if (pytargets_cflags(&t->cflags, t->common, false, true))
		return -1;
	cflags_add(&t->cflags, "-DPY_MAX_DEPTH=%lu", ps->max_depth);
	t->text = pystack_bpf_text;
	if (t->common->print_ebpf)
		return 0;
	if (t->common->npids &&
	    !pytargets_add_pids(&ps->targets, t->common->pids, t->common->npids, PYTARGETS_CPYTHON, NULL))
		return tracker_no_targets(t);
	if (t->common->npids == 0) {
		/* every CPython of the host, now and (each second) the ones started later */
		ps->targets.max = MAX_HOST_PROCESSES;
		ps->targets.all = true;
		pytargets_add_all(&ps->targets);
	}
	return 0;
}

/* -j: the sample as a record. */
static void emit_sample(struct pystack *ps, struct pytarget *pt, const struct pystack_sample *s, int depth,
			const struct pytask_name *tk)
{
	const struct pycode_loc *leaf = depth ? &ps->locs[0] : NULL;
	char thread[PYTHREAD_NAME_MAX];
	json_t *o = json_object();

	pyproc_thread_name(pt->py, (pid_t)s->task.tid, s->task.comm, sizeof(s->task.comm),
			     thread, sizeof(thread));
	json_set_str(o, "metric", sample_schema.metric);
	record_set_time(o, s->task.ts_ns);
	record_set_task(o, &s->task);
	json_set_str(o, "thread_name", thread);
	json_set_str(o, "task", tk->name);
	json_set_str(o, "task_coro", tk->coro);
	json_set_str(o, "stack", pyframes_folded(&ps->text, NULL, ps->locs, depth, s->status));
	json_set_int(o, "stack_depth", depth);
	json_set_str(o, "leaf_func", leaf ? leaf->func : "");
	if (leaf && leaf->file[0]) {
		json_set_str(o, "leaf_file", leaf->file);
		/* 0: an instruction without a location (CPython's co_lines() says None) */
		record_set_int_or_null(o, "leaf_line", leaf->line, leaf->line > 0);
	} else {
		json_object_set_new(o, "leaf_file", json_null());
		json_object_set_new(o, "leaf_line", json_null());
	}
	json_set_str(o, "status", pywalk_status_name(s->status));
	sink_record(ps->base.sink, &sample_schema, o);
}

/* -f or -o: one more of this stack (--per-thread: under its thread's name, --per-task its task's). */
static void count_stack(struct pystack *ps, struct stackagg *agg, struct pytarget *pt,
			const struct pystack_sample *s, int depth, const struct pytask_name *tk)
{
	char thread[PYTHREAD_NAME_MAX + 8];
	const char *stack, *root = NULL;

	if (ps->per_thread) {
		pyproc_thread_name(pt->py, (pid_t)s->task.tid, s->task.comm,
				     sizeof(s->task.comm), thread, sizeof(thread));
		root = thread;
	} else if (ps->per_task) {
		root = pytasks_root(tk->name, thread, sizeof(thread));
	}
	stack = pyframes_folded(&ps->text, root, ps->locs, depth, s->status);
	stackagg_add_stack(agg, stack, strlen(stack));
}

/*
 * The top table: own for the leaf, total once per function (of a process) per sample
 * (recursion); --async: the task (root, when not NULL) counts as a function too.
 */
static void count_functions(struct pystack *ps, __u32 pid, int depth, const char *root)
{
	char key[900];

	stackagg_begin_sample(&ps->agg);
	if (root) {
		int n = snprintf(key, sizeof(key), "%u\t%s", pid, root);
		stackagg_add_frame(&ps->agg, key, n < (int)sizeof(key) ? (size_t)n : sizeof(key) - 1, depth == 0);
	}
	for (int i = 0; i < depth; i++) {
		int n = snprintf(key, sizeof(key), "%u\t%s\t%s\t%d", pid, ps->locs[i].func,
				 ps->locs[i].file, ps->locs[i].firstlineno);
		stackagg_add_frame(&ps->agg, key, n < (int)sizeof(key) ? (size_t)n : sizeof(key) - 1, i == 0);
	}
}

static void on_sample(void *ctx, void *data, int size)
{
	struct pystack *ps = ctx;
	const struct pystack_sample *s = data;
	const size_t head = offsetof(struct pystack_sample, frames);
	struct pytarget *pt;
	struct pytask_name tk = { "", "" };
	int depth;

	if (size < (int)head)
		return;
	depth = pyframes_depth(s->depth, size, head);
	if (depth == 0)
		return; /* no frames (counted in BPF as idle, no_frames or errors): nothing to show */
	pt = pytargets_find(&ps->targets, (pid_t)s->task.pid);
	if (!pt || !pt->py)
		return;
	ps->interval_samples++;
	ps->unresolved_frames += pyframes_resolve(pt->py, s->frames, depth, ps->locs);
	if (ps->base.common->json || ps->per_task)
		pytargets_task_name(&ps->targets, pt, &s->asyncio, s->frames, (uint32_t)depth, &tk);
	if (ps->base.common->json)
		emit_sample(ps, pt, s, depth, &tk);
	if (!ps->lines)
		pyframes_by_function(ps->locs, depth); /* -f, -o (the table keys on the def line anyway) */
	if (ps->folded)
		count_stack(ps, &ps->agg, pt, s, depth, &tk);
	else if (!ps->base.common->json)
		count_functions(ps, s->task.pid, depth, NULL);
	if (ps->out.path)
		count_stack(ps, &ps->profile, pt, s, depth, &tk);
}

/* --async: said once per process whose tasks cannot be read (3.8-3.10). */
static void tell_unsupported(struct pystack *ps, pid_t pid, const char *why)
{
	pid_t *v;

	for (int i = 0; i < ps->nunsupported; i++)
		if (ps->unsupported[i] == pid)
			return;
	v = realloc(ps->unsupported, (size_t)(ps->nunsupported + 1) * sizeof(*v));
	if (!v)
		return;
	ps->unsupported = v;
	v[ps->nunsupported++] = pid;
	log_warn("pid %d: %s: not supported on this version", pid, why);
}

/* Task i's stack into task_frames, innermost first: its own chain, then its awaiters'. */
static int task_stack(struct pystack *ps, const struct pytasks_snapshot *s, int i)
{
	int n = 0;

	for (int hop = 0; i >= 0 && hop < 64; hop++, i = s->v[i].parent)
		for (int k = 0; k < s->v[i].depth && n < (int)ps->max_depth; k++)
			ps->task_frames[n++] = s->v[i].frames[k];
	return n;
}

static void emit_task(struct pystack *ps, struct pytarget *pt, const struct pytask *k, const char *parent,
		      int depth, uint64_t now_ns)
{
	const struct pycode_loc *leaf = depth ? &ps->locs[0] : NULL;
	json_t *o = json_object();

	json_set_str(o, "metric", task_schema.metric);
	record_set_time(o, now_ns);
	json_set_int(o, "pid", pt->pid);
	json_set_int(o, "container_pid", pyproc_ns_pid(pt->py));
	json_set_str(o, "task", k->name);
	json_set_str(o, "task_coro", k->coro_name);
	json_set_str(o, "task_state", k->running ? "running" : "waiting");
	json_set_str(o, "awaited_by", parent);
	json_set_str(o, "stack", pyframes_folded(&ps->text, NULL, ps->locs, depth, PYWALK_COMPLETE));
	json_set_int(o, "stack_depth", depth);
	json_set_str(o, "leaf_func", leaf ? leaf->func : "");
	if (leaf && leaf->file[0]) {
		json_set_str(o, "leaf_file", leaf->file);
		record_set_int_or_null(o, "leaf_line", leaf->line, leaf->line > 0);
	} else {
		json_object_set_new(o, "leaf_file", json_null());
		json_object_set_new(o, "leaf_line", json_null());
	}
	sink_record(ps->base.sink, &task_schema, o);
}

/* --async: every task of every target, once. */
static void sample_tasks(struct pystack *ps, uint64_t now_ns)
{
	for (int i = 0; i < ps->targets.n; i++) {
		struct pytarget *pt = &ps->targets.v[i];
		struct pytasks_snapshot *s = &ps->tasks;
		char why[200], root[PYTASK_NAME_MAX + 8];
		int r;

		if (!pt->py || pt->exited)
			continue;
		r = pytasks_probe(pt->py, why, sizeof(why));
		if (r < 0)
			tell_unsupported(ps, pt->pid, why);
		if (r || pytasks_read(pt->py, s, true) < 0)
			continue;
		ps->torn_reads += s->torn;
		for (int k = 0; k < s->n; k++) {
			const struct pytask *tk = &s->v[k];
			int depth = task_stack(ps, s, k);
			const char *stack = NULL, *rt = pytasks_root(tk->name, root, sizeof(root));

			ps->task_samples++;
			ps->interval_samples++;
			ps->unresolved_frames += pyframes_resolve(pt->py, ps->task_frames, depth, ps->locs);
			if (ps->base.common->json)
				emit_task(ps, pt, tk, tk->parent >= 0 ? s->v[tk->parent].name : "", depth, now_ns);
			if (!ps->lines)
				pyframes_by_function(ps->locs, depth);
			if (ps->folded || ps->out.path)
				stack = pyframes_folded(&ps->text, rt, ps->locs, depth, PYWALK_COMPLETE);
			if (ps->folded)
				stackagg_add_stack(&ps->agg, stack, strlen(stack));
			else if (!ps->base.common->json)
				count_functions(ps, (__u32)pt->pid, depth, rt);
			if (ps->out.path) {
				stack = pyframes_folded(&ps->text, rt, ps->locs, depth, PYWALK_COMPLETE);
				stackagg_add_stack(&ps->profile, stack, strlen(stack));
			}
		}
	}
}

/*
 * --from: the top table's functions of a stored stack, innermost first. Its frames
 * name the line that ran: a function is "func (file)" (the live table's def line is
 * not stored).
 */
static void count_stored_functions(struct pystack *ps, long long pid, const char *stack)
{
	const char *parts[PYWALK_DEPTH_LIMIT + 2];
	size_t lens[PYWALK_DEPTH_LIMIT + 2];
	int n = 0;
	char key[900];

	for (const char *p = stack; *p && n < PYWALK_DEPTH_LIMIT + 2;) {
		const char *end = strchr(p, ';');
		parts[n] = p;
		lens[n] = end ? (size_t)(end - p) : strlen(p);
		p += lens[n++] + (end ? 1 : 0);
	}
	stackagg_begin_sample(&ps->agg);
	for (int i = n - 1; i >= 0; i--) {
		int k = snprintf(key, sizeof(key), "%lld\t", pid);
		if (i == 0 && parts[0][0] == '[' && (!strncmp(parts[0], "[truncated]", lens[0]) ||
						     !strncmp(parts[0], "[error]", lens[0])))
			continue; /* the marker of an incomplete stack */
		k += (int)profdiff_function(parts[i], lens[i], key + k, sizeof(key) - (size_t)k);
		stackagg_add_frame(&ps->agg, key, (size_t)k, i == n - 1);
	}
}

/* --from: a stored stack of a thread, as a live sample of it would have been counted, samples times. */
static void add_stored(void *ctx, const struct profread_row *r)
{
	struct pystack *ps = ctx;
	char root[PYTASK_NAME_MAX + PYTHREAD_NAME_MAX + 8];
	const char *stack = r->stack;
	const char *thread = r->col[STORED_THREAD] ? r->col[STORED_THREAD] : "";
	const char *task = r->col[STORED_TASK] ? r->col[STORED_TASK] : "";
	long long pid = r->col[STORED_PID] ? strtoll(r->col[STORED_PID], NULL, 10) : 0;
	long long samples = (long long)r->weight;
	char *rooted = NULL;
	struct stackagg_entry *e;

	if (ps->per_thread || ps->per_task) {
		const char *name = ps->per_thread ? thread : pytasks_root(task, root, sizeof(root));
		snprintf(root, sizeof(root), "%s", name);
		pyframes_fold_escape(root, sizeof(root), PYFRAMES_FOLD_ROOT);
		if (asprintf(&rooted, "%s;%s", root, r->stack) < 0)
			return;
		stack = rooted;
	}
	ps->stored += samples;
	ps->interval_samples += (unsigned long long)samples;
	if (ps->folded && (e = stackagg_get(&ps->agg, stack, strlen(stack))))
		e->self += samples;
	for (long long i = 0; !ps->folded && i < samples; i++)
		count_stored_functions(ps, pid, stack); /* once per sample: recursion counts once */
	if (ps->out.path && (e = stackagg_get(&ps->profile, stack, strlen(stack))))
		e->self += samples;
	free(rooted);
}

/* --baseline-since/-until: the baseline's stored stacks, by function. */
static void add_stored_baseline(void *ctx, const struct profread_row *r)
{
	struct pystack *ps = ctx;

	ps->stored_before += (long long)r->weight;
	profdiff_add(&ps->baseline, r->stack, strlen(r->stack), (long long)r->weight);
}

/* --from: every stored sample read now (and the baseline's); the run is then done. */
static int read_stored(struct pystack *ps)
{
	long long rows;

	if (profread_each(&ps->from, add_stored, ps, &rows))
		return -1;
	if (ps->stored_baseline && profread_each(&ps->before, add_stored_baseline, ps, &rows))
		return -1;
	ps->base.done = true;
	return 0;
}

static int start(struct tracker *t)
{
	struct pystack *ps = (struct pystack *)t;
	struct bpfprog *p = t->prog;

	if (ps->from.source)
		return read_stored(ps);

	if (pytargets_start(&ps->targets, p))
		return -1;
	if (ps->targets.all)
		snprintf(t->banner, sizeof(t->banner),
			 "Sampling every CPython process (%d now, and new ones) at %lu Hz.",
			 pytargets_add_all(&ps->targets), ps->freq);
	else
		snprintf(t->banner, sizeof(t->banner), "Sampling %d process%s at %lu Hz.", ps->targets.alive,
			 ps->targets.alive == 1 ? "" : "es", ps->freq);
	ps->start_ns = ps->last_report_ns = time_mono_ns();
	if (ps->top) {
		ps->top_tty = topview_open();
		if (!ps->top_tty && !ps->interval_s)
			ps->interval_s = 1; /* not a terminal: the table every second */
	}
	/*
	 * Woken once per 64 samples, read every 100 ms. A wakeup per sample made the
	 * scheduler switch tasks at sample instants: samples then went to whoever ran just
	 * before each tick, not in proportion to CPU time (3-12 points off on a busy host).
	 */
	if (ps->async) {
		/* the tasks are read from here, at -F Hz: no perf event */
		snprintf(t->banner + strlen(t->banner), sizeof(t->banner) - strlen(t->banner),
			 " Reading asyncio tasks.");
		t->poll_ms = (int)(1000 / ps->freq) ? (int)(1000 / ps->freq) : 1;
		ps->next_async_ns = ps->start_ns;
		return 0;
	}
	return bpfprog_open_perf_buffer(p, "events", on_sample, ps, 64, 64) ||
	       cpusampler_attach(&ps->sampler, p, "on_sample", (double)ps->freq, ps->start_ns ^ (uint64_t)getpid(),
				 ps->start_ns);
}

/* "pid\tfunc\tfile\tline" as pid and "func (file:line)". */
static json_int_t function_name(const char *key, char *buf, size_t len)
{
	char *end;
	json_int_t pid = strtoll(key, &end, 10);
	const char *t1, *t2;

	key = *end == '\t' ? end + 1 : key;
	t1 = strchr(key, '\t');
	t2 = t1 ? strchr(t1 + 1, '\t') : NULL;

	if (t1 && t2)
		snprintf(buf, len, "%.*s (%.*s:%d)", (int)(t1 - key), key, (int)(t2 - t1 - 1), t1 + 1,
			 atoi(t2 + 1));
	else
		snprintf(buf, len, "%s", key);
	return pid;
}

static void print_top(struct pystack *ps)
{
	const struct stackagg_entry **rows = stackagg_sorted(&ps->agg);
	double all = ps->interval_samples ? (double)ps->interval_samples : 1;
	char name[1024];

	/* -i: one table per interval, a blank line between them */
	sink_table_begin(ps->base.sink, &function_schema, ps->tables++ ? "" : NULL);
	for (size_t i = 0; rows && i < ps->agg.n; i++) {
		json_t *o = json_object();
		json_set_str(o, "metric", function_schema.metric);
		json_object_set_new(o, "own_pct", json_real(100.0 * (double)rows[i]->self / all));
		json_object_set_new(o, "total_pct", json_real(100.0 * (double)rows[i]->total / all));
		json_set_int(o, "own", rows[i]->self);
		json_set_int(o, "total", rows[i]->total);
		json_set_int(o, "pid", function_name(rows[i]->key, name, sizeof(name)));
		json_set_str(o, "function", name);
		sink_table_row(ps->base.sink, &function_schema, o);
	}
	free(rows);
}

/* --top on a terminal: the table of the whole run so far, redrawn in place. */
static void draw_top(struct pystack *ps, uint64_t now_ns)
{
	enum { MAX_ROWS = 200, NAME = 512 };
	const struct stackagg_entry **sorted = stackagg_sorted(&ps->agg);
	size_t n = ps->agg.n < MAX_ROWS ? ps->agg.n : MAX_ROWS;
	struct topview_row *rows = calloc(n ? n : 1, sizeof(*rows));
	char *names = malloc((n ? n : 1) * NAME), heading[256];
	double all = ps->interval_samples ? (double)ps->interval_samples : 1;

	for (size_t i = 0; sorted && rows && names && i < n; i++) {
		function_name(sorted[i]->key, names + i * NAME, NAME);
		rows[i] = (struct topview_row){ 100.0 * (double)sorted[i]->self / all,
						100.0 * (double)sorted[i]->total / all, sorted[i]->self,
						sorted[i]->total, names + i * NAME };
	}
	snprintf(heading, sizeof(heading), "pystack --top: %llu samples in %.0f s at %lu Hz, %d process%s (q quits)",
		 ps->interval_samples, (double)(now_ns - ps->start_ns) / 1e9, ps->freq, ps->targets.alive,
		 ps->targets.alive == 1 ? "" : "es");
	topview_draw(heading, rows, sorted && rows && names ? n : 0);
	free(sorted);
	free(rows);
	free(names);
}

static void print_folded(struct pystack *ps)
{
	FILE *f = sink_text(ps->base.sink);

	if (ps->diff) {
		struct stackagg after;

		stackagg_init(&after);
		profdiff_add_all(&after, &ps->agg);
		if (f && profdiff_write_text(f, &ps->baseline, &after))
			ps->base.failed = true;
		stackagg_free(&after);
		if (f)
			fflush(f);
		return;
	}

	for (size_t i = 0; f && i < ps->agg.n; i++)
		fprintf(f, "%s %lld\n", ps->agg.v[i].key, ps->agg.v[i].self);
	if (f)
		fflush(f);
}

/* The table or folded stacks so far; then counting starts afresh. */
static void report(struct pystack *ps)
{
	if (ps->base.common->json && !ps->from.source)
		return; /* a live -j run printed its samples (stored ones: the table as JSON) */
	if (ps->folded)
		print_folded(ps);
	else
		print_top(ps);
	stackagg_clear(&ps->agg);
	ps->interval_samples = 0;
}

static int tick(struct tracker *t, uint64_t now_ns)
{
	struct pystack *ps = (struct pystack *)t;

	if (ps->from.source)
		return 0; /* stored samples: all read at the start */
	t->done = pytargets_refresh(&ps->targets, now_ns);
	if (ps->sampler.n) {
		/* the runner wakes for the next re-draw (100 ms at most, the default) */
		int ms = cpusampler_tick(&ps->sampler, now_ns);
		t->poll_ms = ms < 100 ? ms : 100;
	}
	if (ps->async && now_ns >= ps->next_async_ns) {
		uint64_t period = 1000000000ull / ps->freq;
		sample_tasks(ps, now_ns);
		ps->next_async_ns += period;
		if (ps->next_async_ns < now_ns)
			ps->next_async_ns = now_ns + period; /* behind: no burst to catch up */
	}
	if (ps->async) {
		/* wake at the next read's time, not a period after this read ended */
		uint64_t after = time_mono_ns();
		t->poll_ms = ps->next_async_ns > after ? (int)((ps->next_async_ns - after + 999999) / 1000000) : 0;
	}
	if (ps->top_tty) {
		for (int k; (k = topview_key());)
			t->done |= k == 'q' || k == 'Q';
		if ((double)(now_ns - ps->last_report_ns) >= (ps->interval_s ? ps->interval_s : 1) * 1e9) {
			ps->last_report_ns = now_ns;
			draw_top(ps, now_ns);
		}
	} else if (!t->done && ps->interval_s && (double)(now_ns - ps->last_report_ns) >= ps->interval_s * 1e9) {
		ps->last_report_ns = now_ns;
		report(ps);
	}
	return 0;
}

static void finish(struct tracker *t)
{
	struct pystack *ps = (struct pystack *)t;
	json_t *sum;
	const struct profile_meta meta = {
		.title = "pystack: where CPU time goes in Python",
		.count_name = "samples",
		.weight_name = "cpu",
		.period_ns = 1000000000ull / ps->freq,
		.per_thread = ps->per_thread,
	};

	topview_close();
	report(ps);
	if (ps->diff)
		t->failed |= profile_write_diff(&ps->out, &ps->profile, &ps->baseline, &meta) != 0;
	else
		t->failed |= profile_write(&ps->out, &ps->profile, &meta) != 0;
	if (ps->from.source) {
		/* no BPF ran: no counters; what was read instead */
		log_info("read %lld samples from %s%s", ps->stored, ps->from.source,
			 ps->stored_before ? " (and the baseline's)" : "");
		return;
	}
	sum = summary_begin(t, &summary_schema, counters);
	json_set_int(sum, "unresolved_frames", (json_int_t)ps->unresolved_frames);
	json_set_int(sum, "stacks_other", (json_int_t)(ps->agg.other + ps->profile.other));
	json_set_int(sum, "task_samples", (json_int_t)ps->task_samples);
	for (int i = 0; i < ps->targets.n; i++)
		if (ps->targets.v[i].py)
			ps->torn_reads += pytasks_torn(ps->targets.v[i].py);
	json_set_int(sum, "torn_reads", (json_int_t)ps->torn_reads);
	record_set_targets(sum, ps->targets.skipped, ps->targets.exits);
	summary_end(t, &summary_schema, sum, ps->targets.added_python);
}

static void destroy(struct tracker *t)
{
	struct pystack *ps = (struct pystack *)t;

	pytargets_free(&ps->targets);
	stackagg_free(&ps->agg);
	stackagg_free(&ps->profile);
	stackagg_free(&ps->baseline);
	pyframes_buf_free(&ps->text);
	pytasks_snapshot_free(&ps->tasks);
	free(ps->unsupported);
}

/* What pymonitor calls it, and the original monitor's flags as its own options. */
static const struct monitor_entry monitor[] = {
	{ .name = "py_stack",
	  .flags = { { "pystack-frequency", "frequency", "HZ", "py_stack: samples per second and CPU (default 99)" } } },
	{ 0 },
};

const struct tracker_ops pystack_tracker = {
	.name = "pystack",
	.size = sizeof(struct pystack),
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
