/*
 * pygc: every CPython garbage-collection pause: which generation, which thread,
 * how long, how many objects it found unreachable. Hooks, best first: the USDT
 * probes python:gc__start/gc__done (distro builds, also stripped ones), else uprobes
 * on the collector function of that version (builds with symbols, e.g. pyenv).
 */
#define _GNU_SOURCE
#include <bcc/bcc_syms.h>
#include <bcc/libbpf.h>
#include <ctype.h>
#include <stddef.h>
#include <dirent.h>
#include <glob.h>
#include <linux/types.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
#include "pyproc.h"
#include "usdt.h"
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

/* A uprobe pygc puts on a function of the interpreter. */
struct uprobe {
	char binary[4096 + 64];
	char symbol[128];
	uint64_t offset;
	pid_t pid; /* -1: every process running binary */
	const char *fn;
	bool ret;
};

struct hooks {
	struct usdt *usdt;
	struct uprobe *up;
	int nup, capup;
};

static int hooks_add_uprobe(struct hooks *h, const char *binary, const char *symbol,
			    uint64_t offset, pid_t pid, const char *fn, bool ret)
{
	if (h->nup == h->capup) {
		int cap = h->capup ? 2 * h->capup : 16;
		struct uprobe *v = realloc(h->up, (size_t)cap * sizeof(*v));
		if (!v)
			return -1;
		h->up = v, h->capup = cap;
	}
	struct uprobe *u = &h->up[h->nup++];
	snprintf(u->binary, sizeof(u->binary), "%s", binary);
	snprintf(u->symbol, sizeof(u->symbol), "%s", symbol);
	u->offset = offset, u->pid = pid, u->fn = fn, u->ret = ret;
	return 0;
}

/*
 * Function symbols named base or base.<clone suffix> (GCC's .constprop.N, .isra.N,
 * .part.N copies are separate functions: each needs its own uprobe).
 */
#define MAX_CLONES 8
static const char *clone_base;
static char clone_names[MAX_CLONES][128];
static int nclones;

static int on_function_symbol(const char *name, uint64_t addr)
{
	size_t n = strlen(clone_base);

	(void)addr;
	if (nclones < MAX_CLONES && !strncmp(name, clone_base, n) &&
	    (name[n] == 0 || name[n] == '.'))
		snprintf(clone_names[nclones++], sizeof(clone_names[0]), "%s", name);
	return 0;
}

static int find_clones(const char *binary, const char *base)
{
	clone_base = base, nclones = 0;
	bcc_foreach_function_symbol(binary, on_function_symbol);
	return nclones;
}

