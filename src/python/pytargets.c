#include "pytargets.h"

#include <bcc/libbpf.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonfmt.h"
#include "caps.h"
#include "kbtf.h"
#include "kfeatures.h"
#include "pyebpf_bpf.h"
#include "log.h"
#include "procinfo.h"

/* Processes looked at in one /proc scan. */
#define SCAN_MAX 4096

void pytargets_init(struct pytargets *ts, int max)
{
	memset(ts, 0, sizeof(*ts));
	ts->max = max;
	ts->pid_map = ts->forget_map = -1;
}

void pytargets_init_named(struct pytargets *ts)
{
	pytargets_init(ts, PYTARGETS_NAMED_MAX);
	ts->lazy = true;
}

static void target_close(struct pytarget *t)
{
	pyproc_close(t->py);
	t->py = NULL;
}

void pytargets_free(struct pytargets *ts)
{
	for (int i = 0; i < ts->n; i++)
		target_close(&ts->v[i]);
	free(ts->v);
	memset(ts, 0, sizeof(*ts));
}

const char *pywalk_status_name(unsigned status)
{
	switch (status) {
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

/* Gives the walker t's layout; false when the map would not take it (t gets no stacks). */
static bool configure(struct pytargets *ts, struct pytarget *t)
{
	struct pywalk_config cfg;
	int fd;

	if (!ts->walker || !t->py)
		return true;
	/* with its asyncio fields when it has imported asyncio (else pytargets_task_name, later) */
	if (!t->asyncio_walked)
		t->asyncio_walked = pytasks_probe(t->py, NULL, 0) == 0;
	pyproc_walk_config(t->py, &cfg);
	fd = bpfprog_table_fd(ts->walker, "py_config");
	if (fd >= 0 && bpf_update_elem(fd, &t->pid, &cfg, BPF_ANY) == 0)
		return true;
	log_error("cannot configure the stack walker for pid %d: its stacks are not shown", t->pid);
	return false;
}

int pytargets_task_name(struct pytargets *ts, struct pytarget *t, const struct pywalk_asyncio *a,
			const struct pywalk_frame *frames, uint32_t depth, struct pytask_name *out)
{
	int r = pytasks_name_of_walk(t ? t->py : NULL, a, frames, depth, out);

	/* named by userspace, the walker did not read the task: tell it where tasks are now */
	if (t && t->py && a->gen_frame && !a->task && !t->asyncio_walked && pytasks_probe(t->py, NULL, 0) == 0)
		configure(ts, t);
	return r;
}

/* t into the set's pid map (when it has one). */
static void map_pid(struct pytargets *ts, const struct pytarget *t)
{
	__u32 pid = (__u32)t->pid;
	unsigned char one = 1;

	if (ts->pid_map >= 0 && bpf_update_elem(ts->pid_map, &pid, &one, BPF_ANY))
		log_warn("cannot trace pid %d: %s", t->pid, strerror(errno));
}

/* A new entry for pid whose CPython is py (may be NULL), or NULL when the set is full. */
static struct pytarget *append(struct pytargets *ts, pid_t pid, struct pyproc *py, bool watched)
{
	struct pytarget *t;

	if (ts->n == ts->max)
		return NULL;
	if (ts->n == ts->cap) {
		int cap = ts->cap ? 2 * ts->cap : 16;
		struct pytarget *v = realloc(ts->v, (size_t)cap * sizeof(*v));
		if (!v)
			return NULL;
		ts->v = v;
		ts->cap = cap;
	}
	t = &ts->v[ts->n++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->py = py;
	t->watched = watched;
	ts->alive += t->watched;
	ts->watched += t->watched;
	ts->added++;
	ts->added_python += py != NULL;
	if (py && ts->announce) {
		char what[700];
		pyproc_describe(py, true, what, sizeof(what));
		log_info("pid %d: %s", pid, what);
	}
	configure(ts, t);
	map_pid(ts, t);
	return t;
}

/* The pids said skipped in this process (bounded: past it, a pid may be said again). */
static struct {
	pid_t v[256];
	int n;
} skipped_said;

void pytargets_say_skipped(pid_t pid, const char *why)
{
	char named[32];
	const char *at;

	for (int i = 0; i < skipped_said.n; i++)
		if (skipped_said.v[i] == pid)
			return;
	if (skipped_said.n < (int)(sizeof(skipped_said.v) / sizeof(skipped_said.v[0])))
		skipped_said.v[skipped_said.n++] = pid;
	/* "pid N" once, whoever wrote why */
	snprintf(named, sizeof(named), "pid %d", pid);
	at = strstr(why, named);
	if (at && !isdigit((unsigned char)at[strlen(named)]))
		log_warn("%s: skipped", why);
	else
		log_warn("pid %d: %s: skipped", pid, why);
}

/* One -p pid (pytargets_add_pids): true when it is a target now. */
static bool add_root(struct pytargets *ts, pid_t pid, enum pytargets_need need, const char *without_python)
{
	struct pyproc_error err;
	struct pyproc *py = NULL;
	struct pytarget *t;
	char why[400];

	if (!procinfo_exists(pid)) {
		snprintf(why, sizeof(why), "no process with pid %d", pid);
		goto skip;
	}
	py = pyproc_open(pid, &err);
	/* Python state asked for, a capability missing: the deployment's mistake, said as such */
	if (!py && err.code == PYPROC_ECAPS && (need == PYTARGETS_CPYTHON || without_python)) {
		caps_error("%s", err.msg);
		ts->skipped++;
		return false;
	}
	if (!py && need == PYTARGETS_CPYTHON && !ts->children) {
		snprintf(why, sizeof(why), "%s", err.msg);
		goto skip;
	}
	if (!py && need == PYTARGETS_ANY && without_python)
		log_warn("pid %d is not a CPython this tool can read: %s (-v says why)", pid, without_python);
	else if (!py && need == PYTARGETS_CPYTHON)
		log_info("%s: following its children", err.msg);
	if (!py)
		log_debug("%s", err.msg);
	if (ts->n == ts->max) {
		snprintf(why, sizeof(why), "more than %d target processes: pid %d", ts->max, pid);
		pyproc_close(py);
		goto skip;
	}
	t = append(ts, pid, py, true);
	if (!t) {
		pyproc_close(py);
		snprintf(why, sizeof(why), "pid %d: out of memory", pid);
		goto skip;
	}
	t->root = true;
	return true;
skip:
	pytargets_say_skipped(pid, why);
	ts->skipped++;
	return false;
}

int pytargets_add_pids(struct pytargets *ts, const pid_t *pids, int npids, enum pytargets_need need,
		       const char *without_python)
{
	int n = 0;

	for (int i = 0; i < npids; i++)
		n += pytargets_find(ts, pids[i]) || add_root(ts, pids[i], need, without_python);
	return n;
}

struct pytarget *pytargets_add(struct pytargets *ts, pid_t pid, bool watched)
{
	struct pyproc_error err;
	struct pyproc *py;
	struct pytarget *t = pytargets_find(ts, pid);

	if (t)
		return t;
	if (ts->n == ts->max) {
		log_warn("more than %d target processes: pid %d not traced", ts->max, pid);
		return NULL;
	}
	py = pyproc_open(pid, &err);
	if (!py && err.code == PYPROC_ECAPS && !ts->said_caps) {
		/* what it costs (Python thread names, stacks) is said once, not per process */
		log_warn("%s: it is traced without its Python state (and so are others like it)", err.msg);
		ts->said_caps = true;
	} else if (!py) {
		log_debug("%s", err.msg);
	}
	return append(ts, pid, py, watched && py);
}

struct pytarget *pytargets_adopt(struct pytargets *ts, struct pyproc *py, bool watched)
{
	struct pytarget *t;

	if (pytargets_find(ts, pyproc_pid(py)))
		return NULL;
	if ((t = append(ts, pyproc_pid(py), py, watched)))
		t->root = watched;
	return t;
}

struct pytarget *pytargets_find(struct pytargets *ts, pid_t pid)
{
	/* samples come in runs of one process: the last one found first */
	if (ts->last < ts->n && ts->v[ts->last].pid == pid)
		return &ts->v[ts->last];
	for (int i = 0; i < ts->n; i++)
		if (ts->v[i].pid == pid) {
			ts->last = i;
			return &ts->v[i];
		}
	return NULL;
}

/* t's entries leave the BPF maps: the walker's py_config, the pid map and the forget map. */
static void unmap(struct pytargets *ts, const struct pytarget *t)
{
	int fd = ts->walker ? bpfprog_table_fd(ts->walker, "py_config") : -1;
	__u32 pid = (__u32)t->pid;

	if (fd >= 0 && t->py)
		bpf_delete_elem(fd, &pid);
	if (ts->pid_map >= 0)
		bpf_delete_elem(ts->pid_map, &pid);
	if (ts->forget_map >= 0)
		bpf_delete_elem(ts->forget_map, &pid);
}

/*
 * Processes come and go (workers replaced, pids reused): watched ones that exited
 * (their exit said, their maps' entries gone) and unwatched ones that are gone leave
 * the set, but the -p pids stay. The walker's py_config has room for 1024
 * (bpf_text/python.bpf.h).
 */
static void drop_gone(struct pytargets *ts)
{
	for (int i = 0; i < ts->n;) {
		struct pytarget *t = &ts->v[i];

		if (t->root || (t->watched && !t->exited) || (!t->watched && procinfo_exists(t->pid))) {
			i++;
			continue;
		}
		if (!t->watched)
			unmap(ts, t);
		target_close(t);
		*t = ts->v[--ts->n];
	}
	ts->last = 0;
}

struct pytarget *pytargets_get(struct pytargets *ts, pid_t pid)
{
	struct pytarget *t = pytargets_find(ts, pid);

	if (t || !ts->lazy)
		return t;
	drop_gone(ts);
	if (ts->n == ts->max) {
		log_debug("more than %d processes seen: pid %d not opened", ts->max, pid);
		return NULL;
	}
	return pytargets_add(ts, pid, false);
}

struct pytarget *pytargets_thread_name(struct pytargets *ts, pid_t pid, pid_t tid, const char *comm,
				       size_t commlen, char *buf, size_t len)
{
	struct pytarget *t = pytargets_get(ts, pid);

	if (t)
		pyproc_thread_name(t->py, tid, comm, commlen, buf, len);
	else
		snprintf(buf, len, "%.*s", (int)commlen, comm);
	return t;
}

void pytargets_set_thread_name(struct pytargets *ts, json_t *o, const struct task_head *h)
{
	char name[PYTHREAD_NAME_MAX];

	if (!h->pid) {
		json_object_set_new(o, "thread_name", json_null());
		return;
	}
	pytargets_thread_name(ts, (pid_t)h->pid, (pid_t)h->tid, h->comm, sizeof(h->comm), name,
			      sizeof(name));
	json_set_str(o, "thread_name", name);
}

/* Every process of /proc with its parent (at most max); how many, or -1. */
static int list_processes(struct pychild *out, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)) && n < max) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		out[n].pid = (pid_t)atoi(de->d_name);
		out[n].ppid = procinfo_ppid(out[n].pid);
		if (out[n].pid > 0 && out[n].ppid > 0)
			n++;
	}
	closedir(d);
	return n;
}

