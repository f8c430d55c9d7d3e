/*
 * pyhandoff: how long a request waits between the thread that takes a connection
 * (accept, or a keep-alive socket leaving the poller) and the worker thread that
 * first reads it (gunicorn gthread), and how long connections wait in the kernel's
 * accept queue (uwsgi, whose threads accept for themselves). Syscall tracepoints and
 * sock:inet_sock_set_state only.
 */
#include <bcc/libbpf.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bpfprog.h"
#include "kbtf.h"
#include "lathist.h"
#include "lifecycle.h"
#include "log.h"
#include "opts.h"
#include "out.h"
#include "procinfo.h"
#include "pyebpf_bpf.h"
#include "pyhandoff.h"
#include "pyproc.h"

extern const char pyhandoff_bpf_text[];

static const struct tool_doc doc = {
	.name = "pyhandoff",
	.summary = "Trace how long requests wait for a worker thread (gunicorn gthread) and in the accept queue.",
	.examples = "  pyhandoff                       # every process on the host\n"
		    "  pyhandoff -p 4242 --children    # gunicorn master 4242 and its workers, also new ones\n"
		    "  pyhandoff -p 4243 --min-ms 10   # worker 4243, waits of 10 ms or more\n"
		    "  pyhandoff -p 4242 --children -j -e prod  # JSON lines tagged env=prod\n",
};

enum { OPT_CHILDREN = OPT_TOOL_BASE, OPT_MIN_MS };

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_CHILDREN, 0, "children", NULL, "also trace the child processes of -p pids (workers), including ones started later" },
	{ OPT_MIN_MS, 0, "min-ms", "MS", "print only waits of MS milliseconds or more (the summary counts all)" },
	OPT_ENTRIES_BPF_TOOL_TAIL,
};

static const struct out_column columns[] = {
	{ "time", "TIME", -27 },
	{ "pid", "PID", 7 },
	{ "main_tid", "MAIN", 7 },
	{ "worker_tid", "WORKER", 7 },
	{ "fd", "FD", 4 },
	{ "queue_path", "PATH", -12 },
	{ "pickup_via", "VIA", -8 },
	{ "duration_ms", "WAIT_MS", 10 },
	{ "worker_thread_name", "WORKER_THREAD", -20 },
	{ NULL, NULL, 0 },
};

struct settings {
	struct common_opts common;
	bool children;
	double min_ms;
};

/* Waits of one process and one kind (handoff or accept queue), for the summary. */
struct waits {
	__u32 pid;
	int accept_queue;
	char comm[16];
	struct lathist *hist;
};

/*
 * A traced process's CPython, opened on its first event, and its Python thread names
 * by host tid. pyproc_threads() matches threads by pthread id, which also holds in a
 * forked gunicorn worker (whose threading native ids may still be the master's).
 */
#define PYTARGET_THREADS 256
struct pytarget {
	pid_t pid;
	struct pyproc *py; /* NULL: not CPython, or unreadable: the OS thread name is used */
	struct pythread *threads;
	int nthreads;
	uint64_t read_ns; /* when threads was read: an unknown tid rereads, at most every 200 ms */
};
struct run {
	struct out *out;
	const struct settings *s;
	unsigned long long events, printed;
	struct waits *waits;
	size_t nwaits, capwaits;
	struct pytarget *py;
	size_t npy, cappy;
};

static int handle_option(int id, const char *arg, void *ctx)
{
	struct settings *s = ctx;

	switch (id) {
	case OPT_CHILDREN:
		s->children = true;
		return 0;
	case OPT_MIN_MS:
		return opts_parse_double("min-ms", arg, 0, 3600e3, &s->min_ms);
	}
	return -1;
}

/* Kernel struct offsets (from BTF) and settings, as the BPF text's -D options. */
static int build_cflags(const struct settings *s, struct cflags *cf)
{
	struct kbtf *b = kbtf_open();
	int r = -1;

	if (!b)
		return -1;
	if (pyebpf_bpf_cflags(b, cf, &s->common) ||
	    kbtf_offset_cflag(b, cf, "OFF_TASK_PID", "task_struct", "pid") ||
	    kbtf_offset_cflag(b, cf, "OFF_TASK_TGID", "task_struct", "tgid") ||
	    kbtf_offset_cflag(b, cf, "OFF_FILE_F_INODE", "file", "f_inode") ||
	    kbtf_offset_cflag(b, cf, "OFF_INODE_I_MODE", "inode", "i_mode"))
		goto out;
	if (s->children)
		cflags_add(cf, "-DFOLLOW_CHILDREN");
	r = 0;
out:
	kbtf_close(b);
	return r;
}

