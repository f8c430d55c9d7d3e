#define _GNU_SOURCE
#include "pyhooks.h"

#include <elf.h>
#include <bcc/bcc_elf.h>
#include <bcc/bcc_syms.h>
#include <ctype.h>
#include <dirent.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps.h"
#include "log.h"
#include "procinfo.h"
#include "pytargets.h"
#include "symbols.h"
#include "usdt.h"

struct pyhook_plan {
	struct pyhook *hooks;
	int n, cap;
	struct usdt *usdt; /* the USDT entry functions; its locations are copied into hooks */
};

struct pyhook_plan *pyhooks_new(void)
{
	struct pyhook_plan *plan = calloc(1, sizeof(*plan));

	if (plan && !(plan->usdt = usdt_new())) {
		free(plan);
		return NULL;
	}
	return plan;
}

static void hook_free(struct pyhook *h)
{
	free(h->binary);
	free(h->what);
	free(h->fn);
}

/* Drops the hooks planned after the first n (what a failed planner added). */
static void truncate_to(struct pyhook_plan *plan, int n)
{
	while (plan->n > n)
		hook_free(&plan->hooks[--plan->n]);
}

void pyhooks_free(struct pyhook_plan *plan)
{
	if (!plan)
		return;
	truncate_to(plan, 0);
	free(plan->hooks);
	usdt_free(plan->usdt);
	free(plan);
}

int pyhooks_count(const struct pyhook_plan *plan)
{
	return plan->n;
}

const struct pyhook *pyhooks_get(const struct pyhook_plan *plan, int i)
{
	return i >= 0 && i < plan->n ? &plan->hooks[i] : NULL;
}

static int add_hook(struct pyhook_plan *plan, enum pyhook_kind kind, const char *binary,
		    const char *what, uint64_t offset, uint32_t ref_ctr, pid_t pid, const char *fn)
{
	struct pyhook *h;

	if (plan->n == plan->cap) {
		int cap = plan->cap ? 2 * plan->cap : 16;
		struct pyhook *v = realloc(plan->hooks, (size_t)cap * sizeof(*v));
		if (!v)
			return -1;
		plan->hooks = v, plan->cap = cap;
	}
	h = &plan->hooks[plan->n];
	*h = (struct pyhook){ kind, strdup(binary), strdup(what), offset, ref_ctr, pid > 0 ? pid : -1,
			      strdup(fn) };
	if (!h->binary || !h->what || !h->fn) {
		hook_free(h);
		log_error("out of memory");
		return -1;
	}
	plan->n++;
	return 0;
}

/* ---- USDT ---- */

int pyhooks_add_usdt(struct pyhook_plan *plan, const char *binary, pid_t pid,
		     const char *provider, const struct pyhook_usdt *probes)
{
	int n = plan->n;

	for (const struct pyhook_usdt *p = probes; p->probe; p++)
		if (!usdt_binary_has_probe(binary, provider, p->probe))
			return 1;
	for (const struct pyhook_usdt *p = probes; p->probe; p++) {
		int first = usdt_locations(plan->usdt);
		int r = usdt_add(plan->usdt, binary, pid, provider, p->probe, p->handler);

		for (int i = first; r == 0 && i < usdt_locations(plan->usdt); i++) {
			struct usdt_location loc;
			if (usdt_location(plan->usdt, i, &loc) ||
			    add_hook(plan, PYHOOK_USDT, loc.binary, loc.probe, loc.offset, loc.ref_ctr,
				     loc.pid, loc.fn))
				r = -1;
		}
		if (r) {
			/* the entry functions of the probes already added stay in the text, unattached */
			truncate_to(plan, n);
			return r > 0 ? 1 : -1;
		}
	}
	return 0;
}

/* ---- uprobes ---- */

int pyhooks_add_uprobe_at(struct pyhook_plan *plan, const char *binary, pid_t pid,
			  const char *label, uint64_t offset, const char *fn, bool ret)
{
	if (add_hook(plan, ret ? PYHOOK_URETPROBE : PYHOOK_UPROBE, binary, label, offset, 0, pid, fn))
		return -1;
	log_debug("%s %s on %s at %s+0x%llx (pid %d)", ret ? "uretprobe" : "uprobe", fn, label, binary,
		  (unsigned long long)offset, pid > 0 ? pid : -1);
	return 0;
}

int pyhooks_add_uprobe(struct pyhook_plan *plan, const char *binary, pid_t pid,
		       const char *symbol, const char *fn, bool ret)
{
	uint64_t off;

	if (symbols_file_offset(binary, symbol, 0, &off))
		return 1;
	return pyhooks_add_uprobe_at(plan, binary, pid, symbol, off, fn, ret);
}

/* bcc_elf_foreach_sym's payload: the clones of one symbol, found in one call. */
struct clone_query {
	const char *base;
	size_t len;
	struct pyhook_clones *out;
};

