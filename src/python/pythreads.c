/* pyproc, part: a target's threads (tstate lists) and their threading names. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonfmt.h"
#include "procinfo.h"
#include "pyproc_impl.h"
#include "utf8.h"

struct task_ids {
	pid_t tid, ns_tid;
};

/* The tasks of pid; their ids inside its PID namespace read only when it has its own. */
static int list_tasks(pid_t pid, bool nested, struct task_ids *out, int max)
{
	char path[64];
	struct dirent *de;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((de = readdir(dir)) && n < max) {
		struct nsids ids;
		pid_t tid = (pid_t)atoi(de->d_name);
		if (tid <= 0)
			continue;
		out[n].tid = tid;
		out[n].ns_tid = !nested || procinfo_nsids(pid, tid, &ids) ? tid : ids.tid;
		n++;
	}
	closedir(dir);
	return n;
}

struct pyname {
	int64_t ident;  /* Thread.ident == tstate->thread_id */
	int64_t ns_tid; /* Thread._native_id: tid in the target's namespace */
	char name[PYTHREAD_NAME_MAX];
};

struct name_walk {
	struct pyname *out;
	int n, max;
	struct dict_slot name_at, native_id_at; /* the same for every Thread */
};

static int visit_thread(const struct pyproc *p, uint64_t key, uint64_t thread, void *ctx)
{
	struct name_walk *w = ctx;
	struct pyname *pn;
	struct dict_view attrs;
	uint64_t name, nid;

	if (w->n >= w->max)
		return 1;
	pn = &w->out[w->n];
	memset(pn, 0, sizeof(*pn));
	if (pyproc_read_long(p, key, &pn->ident) || pyproc_instance_attrs(p, thread, &attrs))
		return 0;
	name = pyproc_dict_get_slot(p, &attrs, "_name", &w->name_at);
	nid = pyproc_dict_get_slot(p, &attrs, "_native_id", &w->native_id_at);
	if (!name || pyproc_read_str(p, name, pn->name, sizeof(pn->name)))
		return 0;
	if (!nid || pyproc_read_long(p, nid, &pn->ns_tid))
		pn->ns_tid = 0;
	w->n++;
	return 0;
}

/*
 * threading._active of the main interpreter: {ident: Thread}, or 0. The module makes it
 * once, and finding it means looking through sys.modules and the module's dict.
 */
static uint64_t find_active(struct pyproc *p)
{
	const struct pyoffsets *o = &p->off;
	struct dict_view d;
	uint64_t interp, modules, threading, mdict;

	interp = pyproc_u64_or0(p, p->runtime + o->rt_interp_head);
	/* the head is the newest interpreter; threading of the main one is what users name */
	for (int i = 0; interp && i < MAX_INTERPS; i++) {
		uint64_t next = pyproc_u64_or0(p, interp + o->interp_next);
		if (!next)
			break;
		interp = next;
	}
	modules = interp ? pyproc_u64_or0(p, interp + o->interp_modules) : 0;
	if (!modules)
		return 0;
	pyproc_dict_of(p, modules, &d);
	threading = pyproc_dict_get(p, &d, "threading");
	mdict = threading ? pyproc_u64_or0(p, threading + 16) : 0; /* PyModuleObject.md_dict */
	if (!mdict)
		return 0; /* threading not imported (yet): no names to find */
	pyproc_dict_of(p, mdict, &d);
	return pyproc_dict_get(p, &d, "_active");
}

/* The names in threading._active. Returns how many (0 without threading). */
static int read_python_names(struct pyproc *p, struct pyname *out, int max)
{
	struct dict_view d;
	struct name_walk w = { .out = out, .max = max };

	/* a dict freed at the end of the interpreter does not keep its type */
	if (p->active && pyproc_u64_or0(p, p->active + 8) != p->active_type)
		p->active = 0;
	if (!p->active && (p->active = find_active(p)))
		p->active_type = pyproc_u64_or0(p, p->active + 8);
	if (!p->active)
		return 0;
	pyproc_dict_of(p, p->active, &d);
	pyproc_dict_foreach(p, &d, visit_thread, &w);
	return w.n;
}