/* Inodes of the listening TCP sockets in /proc/PID/net/tcp{,6} (the process's netns). */
static int listening_inodes(pid_t pid, unsigned long *inodes, int max)
{
	static const char *files[] = { "tcp", "tcp6" };
	int n = 0;

	for (unsigned i = 0; i < 2; i++) {
		char path[64], line[512];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/net/%s", pid, files[i]);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f) && n < max) {
			unsigned st;
			unsigned long ino;
			/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
			if (sscanf(line, "%*s %*s %*s %x %*s %*s %*s %*s %*s %lu", &st, &ino) == 2 &&
			    st == 0x0a)
				inodes[n++] = ino;
		}
		fclose(f);
	}
	return n;
}

/* Whether pid holds a listening TCP socket: a process that is no server sees no handoffs. */
static bool holds_listener(pid_t pid)
{
	unsigned long inodes[1024];
	int n = listening_inodes(pid, inodes, 1024);
	char path[64];
	struct dirent *d;
	bool found = false;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = opendir(path);
	if (!dir)
		return false;
	while (!found && (d = readdir(dir))) {
		char fdpath[300], target[64];
		unsigned long ino;
		ssize_t len;

		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, d->d_name);
		len = readlink(fdpath, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = 0;
		if (sscanf(target, "socket:[%lu]", &ino) != 1)
			continue;
		for (int i = 0; i < n && !found; i++)
			found = inodes[i] == ino;
	}
	closedir(dir);
	return found;
}

/* --children: the running descendants of the -p pids go into the BPF "children" map. */
static int follow_existing_children(struct bpfprog *p, const struct common_opts *c)
{
	int fd = bpfprog_table_fd(p, "children");
	__u32 set[4096];
	int n = 0, added = 1;
	unsigned char one = 1;

	if (fd < 0)
		return -1;
	for (int i = 0; i < c->npids; i++)
		set[n++] = (__u32)c->pids[i];
	/* repeat until nothing new: grandchildren may be listed before their parents */
	while (added) {
		DIR *dir = opendir("/proc");
		struct dirent *d;

		added = 0;
		if (!dir)
			return -1;
		while ((d = readdir(dir)) && n < 4096) {
			pid_t pid, ppid;
			bool known = false;

			if (!isdigit((unsigned char)d->d_name[0]))
				continue;
			pid = atoi(d->d_name);
			ppid = procinfo_ppid(pid);
			for (int i = 0; i < n && !known; i++)
				known = set[i] == (__u32)pid;
			if (known || ppid <= 0)
				continue;
			for (int i = 0; i < n; i++)
				if (set[i] == (__u32)ppid) {
					set[n++] = (__u32)pid;
					added = 1;
					log_debug("following child %d of %d", pid, ppid);
					if (bpf_update_elem(fd, &set[n - 1], &one, 0))
						log_warn("cannot follow child %d of %d: %s", pid, ppid,
							 strerror(errno));
					break;
				}
		}
		closedir(dir);
	}
	return 0;
}

/* -p pids must exist; a process without a listening socket is traced with a warning. */
static int check_targets(const struct common_opts *c, bool children)
{
	for (int i = 0; i < c->npids; i++) {
		pid_t pid = c->pids[i];
		char comm[32] = "?";

		if (!procinfo_exists(pid)) {
			log_error("no process with pid %d", pid);
			return -1;
		}
		procinfo_comm(pid, pid, comm, sizeof(comm));
		if (!holds_listener(pid))
			log_warn("pid %d (comm \"%s\") holds no listening TCP socket: it does not look like "
				 "a server%s; tracing it anyway", pid, comm,
				 children ? " (its children may be)" : "");
	}
	return 0;
}

static const char *path_name(unsigned path)
{
	switch (path) {
	case HANDOFF_ACCEPT:
		return "accept";
	case HANDOFF_EPOLL_DEL:
		return "epoll_del";
	case HANDOFF_ACCEPT_QUEUE:
		return "accept_queue";
	}
	return "unknown";
}

static const char *via_name(unsigned via)
{
	static const char *names[] = { "?", "read", "readv", "recvfrom", "recvmsg", "accept", "accept4" };

	return via < sizeof(names) / sizeof(names[0]) ? names[via] : "?";
}

