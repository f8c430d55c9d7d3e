/*
 * pygc: every CPython garbage-collection pause: which generation, which thread,
 * how long, how many objects it found unreachable. Hooks, best first: the USDT
 * probes python:gc__start/gc__done (distro builds, also stripped ones), else uprobes
 * on the collector function of that version (builds with symbols, e.g. pyenv).
 */
#define _GNU_SOURCE
#include <bcc/libbpf.h>
#include <stddef.h>
#include <linux/types.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpfprog.h"
#include "kbtf.h"
#include "lifecycle.h"
#include "log.h"
#include "opts.h"
#include "out.h"
#include "procinfo.h"
#include "pyebpf_bpf.h"
#include "pygc.h"
#include "pyhooks.h"
#include "pyproc.h"
#include "utf8.h"

extern const char pygc_bpf_text[];

static const struct tool_doc doc = {
	.name = "pygc",
	.summary = "Trace CPython garbage-collection pauses: generation, thread, duration, objects found.",
	.examples = "  pygc                  # every CPython process on the host\n"
		    "  pygc -p 4242          # the collections of pid 4242\n"
		    "  pygc -p 4242 -g 2     # only full (generation 2) collections\n"
		    "  pygc --min-ms 10 -j   # pauses of 10 ms or more, JSON lines\n"
		    "  pygc -p 4242 --stack  # and the Python code that triggered each one\n",
};

enum { OPT_MIN_MS = OPT_TOOL_BASE, OPT_STACK, OPT_GEN = 'g' };

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_MIN_MS, 0, "min-ms", "MS", "only pauses of at least MS milliseconds (fractions allowed)" },
	{ OPT_GEN, 'g', "generation", "GEN", "only collections of generation GEN (0, 1 or 2)" },
	{ OPT_STACK, 0, "stack", NULL, "add the Python stack of the code that triggered each collection" },
	OPT_ENTRIES_BPF_TOOL_TAIL,
};

static const struct out_column columns[] = {
	{ "time", "TIME", -27 },
	{ "pid", "PID", 7 },
	{ "tid", "TID", 7 },
	{ "comm", "COMM", -15 },
	{ "thread_name", "THREAD", -16 },
	{ "generation", "GEN", 3 },
	{ "duration_ms", "PAUSE_MS", 9 },
	{ "collected", "COLLECTED", 9 },
	{ NULL, NULL, 0 },
};

struct settings {
	struct common_opts common;
	double min_ms;
	int generation; /* -1: all */
	bool stack;
};

/* A traced process (-p), or one seen in an event (system-wide): its CPython view. */
struct target {
	pid_t pid;
	struct pyproc *py; /* NULL when it is not (or no longer) readable */
	bool exited;
};

#define MAX_TARGETS 1024

/* Durations of one generation, for the summary */
struct gen_stats {
	double *ms;
	size_t n, cap;
	double total;
};

struct run {
	const struct settings *s;
	struct out *out;
	struct target targets[MAX_TARGETS];
	int ntargets;
	bool system_wide;
	struct gen_stats gens[3];
	unsigned long long events;
	struct bpfprog *prog;
	unsigned long long stack_errors; /* --stack: events whose stack could not be read */
};

static int handle_option(int id, const char *arg, void *ctx)
{
	struct settings *s = ctx;
	unsigned long g;

	switch (id) {
	case OPT_MIN_MS:
		return opts_parse_double("min-ms", arg, 0, 3600e3, &s->min_ms);
	case OPT_STACK:
		s->stack = true;
		return 0;
	case OPT_GEN:
		if (opts_parse_ulong("generation", arg, 0, 2, &g))
			return -1;
		s->generation = (int)g;
		return 0;
	}
	return -1;
}

static int build_cflags(const struct settings *s, struct cflags *cf)
{
	struct kbtf *b = kbtf_open();
	int r;

	if (!b)
		return -1;
	r = pyebpf_bpf_cflags(b, cf, &s->common);
	/* the walker finds the thread's PyThreadState by its fsbase (python.bpf.h) */
	if (!r && s->stack)
		r = kbtf_offset_cflag(b, cf, "OFF_TASK_THREAD_FSBASE", "task_struct", "thread.fsbase");
	kbtf_close(b);
	if (r)
		return -1;
	if (s->generation >= 0)
		cflags_add(cf, "-DGEN=%d", s->generation);
	if (s->min_ms > 0)
		cflags_add(cf, "-DMIN_NS=%lluull", (unsigned long long)(s->min_ms * 1e6 + 0.5));
	if (s->stack)
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
	/* facts.md 6.1: collect(int generation, ...) in 3.8, (tstate, generation, ...) after */
	return minor == 8 ? "collector_entry_rdi" : "collector_entry_rsi";
}