static int on_symbol(const char *name, uint64_t addr, uint64_t size, void *payload)
{
	struct clone_query *q = payload;
	struct pyhook_clones *c = q->out;

	(void)addr, (void)size;
	if (strncmp(name, q->base, q->len) || (name[q->len] != 0 && name[q->len] != '.'))
		return 0;
	/* .dynsym and .symtab (or the debug file) list a function twice */
	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->names[i], name))
			return 0;
	if (c->n < PYHOOKS_MAX_CLONES && strlen(name) < sizeof(c->names[0]))
		snprintf(c->names[c->n++], sizeof(c->names[0]), "%s", name);
	return 0;
}

int pyhooks_clones(const char *binary, const char *symbol, struct pyhook_clones *out)
{
	/* what bcc_foreach_function_symbol reads: the debug file too, functions only */
	struct bcc_symbol_option opt = {
		.use_debug_file = 1,
		.check_debug_file_crc = 1,
		.use_symbol_type = (1 << STT_FUNC) | (1 << STT_GNU_IFUNC),
	};
	struct clone_query q = { symbol, strlen(symbol), out };

	out->n = 0;
	if (symbols_elf_sane(binary))
		bcc_elf_foreach_sym(binary, on_symbol, &opt, &q);
	return out->n;
}

int pyhooks_add_function(struct pyhook_plan *plan, const char *binary, pid_t pid,
			 const char *symbol, const char *entry_fn, const char *return_fn)
{
	struct pyhook_clones c;
	int added = 0;

	pyhooks_clones(binary, symbol, &c);
	for (int i = 0; i < c.n; i++) {
		int r = pyhooks_add_uprobe(plan, binary, pid, c.names[i], entry_fn, false);
		if (r < 0 || (r == 0 && return_fn &&
			      pyhooks_add_uprobe(plan, binary, pid, c.names[i], return_fn, true)))
			return -1;
		added += r == 0;
	}
	return added;
}

/* ---- finding the binaries ---- */

/* Runs the planner on t; on 1 and -1 what it planned is dropped. */
static int plan_target(struct pyhook_plan *plan, const struct pyhook_planner *p,
		       const struct pyhook_target *t, char *how, size_t howlen)
{
	int n = plan->n;
	int r = p->plan(p->ctx, plan, t, how, howlen);

	if (r)
		truncate_to(plan, n);
	return r;
}

/* Hands py to the planner's owner; true when it kept it. */
static bool keep(const struct pyhook_planner *p, struct pyproc *py)
{
	return p->keep && p->keep(p->ctx, py);
}

struct file_id {
	dev_t dev;
	ino_t ino;
};

#define MAX_BINARIES 256

/* The binaries hooked so far, by file identity. */
struct seen_files {
	struct file_id ids[MAX_BINARIES];
	int n;
};

/* Whether st's file was seen; if not, it is now (false also when the set is full). */
static bool seen_before(struct seen_files *s, const struct stat *st)
{
	for (int i = 0; i < s->n; i++)
		if (s->ids[i].dev == st->st_dev && s->ids[i].ino == st->st_ino)
			return true;
	if (s->n == MAX_BINARIES)
		return true;
	s->ids[s->n++] = (struct file_id){ st->st_dev, st->st_ino };
	return false;
}

const char *pyhooks_every_process_path(const char *path, const char *host_path)
{
	struct stat own, st;

	if (stat(host_path, &st) == 0 && stat(path, &own) == 0 && own.st_dev == st.st_dev &&
	    own.st_ino == st.st_ino)
		return path;
	return host_path;
}