static bool listed(pid_t pid, const pid_t *roots, int nroots, const struct pychild *out, int nout)
{
	for (int i = 0; i < nroots; i++)
		if (roots[i] == pid)
			return true;
	for (int i = 0; i < nout; i++)
		if (out[i].pid == pid)
			return true;
	return false;
}

int pytargets_descendants(const pid_t *roots, int nroots, struct pychild *out, int max)
{
	struct pychild *all = malloc(SCAN_MAX * sizeof(*all));
	int nall = all ? list_processes(all, SCAN_MAX) : -1, nout = 0;
	bool added = true;

	/* until nothing is new: a grandchild may be listed before its parent */
	while (added && nout < max) {
		added = false;
		for (int i = 0; i < nall && nout < max; i++) {
			if (listed(all[i].ppid, roots, nroots, out, nout) &&
			    !listed(all[i].pid, roots, nroots, out, nout)) {
				out[nout++] = all[i];
				added = true;
			}
		}
	}
	free(all);
	return nout;
}

void pytargets_add_children(struct pytargets *ts)
{
	pid_t *roots = malloc((size_t)(ts->n ? ts->n : 1) * sizeof(*roots));
	struct pychild *kids = malloc(SCAN_MAX * sizeof(*kids));
	int nroots = 0, n;

	drop_gone(ts);
	if (roots && kids) {
		for (int i = 0; i < ts->n; i++)
			roots[nroots++] = ts->v[i].pid;
		n = pytargets_descendants(roots, nroots, kids, SCAN_MAX);
		for (int i = 0; i < n; i++) {
			log_debug("child %d of %d", kids[i].pid, kids[i].ppid);
			pytargets_add(ts, kids[i].pid, true);
		}
	}
	free(roots);
	free(kids);
}