int pyproc_threads(struct pyproc *p, struct pythread *out, int max)
{
	const struct pyoffsets *o = &p->off;
	struct task_ids *tasks = calloc(MAX_THREADS, sizeof(*tasks));
	struct pyname *pn = calloc(NAME_CACHE_MAX, sizeof(*pn));
	uint64_t interp;
	int n = 0, nt, np;

	if (!tasks || !pn) {
		free(tasks);
		free(pn);
		return -1;
	}
	nt = list_tasks(p->pid, p->ns_nested, tasks, MAX_THREADS);
	np = read_python_names(p, pn, NAME_CACHE_MAX);
	interp = pyproc_u64_or0(p, p->runtime + o->rt_interp_head);
	if (!interp)
		n = -1;
	for (int i = 0; interp && i < MAX_INTERPS && n >= 0; i++) {
		uint64_t ts = pyproc_u64_or0(p, interp + o->interp_threads_head), mark = 0;
		for (int j = 0; ts && j < MAX_THREADS && n < max; j++) {
			struct pythread *t;
			uint64_t native = 0;
			/*
			 * a list that runs in a cycle (tests/targets/hostile.py) ends where it
			 * meets the state of step 2^k - 1 again (Brent), as the BPF walker's does
			 */
			if (ts == mark)
				break;
			if (!(j & (j + 1)))
				mark = ts;
			t = &out[n++];
			memset(t, 0, sizeof(*t));
			t->tstate = ts;
			t->thread_id = pyproc_u64_or0(p, ts + o->ts_thread_id);
			if (o->ts_native_thread_id != PYOFF_NONE)
				native = pyproc_u64_or0(p, ts + o->ts_native_thread_id);
			for (int k = 0; k < np; k++) {
				if ((uint64_t)pn[k].ident == t->thread_id) {
					snprintf(t->name, sizeof(t->name), "%s", pn[k].name);
					t->python_name = true;
					if (!native)
						native = (uint64_t)pn[k].ns_tid;
				}
			}
			t->ns_tid = (pid_t)native;
			for (int k = 0; native && k < nt; k++)
				if ((uint64_t)tasks[k].ns_tid == native)
					t->tid = tasks[k].tid;
			if (!t->python_name && t->tid) {
				char comm[64];
				if (!procinfo_comm(p->pid, t->tid, comm, sizeof(comm)))
					utf8_repair(comm, strlen(comm), t->name, sizeof(t->name));
			}
			ts = pyproc_u64_or0(p, ts + o->ts_next);
		}
		interp = pyproc_u64_or0(p, interp + o->interp_next);
	}
	free(tasks);
	free(pn);
	return n;
}

/*
 * The names table read now, at most every min_ns, and (min_ns > 0) not before 10 times
 * as long as the last read took has passed: a target whose lists make a read slow
 * (huge dicts, tests/fuzz/corpus/pymem/slow-*) would have the tool reading it all
 * the time. False when the table could not be made.
 */
static bool reread_names(struct pyproc *p, uint64_t now, uint64_t min_ns)
{
	if (!p->names && !(p->names = calloc(NAMES_MAX, sizeof(*p->names))))
		return false;
	if (min_ns && min_ns < 10 * p->names_took_ns)
		min_ns = 10 * p->names_took_ns;
	if (p->names_read_ns && now - p->names_read_ns < min_ns)
		return true;
	p->names_read_ns = now;
	p->nnames = pyproc_threads(p, p->names, NAMES_MAX);
	if (p->nnames < 0)
		p->nnames = 0;
	p->names_took_ns = time_mono_ns() - now;
	return true;
}

/* The entry of tid, or NULL. */
static const struct pythread *thread_of(const struct pyproc *p, pid_t tid)
{
	for (int i = 0; i < p->nnames; i++)
		if (p->names[i].tid == tid)
			return &p->names[i];
	return NULL;
}

