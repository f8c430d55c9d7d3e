/*
 * The pygil tracker: who waits for CPython's GIL, how long, and who holds it, with
 * both Python stacks. Hooks (bpf_text/pygil.bpf.c): the futex syscall tracepoints of
 * the GIL's condition variable (the default, any build), or with --hook uprobes on
 * take_gil and its clones (builds with a symbol table) or on libc's
 * pthread_cond_timedwait on that condition variable. At the end and every -i: the share
 * of wall time each thread held the GIL, waited for it or neither, and the holder
 * stacks that made others wait longest (-f: folded; -o FILE: drawn, weighted by the
 * waits, for the whole run). With --from, the gil_wait events a database sink stored
 * (profread.h): their holder stacks, as the table, -f or -o show them, without BPF.
 */
#include <bcc/libbpf.h>
#include <linux/types.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "jsonfmt.h"
#include "pyebpf_bpf.h"
#include "pyframes.h"
#include "pygil.h"
#include "pygil_hooks.h"
#include "pygil_waits.h"
#include "profile.h"
#include "profread.h"
#include "pyhooks.h"
#include "pytargets.h"
#include "record.h"
#include "stackagg.h"
#include "monitor.h"
#include "summary.h"
#include "tracker.h"

extern const char pygil_bpf_text[];

/* Target processes at most (as many as gil_targets holds). */
enum { MAX_TARGETS = 1024 };
/* Threads kept for the per-thread table, holder stacks shown in it. */
enum { MAX_THREADS = 4096, TOP_STACKS = 10 };
/* What the tables, folded stacks and columns show for a thread that ran no Python frame. */
#define NO_FRAMES "[no Python frames]"

/*
 * How often userspace looks at who holds the GIL (the holding share): on average
 * every SAMPLE_MS, each time after a random 1/2 to 3/2 of it. A fixed period aliases
 * with the GIL's own (CPU-bound threads swap it every 5 ms switch interval): samples
 * then land on one thread for long stretches. A share from n samples has a standard
 * error of at most 50/sqrt(n) points: 3 s, 600 samples, 2 points.
 */
enum { SAMPLE_MS = 5 };

enum {
	OPT_FOLDED = 'f',
	OPT_INTERVAL = 'i',
	OPT_CHILDREN = OPT_TOOL_BASE,
	OPT_MIN_WAIT,
	OPT_PY_MIN,
	OPT_NO_STACKS,
	OPT_HOOK,
	OPT_FORMAT,
	OPT_FROM,
	OPT_HOST,
	OPT_SINCE,
	OPT_UNTIL,
	OPT_OUTPUT = 'o',
};

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_CHILDREN, 0, "children", NULL, "also trace the child processes of the -p pids (and new ones)" },
	{ OPT_MIN_WAIT, 0, "min-wait-ms", "MS", "report waits of at least MS milliseconds (default 1.0)" },
	{ OPT_PY_MIN, 0, "py-min-ms", "MS", "walk the two stacks only for waits of at least MS (default: every reported wait)" },
	{ OPT_NO_STACKS, 0, "no-stacks", NULL, "do not walk the Python stacks" },
	{ OPT_FOLDED, 'f', "folded", NULL, "print the holder stacks folded (FlameGraph input, microseconds waited) instead of waits and tables" },
	{ OPT_INTERVAL, 'i', "interval", "SECONDS", "print the tables (or folded stacks) every SECONDS" },
	{ OPT_HOOK, 0, "hook", "HOOK", "take_gil or condvar (uprobes) instead of futex, the syscall tracepoints" },
	PROFILE_OPT_ENTRIES(OPT_OUTPUT, OPT_FORMAT),
	PROFREAD_OPT_ENTRIES(OPT_FROM, OPT_HOST, OPT_SINCE, OPT_UNTIL),
	OPT_ENTRIES_TRACKER_TAIL,
};