/*
 * The collector of each version (facts.md 6.1): 3.8-3.9 collect(), 3.10-3.13 and
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
	}
	return 0;
}

/*
 * The hooks for one interpreter binary (pyhooks.h): USDT if it has the gc probes,
 * else uprobes; an installed binary no process runs yet has no version: USDT only.
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
	struct run *run = ctx;

	if (run->ntargets == MAX_TARGETS)
		return false;
	run->targets[run->ntargets++] = (struct target){ pyproc_pid(py), py, false };
	return true;
}

static int plan_hooks(struct run *run, struct pyhook_plan *plan)
{
	const struct common_opts *c = &run->s->common;
	const struct pyhook_planner planner = { plan_binary, keep_target, run, false };

	if (!run->system_wide)
		return pyhooks_plan_pids(plan, c->pids, c->npids, &planner);
	if (pyhooks_plan_system(plan, &planner) > 0)
		return 0;
	log_error("no running CPython process with USDT gc probes or collector symbols was "
		  "found; start one first or name it with -p PID");
	return -1;
}

/* ---- events ---- */

/* --stack: gives the walker in BPF the layout of t's interpreter. */
static void configure_walker(struct run *run, struct target *t)
{
	struct pywalk_config cfg;
	int fd;

	if (!run->s->stack || !t->py || !run->prog)
		return;
	pyproc_walk_config(t->py, &cfg);
	fd = bpfprog_table_fd(run->prog, "py_config");
	if (fd < 0 || bpf_update_elem(fd, &t->pid, &cfg, BPF_ANY))
		log_warn("cannot configure the stack walker for pid %d: its stacks are not shown", t->pid);
}

static struct target *target_of(struct run *run, pid_t pid)
{
	struct pyproc_error err;

	for (int i = 0; i < run->ntargets; i++)
		if (run->targets[i].pid == pid)
			return &run->targets[i];
	if (!run->system_wide || run->ntargets == MAX_TARGETS)
		return NULL;
	/* system-wide: opened on its first collection, for thread names (and stacks, from its next one) */
	run->targets[run->ntargets] = (struct target){ pid, pyproc_open(pid, &err), false };
	configure_walker(run, &run->targets[run->ntargets]);
	return &run->targets[run->ntargets++];
}

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

static void stats_add(struct gen_stats *g, double ms)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 256;
		double *v = realloc(g->ms, cap * sizeof(*v));
		if (!v)
			return;
		g->ms = v, g->cap = cap;
	}
	g->ms[g->n++] = ms;
	g->total += ms;
}

/*
 * --stack: the frames as "func (file:line)", outermost first like a Python traceback
 * (most recent call last). A stack that could not be read completely says so in its
 * first entry ("[truncated]", "[unknown: ...]"), never silently.
 */
static json_t *stack_json(struct run *run, struct target *t, const struct pygc_stack_event *s,
			  int size)
{
	static const char *const why[] = {
		[PYWALK_NO_THREAD] = "[unknown: no Python thread state]",
		[PYWALK_ERR_CONFIG] = "[unknown: process not configured yet]",
		[PYWALK_ERR_THREADS] = "[unknown: thread list unreadable]",
		[PYWALK_ERR_FRAME] = "[unknown: frame unreadable]",
		[PYWALK_ERR_CODE] = "[unknown: code object unreadable]",
	};
	json_t *a = json_array();
	int depth = (int)s->depth;
	char frame[1024], clean[3 * sizeof(frame)];

	if (depth > PYWALK_DEPTH_LIMIT ||
	    size < (int)(offsetof(struct pygc_stack_event, frames) + (size_t)depth * sizeof(s->frames[0])))
		depth = 0;
	if (s->status == PYWALK_TRUNCATED)
		json_array_append_new(a, json_string("[truncated]"));
	else if (s->status != PYWALK_COMPLETE && s->status < sizeof(why) / sizeof(why[0]) && why[s->status])
		json_array_append_new(a, json_string(why[s->status]));
	if (s->status != PYWALK_COMPLETE)
		run->stack_errors++;
	for (int i = depth - 1; i >= 0; i--) {
		struct pycode_loc loc;

		if (!t || !t->py ||
		    pyproc_code_location(t->py, s->frames[i].code, s->frames[i].instr,
					 s->frames[i].firstlineno, &loc))
			snprintf(frame, sizeof(frame), "[unknown]");
		else if (loc.file[0])
			snprintf(frame, sizeof(frame), "%s (%s:%d)", loc.func, loc.file, loc.line);
		else
			snprintf(frame, sizeof(frame), "%s", loc.func);
		utf8_repair(frame, sizeof(frame), clean, sizeof(clean));
		json_array_append_new(a, json_string(clean));
	}
	return a;
}