static int symbol_file_offset(const char *binary, const char *name, uint64_t *off)
{
	struct bcc_symbol sym = { 0 };

	if (bcc_resolve_symname(binary, name, 0, 0, NULL, &sym) < 0)
		return -1;
	*off = sym.offset;
	free((void *)sym.module);
	return 0;
}

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
static int plan_uprobes(struct hooks *h, const char *binary, const struct pyversion *v, pid_t pid,
			char *how, size_t howlen)
{
	const char *const *names = collector_names(v->minor);
	int added = 0;

	for (; *names && !added; names++) {
		int n = find_clones(binary, *names);
		for (int i = 0; i < n; i++) {
			uint64_t off;
			if (symbol_file_offset(binary, clone_names[i], &off))
				continue;
			if (hooks_add_uprobe(h, binary, clone_names[i], off, pid,
					     collector_entry_fn(v->minor, clone_names[i]), false) ||
			    hooks_add_uprobe(h, binary, clone_names[i], off, pid, "collector_return", true))
				return -1;
			if (!added)
				snprintf(how, howlen, "uprobes on %s", clone_names[i]);
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
	if (v->minor >= 13) {
		int n = find_clones(binary, "invoke_gc_callback");
		for (int i = 0; i < n; i++) {
			uint64_t off;
			if (symbol_file_offset(binary, clone_names[i], &off))
				continue;
			if (hooks_add_uprobe(h, binary, clone_names[i], off, pid, "callback_entry", false) ||
			    hooks_add_uprobe(h, binary, clone_names[i], off, pid, "callback_return", true))
				return -1;
		}
		if (n)
			snprintf(how + strlen(how), howlen - strlen(how), " timed between its callbacks");
	}
	return 0;
}

/*
 * The hooks for one interpreter binary: USDT if it has the gc probes, else uprobes.
 * 0, 1 when it has neither (how says why), -1 after an error message.
 */
static int plan_binary(struct hooks *h, const char *binary, const struct pyversion *v, pid_t pid,
		       char *how, size_t howlen)
{
	if (usdt_binary_has_probe(binary, "python", "gc__start") &&
	    usdt_binary_has_probe(binary, "python", "gc__done")) {
		if (usdt_add(h->usdt, binary, pid, "python", "gc__start", "usdt_gc_start") ||
		    usdt_add(h->usdt, binary, pid, "python", "gc__done", "usdt_gc_done"))
			return -1;
		snprintf(how, howlen, "USDT python:gc__start/gc__done");
		return 0;
	}
	return plan_uprobes(h, binary, v, pid, how, howlen);
}

static void describe(const struct pyproc *py, char *buf, size_t len)
{
	const struct pyversion *v = pyproc_version(py);
	char micro[16] = "";

	if (v->micro >= 0)
		snprintf(micro, sizeof(micro), ".%d", v->micro);
	snprintf(buf, len, "CPython %d.%d%s in %s", v->major, v->minor, micro,
		 pyproc_module(py)->path);
}

/* -p: each pid must be a CPython this tool can hook. */
static int plan_pids(struct run *run, struct hooks *h)
{
	const struct common_opts *c = &run->s->common;

	for (int i = 0; i < c->npids; i++) {
		struct pyproc_error err;
		struct pyproc *py = pyproc_open(c->pids[i], &err);
		char what[600], how[200] = "";
		int r;

		if (!py) {
			log_error("%s", err.msg);
			return -1;
		}
		run->targets[run->ntargets++] = (struct target){ c->pids[i], py, false };
		describe(py, what, sizeof(what));
		r = plan_binary(h, pyproc_module(py)->host_path, pyproc_version(py), c->pids[i], how,
				sizeof(how));
		if (r < 0)
			return -1;
		if (r > 0) {
			log_error("pid %d (%s) has no USDT gc probes (built without --with-dtrace) and no "
				  "symbol for its collector function (stripped): its collections cannot "
				  "be traced",
				  c->pids[i], what);
			return -1;
		}
		log_info("pid %d: %s: %s", c->pids[i], what, how);
	}
	return 0;
}

struct file_id {
	dev_t dev;
	ino_t ino;
};

/*
 * Installed interpreters with USDT gc probes (distro builds) that no process runs
 * yet: their probes need no version or process, and the kernel raises the
 * semaphores in processes that start later. Returns how many were added.
 */
static int plan_installed(struct hooks *h, struct file_id *seen, int *nseen)
{
	static const char *const patterns[] = { "/usr/bin/python3.*", "/usr/local/bin/python3.*" };
	int planned = 0;

	for (size_t p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++) {
		glob_t g;

		if (glob(patterns[p], 0, NULL, &g))
			continue;
		for (size_t i = 0; i < g.gl_pathc; i++) {
			const char *path = g.gl_pathv[i];
			struct stat st;
			int dup = 0;

			/* python3.11-config and friends are scripts; only real ELF files count */
			if (stat(path, &st) || !S_ISREG(st.st_mode) || *nseen == 256)
				continue;
			for (int j = 0; j < *nseen; j++)
				dup |= seen[j].dev == st.st_dev && seen[j].ino == st.st_ino;
			if (dup || !usdt_binary_has_probe(path, "python", "gc__start") ||
			    !usdt_binary_has_probe(path, "python", "gc__done"))
				continue;
			seen[*nseen].dev = st.st_dev, seen[(*nseen)++].ino = st.st_ino;
			if (usdt_add(h->usdt, path, -1, "python", "gc__start", "usdt_gc_start") ||
			    usdt_add(h->usdt, path, -1, "python", "gc__done", "usdt_gc_done"))
				continue;
			log_info("%s: USDT python:gc__start/gc__done (processes started later too)", path);
			planned++;
		}
		globfree(&g);
	}
	return planned;
}

/*
 * The path to hook a module by for every process: /proc/PID/root/... dies with PID,
 * which may be a short-lived process, so the module's own path is used when it names
 * the same file from here (no container in between). st: the module's stat.
 */
static const char *stable_path(const struct pymodule *m, const struct stat *st)
{
	struct stat own;

	if (stat(m->path, &own) == 0 && own.st_dev == st->st_dev && own.st_ino == st->st_ino)
		return m->path;
	return m->host_path;
}

/*
 * Without -p: every interpreter binary that runs now, each hooked once for all its
 * processes (uprobes by file), and the installed ones with USDT probes.
 */
static int plan_system(struct run *run, struct hooks *h)
{
	struct file_id seen[256];
	int nseen = 0, planned = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d) {
		log_error("cannot read /proc");
		return -1;
	}
	while ((de = readdir(d))) {
		struct pyproc_error err;
		struct pyproc *py;
		struct stat st;
		char what[600], how[200] = "";
		pid_t pid;
		int r, dup = 0;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (pid == getpid())
			continue;
		py = pyproc_open(pid, &err);
		if (!py)
			continue;
		/* kept: thread names, and the stack walker's configuration */
		if (run->ntargets < MAX_TARGETS)
			run->targets[run->ntargets++] = (struct target){ pid, py, false };
		/* gone already (short-lived processes come and go during the scan): dup */
		if (stat(pyproc_module(py)->host_path, &st) != 0)
			dup = 1;
		for (int i = 0; i < nseen && !dup; i++)
			dup |= seen[i].dev == st.st_dev && seen[i].ino == st.st_ino;
		if (dup || nseen == 256) {
			if (run->ntargets == 0 || run->targets[run->ntargets - 1].py != py)
				pyproc_close(py);
			continue;
		}
		seen[nseen].dev = st.st_dev, seen[nseen++].ino = st.st_ino;
		describe(py, what, sizeof(what));
		r = plan_binary(h, stable_path(pyproc_module(py), &st), pyproc_version(py), -1, how,
				sizeof(how));
		if (r < 0)
			log_warn("%s (pid %d): not traced (see above)", what, pid);
		else if (r > 0)
			log_warn("%s (pid %d and others): no USDT gc probes and no collector symbol, not traced",
				 what, pid);
		else {
			log_info("%s: %s (every process running it)", what, how);
			planned++;
		}
		if (run->ntargets == 0 || run->targets[run->ntargets - 1].py != py)
			pyproc_close(py);
	}
	closedir(d);
	planned += plan_installed(h, seen, &nseen);
	if (!planned) {
		log_error("no running CPython process with USDT gc probes or collector symbols was "
			  "found; start one first or name it with -p PID");
		return -1;
	}
	return 0;
}

static int hooks_attach(const struct hooks *h, struct bpfprog *p)
{
	if (usdt_attach(h->usdt, p))
		return -1;
	for (int i = 0; i < h->nup; i++) {
		const struct uprobe *u = &h->up[i];
		if (bpfprog_attach_uprobe(p, u->fn, u->binary, u->offset, u->pid, u->ret, 0))
			return -1;
	}
	return 0;
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
	struct hooks hooks = { 0 };
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
	hooks.usdt = usdt_new();
	if (!hooks.usdt || build_cflags(&s, &cf))
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
	if (run->system_wide ? plan_system(run, &hooks) : plan_pids(run, &hooks))
		goto cleanup;
	text = usdt_text(hooks.usdt, pygc_bpf_text);
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
	if (hooks_attach(&hooks, prog))
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
	usdt_free(hooks.usdt);
	free(hooks.up);
	free(text);
	cflags_free(&cf);
	free(run);
	return rc;
}
