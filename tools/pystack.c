/*
 * pystack: where CPU goes in CPython processes, in Python frames. Samples every
 * thread of the target processes at -F Hz with a cpu-clock perf event, walks the
 * Python frame chain in BPF (bpf_text/python.bpf.h) and resolves names and lines in
 * userspace (src/python/pyproc.h). Output: a top table (default), folded stacks (-f) or
 * one JSON line per sample (-j).
 */
#include <bcc/libbpf.h>
#include <dirent.h>
#include <linux/perf_event.h>
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpfprog.h"
#include "kbtf.h"
#include "lifecycle.h"
#include "log.h"
#include "opts.h"
#include "out.h"
#include "procinfo.h"
#include "pyebpf_bpf.h"
#include "pyproc.h"
#include "pystack.h"
#include "pywalk.h"

extern const char pystack_bpf_text[];

static const struct tool_doc doc = {
	.name = "pystack",
	.summary = "Sample where CPython processes spend CPU, as Python stacks (BPF frame walker).",
	.examples = "  pystack -p 4242               # top functions of pid 4242 at exit\n"
		    "  pystack -p 4242 -d 10 -f      # 10 s of folded stacks for flamegraph.pl\n"
		    "  pystack -p 4242 --children -i 5  # gunicorn master and workers, a table every 5 s\n"
		    "  pystack -p 4242 -j            # one JSON line per sample\n",
};

enum {
	OPT_FREQ = 'F',
	OPT_FOLDED = 'f',
	OPT_INTERVAL = 'i',
	OPT_CHILDREN = OPT_TOOL_BASE,
	OPT_PER_THREAD,
	OPT_MAX_DEPTH,
};

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_FREQ, 'F', "frequency", "HZ", "samples per second and CPU (default 99)" },
	{ OPT_CHILDREN, 0, "children", NULL, "also sample the child processes of the -p pids (and new ones)" },
	{ OPT_FOLDED, 'f', "folded", NULL, "print folded stacks (FlameGraph input) instead of the top table" },
	{ OPT_PER_THREAD, 0, "per-thread", NULL, "with -f: the thread name as the root frame" },
	{ OPT_INTERVAL, 'i', "interval", "SECONDS", "print the table (or folded stacks) every SECONDS" },
	{ OPT_MAX_DEPTH, 0, "max-depth", "N", "frames kept per stack, innermost first (default 128, max 256)" },
	OPT_ENTRIES_BPF_TOOL_TAIL,
};

/* -j columns are not used (JSON only), but out_open wants the keys. */
static const struct out_column columns[] = {
	{ "time", "TIME", -27 },
	{ "pid", "PID", 7 },
	{ "tid", "TID", 7 },
	{ "thread_name", "THREAD", -16 },
	{ "leaf_func", "LEAF", -30 },
	{ NULL, NULL, 0 },
};

struct settings {
	struct common_opts common;
	unsigned long freq, interval_s, max_depth;
	bool children, folded, per_thread;
};

#define MAX_TARGETS 256

struct target {
	pid_t pid;
	struct pyproc *py; /* NULL: not Python (kept so --children does not retry it) */
	bool exited;
};

struct run {
	const struct settings *s;
	struct bpfprog *prog;
	struct out *out;
	struct target targets[MAX_TARGETS];
	int ntargets, alive;
	json_t *folded;  /* stack -> count */
	json_t *funcs;   /* "func\tfile\tline" -> [own, total] */
	unsigned long long with_stack, shown, interval_samples;
	unsigned long long unresolved_frames;
	unsigned tables; /* top tables printed so far */
};

static int handle_option(int id, const char *arg, void *ctx)
{
	struct settings *s = ctx;

	switch (id) {
	case OPT_FREQ:
		return opts_parse_ulong("frequency", arg, 1, 10000, &s->freq);
	case OPT_INTERVAL:
		return opts_parse_ulong("interval", arg, 1, 86400, &s->interval_s);
	case OPT_MAX_DEPTH:
		return opts_parse_ulong("max-depth", arg, 1, PYWALK_DEPTH_LIMIT, &s->max_depth);
	case OPT_CHILDREN:
		s->children = true;
		return 0;
	case OPT_FOLDED:
		s->folded = true;
		return 0;
	case OPT_PER_THREAD:
		s->per_thread = true;
		return 0;
	}
	return -1;
}