static void on_event(void *ctx, void *data, int size)
{
	struct run *run = ctx;
	const struct pygc_event *ev = data;
	char start[40], end[40], name[PYTHREAD_NAME_MAX] = "";
	json_t *stack = NULL;
	struct target *t;
	double ms;
	json_t *o;

	if (size < (int)sizeof(*ev))
		return;
	if (run->s->stack && size < (int)offsetof(struct pygc_stack_event, frames))
		return;
	ms = (double)(ev->end_ns - ev->start_ns) / 1e6;
	t = target_of(run, (pid_t)ev->pid);
	if (!t || !t->py || pyproc_thread_name(t->py, (pid_t)ev->tid, name, sizeof(name)) < 0)
		if (procinfo_comm((pid_t)ev->pid, (pid_t)ev->tid, name, sizeof(name)))
			snprintf(name, sizeof(name), "%.16s", ev->comm);
	time_format_mono_ns(ev->start_ns, start, sizeof(start));
	time_format_mono_ns(ev->end_ns, end, sizeof(end));

	o = json_object();
	json_set_str(o, "metric", "gc_pause");
	json_set_int(o, "pid", ev->pid);
	json_set_int(o, "tid", ev->tid);
	json_set_int(o, "container_pid", ev->nspid ? ev->nspid : ev->pid);
	json_set_int(o, "container_tid", ev->nstid ? ev->nstid : ev->tid);
	json_set_strn(o, "comm", ev->comm, strnlen(ev->comm, sizeof(ev->comm)));
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
	if (run->s->stack) {
		stack = stack_json(run, t, data, size);
		if (run->s->common.json)
			json_object_set(o, "stack", stack);
	}
	out_event(run->out, o);
	if (stack && !run->s->common.json) {
		/* columns: the frames under the event, indented, outermost first */
		size_t i;
		json_t *f;
		json_array_foreach(stack, i, f)
			printf("    %s\n", json_string_value(f));
		fflush(stdout);
	}
	json_decref(stack);
	run->events++;
	if (ev->generation >= 0 && ev->generation <= 2)
		stats_add(&run->gens[ev->generation], ms);
}

/* -p targets that went away; true when none is left. */
static bool targets_gone(struct run *run)
{
	int alive = 0;

	for (int i = 0; i < run->ntargets; i++) {
		struct target *t = &run->targets[i];
		if (!t->exited && !procinfo_exists(t->pid)) {
			t->exited = true;
			log_info("pid %d exited", t->pid);
		}
		alive += !t->exited;
	}
	return !alive;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted values. */
static double percentile(const double *v, size_t n, double p)
{
	size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999999);
	if (rank < 1)
		rank = 1;
	return v[rank > n ? n - 1 : rank - 1];
}

