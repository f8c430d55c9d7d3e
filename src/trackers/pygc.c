/*
 * The pygc tracker: every CPython garbage-collection pause: which generation, which
 * thread, how long, how many objects it found unreachable. Hooks, best first
 * (src/python/pyhooks.h): the USDT probes python:gc__start/gc__done (distro builds, also
 * stripped ones), else uprobes on the collector function of that version (builds
 * with symbols, e.g. pyenv).
 */
#include <bcc/libbpf.h>
#include <linux/types.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lathist.h"
#include "log.h"
#include "jsonfmt.h"
#include "pyebpf_bpf.h"
#include "pygc.h"
#include "profile.h"
#include "pyhooks.h"
#include "pyframes.h"
#include "pytargets.h"
#include "pytasks.h"
#include "record.h"
#include "monitor.h"
#include "summary.h"
#include "tracker.h"
#include "utf8.h"

extern const char pygc_bpf_text[];

enum { OPT_MIN_MS = OPT_TOOL_BASE, OPT_STACK, OPT_FORMAT, OPT_CHILDREN, OPT_GEN = 'g', OPT_OUTPUT = 'o' };

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_MIN_MS, 0, "min-ms", "MS", "only pauses of at least MS milliseconds (fractions allowed)" },
	{ OPT_GEN, 'g', "generation", "GEN", "only collections of generation GEN (0, 1 or 2)" },
	{ OPT_STACK, 0, "stack", NULL, "add the Python stack of the code that triggered each collection" },
	{ OPT_CHILDREN, 0, "children", NULL, "also trace the child processes of the -p pids (and new ones)" },
	PROFILE_OPT_ENTRIES(OPT_OUTPUT, OPT_FORMAT),
	OPT_ENTRIES_TRACKER_TAIL,
};