static int build_cflags(const struct settings *s, struct cflags *cf)
{
	struct kbtf *b = kbtf_open();
	struct common_opts nofilter = s->common;
	int r = -1;

	if (!b)
		return -1;
	nofilter.npids = 0; /* targets are the keys of py_config, not pid_filter */
	if (pyebpf_bpf_cflags(b, cf, &nofilter) ||
	    kbtf_offset_cflag(b, cf, "OFF_TASK_THREAD_FSBASE", "task_struct", "thread.fsbase"))
		goto out;
	cflags_add(cf, "-DPY_MAX_DEPTH=%lu", s->max_depth);
	r = 0;
out:
	kbtf_close(b);
	return r;
}

/* ------------------------------------------------------------------ targets */

static struct target *target_find(struct run *run, pid_t pid)
{
	for (int i = 0; i < run->ntargets; i++)
		if (run->targets[i].pid == pid)
			return &run->targets[i];
	return NULL;
}

/* Opens pid and gives its layout to BPF. quiet: --children skips non-Python children silently. */
static int target_add(struct run *run, pid_t pid, bool quiet)
{
	struct pyproc_error err;
	struct pywalk_config cfg;
	struct target *t;
	int fd;

	if (target_find(run, pid))
		return 0;
	if (run->ntargets == MAX_TARGETS) {
		log_warn("more than %d target processes: pid %d not sampled", MAX_TARGETS, pid);
		return -1;
	}
	t = &run->targets[run->ntargets++];
	t->pid = pid;
	t->py = pyproc_open(pid, &err);
	if (!t->py) {
		if (!quiet)
			log_error("%s", err.msg);
		else
			log_debug("%s", err.msg);
		return -1;
	}
	pyproc_walk_config(t->py, &cfg);
	fd = bpfprog_table_fd(run->prog, "py_config");
	if (fd < 0 || bpf_update_elem(fd, &pid, &cfg, BPF_ANY)) {
		log_error("cannot configure the walker for pid %d", pid);
		pyproc_close(t->py);
		t->py = NULL;
		return -1;
	}
	run->alive++;
	{
		const struct pyversion *v = pyproc_version(t->py);
		const struct pymodule *m = pyproc_module(t->py);
		log_info("pid %d: CPython %d.%d%s%.0d (%s) in %s", pid, v->major, v->minor,
			 v->micro >= 0 ? "." : "", v->micro >= 0 ? v->micro : 0, v->source, m->path);
	}
	return 0;
}

/* --children: every descendant of a target that is Python (checked each second). */
static void add_children(struct run *run)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	bool added = true;
	pid_t pids[4096];
	int n = 0;

	if (!d)
		return;
	while ((de = readdir(d)) && n < 4096) {
		pid_t pid = (pid_t)atoi(de->d_name);
		if (pid > 0)
			pids[n++] = pid;
	}
	closedir(d);
	/* repeat so that grandchildren of new children are found in the same pass */
	while (added) {
		added = false;
		for (int i = 0; i < n; i++) {
			pid_t ppid;
			if (target_find(run, pids[i]))
				continue;
			ppid = procinfo_ppid(pids[i]);
			if (ppid > 0 && target_find(run, ppid)) {
				target_add(run, pids[i], true);
				added = true;
			}
		}
	}
}

static void check_exits(struct run *run)
{
	for (int i = 0; i < run->ntargets; i++) {
		struct target *t = &run->targets[i];
		if (!t->py || t->exited || procinfo_alive(t->pid))
			continue;
		t->exited = true;
		run->alive--;
		log_info("pid %d exited", t->pid);
	}
}

/* ------------------------------------------------------------------ samples */

static const char *status_name(unsigned st)
{
	switch (st) {
	case PYWALK_COMPLETE:
		return "complete";
	case PYWALK_TRUNCATED:
		return "truncated";
	case PYWALK_NO_THREAD:
		return "no_python_thread";
	case PYWALK_ERR_CONFIG:
		return "error: no configuration";
	case PYWALK_ERR_THREADS:
		return "error: thread list unreadable";
	case PYWALK_ERR_FRAME:
		return "error: frame unreadable";
	case PYWALK_ERR_CODE:
		return "error: code object unreadable";
	}
	return "error";
}

/* Appends s to a growing buffer. */
struct sbuf {
	char *p;
	size_t len, cap;
};