int pytargets_set_walker(struct pytargets *ts, struct bpfprog *prog)
{
	int r = 0;

	ts->walker = prog;
	for (int i = 0; i < ts->n; i++)
		if (!configure(ts, &ts->v[i]))
			r = -1;
	return r;
}

int pytargets_start(struct pytargets *ts, struct bpfprog *walker)
{
	if (walker && pytargets_set_walker(ts, walker))
		return -1;
	if (ts->children)
		pytargets_add_children(ts);
	ts->next_children_ns = ts->next_exits_ns = time_mono_ns() + 1000000000ull;
	return 0;
}

int pytargets_cflags(struct cflags *cf, const struct common_opts *c, bool pid_filter, bool walk)
{
	struct common_opts nofilter = *c;
	struct kbtf *b = kbtf_open();
	int r;

	if (!b)
		return -1;
	if (!pid_filter)
		nofilter.npids = 0;
	r = pyebpf_bpf_cflags(b, cf, &nofilter);
	/* the walker finds the thread's PyThreadState by its fsbase (python.bpf.h) */
	if (!r && walk)
		r = kbtf_offset_cflag(b, cf, "OFF_TASK_THREAD_FSBASE", "task_struct", "thread.fsbase");
	/*
	 * may_goto heads the walker's loops where the kernel has it, so that the verifier
	 * need not walk every iteration (python.bpf.h, PY_LOOP); PYEBPF_BOUNDED_LOOPS=1
	 * keeps the plain bounded loops (to compare the two, or on a kernel that errs)
	 */
	if (!r && walk) {
		const char *bounded = getenv("PYEBPF_BOUNDED_LOOPS");

		if ((!bounded || !*bounded || !strcmp(bounded, "0")) && kfeatures_may_goto())
			cflags_add(cf, "-DPY_MAY_GOTO");
		else
			log_debug("the stack walker's loops are bounded loops (no may_goto%s)",
				  bounded && *bounded && strcmp(bounded, "0") ? ": PYEBPF_BOUNDED_LOOPS" : " in this kernel");
	}
	kbtf_close(b);
	return r;
}