/*
 * A thread the names table does not list has often started since the table was read
 * (a pool growing, a thread per request), and a reread names it. Such rereads are paid
 * from a budget that grows by 1% of the time that passes, up to 20 ms: a target that
 * starts threads all the time costs at most that, and a burst of new threads is named
 * at once. A tid that such a reread left unnamed (a thread that is not a
 * threading.Thread, or one that ended) waits for the periodic rereads.
 */
#define REREAD_SHARE 100
#define REREAD_BURST_NS 20000000ll
#define UNNAMED_FOR_NS 1000000000ull

static bool recently_unnamed(const struct pyproc *p, pid_t tid, uint64_t now)
{
	for (size_t i = 0; i < UNNAMED_MAX; i++)
		if (p->unnamed[i].tid == tid && now - p->unnamed[i].at_ns < UNNAMED_FOR_NS)
			return true;
	return false;
}

static bool afford_reread(struct pyproc *p, uint64_t now)
{
	p->reread_budget_ns = !p->budget_at_ns ? REREAD_BURST_NS :
			      p->reread_budget_ns + (int64_t)((now - p->budget_at_ns) / REREAD_SHARE);
	if (p->reread_budget_ns > REREAD_BURST_NS)
		p->reread_budget_ns = REREAD_BURST_NS;
	p->budget_at_ns = now;
	return p->reread_budget_ns > 0;
}

/* The entry of a tid the table does not list, after a reread if the budget allows one. */
static const struct pythread *reread_for(struct pyproc *p, pid_t tid)
{
	uint64_t now = time_mono_ns();
	const struct pythread *t;

	if (recently_unnamed(p, tid, now) || !afford_reread(p, now) || !reread_names(p, now, 0))
		return NULL;
	p->reread_budget_ns -= (int64_t)(time_mono_ns() - now);
	t = thread_of(p, tid);
	if (!(t && t->python_name)) {
		unsigned slot = p->unnamed_next++ % UNNAMED_MAX;
		p->unnamed[slot].tid = tid;
		p->unnamed[slot].at_ns = now;
	}
	return t;
}

void pyproc_thread_name(struct pyproc *p, pid_t tid, const char *comm, size_t commlen, char *buf,
			size_t len)
{
	const struct pythread *t = p ? thread_of(p, tid) : NULL;

	if (p && !t)
		t = reread_for(p, tid);
	if (p && !(t && t->python_name) &&
	    reread_names(p, time_mono_ns(), t ? 1000000000ull : 200000000ull))
		t = thread_of(p, tid);
	if (t && t->python_name && t->name[0])
		snprintf(buf, len, "%s", t->name);
	else if (p && tid == p->pid)
		/* threading not imported (or not this thread's name yet): what it calls the main thread */
		snprintf(buf, len, "MainThread");
	else
		snprintf(buf, len, "%.*s", (int)commlen, comm);
}

/* The entry of tstate, or NULL when there is none or it is stale. */
static const struct pythread *thread_at(const struct pyproc *p, uint64_t tstate)
{
	uint64_t id = 0;

	for (int i = 0; i < p->nnames; i++) {
		const struct pythread *t = &p->names[i];
		if (t->tstate != tstate)
			continue;
		/*
		 * a new thread's state is made by its parent (with the parent's ids, 3.11)
		 * and bound by the thread itself: one read tells whether the entry is stale
		 */
		if (pyproc_read(p, tstate + p->off.ts_thread_id, &id, sizeof(id)) || id != t->thread_id)
			return NULL;
		return t;
	}
	return NULL;
}

const struct pythread *pyproc_thread_of_tstate(struct pyproc *p, uint64_t tstate)
{
	const struct pythread *t;

	if (!p || !tstate)
		return NULL;
	t = thread_at(p, tstate);
	if (t && t->python_name && t->tid)
		return t;
	/*
	 * an unknown one, or one not matched to its task yet, is a thread that just
	 * started (the GIL holder of the next waits too): reread after 20 ms; one
	 * without a Python name yet, every second
	 */
	if (reread_names(p, time_mono_ns(), t && t->tid ? 1000000000ull : 20000000ull))
		t = thread_at(p, tstate);
	return t;
}