static void sb_add(struct sbuf *b, const char *s)
{
	size_t n = strlen(s);

	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 1024;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n + 1);
	b->len += n;
}

static void count_func(struct run *run, const char *key, bool own, bool first_in_sample)
{
	json_t *v = json_object_get(run->funcs, key);

	if (!v) {
		v = json_pack("[ii]", 0, 0);
		json_object_set_new(run->funcs, key, v);
	}
	if (own)
		json_array_set_new(v, 0, json_integer(json_integer_value(json_array_get(v, 0)) + 1));
	if (first_in_sample)
		json_array_set_new(v, 1, json_integer(json_integer_value(json_array_get(v, 1)) + 1));
}

static void on_sample(void *ctx, void *data, int size)
{
	struct run *run = ctx;
	const struct pystack_sample *s = data;
	struct pycode_loc *locs;
	struct target *t;
	struct sbuf stack = { 0 };
	char thread[PYTHREAD_NAME_MAX] = "", frame[900];
	int depth;

	if (size < (int)offsetof(struct pystack_sample, frames))
		return;
	depth = (int)s->depth;
	if (depth > PYWALK_DEPTH_LIMIT ||
	    size < (int)(offsetof(struct pystack_sample, frames) + (size_t)depth * sizeof(s->frames[0])))
		depth = 0;
	if (s->status != PYWALK_COMPLETE && s->status != PYWALK_TRUNCATED && depth == 0)
		return; /* counted in BPF; nothing to show */
	t = target_find(run, (pid_t)s->pid);
	if (!t || !t->py)
		return;
	run->with_stack++;
	run->interval_samples++;
	locs = calloc((size_t)(depth ? depth : 1), sizeof(*locs));
	if (!locs)
		return;
	for (int i = 0; i < depth; i++)
		if (pyproc_code_location(t->py, s->frames[i].code, s->frames[i].instr,
					 s->frames[i].firstlineno, &locs[i]))
			run->unresolved_frames++;
	if (pyproc_thread_name(t->py, (pid_t)s->tid, thread, sizeof(thread)) < 0)
		snprintf(thread, sizeof(thread), "%.*s", (int)sizeof(s->comm), s->comm);

	/* root first; a truncated stack says so where its missing outer frames would be */
	if (s->status != PYWALK_COMPLETE) {
		snprintf(frame, sizeof(frame), s->status == PYWALK_TRUNCATED ? "[truncated]" : "[error]");
		sb_add(&stack, frame);
	}
	for (int i = depth - 1; i >= 0; i--) {
		if (stack.len)
			sb_add(&stack, ";");
		if (locs[i].file[0])
			snprintf(frame, sizeof(frame), "%s (%s:%d)", locs[i].func, locs[i].file, locs[i].line);
		else
			snprintf(frame, sizeof(frame), "%s", locs[i].func);
		/* ';' separates frames in folded output */
		for (char *c = frame; *c; c++)
			if (*c == ';')
				*c = ',';
		sb_add(&stack, frame);
	}
	if (!stack.p)
		sb_add(&stack, "");

	if (run->s->common.json) {
		json_t *o = json_object();
		char when[40];
		time_format_mono_ns(s->time_ns, when, sizeof(when));
		json_set_str(o, "metric", "py_stack");
		json_set_str(o, "time", when);
		json_set_int(o, "pid", s->pid);
		json_set_int(o, "tid", s->tid);
		json_set_int(o, "container_pid", s->ns_pid ? s->ns_pid : s->pid);
		json_set_int(o, "container_tid", s->ns_tid ? s->ns_tid : s->tid);
		json_set_strn(o, "comm", s->comm, sizeof(s->comm));
		json_set_str(o, "thread_name", thread);
		json_set_str(o, "stack", stack.p ? stack.p : "");
		json_set_int(o, "stack_depth", depth);
		json_set_str(o, "leaf_func", depth ? locs[0].func : "");
		if (depth && locs[0].file[0]) {
			json_set_str(o, "leaf_file", locs[0].file);
			json_set_int(o, "leaf_line", locs[0].line);
		} else {
			json_object_set_new(o, "leaf_file", json_null());
			json_object_set_new(o, "leaf_line", json_null());
		}
		json_set_str(o, "status", status_name(s->status));
		out_event(run->out, o);
		run->shown++;
	} else if (run->s->folded) {
		struct sbuf key = { 0 };
		json_t *v;
		if (run->s->per_thread) {
			for (char *c = thread; *c; c++)
				if (*c == ';' || *c == ' ')
					*c = '_';
			sb_add(&key, thread);
			if (stack.len)
				sb_add(&key, ";");
		}
		sb_add(&key, stack.p ? stack.p : "");
		if (key.p) {
			v = json_object_get(run->folded, key.p);
			json_object_set_new(run->folded, key.p,
					    json_integer((v ? json_integer_value(v) : 0) + 1));
		}
		free(key.p);
	} else {
		/* top: own for the leaf, total once per function per sample (recursion) */
		json_t *seen = json_object();
		for (int i = 0; i < depth; i++) {
			snprintf(frame, sizeof(frame), "%s\t%s\t%d", locs[i].func, locs[i].file,
				 locs[i].firstlineno);
			bool first = !json_object_get(seen, frame);
			json_object_set_new(seen, frame, json_true());
			count_func(run, frame, i == 0, first);
		}
		json_decref(seen);
	}
	free(stack.p);
	free(locs);
}