static struct pytarget *python_of(struct run *run, pid_t pid)
{
	struct pyproc_error err;
	struct pytarget *t;

	for (size_t i = 0; i < run->npy; i++)
		if (run->py[i].pid == pid)
			return &run->py[i];
	/* workers come and go (gunicorn --max-requests): let the gone ones' handles go */
	for (size_t i = 0; i < run->npy;) {
		if (procinfo_exists(run->py[i].pid)) {
			i++;
			continue;
		}
		pyproc_close(run->py[i].py);
		free(run->py[i].threads);
		run->py[i] = run->py[--run->npy];
	}
	if (run->npy == run->cappy) {
		size_t cap = run->cappy ? run->cappy * 2 : 8;
		struct pytarget *n = realloc(run->py, cap * sizeof(*n));
		if (!n)
			return NULL;
		run->py = n;
		run->cappy = cap;
	}
	t = &run->py[run->npy++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->py = pyproc_open(pid, &err);
	if (!t->py)
		log_debug("thread names of pid %d are OS names: %s", pid, err.msg);
	else
		t->threads = calloc(PYTARGET_THREADS, sizeof(*t->threads));
	return t;
}

static const char *python_thread_name(struct pytarget *t, pid_t tid)
{
	for (int pass = 0; pass < 2; pass++) {
		uint64_t now = time_mono_ns();

		for (int i = 0; i < t->nthreads; i++)
			if (t->threads[i].tid == tid && t->threads[i].python_name)
				return t->threads[i].name;
		if (pass || now - t->read_ns < 200000000ull)
			break;
		t->read_ns = now;
		t->nthreads = pyproc_threads(t->py, t->threads, PYTARGET_THREADS);
		if (t->nthreads < 0)
			t->nthreads = 0;
	}
	return NULL;
}

/*
 * The thread's Python name (threading.Thread.name, read from the target), else the
 * OS thread name (comm) the kernel had at the event.
 */
static void thread_name(struct run *run, pid_t pid, pid_t tid, const char *comm, size_t len,
			char *buf, size_t buflen)
{
	struct pytarget *t = python_of(run, pid);
	const char *name = t && t->py && t->threads ? python_thread_name(t, tid) : NULL;

	if (name && name[0])
		snprintf(buf, buflen, "%s", name);
	else
		snprintf(buf, buflen, "%.*s", (int)len, comm);
}

static struct waits *waits_of(struct run *run, __u32 pid, int accept_queue, const char *comm)
{
	struct waits *w;