/* Skips -p pid (said once, pytargets_say_skipped), and closes py when the planner kept none. */
static void skip_pid(pid_t pid, struct pyproc *py, bool kept, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void skip_pid(pid_t pid, struct pyproc *py, bool kept, const char *fmt, ...)
{
	char why[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	pytargets_say_skipped(pid, why);
	if (py && !kept)
		pyproc_close(py);
}

int pyhooks_plan_pids(struct pyhook_plan *plan, const pid_t *pids, int npids,
		      const struct pyhook_planner *p)
{
	struct seen_files seen = { .n = 0 };
	int planned = 0;

	for (int i = 0; i < npids; i++) {
		struct pyproc_error err;
		struct pyproc *py = pyproc_open(pids[i], &err);
		const struct pymodule *m;
		char what[600], how[240] = "";
		struct pyhook_target t;
		struct stat st;
		bool kept;
		int r;

		/* a capability missing is the deployment's mistake, said as such (caps_error) */
		if (!py && err.code == PYPROC_ECAPS) {
			caps_error("%s", err.msg);
			continue;
		}
		if (!py) {
			skip_pid(pids[i], NULL, false, "%s", err.msg);
			continue;
		}
		m = pyproc_module(py);
		pyproc_describe(py, false, what, sizeof(what));
		if (p->children && stat(m->host_path, &st) == 0 && seen_before(&seen, &st)) {
			/* its binary's hooks, for every process running it, are planned already */
			kept = keep(p, py);
			log_info("pid %d: %s: as above", pids[i], what);
			if (!kept)
				pyproc_close(py);
			planned++;
			continue;
		}
		/* --children: the hooks go on the binary for every process, the BPF filter picks */
		if (p->children)
			t = (struct pyhook_target){ pyhooks_every_process_path(m->path, m->host_path), py, -1 };
		else
			t = (struct pyhook_target){ m->host_path, py, pids[i] };
		r = plan_target(plan, p, &t, how, sizeof(how));
		if (r < 0) {
			pyproc_close(py);
			return -1;
		}
		if (r > 0) {
			skip_pid(pids[i], py, false, "pid %d (%s) %s", pids[i], what, how);
			continue;
		}
		kept = keep(p, py);
		log_info("pid %d: %s: %s", pids[i], what, how);
		if (!kept)
			pyproc_close(py);
		planned++;
	}
	return planned;
}

/* One running CPython: plans its binary unless another process's plan covers it. 1: planned. */
static int plan_running(struct pyhook_plan *plan, const struct pyhook_planner *p,
			struct seen_files *seen, pid_t pid, struct pyproc *py)
{
	const struct pymodule *m = pyproc_module(py);
	char what[600], how[240] = "";
	struct pyhook_target t;
	struct stat st;
	int r;

	/* gone already (short-lived processes come and go during the scan) */
	if (stat(m->host_path, &st) != 0)
		return 0;
	if (p->each_process)
		t = (struct pyhook_target){ m->host_path, py, pid };
	else if (seen_before(seen, &st))
		return 0;
	else
		t = (struct pyhook_target){ pyhooks_every_process_path(m->path, m->host_path), py, -1 };
	pyproc_describe(py, false, what, sizeof(what));
	r = plan_target(plan, p, &t, how, sizeof(how));
	if (r < 0)
		log_warn("%s (pid %d): not traced (see above)", what, pid);
	else if (r > 0)
		log_warn("%s (pid %d%s) %s", what, pid, p->each_process ? "" : " and others", how);
	else if (p->each_process)
		log_info("pid %d: %s: %s", pid, what, how);
	else
		log_info("%s: %s (every process running it)", what, how);
	return r == 0;
}

/*
 * Installed interpreters that no process runs yet: hooks that need no process (USDT
 * probes: the kernel raises their semaphores in processes that start later).
 */
static int plan_installed(struct pyhook_plan *plan, const struct pyhook_planner *p,
			  struct seen_files *seen)
{
	static const char *const patterns[] = { "/usr/bin/python3.*", "/usr/local/bin/python3.*" };
	int planned = 0;

	for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
		glob_t g;

		if (glob(patterns[i], 0, NULL, &g))
			continue;
		for (size_t j = 0; j < g.gl_pathc; j++) {
			const char *path = g.gl_pathv[j];
			struct pyhook_target t = { path, NULL, -1 };
			char how[240] = "";
			struct stat st;

			/* python3.11-config and friends are scripts; only real ELF files count */
			if (stat(path, &st) || !S_ISREG(st.st_mode) || seen_before(seen, &st))
				continue;
			if (plan_target(plan, p, &t, how, sizeof(how)) == 0) {
				log_info("%s: %s (processes started later too)", path, how);
				planned++;
			}
		}
		globfree(&g);
	}
	return planned;
}

int pyhooks_plan_system(struct pyhook_plan *plan, const struct pyhook_planner *p)
{
	struct seen_files seen = { .n = 0 };
	DIR *d = opendir("/proc");
	struct dirent *de;
	int planned = 0;

	if (!d) {
		log_error("cannot read /proc");
		return -1;
	}
	while ((de = readdir(d))) {
		struct pyproc_error err;
		struct pyproc *py;
		pid_t pid;
		bool kept;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (pid == getpid() || !(py = pyproc_open(pid, &err)))
			continue;
		kept = keep(p, py);
		planned += plan_running(plan, p, &seen, pid, py);
		if (!kept)
			pyproc_close(py);
	}
	closedir(d);
	if (!p->each_process)
		planned += plan_installed(plan, p, &seen);
	return planned;
}

/* ---- the text and the attachments ---- */

char *pyhooks_text(const struct pyhook_plan *plan, const char *tool_text)
{
	return usdt_text(plan->usdt, tool_text);
}

int pyhooks_attach(const struct pyhook_plan *plan, struct bpfprog *p)
{
	pid_t gone = 0;

	for (int i = 0; i < plan->n; i++) {
		const struct pyhook *h = &plan->hooks[i];

		/*
		 * A target that exited since it was planned (during the compile) is not
		 * an error: said once, and the run ends like one whose target exited.
		 */
		if (h->pid > 0 && (h->pid == gone || !procinfo_alive(h->pid))) {
			if (h->pid != gone)
				log_warn("target pid %d exited before its probes were attached", h->pid);
			gone = h->pid;
			continue;
		}
		if (bpfprog_attach_uprobe(p, h->fn, h->binary, h->offset, h->pid,
					  h->kind == PYHOOK_URETPROBE, h->ref_ctr))
			return -1;
	}
	return 0;
}