static const struct field pause_fields[] = {
	{ .name = "metric", .type = FIELD_STR, .meaning = "gc_pause: one garbage collection" },
	FIELD_PID(2),
	FIELD_TID(3),
	FIELD_CONTAINER_PID,
	FIELD_CONTAINER_TID,
	FIELD_COMM(4),
	FIELD_THREAD_NAME(5),
	{ .name = "generation", .type = FIELD_INT, COLUMN(6, "GEN", 3),
	  .meaning = "the generation collected: 0, 1 or 2 (2: full collection)" },
	{ .name = "start_time", .type = FIELD_TIME,
	  .meaning = "when the collection started (UTC, ISO 8601, microseconds)" },
	{ .name = "end_time", .type = FIELD_TIME, .meaning = "when it ended" },
	{ .name = "start_ns", .type = FIELD_INT, .unit = "ns",
	  .meaning = "the start on CLOCK_MONOTONIC (Python's time.monotonic_ns clock)" },
	{ .name = "end_ns", .type = FIELD_INT, .unit = "ns", .meaning = "the end on CLOCK_MONOTONIC" },
	{ .name = "duration_ms", .type = FIELD_REAL, .unit = "ms", COLUMN(7, "PAUSE_MS", 9),
	  .meaning = "the pause: end minus start" },
	{ .name = "collected", .type = FIELD_INT, COLUMN(8, "COLLECTED", 9),
	  .meaning = "unreachable objects found (collected + uncollectable); null when unknown" },
	{ .name = "hook", .type = FIELD_STR, .meaning = "what measured it: usdt, uprobe or uprobe_callbacks" },
	FIELD_TIME(1),
	{ .name = "stack", .type = FIELD_ARRAY,
	  .meaning = "--stack: the frames as \"function (file:line)\", outermost first" },
	{ .name = "task", .type = FIELD_STR,
	  .meaning = "--stack: the asyncio task running on the thread when the collection began (its name), empty when none" },
	{ .name = "task_coro", .type = FIELD_STR, .meaning = "--stack: that task's coroutine (qualified name), empty when none" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field generation_fields[] = {
	FIELD_METRIC,
	{ .name = "generation", .type = FIELD_INT, .meaning = "the generation these pauses are of" },
	{ .name = "count", .type = FIELD_INT, .meaning = "collections reported" },
	{ .name = "total_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "their pauses added up" },
	{ .name = "p50_ms", .type = FIELD_REAL, .unit = "ms",
	  .meaning = "median pause (nearest rank); null without collections" },
	{ .name = "p99_ms", .type = FIELD_REAL, .unit = "ms",
	  .meaning = "99th percentile pause (nearest rank); null without collections" },
	{ .name = "max_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "longest pause; null without collections" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field summary_fields[] = {
	FIELD_METRIC,
	{ .name = "events", .type = FIELD_INT, .meaning = "records printed" },
	FIELD_LOST,
	FIELD_MISSED,
	PYGC_COUNTERS(PYEBPF_COUNTER_FIELD)
	{ .name = "stacks_incomplete", .type = FIELD_INT,
	  .meaning = "--stack: pauses whose stack could not be read completely" },
	FIELD_STACKS_OTHER,
	FIELD_TARGETS,
	FIELD_ENV,
	FIELD_END,
};

static const struct counter_name counters[] = { PYGC_COUNTERS(PYEBPF_COUNTER_NAME) { 0, NULL, NULL } };

static const struct schema pause_schema = { "gc_pause", SCHEMA_EVENT, pause_fields };
static const struct schema generation_schema = { "gc_summary", SCHEMA_SUMMARY, generation_fields };
static const struct schema summary_schema = { "pygc_summary", SCHEMA_SUMMARY, summary_fields };
static const struct schema *const schemas[] = { &pause_schema, &generation_schema, &summary_schema, NULL };

/* Target processes at most: as many as the walker's py_config holds (bpf_text/python.bpf.h). */
enum { MAX_TARGETS = 1024 };

/* Pauses of one generation, for the summary: a histogram, not every pause (bounded memory) */
struct gen_stats {
	struct lathist *hist; /* calloc'ed on the generation's first pause */
	double total;
};

struct pygc {
	struct tracker base;
	double min_ms;
	int generation; /* -1: all */
	bool stack;
	bool system_wide;
	struct pyhook_plan *hooks;
	char *text; /* the BPF text with the plan's USDT entry functions */
	struct pytargets targets; /* -p (watched), found by the scan, or seen in an event (system-wide) */
	struct gen_stats gens[3];
	unsigned long long events;
	unsigned long long stack_errors; /* --stack: events whose stack could not be read */
	struct profile_out out;          /* -o: the pauses' stacks, weighted by their length */
	struct stackagg profile;
	struct pyframes_buf folded;
	struct pycode_loc locs[PYWALK_DEPTH_LIMIT]; /* --stack: an event's frames, innermost first */
};

static void init(struct tracker *t)
{
	struct pygc *g = (struct pygc *)t;

	g->generation = -1;
	pytargets_init(&g->targets, MAX_TARGETS);
	stackagg_init(&g->profile);
	stackagg_limit(&g->profile, STACKAGG_MAX_STACKS);
}

static int option(struct tracker *t, int id, const char *arg)
{
	struct pygc *g = (struct pygc *)t;
	unsigned long gen;

	switch (id) {
	case OPT_MIN_MS:
		return opts_parse_double("min-ms", arg, 0, 3600e3, &g->min_ms);
	case OPT_STACK:
		g->stack = true;
		return 0;
	case OPT_CHILDREN:
		g->targets.children = true;
		return 0;
	case OPT_OUTPUT:
		g->stack = true; /* the picture is of the stacks */
		return profile_option(&g->out, false, arg);
	case OPT_FORMAT:
		return profile_option(&g->out, true, arg);
	case OPT_GEN:
		if (opts_parse_ulong("generation", arg, 0, 2, &gen))
			return -1;
		g->generation = (int)gen;
		return 0;
	}
	return -1;
}

static int check(struct tracker *t)
{
	if (((struct pygc *)t)->targets.children && !t->common->npids)
		return opts_usage_error("--children needs -p (the parent processes to follow)");
	return profile_check(&((struct pygc *)t)->out);
}

static int build_cflags(struct pygc *g)
{
	struct cflags *cf = &g->base.cflags;

	if (pytargets_cflags(cf, g->base.common, true, g->stack))
		return -1;
	if (g->generation >= 0)
		cflags_add(cf, "-DGEN=%d", g->generation);
	if (g->min_ms > 0)
		cflags_add(cf, "-DMIN_NS=%lluull", (unsigned long long)(g->min_ms * 1e6 + 0.5));
	if (g->stack)
		cflags_add(cf, "-DSTACK");
	return 0;
}

/* ---- hooks: which functions of which binary, per CPython version ---- */

/*
 * Clones that take no generation argument: the compiler specialised them for the one
 * constant caller, the full collection (generation 2). Checked with the DWARF of the
 * build (gdb "info scope": collect.constprop.0 has n_collected in rdi, no generation).
 */
static const struct {
	int minor;
	const char *symbol;
} full_collection_clones[] = {
	{ 8, "collect.constprop.0" }, /* pyenv 3.8.18 (GCC 12) */
};

static const char *collector_entry_fn(int minor, const char *symbol)
{
	for (size_t i = 0; i < sizeof(full_collection_clones) / sizeof(full_collection_clones[0]); i++)
		if (full_collection_clones[i].minor == minor &&
		    !strcmp(full_collection_clones[i].symbol, symbol))
			return "collector_entry_gen2";
	/* collect(int generation, ...) in 3.8, (tstate, generation, ...) after */
	return minor == 8 ? "collector_entry_rdi" : "collector_entry_rsi";
}

/*
 * The collector of each version (static functions, so only in builds with a symbol
 * table; pyebpf(7), CPYTHON INTERNALS): 3.8-3.9 collect(), 3.10-3.13 and
 * 3.14.5+ gc_collect_main(), 3.14.0-3.14.4 (incremental GC) _PyGC_Collect().
 */
static const char *const *collector_names(int minor)
{
	static const char *const v38[] = { "collect", NULL };
	static const char *const v310[] = { "gc_collect_main", NULL };
	static const char *const v314[] = { "gc_collect_main", "_PyGC_Collect", NULL };

	if (minor <= 9)
		return v38;
	if (minor <= 13)
		return v310;
	return v314;
}

/* Uprobes on the collector (and, 3.13+, on the callback runner inside it). 1: none found. */
static int plan_uprobes(struct pyhook_plan *plan, const struct pyhook_target *t, char *how,
			size_t howlen)
{
	int minor = pyproc_version(t->py)->minor;
	const char *const *names = collector_names(minor);
	int added = 0;

	for (; *names && !added; names++) {
		struct pyhook_clones c;

		pyhooks_clones(t->binary, *names, &c);
		for (int i = 0; i < c.n; i++) {
			const char *fn = collector_entry_fn(minor, c.names[i]);
			int r = pyhooks_add_uprobe(plan, t->binary, t->pid, c.names[i], fn, false);

			if (r > 0)
				continue;
			if (r < 0 ||
			    pyhooks_add_uprobe(plan, t->binary, t->pid, c.names[i], "collector_return", true))
				return -1;
			if (!added)
				snprintf(how, howlen, "uprobes on %s", c.names[i]);
			added++;
		}
	}
	if (!added)
		return 1;
	/*
	 * From 3.13 on, the gc.callbacks run inside the collector. Timing from the
	 * "start" callback's return to the "stop" callback's entry measures the
	 * collection alone, as the USDT probes do (shutdown collections run no
	 * callbacks: they keep the collector's entry and return).
	 */
	if (minor >= 13) {
		int n = pyhooks_add_function(plan, t->binary, t->pid, "invoke_gc_callback",
					     "callback_entry", "callback_return");
		if (n < 0)
			return -1;
		if (n)
			snprintf(how + strlen(how), howlen - strlen(how), " timed between its callbacks");
		else /* the generation of an automatic collection shows only in the callback call */
			snprintf(how + strlen(how), howlen - strlen(how),
				 " (no invoke_gc_callback symbol: automatic collections are not seen)");
	}
	return 0;
}

/*
 * The hooks for one interpreter binary: USDT if it has the gc probes, else uprobes.
 * An installed binary no process runs yet has no known version: USDT only.
 */
static int plan_binary(void *ctx, struct pyhook_plan *plan, const struct pyhook_target *t,
		       char *how, size_t howlen)
{
	static const struct pyhook_usdt gc_probes[] = {
		{ "gc__start", "usdt_gc_start" },
		{ "gc__done", "usdt_gc_done" },
		{ NULL, NULL },
	};
	int r = pyhooks_add_usdt(plan, t->binary, t->pid, "python", gc_probes);

	(void)ctx;
	if (r == 0)
		snprintf(how, howlen, "USDT python:gc__start/gc__done");
	if (r == 1 && t->py)
		r = plan_uprobes(plan, t, how, howlen);
	if (r == 1)
		snprintf(how, howlen, "has no USDT gc probes (built without --with-dtrace) and no "
			 "symbol for its collector function (stripped): its collections cannot be traced");
	return r;
}

/* Every CPython found is kept: thread names, and the stack walker's configuration. */
static bool keep_target(void *ctx, struct pyproc *py)
{
	struct pygc *g = ctx;

	return pytargets_adopt(&g->targets, py, !g->system_wide) != NULL;
}

static int plan_hooks(struct pygc *g)
{
	const struct common_opts *c = g->base.common;
	const struct pyhook_planner planner = { plan_binary, keep_target, g, false, g->targets.children };
	int n;

	if (!g->system_wide) {
		if ((n = pyhooks_plan_pids(g->hooks, c->pids, c->npids, &planner)) < 0)
			return -1;
		g->targets.skipped = (unsigned long long)(c->npids - n);
		return n ? 0 : tracker_no_targets(&g->base);
	}
	if (pyhooks_plan_system(g->hooks, &planner) > 0)
		return 0;
	log_error("no running CPython process with USDT gc probes or collector symbols was "
		  "found; start one first or name it with -p PID");
	return -1;
}

static int prepare(struct tracker *t)
{
	struct pygc *g = (struct pygc *)t;

	if (build_cflags(g))
		return -1;
	if (t->common->print_ebpf && !t->common->npids) {
		/* the USDT entry functions depend on the targets; without -p show the tool's part */
		t->text = pygc_bpf_text;
		return 0;
	}
	g->system_wide = t->common->npids == 0;
	/* system-wide: a process is opened on its first collection (stacks from its next one) */
	g->targets.lazy = g->system_wide;
	if (!(g->hooks = pyhooks_new()) || plan_hooks(g))
		return -1;
	if (!t->common->print_ebpf && pyhooks_count(g->hooks) && bpfprog_check_uprobe_caps())
		return -1;
	if (!(g->text = pyhooks_text(g->hooks, pygc_bpf_text)))
		return -1;
	t->text = g->text;
	return 0;
}

/* ---- events ---- */

static const char *hook_name(unsigned source)
{
	switch (source) {
	case PYGC_SRC_USDT:
		return "usdt";
	case PYGC_SRC_UPROBE:
		return "uprobe";
	case PYGC_SRC_CALLBACK:
		return "uprobe_callbacks";
	}
	return "unknown";
}

static void stats_add(struct gen_stats *s, uint64_t ns)
{
	if (!s->hist && !(s->hist = calloc(1, sizeof(*s->hist))))
		return;
	lathist_add(s->hist, ns);
	s->total += (double)ns / 1e6;
}

/*
 * --stack: the frames as "func (file:line)", outermost first like a Python traceback
 * (most recent call last). A stack that could not be read completely says so in its
 * first entry ("[truncated]", "[unknown: ...]"), never silently.
 */
static json_t *stack_json(struct pygc *g, const struct pytarget *target,
			  const struct pygc_stack_event *s, int size)
{
	const char *marker = pyframes_marker(s->status, true);
	int depth = pyframes_depth(s->depth, size, offsetof(struct pygc_stack_event, frames));
	json_t *a = json_array();
	char frame[1024], clean[3 * sizeof(frame)];

	if (marker) {
		json_array_append_new(a, json_string(marker));
		g->stack_errors++;
	}
	pyframes_resolve(target ? target->py : NULL, s->frames, depth, g->locs);
	for (int i = depth - 1; i >= 0; i--) {
		pyframes_format(&g->locs[i], frame, sizeof(frame));
		utf8_repair(frame, sizeof(frame), clean, sizeof(clean));
		json_array_append_new(a, json_string(clean));
	}
	return a;
}

/* -o: the stack stack_json resolved, by function, one more pause of ns. */
static void count_stack(struct pygc *g, const struct pygc_stack_event *s, int size, long long ns)
{
	int depth = pyframes_depth(s->depth, size, offsetof(struct pygc_stack_event, frames));
	const char *folded;

	pyframes_by_function(g->locs, depth);
	folded = pyframes_folded(&g->folded, NULL, g->locs, depth, s->status);
	stackagg_add_weighted(&g->profile, folded, strlen(folded), ns);
}

static void on_event(void *ctx, void *data, int size)
{
	struct pygc *g = ctx;
	const struct pygc_event *ev = data;
	const struct task_head *task = &ev->task;
	char start[40], end[40], name[PYTHREAD_NAME_MAX];
	json_t *stack = NULL;
	struct pytarget *target;
	FILE *text;
	double ms;
	json_t *o;

	if (size < (int)sizeof(*ev))
		return;
	if (g->stack && size < (int)offsetof(struct pygc_stack_event, frames))
		return;
	ms = (double)(ev->end_ns - ev->start_ns) / 1e6;
	target = pytargets_thread_name(&g->targets, (pid_t)task->pid, (pid_t)task->tid, task->comm,
				       sizeof(task->comm), name, sizeof(name));
	time_format_mono_ns(ev->start_ns, start, sizeof(start));
	time_format_mono_ns(ev->end_ns, end, sizeof(end));

	o = json_object();
	json_set_str(o, "metric", pause_schema.metric);
	record_set_task(o, task);
	json_set_str(o, "thread_name", name);
	json_set_int(o, "generation", ev->generation);
	json_set_str(o, "start_time", start);
	json_set_str(o, "end_time", end);
	json_set_int(o, "start_ns", (json_int_t)ev->start_ns);
	json_set_int(o, "end_ns", (json_int_t)ev->end_ns);
	json_set_real(o, "duration_ms", ms);
	json_object_set_new(o, "collected", ev->collected >= 0 ? json_integer(ev->collected) : json_null());
	json_set_str(o, "hook", hook_name(ev->source));
	json_set_str(o, "time", end);
	if (g->stack) {
		const struct pygc_stack_event *s = data;
		struct pytask_name tk;

		stack = stack_json(g, target, data, size);
		json_object_set(o, "stack", stack);
		pytargets_task_name(&g->targets, target, &s->asyncio, s->frames,
				    (uint32_t)pyframes_depth(s->depth, size, offsetof(struct pygc_stack_event, frames)), &tk);
		json_set_str(o, "task", tk.name);
		json_set_str(o, "task_coro", tk.coro);
		if (g->out.path)
			count_stack(g, data, size, (long long)(ev->end_ns - ev->start_ns));
	}
	sink_record(g->base.sink, &pause_schema, o);
	text = sink_text(g->base.sink);
	if (stack && text) {
		/* columns: the frames under the event, indented, outermost first */
		size_t i;
		json_t *f;
		json_array_foreach(stack, i, f)
			fprintf(text, "    %s\n", json_string_value(f));
		fflush(text);
	}
	json_decref(stack);
	g->events++;
	if (ev->generation >= 0 && ev->generation <= 2)
		stats_add(&g->gens[ev->generation], ev->end_ns - ev->start_ns);
}

static int start(struct tracker *t)
{
	struct pygc *g = (struct pygc *)t;
	struct bpfprog *p = t->prog;

	/* -p: the targets (with --children, theirs too, while they live) are the pid filter */
	if (!g->system_wide && pytargets_set_pid_map(&g->targets, p, "pid_filter"))
		return -1;
	if (g->stack && pytargets_set_walker(&g->targets, p))
		return -1;
	if (g->targets.children)
		pytargets_add_children(&g->targets);
	/*
	 * A wakeup per record costs the collecting thread an IPI (a third of pygc's cost
	 * per collection in bench/pygc.sh): wake every 32 records; the runner reads the
	 * rest after each poll of at most poll_ms (100), so a record waits 100 ms at most.
	 */
	if (bpfprog_open_perf_buffer(p, "events", on_event, g, 256, 32) || pyhooks_attach(g->hooks, p))
		return -1;
	if (g->stack)
		t->poll_ms = PYTASKS_POLL_MS; /* the task field (pytasks.h) */
	snprintf(t->banner, sizeof(t->banner), "Tracing CPython GC pauses (%d probes).",
		 bpfprog_attachments(p));
	return 0;
}

static int tick(struct tracker *t, uint64_t now_ns)
{
	struct pygc *g = (struct pygc *)t;

	t->done = pytargets_refresh(&g->targets, now_ns);
	return 0;
}

static void finish(struct tracker *t)
{
	struct pygc *g = (struct pygc *)t;
	json_t *o;

	for (int gen = 0; gen < 3; gen++) {
		const struct lathist *h = g->gens[gen].hist;
		char title[32];

		o = json_object();
		json_set_str(o, "metric", generation_schema.metric);
		json_set_int(o, "generation", gen);
		json_set_int(o, "count", h ? (json_int_t)h->count : 0);
		json_set_real(o, "total_ms", g->gens[gen].total);
		if (h && h->count) {
			/* within the histogram's resolution (lathist.h); the max is exact */
			json_set_real(o, "p50_ms", (double)lathist_percentile_ns(h, 50) / 1e6);
			json_set_real(o, "p99_ms", (double)lathist_percentile_ns(h, 99) / 1e6);
			json_set_real(o, "max_ms", (double)h->max_ns / 1e6);
		} else {
			json_object_set_new(o, "p50_ms", json_null());
			json_object_set_new(o, "p99_ms", json_null());
			json_object_set_new(o, "max_ms", json_null());
		}
		snprintf(title, sizeof(title), "generation %d", gen);
		sink_result_titled(t->sink, &generation_schema, title, o);
	}
	o = summary_begin(t, &summary_schema, counters);
	json_set_int(o, "events", (json_int_t)g->events);
	if (g->stack)
		json_set_int(o, "stacks_incomplete", (json_int_t)g->stack_errors);
	json_set_int(o, "stacks_other", (json_int_t)g->profile.other);
	record_set_targets(o, g->targets.skipped, g->targets.exits);
	summary_end(t, &summary_schema, o, 0);
	t->failed |= 0 != profile_write(&g->out, &g->profile, &(const struct profile_meta){
		.title = "pygc: GC pauses by the Python code that triggered them",
		.count_name = "collections",
		.weight_name = "pause",
		.by_weight = true,
	});
}

static void destroy(struct tracker *t)
{
	struct pygc *g = (struct pygc *)t;

	pytargets_free(&g->targets);
	stackagg_free(&g->profile);
	pyframes_buf_free(&g->folded);
	for (int gen = 0; gen < 3; gen++)
		free(g->gens[gen].hist);
	pyhooks_free(g->hooks);
	free(g->text);
}

/* What pymonitor calls it, and the original monitor's flags as its own options. */
static const struct monitor_entry monitor[] = {
	{ .name = "gc" },
	{ 0 },
};

const struct tracker_ops pygc_tracker = {
	.name = "pygc",
	.size = sizeof(struct pygc),
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