	for (size_t i = 0; i < run->nwaits; i++)
		if (run->waits[i].pid == pid && run->waits[i].accept_queue == accept_queue)
			return &run->waits[i];
	if (run->nwaits == run->capwaits) {
		size_t cap = run->capwaits ? run->capwaits * 2 : 8;
		struct waits *nw = realloc(run->waits, cap * sizeof(*nw));
		if (!nw)
			return NULL;
		run->waits = nw;
		run->capwaits = cap;
	}
	w = &run->waits[run->nwaits];
	memset(w, 0, sizeof(*w));
	w->hist = calloc(1, sizeof(*w->hist));
	if (!w->hist)
		return NULL;
	run->nwaits++;
	w->pid = pid;
	w->accept_queue = accept_queue;
	memcpy(w->comm, comm, sizeof(w->comm) - 1);
	return w;
}

static void set_tid(json_t *o, const char *key, __u32 v)
{
	json_object_set_new(o, key, v ? json_integer(v) : json_null());
}

static void print_event(struct run *run, const struct handoff_event *ev)
{
	char queued[40], picked[40], name[PYTHREAD_NAME_MAX];
	double ms = (double)(ev->pickup_ns - ev->queued_ns) / 1e6;
	int handoff = ev->path != HANDOFF_ACCEPT_QUEUE;
	struct waits *w = waits_of(run, ev->pid, !handoff, ev->worker_comm);
	json_t *o;

	run->events++;
	if (w)
		lathist_add(w->hist, ev->pickup_ns - ev->queued_ns);
	if (ms < run->s->min_ms)
		return;
	o = json_object();
	time_format_mono_ns(ev->queued_ns, queued, sizeof(queued));
	time_format_mono_ns(ev->pickup_ns, picked, sizeof(picked));
	json_set_str(o, "metric", "handoff");
	json_set_int(o, "pid", ev->pid);
	json_set_int(o, "tid", ev->worker_tid);
	set_tid(o, "container_pid", ev->nspid);
	set_tid(o, "container_tid", ev->nstid);
	json_set_real(o, "duration_ms", ms);
	json_set_real(o, "handoff_ms", ms);
	json_set_int(o, "worker_tid", ev->worker_tid);
	json_set_strn(o, "worker_comm", ev->worker_comm, sizeof(ev->worker_comm));
	thread_name(run, ev->pid, ev->worker_tid, ev->worker_comm, sizeof(ev->worker_comm), name,
		    sizeof(name));
	json_set_str(o, "worker_thread_name", name);
	/* the accept queue is the kernel's: no thread put the connection there */
	set_tid(o, "main_tid", handoff ? ev->main_tid : 0);
	if (handoff) {
		json_set_strn(o, "main_comm", ev->main_comm, sizeof(ev->main_comm));
		thread_name(run, ev->pid, ev->main_tid, ev->main_comm, sizeof(ev->main_comm), name,
			    sizeof(name));
		json_set_str(o, "main_thread_name", name);
	} else {
		json_object_set_new(o, "main_comm", json_null());
		json_object_set_new(o, "main_thread_name", json_null());
	}
	json_set_int(o, "fd", ev->fd);
	json_set_str(o, "queue_path", path_name(ev->path));
	json_set_str(o, "pickup_via", via_name(ev->via));
	json_set_str(o, "queued_time", queued);
	json_set_str(o, "pickup_time", picked);
	json_set_str(o, "time", picked);
	out_event(run->out, o);
	run->printed++;
}

static void on_event(void *ctx, void *data, int size)
{
	if (size >= (int)sizeof(struct handoff_event))
		print_event(ctx, data);
}

static int attach_all(struct bpfprog *p, const struct settings *s)
{
	/* where waits end first, then where they begin: no wait is begun that cannot end */
	if (bpfprog_attach_tracepoint(p, "sock", "inet_sock_set_state") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_close") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_read") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_readv") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_recvfrom") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_recvmsg") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_accept4") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_accept") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_epoll_ctl") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_epoll_ctl"))
		return -1;
	if (s->children &&
	    (bpfprog_attach_raw_tracepoint(p, "raw_tracepoint__sched_process_fork", "sched_process_fork") ||
	     bpfprog_attach_tracepoint(p, "sched", "sched_process_exit")))
		return -1;
	return 0;
}

static const char *model_name(const struct handoff_proc_counts *c)
{
	if (c->handoffs)
		return "handoff";
	if (c->same_thread)
		return "each-thread-accepts";
	return "unknown";
}

/* Per process: server model, counts, histogram and percentiles of each kind of wait. */
static void summarize(struct bpfprog *p, struct run *run)
{
	int fd = bpfprog_table_fd(p, "procs");
	__u32 key, next, *prev = NULL;
	struct handoff_proc_counts c;
	char comm[64];
	int procs = 0;

	while (fd >= 0 && bpf_get_next_key(fd, prev, &next) == 0) {
		json_t *sum;

		key = next;
		prev = &key;
		if (bpf_lookup_elem(fd, &key, &c))
			continue;
		procs++;
		sum = json_object();
		json_set_str(sum, "metric", "handoff_process");
		json_set_int(sum, "pid", key);
		json_set_str(sum, "comm", procinfo_comm((pid_t)key, (pid_t)key, comm, sizeof(comm)) ? "?" : comm);
		json_set_str(sum, "model", model_name(&c));
		json_set_int(sum, "handoffs", (json_int_t)c.handoffs);
		json_set_int(sum, "same_thread_reads", (json_int_t)c.same_thread);
		json_set_int(sum, "accept_queue", (json_int_t)c.accepts);
		json_set_int(sum, "fd_reused", (json_int_t)c.stale);
		out_summary(run->out, "process", sum);
	}
	for (size_t i = 0; i < run->nwaits; i++) {
		struct waits *w = &run->waits[i];
		json_t *sum;

		if (!w->hist->count)
			continue;
		fprintf(stderr, "\npid %u (%s), %s waits:\n", w->pid, w->comm,
			w->accept_queue ? "accept queue" : "handoff");
		lathist_print_log2(w->hist, stderr);
		sum = json_object();
		json_set_str(sum, "metric", "handoff_latency");
		json_set_int(sum, "pid", w->pid);
		json_set_str(sum, "kind", w->accept_queue ? "accept_queue" : "handoff");
		json_set_int(sum, "count", (json_int_t)w->hist->count);
		json_set_real(sum, "p50_ms", (double)lathist_percentile_ns(w->hist, 50) / 1e6);
		json_set_real(sum, "p90_ms", (double)lathist_percentile_ns(w->hist, 90) / 1e6);
		json_set_real(sum, "p99_ms", (double)lathist_percentile_ns(w->hist, 99) / 1e6);
		json_set_real(sum, "max_ms", (double)w->hist->max_ns / 1e6);
		out_summary(run->out, "latency", sum);
	}
	if (!procs)
		log_info("no accept or handoff seen in the traced processes");
}