/* ------------------------------------------------------------------ reports */

struct func_row {
	const char *key;
	long long own, total;
};

static int cmp_rows(const void *a, const void *b)
{
	const struct func_row *x = a, *y = b;

	if (x->own != y->own)
		return x->own < y->own ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return strcmp(x->key, y->key);
}

static void print_top(struct run *run)
{
	size_t n = json_object_size(run->funcs), i = 0;
	struct func_row *rows = calloc(n ? n : 1, sizeof(*rows));
	double all = run->interval_samples ? (double)run->interval_samples : 1;
	const char *key;
	json_t *v;

	if (!rows)
		return;
	json_object_foreach(run->funcs, key, v)
	{
		rows[i].key = key;
		rows[i].own = json_integer_value(json_array_get(v, 0));
		rows[i].total = json_integer_value(json_array_get(v, 1));
		i++;
	}
	qsort(rows, n, sizeof(*rows), cmp_rows);
	if (run->tables++)
		printf("\n"); /* -i: one table per interval, a blank line between them */
	printf("%7s %7s %8s %8s  %s\n", "%OWN", "%TOTAL", "OWN", "TOTAL", "FUNCTION (FILE:LINE)");
	for (i = 0; i < n; i++) {
		char func[300], file[600];
		int line = 0;
		const char *t1 = strchr(rows[i].key, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		if (!t1 || !t2)
			continue;
		snprintf(func, sizeof(func), "%.*s", (int)(t1 - rows[i].key), rows[i].key);
		snprintf(file, sizeof(file), "%.*s", (int)(t2 - t1 - 1), t1 + 1);
		line = atoi(t2 + 1);
		printf("%6.2f%% %6.2f%% %8lld %8lld  %s (%s:%d)\n", 100.0 * (double)rows[i].own / all,
		       100.0 * (double)rows[i].total / all, rows[i].own, rows[i].total, func, file, line);
	}
	free(rows);
	fflush(stdout);
}

static void print_folded(struct run *run)
{
	const char *key;
	json_t *v;

	json_object_foreach(run->folded, key, v)
		printf("%s %lld\n", key, (long long)json_integer_value(v));
	fflush(stdout);
}

/* The table or folded stacks so far; then start counting afresh. */
static void report(struct run *run)
{
	if (run->s->common.json)
		return;
	if (run->s->folded)
		print_folded(run);
	else
		print_top(run);
	json_object_clear(run->folded);
	json_object_clear(run->funcs);
	run->interval_samples = 0;
}

int main(int argc, char **argv)
{
	struct settings s = { .freq = 99, .max_depth = 128 };
	struct cflags cf = { 0 };
	struct run run = { .s = &s };
	uint64_t last_children = 0, last_report;
	int rc = EXIT_RUNTIME;

	if (opts_parse(&doc, options, argc, argv, &s.common, handle_option, &s) < 0)
		return EXIT_USAGE;
	if (!s.common.print_ebpf && s.common.npids == 0) {
		opts_usage_error("give the processes to sample with -p PID");
		return EXIT_USAGE;
	}
	if (s.per_thread && !s.folded) {
		opts_usage_error("--per-thread needs -f/--folded");
		return EXIT_USAGE;
	}
	if (s.folded && s.common.json) {
		opts_usage_error("-f and -j exclude each other");
		return EXIT_USAGE;
	}
	if (build_cflags(&s, &cf))
		goto cleanup;
	if (s.common.print_ebpf) {
		bpfprog_print_text(stdout, pystack_bpf_text, &cf);
		rc = EXIT_OK;
		goto cleanup;
	}
	if (lifecycle_check_privileges())
		goto cleanup;
	run.folded = json_object();
	run.funcs = json_object();

	/* targets are inspected before the compile so that a wrong pid fails fast */
	for (int i = 0; i < s.common.npids; i++) {
		struct pyproc_error err;
		struct pyproc *py = pyproc_open(s.common.pids[i], &err);
		if (!py) {
			log_error("%s", err.msg);
			goto cleanup;
		}
		pyproc_close(py);
	}
	run.prog = bpfprog_compile(pystack_bpf_text, &cf, s.common.kernel_headers);
	if (!run.prog)
		goto cleanup;
	for (int i = 0; i < s.common.npids; i++)
		if (target_add(&run, s.common.pids[i], false))
			goto cleanup;
	if (s.children)
		add_children(&run);
	run.out = out_open(s.common.json, s.common.env, columns);
	/*
	 * Woken once per 64 samples, drained every 100 ms. A wakeup per sample made the
	 * scheduler switch tasks at sample instants: samples then went to whoever ran just
	 * before each tick, not in proportion to CPU time (3-12 points off on a busy host).
	 */
	if (!run.out || bpfprog_open_perf_buffer(run.prog, "events", on_sample, &run, 64, 64))
		goto cleanup;
	if (bpfprog_attach_perf_event(run.prog, "on_sample", PERF_TYPE_SOFTWARE,
				      PERF_COUNT_SW_CPU_CLOCK, s.freq, -1))
		goto cleanup;

	lifecycle_start(s.common.duration_s);
	log_info("Sampling %d process%s at %lu Hz. Hit Ctrl-C to end.", run.alive,
		 run.alive == 1 ? "" : "es", s.freq);
	last_report = last_children = time_mono_ns();
	while (!lifecycle_stopping() && !ferror(stdout)) {
		uint64_t now;
		if (bpfprog_poll(run.prog, lifecycle_poll_timeout_ms(100)) < 0) {
			log_error("polling the perf buffers failed");
			goto cleanup;
		}
		now = time_mono_ns();
		if (now - last_children >= 1000000000ull) {
			last_children = now;
			if (s.children)
				add_children(&run);
			check_exits(&run);
			if (run.alive <= 0) {
				log_info("every target exited");
				break;
			}
		}
		if (s.interval_s && now - last_report >= s.interval_s * 1000000000ull) {
			last_report = now;
			report(&run);
		}
	}

	bpfprog_drain(run.prog);
	report(&run);
	{
		json_t *sum = json_object();
		json_set_str(sum, "metric", "pystack_summary");
		json_set_int(sum, "samples", (json_int_t)bpfprog_table_sum_u64(run.prog, "counters", PYSTACK_CNT_SAMPLES));
		json_set_int(sum, "python_stacks", (json_int_t)bpfprog_table_sum_u64(run.prog, "counters", PYSTACK_CNT_PYTHON));
		json_set_int(sum, "idle", (json_int_t)bpfprog_table_sum_u64(run.prog, "counters", PYSTACK_CNT_IDLE));
		json_set_int(sum, "truncated", (json_int_t)bpfprog_table_sum_u64(run.prog, "counters", PYSTACK_CNT_TRUNCATED));
		json_set_int(sum, "errors", (json_int_t)bpfprog_table_sum_u64(run.prog, "counters", PYSTACK_CNT_ERRORS));
		json_set_int(sum, "unresolved_frames", (json_int_t)run.unresolved_frames);
		json_set_int(sum, "lost", (json_int_t)bpfprog_lost(run.prog));
		json_set_int(sum, "missed", (json_int_t)bpfprog_missed(run.prog));
		json_set_int(sum, "processes", run.ntargets);
		out_summary(run.out, "summary", sum);
	}
	rc = EXIT_OK;
cleanup:
	if (run.out && out_close(run.out) && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	bpfprog_close(run.prog);
	for (int i = 0; i < run.ntargets; i++)
		pyproc_close(run.targets[i].py);
	json_decref(run.folded);
	json_decref(run.funcs);
	cflags_free(&cf);
	return rc;
}