static void print_summary(struct run *run, struct bpfprog *prog)
{
	for (int g = 0; g < 3; g++) {
		struct gen_stats *s = &run->gens[g];
		json_t *o = json_object();
		char title[32];

		json_set_str(o, "metric", "gc_summary");
		json_set_int(o, "generation", g);
		json_set_int(o, "count", (json_int_t)s->n);
		json_set_real(o, "total_ms", s->total);
		if (s->n) {
			qsort(s->ms, s->n, sizeof(double), cmp_double);
			json_set_real(o, "p50_ms", percentile(s->ms, s->n, 50));
			json_set_real(o, "p99_ms", percentile(s->ms, s->n, 99));
			json_set_real(o, "max_ms", s->ms[s->n - 1]);
		} else {
			json_object_set_new(o, "p50_ms", json_null());
			json_object_set_new(o, "p99_ms", json_null());
			json_object_set_new(o, "max_ms", json_null());
		}
		snprintf(title, sizeof(title), "generation %d", g);
		out_summary(run->out, title, o);
	}
	json_t *o = json_object();
	json_set_str(o, "metric", "pygc_summary");
	json_set_int(o, "events", (json_int_t)run->events);
	json_set_int(o, "lost", (json_int_t)bpfprog_lost(prog));
	json_set_int(o, "missed", (json_int_t)bpfprog_missed(prog));
	json_set_int(o, "map_full", (json_int_t)bpfprog_table_sum_u64(prog, "counters", PYGC_CNT_MAP_FULL));
	json_set_int(o, "started_before_tracing",
		     (json_int_t)bpfprog_table_sum_u64(prog, "counters", PYGC_CNT_NO_START));
	if (run->s->stack)
		json_set_int(o, "stacks_incomplete", (json_int_t)run->stack_errors);
	out_summary(run->out, "summary", o);
}

int main(int argc, char **argv)
{
	struct settings s = { .generation = -1 };
	struct cflags cf = { 0 };
	struct pyhook_plan *hooks = pyhooks_new();
	struct bpfprog *prog = NULL;
	struct run *run = calloc(1, sizeof(*run));
	char *text = NULL;
	int rc = EXIT_RUNTIME;

	if (!run)
		return EXIT_RUNTIME;
	run->s = &s;
	if (opts_parse(&doc, options, argc, argv, &s.common, handle_option, &s) < 0) {
		free(run);
		return EXIT_USAGE;
	}
	if (!hooks || build_cflags(&s, &cf))
		goto cleanup;
	if (s.common.print_ebpf && !s.common.npids) {
		/* the USDT entry functions depend on the targets; without -p show the tool's part */
		bpfprog_print_text(stdout, pygc_bpf_text, &cf);
		rc = EXIT_OK;
		goto cleanup;
	}
	if (!s.common.print_ebpf && lifecycle_check_privileges())
		goto cleanup;

	run->system_wide = s.common.npids == 0;
	if (plan_hooks(run, hooks))
		goto cleanup;
	text = pyhooks_text(hooks, pygc_bpf_text);
	if (!text)
		goto cleanup;
	if (s.common.print_ebpf) {
		bpfprog_print_text(stdout, text, &cf);
		rc = EXIT_OK;
		goto cleanup;
	}

	prog = bpfprog_compile(text, &cf, s.common.kernel_headers);
	if (!prog || pyebpf_bpf_set_pids(prog, &s.common))
		goto cleanup;
	run->prog = prog;
	for (int i = 0; i < run->ntargets; i++)
		configure_walker(run, &run->targets[i]);
	run->out = out_open(s.common.json, s.common.env, columns);
	/*
	 * A wakeup per record costs the collecting thread an IPI (a third of pygc's cost
	 * per collection in bench/pygc.sh): wake every 32 records, and drain after each
	 * poll of at most 100 ms, so a record waits 100 ms at most.
	 */
	if (!run->out || bpfprog_open_perf_buffer(prog, "events", on_event, run, 256, 32))
		goto cleanup;
	if (pyhooks_attach(hooks, prog))
		goto cleanup;

	lifecycle_start(s.common.duration_s);
	log_info("Tracing CPython GC pauses (%d probes). Hit Ctrl-C to end.",
		 bpfprog_attachments(prog));
	while (!lifecycle_stopping() && !ferror(stdout)) {
		if (bpfprog_poll(prog, lifecycle_poll_timeout_ms(100)) < 0) {
			log_error("polling the perf buffers failed");
			goto cleanup;
		}
		if (!run->system_wide && targets_gone(run)) {
			log_info("every traced process has exited");
			break;
		}
	}

	bpfprog_drain(prog);
	print_summary(run, prog);
	rc = EXIT_OK;
cleanup:
	if (run->out && out_close(run->out) && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	bpfprog_close(prog);
	for (int i = 0; i < run->ntargets; i++)
		pyproc_close(run->targets[i].py);
	for (int g = 0; g < 3; g++)
		free(run->gens[g].ms);
	pyhooks_free(hooks);
	free(text);
	cflags_free(&cf);
	free(run);
	return rc;
}