int main(int argc, char **argv)
{
	struct settings s = { 0 };
	struct cflags cf = { 0 };
	struct bpfprog *prog = NULL;
	struct run run = { .s = &s };
	int rc = EXIT_RUNTIME;

	if (opts_parse(&doc, options, argc, argv, &s.common, handle_option, &s) < 0)
		return EXIT_USAGE;
	if (s.children && !s.common.npids) {
		opts_usage_error("--children needs -p (the parent processes to follow)");
		return EXIT_USAGE;
	}
	if (build_cflags(&s, &cf))
		goto cleanup;
	if (s.common.print_ebpf) {
		bpfprog_print_text(stdout, pyhandoff_bpf_text, &cf);
		rc = EXIT_OK;
		goto cleanup;
	}
	if (lifecycle_check_privileges() || check_targets(&s.common, s.children))
		goto cleanup;

	prog = bpfprog_compile(pyhandoff_bpf_text, &cf, s.common.kernel_headers);
	if (!prog || pyebpf_bpf_set_pids(prog, &s.common))
		goto cleanup;
	if (s.children && follow_existing_children(prog, &s.common))
		goto cleanup;
	run.out = out_open(s.common.json, s.common.env, columns);
	if (!run.out || bpfprog_open_perf_buffer(prog, "events", on_event, &run, 128, 64))
		goto cleanup;
	if (attach_all(prog, &s))
		goto cleanup;

	lifecycle_start(s.common.duration_s);
	lifecycle_watch_pids(s.common.pids, s.common.npids);
	log_info("Tracing connection handoffs and accept-queue waits. Hit Ctrl-C to end.");
	/*
	 * Read in batches every 50 ms rather than being woken per record: a busy server
	 * hands off thousands of connections a second, and a wake-up per request costs
	 * the traced server more CPU (on the same cores) than the records themselves.
	 * Even unpolled, a buffer that wakes per record queues a self-IPI per record in
	 * the server's syscall: the kernel signals once per 64 instead.
	 * 128 pages per CPU hold about 6000 records, far more than 50 ms bring.
	 */
	while (!lifecycle_stopping() && !ferror(stdout)) {
		struct timespec nap = { 0, lifecycle_poll_timeout_ms(50) * 1000000L };

		bpfprog_drain(prog);
		fflush(stdout);
		nanosleep(&nap, NULL);
	}

	bpfprog_drain(prog);
	summarize(prog, &run);
	{
		json_t *sum = json_object();
		json_set_str(sum, "metric", "pyhandoff_summary");
		json_set_int(sum, "events", (json_int_t)run.events);
		json_set_int(sum, "printed", (json_int_t)run.printed);
		json_set_int(sum, "lost", (json_int_t)bpfprog_lost(prog));
		json_set_int(sum, "missed", (json_int_t)bpfprog_missed(prog));
		json_set_int(sum, "map_full", (json_int_t)bpfprog_table_sum_u64(prog, "counters", HANDOFF_CNT_MAP_FULL));
		json_set_int(sum, "children_not_followed", (json_int_t)bpfprog_table_sum_u64(prog, "counters", HANDOFF_CNT_CHILDREN_FULL));
		out_summary(run.out, "summary", sum);
	}
	rc = EXIT_OK;
cleanup:
	if (run.out && out_close(run.out) && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	bpfprog_close(prog);
	cflags_free(&cf);
	for (size_t i = 0; i < run.nwaits; i++)
		free(run.waits[i].hist);
	free(run.waits);
	for (size_t i = 0; i < run.npy; i++) {
		pyproc_close(run.py[i].py);
		free(run.py[i].threads);
	}
	free(run.py);
	return rc;
}