int pytargets_set_pid_map(struct pytargets *ts, struct bpfprog *prog, const char *pid_map)
{
	if ((ts->pid_map = bpfprog_table_fd(prog, pid_map)) < 0) {
		log_error("no BPF map %s", pid_map);
		return -1;
	}
	for (int i = 0; i < ts->n; i++)
		if (!ts->v[i].exited)
			map_pid(ts, &ts->v[i]);
	return 0;
}

int pytargets_add_all(struct pytargets *ts)
{
	struct pychild *all = malloc(SCAN_MAX * sizeof(*all));
	int n = all ? list_processes(all, SCAN_MAX) : -1, python = 0;

	drop_gone(ts);
	for (int i = 0; i < n; i++)
		if (all[i].pid != getpid() && !pytargets_find(ts, all[i].pid))
			pytargets_add(ts, all[i].pid, false);
	free(all);
	for (int i = 0; i < ts->n; i++)
		python += ts->v[i].py != NULL;
	return python;
}

bool pytargets_refresh(struct pytargets *ts, uint64_t now_ns)
{
	int alive = ts->alive;

	if ((ts->children || ts->all) && now_ns >= ts->next_children_ns) {
		ts->next_children_ns = now_ns + 1000000000ull;
		if (ts->all)
			pytargets_add_all(ts);
		else
			pytargets_add_children(ts);
	}
	if (now_ns >= ts->next_exits_ns) {
		int exits = 0;

		ts->next_exits_ns = now_ns + 200000000ull;
		for (int i = 0; i < ts->n; i++) {
			struct pytarget *t = &ts->v[i];
			if (!t->watched || t->exited || procinfo_alive(t->pid))
				continue;
			t->exited = true;
			ts->alive--;
			ts->exits++;
			exits++;
			unmap(ts, t); /* its pid may be another process's soon */
			log_warn("target pid %d exited", t->pid);
		}
		if (alive > 0 && ts->alive == 0)
			log_info("every target exited");
		/* a child's records were read before this tick: it may go now */
		if (exits && (ts->children || ts->all))
			drop_gone(ts);
	}
	return ts->watched > 0 && ts->alive == 0;
}