static const struct field wait_fields[] = {
	{ .name = "metric", .type = FIELD_STR, .meaning = "gil_wait: one wait for the GIL" },
	FIELD_PID(2),
	FIELD_TID(3),
	FIELD_CONTAINER_PID,
	FIELD_CONTAINER_TID,
	FIELD_COMM(0),
	FIELD_THREAD_NAME(4),
	{ .name = "duration_ms", .type = FIELD_REAL, .unit = "ms", COLUMN(5, "WAIT_MS", 9),
	  .meaning = "how long it waited for the GIL" },
	{ .name = "holder_tid", .type = FIELD_INT, COLUMN(6, "HOLDER", 7),
	  .meaning = "host thread id of the holder (the GIL's last_holder); null when unknown" },
	{ .name = "holder_container_tid", .type = FIELD_INT,
	  .meaning = "the holder's thread id in its PID namespace; null when unknown" },
	{ .name = "holder_thread_name", .type = FIELD_STR, COLUMN_LEFT(7, "HOLDER_THREAD", 16),
	  .meaning = "the holder's Python thread name; null when unknown" },
	{ .name = "waiter_py_stack", .type = FIELD_STR,
	  .meaning = "the waiter's frames, root first, ';' between them, each \"func (file:line)\"; null without stacks" },
	{ .name = "waiter_py_stack_depth", .type = FIELD_INT,
	  .meaning = "frames in waiter_py_stack; null without stacks" },
	{ .name = "holder_py_stack", .type = FIELD_STR,
	  .meaning = "the holder's frames, walked from its thread state when the wait ended; null without stacks" },
	{ .name = "holder_py_stack_depth", .type = FIELD_INT,
	  .meaning = "frames in holder_py_stack; null without stacks" },
	{ .name = "switch_number", .type = FIELD_INT, .meaning = "the GIL's switch counter when the wait ended" },
	{ .name = "hook", .type = FIELD_STR, .meaning = "what measured it: futex, take_gil or condvar" },
	FIELD_TIME(1),
	FIELD_ENV,
	FIELD_END,
};

static const struct field thread_fields[] = {
	FIELD_METRIC,
	FIELD_PID(1),
	FIELD_TID(2),
	{ .name = "thread_name", .type = FIELD_STR, COLUMN_LEFT(3, "THREAD", 16),
	  .meaning = "the Python thread's name (else its comm)" },
	{ .name = "hold_pct", .type = FIELD_REAL, .unit = "%", COLUMN(4, "%HOLD", 7), .fmt = "%6.1f%%",
	  .meaning = "share of the interval it held the GIL (sampled about every 5 ms)" },
	{ .name = "wait_pct", .type = FIELD_REAL, .unit = "%", COLUMN(5, "%WAIT", 7), .fmt = "%6.1f%%",
	  .meaning = "share of the interval it waited for the GIL (every wait, also the short ones)" },
	{ .name = "neither_pct", .type = FIELD_REAL, .unit = "%", COLUMN(6, "%NEITHER", 9), .fmt = "%8.1f%%",
	  .meaning = "the rest: running without the GIL, blocked, or idle" },
	{ .name = "waits", .type = FIELD_INT, COLUMN(7, "WAITS", 7), .meaning = "waits in the interval" },
	{ .name = "wait_ms", .type = FIELD_REAL, .unit = "ms", COLUMN(8, "WAIT_MS", 10),
	  .meaning = "their time added up" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field holder_fields[] = {
	FIELD_METRIC,
	{ .name = "wait_ms", .type = FIELD_REAL, .unit = "ms", COLUMN(1, "WAITED_MS", 10),
	  .meaning = "time others waited while this holder stack had the GIL" },
	{ .name = "waits", .type = FIELD_INT, COLUMN(2, "WAITS", 7), .meaning = "waits it caused" },
	{ .name = "holder_py_stack", .type = FIELD_STR, COLUMN(3, "HOLDER STACK", 0),
	  .meaning = "the holder's frames, root first" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field summary_fields[] = {
	FIELD_METRIC,
	{ .name = "events", .type = FIELD_INT, .meaning = "waits reported" },
	PYGIL_COUNTERS(PYEBPF_COUNTER_FIELD)
	{ .name = "stacks_incomplete", .type = FIELD_INT, .meaning = "stacks that could not be read completely" },
	FIELD_STACKS_OTHER,
	{ .name = "rows_untabled", .type = FIELD_INT,
	  .meaning = "waits or holding times of threads left out of a gil_thread table: it had 4096 threads" },
	FIELD_LOST,
	FIELD_MISSED,
	FIELD_PROCESSES,
	FIELD_TARGETS,
	FIELD_ENV,
	FIELD_END,
};

static const struct counter_name counters[] = { PYGIL_COUNTERS(PYEBPF_COUNTER_NAME) { 0, NULL, NULL } };

static const struct schema wait_schema = { "gil_wait", SCHEMA_EVENT, wait_fields };
static const struct schema thread_schema = { "gil_thread", SCHEMA_ROW, thread_fields };
static const struct schema holder_schema = { "gil_holder_stack", SCHEMA_ROW, holder_fields };
static const struct schema summary_schema = { "pygil_summary", SCHEMA_SUMMARY, summary_fields };
static const struct schema *const schemas[] = { &wait_schema, &thread_schema, &holder_schema,
						&summary_schema, NULL };
/* --from: every stored gil_wait event with a holder stack (by id, profrows.h) */
static const struct profread_layout stored_layout = {
	.metric = "gil_wait", .stack = "holder_py_stack_id", .weight = "duration_ms", .what = "events",
};

/* One thread in the per-thread table. */
struct thread_row {
	pid_t pid, tid;
	uint64_t hold_ns, wait_ns, waits;
	char name[PYTHREAD_NAME_MAX];
};

/* How often the threads' wait totals are read (pygil_waits.h). */
enum { SWEEP_MS = 1000 };

struct pygil {
	struct tracker base;
	double min_wait_ms, py_min_ms;
	double interval_s;
	bool folded, stacks;
	enum pygil_hook hook;
	struct pyhook_plan *hooks;
	char *text;
	struct pytargets targets;
	struct thread_row *rows;   /* the current interval's threads */
	int nrows;
	unsigned long long rows_untabled; /* row_of refused: MAX_THREADS rows already */
	struct pygil_waits waits;  /* the threads' wait totals */
	uint64_t next_sweep_ns;
	struct stackagg holders;   /* holder stack -> self: microseconds waited, total: waits */
	struct profile_out out;    /* -o: the holder stacks of the whole run */
	struct stackagg profile;   /* holder stack -> self: waits, total: nanoseconds waited */
	struct pyframes_buf waiter_text, holder_text;
	unsigned long long events, stack_errors;
	unsigned tables;
	uint64_t interval_start_ns, last_sample_ns, next_sample_ns;
	uint32_t jitter; /* xorshift state for the sampling times */
	struct pycode_loc locs[PYGIL_DEPTH];
	struct profread_query from; /* --from: the stored waits drawn (source NULL: live ones) */
	const char *tracing_option; /* the last option that only tracing takes (not --from) */
};

static void init(struct tracker *t)
{
	struct pygil *g = (struct pygil *)t;

	profread_init(&g->from, &stored_layout);
	g->min_wait_ms = 1.0;
	g->py_min_ms = -1;
	g->stacks = true;
	pytargets_init(&g->targets, MAX_TARGETS);
	stackagg_init(&g->holders);
	stackagg_init(&g->profile);
	stackagg_limit(&g->holders, STACKAGG_MAX_STACKS);
	stackagg_limit(&g->profile, STACKAGG_MAX_STACKS);
}

static int option(struct tracker *t, int id, const char *arg)
{
	struct pygil *g = (struct pygil *)t;
	static const struct {
		int id;
		const char *name;
	} tracing[] = { { OPT_CHILDREN, "--children" }, { OPT_MIN_WAIT, "--min-wait-ms" }, { OPT_PY_MIN, "--py-min-ms" },
			{ OPT_NO_STACKS, "--no-stacks" }, { OPT_HOOK, "--hook" }, { OPT_INTERVAL, "-i" } };

	for (size_t i = 0; i < sizeof(tracing) / sizeof(tracing[0]); i++)
		if (tracing[i].id == id)
			g->tracing_option = tracing[i].name;
	switch (id) {
	case OPT_MIN_WAIT:
		return opts_parse_double("min-wait-ms", arg, 0, 3600e3, &g->min_wait_ms);
	case OPT_PY_MIN:
		return opts_parse_double("py-min-ms", arg, 0, 3600e3, &g->py_min_ms);
	case OPT_INTERVAL:
		return opts_parse_seconds("interval", arg, &g->interval_s);
	case OPT_CHILDREN:
		g->targets.children = true;
		return 0;
	case OPT_NO_STACKS:
		g->stacks = false;
		return 0;
	case OPT_FOLDED:
		g->folded = true;
		return 0;
	case OPT_HOOK:
		if (!strcmp(arg, "take_gil"))
			g->hook = PYGIL_HOOK_TAKE_GIL;
		else if (!strcmp(arg, "condvar"))
			g->hook = PYGIL_HOOK_CONDVAR;
		else if (!strcmp(arg, "futex"))
			g->hook = PYGIL_HOOK_FUTEX;
		else
			return opts_usage_error("invalid --hook '%s': futex, take_gil or condvar", arg);
		return 0;
	case OPT_OUTPUT:
	case OPT_FORMAT:
		return profile_option(&g->out, id == OPT_FORMAT, arg);
	case OPT_FROM:
	case OPT_HOST:
	case OPT_SINCE:
	case OPT_UNTIL:
		return profread_option(&g->from, (enum profread_opt)(id - OPT_FROM), arg);
	}
	return -1;
}

/* --from: the stored waits' holder stacks; no targets (-p chooses rows). */
static int check_stored(struct pygil *g)
{
	if (profread_check(&g->from, g->base.common))
		return -1;
	if (!g->from.source)
		return 0;
	if (g->folded && g->base.common->json)
		return opts_usage_error("-f and -j exclude each other");
	if (g->tracing_option)
		return opts_usage_error("--from draws stored waits: not with %s, which sets how to trace", g->tracing_option);
	g->base.stored = true;
	return 0;
}

static int check(struct tracker *t)
{
	struct pygil *g = (struct pygil *)t;

	if (check_stored(g))
		return -1;
	if (!g->from.source && tracker_check_pids_folded(t, g->folded))
		return -1;
	if (g->folded && !g->stacks)
		return opts_usage_error("-f needs the stacks (drop --no-stacks)");
	if (g->py_min_ms >= 0 && !g->stacks)
		return opts_usage_error("--py-min-ms and --no-stacks exclude each other");
	if (g->out.path && !g->stacks)
		return opts_usage_error("-o needs the stacks (drop --no-stacks)");
	return profile_check(&g->out);
}

static int build_cflags(struct pygil *g)
{
	struct cflags *cf = &g->base.cflags;

	/* targets are the keys of gil_targets, not pid_filter */
	if (pytargets_cflags(cf, g->base.common, false, g->stacks))
		return -1;
	if (g->min_wait_ms > 0)
		cflags_add(cf, "-DMIN_NS=%lluull", (unsigned long long)(g->min_wait_ms * 1e6 + 0.5));
	if (g->stacks)
		cflags_add(cf, "-DSTACKS");
	if (g->stacks && g->py_min_ms > 0)
		cflags_add(cf, "-DPY_MIN_NS=%lluull", (unsigned long long)(g->py_min_ms * 1e6 + 0.5));
	if (g->hook == PYGIL_HOOK_FUTEX)
		cflags_add(cf, "-DFUTEX_HOOK");
	return 0;
}

/* ---- hooks ---- */

static int plan_binary(void *ctx, struct pyhook_plan *plan, const struct pyhook_target *t,
		       char *how, size_t howlen)
{
	struct pygil *g = ctx;

	return pygil_hooks_plan(g->hook, g->targets.children, plan, t, how, howlen);
}

static bool keep_target(void *ctx, struct pyproc *py)
{
	struct pygil *g = ctx;

	return pytargets_adopt(&g->targets, py, true) != NULL;
}

static int prepare(struct tracker *t)
{
	struct pygil *g = (struct pygil *)t;
	const struct common_opts *c = t->common;
	const struct pyhook_planner planner = { plan_binary, keep_target, g, false, g->targets.children };
	int n;

	if (g->from.source)
		return 0; /* stored waits: no BPF, no targets */
	if (build_cflags(g))
		return -1;
	t->text = pygil_bpf_text;
	if (c->print_ebpf)
		return 0;
	if (!(g->hooks = pyhooks_new()) || (n = pyhooks_plan_pids(g->hooks, c->pids, c->npids, &planner)) < 0)
		return -1;
	g->targets.skipped = (unsigned long long)(c->npids - n);
	if (!n)
		return tracker_no_targets(t);
	if (pyhooks_count(g->hooks) && bpfprog_check_uprobe_caps())
		return -1;
	if (!(g->text = pyhooks_text(g->hooks, pygil_bpf_text)))
		return -1;
	t->text = g->text;
	return 0;
}

/* ---- targets: each one's GIL in gil_targets ---- */

/* A target into gil_targets and into its slot, or the slot marked shared (pygil.h). */
static int add_target(struct pygil *g, struct pygil_target *cfg)
{
	int fd = bpfprog_table_fd(g->base.prog, "gil_targets");
	int slots = bpfprog_table_fd(g->base.prog, "target_slots");
	__u32 key = cfg->tgid, slot = key % PYGIL_TARGET_SLOTS;
	struct pygil_target in_slot = { 0 };

	if (fd < 0 || slots < 0 || bpf_update_elem(fd, &key, cfg, BPF_ANY) ||
	    bpf_lookup_elem(slots, &slot, &in_slot))
		return -1;
	if (in_slot.tgid && in_slot.tgid != key) {
		in_slot.tgid = PYGIL_SLOT_SHARED;
		log_debug("pid %u: shares its slot with another target", key);
		return bpf_update_elem(slots, &slot, &in_slot, BPF_ANY);
	}
	return bpf_update_elem(slots, &slot, cfg, BPF_ANY);
}

/* The targets added since the last call into gil_targets (a target that goes leaves it: forget_map). */
static void configure_targets(struct pygil *g)
{
	for (int i = 0; i < g->targets.n; i++) {
		struct pytarget *pt = &g->targets.v[i];
		struct pygil_target cfg = { 0 };

		if (pt->ready || !pt->py)
			continue;
		pt->ready = true;
		cfg.gil = pyproc_gil(pt->py);
		cfg.ts_native_tid = pyproc_offsets(pt->py)->ts_native_thread_id;
		cfg.tgid = (__u32)pt->pid;
		if (!cfg.gil || add_target(g, &cfg))
			log_error("pid %d: cannot find or configure its GIL: its waits are not traced", pt->pid);
		else
			log_debug("pid %d: GIL at 0x%llx", pt->pid, (unsigned long long)cfg.gil);
	}
}

/* ---- the per-thread table ---- */

static struct thread_row *row_of(struct pygil *g, pid_t pid, pid_t tid, const char *name)
{
	struct thread_row *r;

	for (int i = 0; i < g->nrows; i++) {
		r = &g->rows[i];
		if (r->pid != pid || r->tid != tid)
			continue;
		if (name && name[0]) /* threading may have named it since */
			snprintf(r->name, sizeof(r->name), "%s", name);
		return r;
	}
	if (g->nrows == MAX_THREADS ||
	    (!g->rows && !(g->rows = calloc(MAX_THREADS, sizeof(*g->rows))))) {
		g->rows_untabled++;
		return NULL;
	}
	r = &g->rows[g->nrows++];
	memset(r, 0, sizeof(*r));
	r->pid = pid, r->tid = tid;
	snprintf(r->name, sizeof(r->name), "%s", name ? name : "");
	return r;
}

/* When the next sample is due: SAMPLE_MS/2 to 3*SAMPLE_MS/2 from now. */
static uint64_t next_sample(struct pygil *g, uint64_t now_ns)
{
	uint32_t x = g->jitter;

	x ^= x << 13, x ^= x >> 17, x ^= x << 5;
	g->jitter = x;
	return now_ns + SAMPLE_MS * 1000000ull / 2 + x % (SAMPLE_MS * 1000000u);
}

/* Who holds each target's GIL now: the time since the last sample more for that thread. */
static void sample_holders(struct pygil *g, uint64_t now_ns)
{
	uint64_t dt = now_ns - g->last_sample_ns;

	if (now_ns < g->next_sample_ns)
		return;
	g->last_sample_ns = now_ns;
	g->next_sample_ns = next_sample(g, now_ns);
	if (dt > 10 * SAMPLE_MS * 1000000ull)
		dt = SAMPLE_MS * 1000000ull; /* a late tick does not stand for the time it missed */
	for (int i = 0; i < g->targets.n; i++) {
		struct pytarget *pt = &g->targets.v[i];
		uint64_t gil = pt->py && !pt->exited ? pyproc_gil(pt->py) : 0, holder = 0;
		const struct pythread *th;
		int locked = 0;
		struct thread_row *r;

		if (!gil || pyproc_read(pt->py, gil + PYGIL_OFF_LOCKED, &locked, sizeof(locked)) || locked != 1 ||
		    pyproc_read(pt->py, gil + PYGIL_OFF_LAST_HOLDER, &holder, sizeof(holder)))
			continue;
		th = pyproc_thread_of_tstate(pt->py, holder);
		if (th && th->tid && (r = row_of(g, pt->pid, th->tid, th->name)))
			r->hold_ns += dt;
	}
}

/* A thread's waits since the last sweep, into its row. */
static void add_waits(void *ctx, pid_t pid, pid_t tid, uint64_t wait_ns, uint64_t waits)
{
	struct pygil *g = ctx;
	char name[PYTHREAD_NAME_MAX];
	struct thread_row *r;

	pytargets_thread_name(&g->targets, pid, tid, "", 0, name, sizeof(name));
	if ((r = row_of(g, pid, tid, name))) {
		r->wait_ns += wait_ns;
		r->waits += waits;
	}
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0;
}

static void print_threads(struct pygil *g, uint64_t wall_ns)
{
	sink_table_begin(g->base.sink, &thread_schema, g->tables ? "" : NULL);
	for (int i = 0; i < g->nrows; i++) {
		const struct thread_row *r = &g->rows[i];
		double hold = pct(r->hold_ns, wall_ns), wait = pct(r->wait_ns, wall_ns);
		json_t *o = json_object();

		if (hold + wait > 100)
			hold = 100 - wait > 0 ? 100 - wait : 0;
		json_set_str(o, "metric", thread_schema.metric);
		json_set_int(o, "pid", r->pid);
		json_set_int(o, "tid", r->tid);
		json_set_str(o, "thread_name", r->name);
		json_set_real(o, "hold_pct", hold);
		json_set_real(o, "wait_pct", wait);
		json_set_real(o, "neither_pct", 100 - hold - wait > 0 ? 100 - hold - wait : 0);
		json_set_int(o, "waits", (json_int_t)r->waits);
		json_set_real(o, "wait_ms", (double)r->wait_ns / 1e6);
		sink_table_row(g->base.sink, &thread_schema, o);
	}
}

static void print_holders(struct pygil *g)
{
	const struct stackagg_entry **top = stackagg_sorted(&g->holders);

	sink_table_begin(g->base.sink, &holder_schema, g->from.source ? NULL : "");
	for (size_t i = 0; top && i < g->holders.n && i < TOP_STACKS; i++) {
		json_t *o = json_object();

		json_set_str(o, "metric", holder_schema.metric);
		json_set_real(o, "wait_ms", (double)top[i]->self / 1e3);
		json_set_int(o, "waits", top[i]->total);
		json_set_str(o, "holder_py_stack", top[i]->key);
		sink_table_row(g->base.sink, &holder_schema, o);
	}
	free(top);
}

static void print_folded(struct pygil *g)
{
	FILE *f = sink_text(g->base.sink);

	for (size_t i = 0; f && i < g->holders.n; i++)
		fprintf(f, "%s %lld\n", g->holders.v[i].key, g->holders.v[i].self);
	if (f)
		fflush(f);
}

/* The threads' waits since the last sweep into the rows; the next sweep SWEEP_MS from now. */
static void sweep_waits(struct pygil *g, uint64_t now_ns)
{
	pygil_waits_sweep(&g->waits, g->base.prog, add_waits, g);
	g->next_sweep_ns = now_ns + SWEEP_MS * 1000000ull;
}

/* The tables (or folded stacks) of the interval that ends now; then it starts afresh. */
static void report(struct pygil *g, uint64_t now_ns)
{
	sweep_waits(g, now_ns);
	if (g->folded) {
		print_folded(g);
	} else {
		print_threads(g, now_ns - g->interval_start_ns);
		if (g->stacks)
			print_holders(g);
	}
	g->tables++;
	g->nrows = 0;
	stackagg_clear(&g->holders);
	g->interval_start_ns = now_ns;
}

/* ---- events ---- */

/* A walked stack as folded text (root first), or NULL for none; counts incomplete ones. */
static const char *stack_text(struct pygil *g, struct pytarget *pt, const struct pywalk_frame *frames,
			      unsigned depth, unsigned status, struct pyframes_buf *buf, int *out_depth)
{
	int n = depth <= PYGIL_DEPTH ? (int)depth : 0;

	*out_depth = n;
	if (status == PYWALK_NO_THREAD && !n)
		return NULL;
	if (status != PYWALK_COMPLETE)
		g->stack_errors++;
	pyframes_resolve(pt ? pt->py : NULL, frames, n, g->locs);
	return pyframes_folded(buf, NULL, g->locs, n, status);
}

/* A stack as the tables, folded stacks and columns show it ("-": not walked). */
static const char *shown_stack(const char *text)
{
	return !text ? "-" : *text ? text : NO_FRAMES;
}

static void set_stack(json_t *o, const char *key, const char *depth_key, const char *text, int depth)
{
	json_object_set_new(o, key, text ? json_string(text) : json_null());
	json_object_set_new(o, depth_key, text ? json_integer(depth) : json_null());
}

/* A wait of ns behind holder's stack: into the holder table (-f) and the profile (-o). */
static void add_holder(struct pygil *g, const char *holder, uint64_t ns)
{
	/* a holder between frames (a thread starting or ending) still made others wait */
	const char *key = shown_stack(holder);
	struct stackagg_entry *e = stackagg_get(&g->holders, key, strlen(key));

	if (e) {
		e->self += (long long)(ns / 1000);
		e->total++;
	}
	if (g->out.path)
		stackagg_add_weighted(&g->profile, key, strlen(key), (long long)ns);
}

/*
 * --from: a stored wait, as the live run counted it. Its duration_ms has three
 * decimals (jsonfmt.h): the wait in whole microseconds, rounded where the live run's
 * -f cuts each wait's nanoseconds to whole microseconds and -o adds nanoseconds.
 */
static void add_stored(void *ctx, const struct profread_row *r)
{
	struct pygil *g = ctx;

	add_holder(g, r->stack, (uint64_t)llround(r->weight * 1e6));
	g->events++;
}

static void on_event(void *ctx, void *data, int size)
{
	struct pygil *g = ctx;
	const struct pygil_event *ev = data;
	const struct pygil_stack_event *s = data;
	const size_t head = offsetof(struct pygil_stack_event, holder);
	const char *waiter = NULL, *holder = NULL;
	int wdepth = 0, hdepth = 0;
	char name[PYTHREAD_NAME_MAX], hname[PYTHREAD_NAME_MAX], when[40];
	const struct pythread *th = NULL;
	struct pytarget *pt;
	json_int_t holder_tid = 0; /* 0: unknown */
	double ms;
	json_t *o;
	FILE *text;

	if (size < (int)sizeof(*ev) || (g->stacks && size < (int)head))
		return;
	ms = (double)(ev->end_ns - ev->start_ns) / 1e6;
	pt = pytargets_thread_name(&g->targets, (pid_t)ev->task.pid, (pid_t)ev->task.tid, ev->task.comm,
				   sizeof(ev->task.comm), name, sizeof(name));
	if (pt && pt->py)
		th = pyproc_thread_of_tstate(pt->py, ev->holder);
	if (g->stacks) {
		waiter = stack_text(g, pt, s->waiter, s->waiter_depth, s->waiter_status, &g->waiter_text, &wdepth);
		if (size < (int)(head + (size_t)pyframes_depth(s->holder_depth, size, head) * sizeof(s->holder[0])))
			return;
		holder = stack_text(g, pt, s->holder, (unsigned)pyframes_depth(s->holder_depth, size, head),
				    s->holder_status, &g->holder_text, &hdepth);
		if (holder)
			add_holder(g, holder, ev->end_ns - ev->start_ns);
	}
	g->events++;
	if (g->folded)
		return;
	time_format_mono_ns(ev->end_ns, when, sizeof(when));
	o = json_object();
	json_set_str(o, "metric", wait_schema.metric);
	record_set_task(o, &ev->task);
	json_set_str(o, "thread_name", name);
	json_set_real(o, "duration_ms", ms);
	/* a holder not listed yet (a new thread): its native id is the host tid outside namespaces */
	if (th && th->tid)
		holder_tid = th->tid;
	else if (ev->holder_ns_tid && pt && pt->py && pyproc_ns_pid(pt->py) == pt->pid)
		holder_tid = ev->holder_ns_tid;
	record_set_int_or_null(o, "holder_tid", holder_tid, holder_tid != 0);
	record_set_int_or_null(o, "holder_container_tid", th && th->ns_tid ? (json_int_t)th->ns_tid : (json_int_t)ev->holder_ns_tid,
			       (th && th->ns_tid) || ev->holder_ns_tid);
	if (!th && pt && pt->py && holder_tid)
		/* a thread state not listed yet: its name by its tid, when that is known */
		pyproc_thread_name(pt->py, (pid_t)holder_tid, "", 0, hname, sizeof(hname));
	else
		snprintf(hname, sizeof(hname), "%s", th ? th->name : "");
	json_object_set_new(o, "holder_thread_name", hname[0] ? json_string(hname) : json_null());
	if (g->stacks) {
		set_stack(o, "waiter_py_stack", "waiter_py_stack_depth", waiter, wdepth);
		set_stack(o, "holder_py_stack", "holder_py_stack_depth", holder, hdepth);
	}
	json_set_int(o, "switch_number", (json_int_t)ev->switch_number);
	json_set_str(o, "hook", ev->source == PYGIL_SRC_FUTEX ? "futex" :
				ev->source == PYGIL_SRC_TAKE_GIL ? "take_gil" : "condvar");
	json_set_str(o, "time", when);
	sink_record(g->base.sink, &wait_schema, o);
	text = sink_text(g->base.sink);
	if (text && g->stacks) {
		/* columns: the two stacks under the wait, root first */
		fprintf(text, "    waiter: %s\n    holder: %s\n", shown_stack(waiter), shown_stack(holder));
		fflush(text);
	}
}

static int start(struct tracker *t)
{
	struct pygil *g = (struct pygil *)t;
	struct bpfprog *p = t->prog;
	long long rows;

	if (g->from.source) {
		t->done = true;
		return profread_each(&g->from, add_stored, g, &rows);
	}
	if (pygil_waits_init(&g->waits)) {
		log_error("out of memory");
		return -1;
	}
	g->targets.forget_map = bpfprog_table_fd(p, "gil_targets");
	configure_targets(g);
	if (pytargets_start(&g->targets, g->stacks ? p : NULL))
		return -1;
	if (g->targets.children)
		configure_targets(g);
	/* woken per 16 records, read every poll: the holder samples want a tick about every 5 ms */
	t->poll_ms = SAMPLE_MS;
	if (bpfprog_open_perf_buffer(p, "events", on_event, g, 256, 16) || pyhooks_attach(g->hooks, p) ||
	    (g->hook == PYGIL_HOOK_FUTEX && (bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_futex") ||
				       bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_futex"))))
		return -1;
	snprintf(t->banner, sizeof(t->banner), "Tracing GIL waits of %d process%s (%d probes).",
		 g->targets.alive, g->targets.alive == 1 ? "" : "es", bpfprog_attachments(p));
	g->interval_start_ns = g->last_sample_ns = g->next_sample_ns = time_mono_ns();
	g->next_sweep_ns = g->interval_start_ns + SWEEP_MS * 1000000ull;
	g->jitter = (uint32_t)g->last_sample_ns | 1;
	return 0;
}

static int tick(struct tracker *t, uint64_t now_ns)
{
	struct pygil *g = (struct pygil *)t;

	if (g->from.source)
		return 0; /* stored waits: all read at the start */
	t->done = pytargets_refresh(&g->targets, now_ns);
	configure_targets(g);
	sample_holders(g, now_ns);
	t->poll_ms = (int)((g->next_sample_ns - now_ns) / 1000000) + 1; /* the runner wakes for the next */
	/* a report sweeps too: no second sweep of its own in the same tick */
	if (!t->done && g->interval_s && (double)(now_ns - g->interval_start_ns) >= g->interval_s * 1e9)
		report(g, now_ns);
	else if (now_ns >= g->next_sweep_ns)
		sweep_waits(g, now_ns);
	return 0;
}

static const struct profile_meta profile_meta = {
	.title = "pygil: the Python code holding the GIL while others waited",
	.count_name = "waits",
	.weight_name = "gil_wait",
	.by_weight = true,
	.folded_us = true,
};

static void finish(struct tracker *t)
{
	struct pygil *g = (struct pygil *)t;
	json_t *o;

	if (g->from.source) {
		/* the holder stacks of the stored waits: no thread table (holding was sampled, not stored) */
		if (g->folded)
			print_folded(g);
		else
			print_holders(g);
		t->failed |= 0 != profile_write(&g->out, &g->profile, &profile_meta);
		log_info("read %llu gil_wait events from %s", g->events, g->from.source);
		return;
	}
	report(g, time_mono_ns());
	o = summary_begin(t, &summary_schema, counters);
	json_set_int(o, "events", (json_int_t)g->events);
	json_set_int(o, "stacks_incomplete", (json_int_t)g->stack_errors);
	json_set_int(o, "stacks_other", (json_int_t)(g->holders.other + g->profile.other));
	json_set_int(o, "rows_untabled", (json_int_t)g->rows_untabled);
	record_set_targets(o, g->targets.skipped, g->targets.exits);
	summary_end(t, &summary_schema, o, g->targets.added);
	t->failed |= 0 != profile_write(&g->out, &g->profile, &profile_meta);
}

static void destroy(struct tracker *t)
{
	struct pygil *g = (struct pygil *)t;

	pytargets_free(&g->targets);
	stackagg_free(&g->holders);
	stackagg_free(&g->profile);
	pyframes_buf_free(&g->waiter_text);
	pyframes_buf_free(&g->holder_text);
	pyhooks_free(g->hooks);
	free(g->rows);
	pygil_waits_free(&g->waits);
	free(g->text);
}

/* What pymonitor calls it, and the original monitor's flags as its own options. */
static const struct monitor_entry monitor[] = {
	{ .name = "gil",
	  .needs_pids = true,
	  .flags = { { "gil-min-wait-ms", "min-wait-ms", "MS", "gil: only GIL waits of MS or more (default 1.0)" },
		     { "gil-py-enable", NULL, NULL, "gil: the waiter's and holder's Python stacks (always walked)" },
		     { "gil-py-min-ms", "py-min-ms", "MS", "gil: Python stacks only of waits of MS or more" } } },
	{ 0 },
};

const struct tracker_ops pygil_tracker = {
	.name = "pygil",
	.size = sizeof(struct pygil),
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
