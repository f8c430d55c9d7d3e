/*
 * The pyhandoff tracker: how long a request waits between the thread that takes a
 * connection (accept, or a keep-alive socket leaving the poller) and the worker
 * thread that first reads it (gunicorn gthread), and how long connections wait in the
 * kernel's accept queue (uwsgi, whose threads accept for themselves). Syscall
 * tracepoints and sock:inet_sock_set_state only.
 */
#include <bcc/libbpf.h>
#include <errno.h>
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "caps.h"
#include "kbtf.h"
#include "lathist.h"
#include "log.h"
#include "jsonfmt.h"
#include "pidwatch.h"
#include "procinfo.h"
#include "pyebpf_bpf.h"
#include "pyhandoff.h"
#include "pytargets.h"
#include "sockdiag.h"
#include "record.h"
#include "monitor.h"
#include "summary.h"
#include "tracker.h"

extern const char pyhandoff_bpf_text[];

/*
 * One 1 MiB ring for all CPUs, never signalled: read every 50 ms (poll_ms), in batches.
 * A busy server hands off thousands of connections a second; a wakeup per request
 * would cost it more CPU (on the same cores) than the records themselves, and 50 ms
 * of records at 20000 a second take a tenth of the ring.
 */
enum { RING_PAGES = 256, POLL_MS = 50 };

enum { OPT_CHILDREN = OPT_TOOL_BASE, OPT_MIN_MS };

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_CHILDREN, 0, "children", NULL, "also trace the child processes of -p pids (workers), including ones started later" },
	{ OPT_MIN_MS, 0, "min-ms", "MS", "print only waits of MS milliseconds or more (the summary counts all)" },
	OPT_ENTRIES_TRACKER_TAIL,
};

static const struct field handoff_fields[] = {
	FIELD_METRIC,
	FIELD_PID(2),
	FIELD_TID(0),
	FIELD_CONTAINER_PID,
	FIELD_CONTAINER_TID,
	{ .name = "duration_ms", .type = FIELD_REAL, .unit = "ms", COLUMN(8, "WAIT_MS", 10),
	  .meaning = "how long the connection waited" },
	{ .name = "handoff_ms", .type = FIELD_REAL, .unit = "ms",
	  .meaning = "the same as duration_ms (the seed's name)" },
	{ .name = "worker_tid", .type = FIELD_INT, COLUMN(4, "WORKER", 7),
	  .meaning = "the thread that picked the connection up" },
	{ .name = "worker_comm", .type = FIELD_STR, .meaning = "that thread's comm at the pickup" },
	{ .name = "worker_thread_name", .type = FIELD_STR, COLUMN_LEFT(9, "WORKER_THREAD", 20),
	  .meaning = "that thread's Python name, else its comm" },
	FIELD_THREAD_NAME(0), /* the common field: the record's thread, the worker */
	{ .name = "main_tid", .type = FIELD_INT, COLUMN(3, "MAIN", 7),
	  .meaning = "the thread that took the connection; null for accept_queue" },
	{ .name = "main_comm", .type = FIELD_STR,
	  .meaning = "that thread's comm when it queued it; null for accept_queue" },
	{ .name = "main_thread_name", .type = FIELD_STR,
	  .meaning = "its Python name, else its comm; null for accept_queue" },
	{ .name = "fd", .type = FIELD_INT, COLUMN(5, "FD", 4), .meaning = "the connection's file descriptor" },
	{ .name = "queue_path", .type = FIELD_STR, COLUMN_LEFT(6, "PATH", 12),
	  .meaning = "accept, epoll_del, accept_queue, or eof: a client's close handed over like a request" },
	{ .name = "pickup_via", .type = FIELD_STR, COLUMN_LEFT(7, "VIA", 8),
	  .meaning = "the syscall that ended the wait" },
	{ .name = "queued_time", .type = FIELD_TIME, .meaning = "when the wait began" },
	{ .name = "pickup_time", .type = FIELD_TIME, .meaning = "when it ended" },
	FIELD_TIME(1),
	FIELD_ENV,
	FIELD_END,
};

static const struct field process_fields[] = {
	FIELD_METRIC,
	FIELD_PID(0),
	{ .name = "comm", .type = FIELD_STR, .meaning = "the process's comm at the end (\"?\" once it has exited)" },
	{ .name = "model", .type = FIELD_STR, .meaning = "handoff, each-thread-accepts or unknown" },
	{ .name = "handoffs", .type = FIELD_INT, .meaning = "connections queued in one thread, first read in another" },
	{ .name = "same_thread_reads", .type = FIELD_INT,
	  .meaning = "connections queued and first read by the same thread" },
	{ .name = "accept_queue", .type = FIELD_INT, .meaning = "accepts whose ESTABLISHED time was known" },
	{ .name = "fd_reused", .type = FIELD_INT, .meaning = "queued fds that pointed to another file when read" },
	{ .name = "client_closes", .type = FIELD_INT,
	  .meaning = "connections handed to another thread that read only their end (eof records)" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field latency_fields[] = {
	FIELD_METRIC,
	FIELD_PID(0),
	{ .name = "kind", .type = FIELD_STR, .meaning = "handoff or accept_queue" },
	{ .name = "count", .type = FIELD_INT, .meaning = "waits (also those --min-ms hid)" },
	{ .name = "p50_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "median wait" },
	{ .name = "p90_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "90th percentile" },
	{ .name = "p99_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "99th percentile" },
	{ .name = "max_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "longest wait" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field summary_fields[] = {
	FIELD_METRIC,
	{ .name = "events", .type = FIELD_INT, .meaning = "waits seen (eof records not included)" },
	{ .name = "printed", .type = FIELD_INT, .meaning = "waits printed (not hidden by --min-ms)" },
	{ .name = "client_closes", .type = FIELD_INT,
	  .meaning = "eof records: clients' closes handed over, in no statistics" },
	{ .name = "waits_untabled", .type = FIELD_INT,
	  .meaning = "waits of processes past the 1024th (process, kind): in no handoff_latency record" },
	{ .name = "processes_untabled", .type = FIELD_INT,
	  .meaning = "processes that exited past the 1024th with counts: in no handoff_process record" },
	FIELD_LOST,
	FIELD_MISSED,
	HANDOFF_COUNTERS(PYEBPF_COUNTER_FIELD)
	FIELD_TARGETS,
	FIELD_ENV,
	FIELD_END,
};

static const struct counter_name counters[] = { HANDOFF_COUNTERS(PYEBPF_COUNTER_NAME) { 0, NULL, NULL } };

static const struct schema handoff_schema = { "handoff", SCHEMA_EVENT, handoff_fields };
static const struct schema process_schema = { "handoff_process", SCHEMA_SUMMARY, process_fields };
static const struct schema latency_schema = { "handoff_latency", SCHEMA_SUMMARY, latency_fields };
static const struct schema summary_schema = { "pyhandoff_summary", SCHEMA_SUMMARY, summary_fields };
static const struct schema *const schemas[] = { &handoff_schema, &process_schema, &latency_schema,
						&summary_schema, NULL };

/* Waits of one process and one kind (handoff or accept queue), for the summary. */
struct waits {
	__u32 pid;
	int accept_queue;
	char comm[16];
	struct lathist *hist;
};

struct pyhandoff {
	struct tracker base;
	bool children;
	double min_ms;
	unsigned long long events, printed, closes;
	struct waits *waits;    /* MAX_WAITS at most (30 KB each): workers come and go for weeks */
	size_t nwaits, capwaits;
	unsigned long long untabled; /* waits of the (pid, kind)s past MAX_WAITS */
	struct handoff_proc_exit *exited; /* the counts of processes that exited, MAX_EXITED at most */
	size_t nexited, capexited;
	unsigned long long exited_untabled; /* processes that exited past MAX_EXITED */
	struct pytargets named; /* every process seen in an event: its Python thread names */
	struct pidwatch watch;  /* the -p processes */
	pid_t master;           /* a -p pid whose workers --children would follow, else 0 */
};

static void init(struct tracker *t)
{
	struct pyhandoff *h = (struct pyhandoff *)t;

	pytargets_init_named(&h->named);
	t->poll_ms = POLL_MS;
}

static int option(struct tracker *t, int id, const char *arg)
{
	struct pyhandoff *h = (struct pyhandoff *)t;

	switch (id) {
	case OPT_CHILDREN:
		h->children = true;
		return 0;
	case OPT_MIN_MS:
		return opts_parse_double("min-ms", arg, 0, 3600e3, &h->min_ms);
	}
	return -1;
}

static int check(struct tracker *t)
{
	struct pyhandoff *h = (struct pyhandoff *)t;

	if (h->children && !t->common->npids)
		return opts_usage_error("--children needs -p (the parent processes to follow)");
	return 0;
}

/* The first child of pid that holds a listening socket (a pre-fork worker), or 0. */
static pid_t listening_child(pid_t pid)
{
	enum { MAX = 4096 };
	struct pychild *kids = malloc(MAX * sizeof(*kids));
	int n = kids ? pytargets_descendants(&pid, 1, kids, MAX) : 0;
	pid_t found = 0;

	for (int i = 0; i < n && !found; i++)
		if (kids[i].ppid == pid && sockdiag_holds_listener(kids[i].pid) == 1)
			found = kids[i].pid;
	free(kids);
	return found;
}

/*
 * Whether pid listens could not be told (err from sockdiag_holds_listener): the
 * capability that was missing, never "no listening socket".
 */
static void say_unchecked(pid_t pid, const char *comm, int err)
{
	static const int fds[] = { CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH };
	char missing[64], path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (err == -EPERM && !caps_have(CAP_SYS_ADMIN))
		log_warn("pid %d (comm \"%s\") is in another network namespace, and entering it to look "
			 "for its listening sockets needs CAP_SYS_ADMIN: not checked", pid, comm);
	else if (err == -EACCES && caps_missing(fds, 2, missing, sizeof(missing)) && stat(path, &st) == 0)
		log_warn("needs %s to read pid %d's fds (owned by uid %u) and look for its listening "
			 "sockets: not checked", missing, pid, (unsigned)st.st_uid);
	else
		log_warn("cannot tell whether pid %d (comm \"%s\") holds a listening TCP socket: %s",
			 pid, comm, strerror(-err));
}

/*
 * The -p pids that are there (pidwatch_init skipped the others): a process without a
 * listening socket is traced with a warning.
 * Without --children, a pre-fork master (gunicorn, uwsgi: children that hold its
 * listening socket) is traced as asked, with the advice to follow its workers: -p
 * means that process in every tool, and only the workers accept and hand off.
 * Returns the first such master, 0 when none.
 */
static pid_t check_targets(const struct pidwatch *w, bool children)
{
	pid_t master = 0;

	for (int i = 0; i < w->npids; i++) {
		pid_t pid = w->pids[i], worker;
		char comm[32] = "?";
		int listens;

		procinfo_comm(pid, pid, comm, sizeof(comm));
		listens = sockdiag_holds_listener(pid);
		if (listens < 0)
			say_unchecked(pid, comm, listens);
		else if (!listens)
			log_warn("pid %d (comm \"%s\") holds no listening TCP socket: it does not look like "
				 "a server%s; tracing it anyway", pid, comm,
				 children ? " (its children may be)" : "");
		else if (!children && (worker = listening_child(pid))) {
			log_warn("pid %d (comm \"%s\") has worker children that share its listening "
				 "socket (pid %d, ...): they accept and hand off, not pid %d; add "
				 "--children to follow them", pid, comm, worker, pid);
			if (!master)
				master = pid;
		}
	}
	return master;
}

/* Kernel struct offsets (from BTF) and settings as -D options; then the -p pids are checked. */
static int prepare(struct tracker *t)
{
	struct pyhandoff *h = (struct pyhandoff *)t;
	struct cflags *cf = &t->cflags;
	struct kbtf *b = kbtf_open();
	int r;

	if (!b)
		return -1;
	r = pyebpf_bpf_cflags(b, cf, t->common) ||
	    kbtf_offset_cflag(b, cf, "OFF_TASK_PID", "task_struct", "pid") ||
	    kbtf_offset_cflag(b, cf, "OFF_TASK_TGID", "task_struct", "tgid") ||
	    kbtf_offset_cflag(b, cf, "OFF_FILE_F_INODE", "file", "f_inode") ||
	    kbtf_offset_cflag(b, cf, "OFF_INODE_I_MODE", "inode", "i_mode");
	kbtf_close(b);
	if (r)
		return -1;
	if (h->children)
		cflags_add(cf, "-DFOLLOW_CHILDREN");
	cflags_add(cf, "-DPYEBPF_RINGBUF_PAGES=%d", RING_PAGES);
	t->text = pyhandoff_bpf_text;
	if (t->common->print_ebpf)
		return 0;
	/* without -p every process of the host is traced: no pid to be left */
	if (t->common->npids && !pidwatch_init(&h->watch, t->common->pids, t->common->npids))
		return tracker_no_targets(t);
	h->master = check_targets(&h->watch, h->children);
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
	case HANDOFF_EOF:
		return "eof";
	}
	return "unknown";
}

static const char *via_name(unsigned via)
{
	static const char *names[] = { "?", "read", "readv", "recvfrom", "recvmsg", "accept", "accept4" };

	return via < sizeof(names) / sizeof(names[0]) ? names[via] : "?";
}

enum { MAX_WAITS = 1024, MAX_EXITED = 1024 };

static struct waits *waits_of(struct pyhandoff *h, __u32 pid, int accept_queue, const char *comm)
{
	struct waits *w;

	for (size_t i = 0; i < h->nwaits; i++)
		if (h->waits[i].pid == pid && h->waits[i].accept_queue == accept_queue)
			return &h->waits[i];
	if (h->nwaits == MAX_WAITS)
		return NULL;
	if (h->nwaits == h->capwaits) {
		size_t cap = h->capwaits ? h->capwaits * 2 : 8;
		struct waits *nw = realloc(h->waits, cap * sizeof(*nw));
		if (!nw)
			return NULL;
		h->waits = nw;
		h->capwaits = cap;
	}
	w = &h->waits[h->nwaits];
	memset(w, 0, sizeof(*w));
	w->hist = calloc(1, sizeof(*w->hist));
	if (!w->hist)
		return NULL;
	h->nwaits++;
	w->pid = pid;
	w->accept_queue = accept_queue;
	memcpy(w->comm, comm, sizeof(w->comm) - 1);
	return w;
}

static void emit(struct pyhandoff *h, const struct handoff_event *ev)
{
	const struct task_head *worker = &ev->task;
	char queued[40], picked[40], name[PYTHREAD_NAME_MAX];
	double ms = (double)(worker->ts_ns - ev->queued_ns) / 1e6;
	int handoff = ev->path != HANDOFF_ACCEPT_QUEUE;
	json_t *o;

	if (ev->path == HANDOFF_EOF) {
		/* no request: printed for what it is, kept out of the waits and their statistics */
		h->closes++;
	} else {
		struct waits *w = waits_of(h, worker->pid, !handoff, worker->comm);

		h->events++;
		if (w)
			lathist_add(w->hist, worker->ts_ns - ev->queued_ns);
		else
			h->untabled++;
	}
	if (ms < h->min_ms)
		return;
	o = json_object();
	time_format_mono_ns(ev->queued_ns, queued, sizeof(queued));
	time_format_mono_ns(worker->ts_ns, picked, sizeof(picked));
	json_set_str(o, "metric", handoff_schema.metric);
	record_set_ids(o, worker);
	json_set_real(o, "duration_ms", ms);
	json_set_real(o, "handoff_ms", ms);
	json_set_int(o, "worker_tid", worker->tid);
	json_set_strn(o, "worker_comm", worker->comm, sizeof(worker->comm));
	pytargets_thread_name(&h->named, (pid_t)worker->pid, (pid_t)worker->tid, worker->comm,
			      sizeof(worker->comm), name, sizeof(name));
	json_set_str(o, "worker_thread_name", name);
	json_set_str(o, "thread_name", name);
	/* the accept queue is the kernel's: no thread put the connection there */
	json_object_set_new(o, "main_tid", handoff && ev->main_tid ? json_integer(ev->main_tid) : json_null());
	if (handoff) {
		json_set_strn(o, "main_comm", ev->main_comm, sizeof(ev->main_comm));
		pytargets_thread_name(&h->named, (pid_t)worker->pid, (pid_t)ev->main_tid, ev->main_comm,
				      sizeof(ev->main_comm), name, sizeof(name));
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
	sink_record(h->base.sink, &handoff_schema, o);
	if (ev->path != HANDOFF_EOF)
		h->printed++;
}

/* A process's counts at its exit, kept for its handoff_process record at the end. */
static void keep_exited(struct pyhandoff *h, const struct handoff_proc_exit *e)
{
	if (h->nexited == MAX_EXITED) {
		h->exited_untabled++;
		return;
	}
	if (h->nexited == h->capexited) {
		size_t cap = h->capexited ? h->capexited * 2 : 16;
		struct handoff_proc_exit *ne = realloc(h->exited, cap * sizeof(*ne));
		if (!ne) {
			h->exited_untabled++;
			return;
		}
		h->exited = ne;
		h->capexited = cap;
	}
	h->exited[h->nexited++] = *e;
}

_Static_assert(sizeof(struct handoff_proc_exit) < sizeof(struct handoff_event),
	       "the ring buffer's two records are told apart by their size");

static void on_event(void *ctx, void *data, int size)
{
	if (size == (int)sizeof(struct handoff_proc_exit))
		keep_exited(ctx, data);
	else if (size >= (int)sizeof(struct handoff_event))
		emit(ctx, data);
}

static int attach_all(struct bpfprog *p, bool children)
{
	/* where waits end first, then where they begin: no wait is begun that cannot end */
	if (bpfprog_attach_tracepoint(p, "sock", "inet_sock_set_state") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_close") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_read") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_readv") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_recvfrom") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_recvmsg") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_read") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_readv") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_recvfrom") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_recvmsg") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_accept4") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_accept") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_epoll_ctl") ||
	    bpfprog_attach_tracepoint(p, "syscalls", "sys_enter_epoll_ctl"))
		return -1;
	/* where the counts of a process leave the map, before they are begun */
	if (bpfprog_attach_tracepoint(p, "sched", "sched_process_exit"))
		return -1;
	if (children && bpfprog_attach_raw_tracepoint(p, "raw_tracepoint__sched_process_fork", "sched_process_fork"))
		return -1;
	return 0;
}

static int start(struct tracker *t)
{
	struct pyhandoff *h = (struct pyhandoff *)t;
	struct bpfprog *p = t->prog;

	snprintf(t->banner, sizeof(t->banner), "Tracing connection handoffs and accept-queue waits.");
	return pyebpf_bpf_set_pid_list(p, h->watch.pids, h->watch.npids) ||
	       (h->children && pidwatch_follow_children(&h->watch, p, "children", 1)) ||
	       bpfprog_open_ring_buffer(p, "events", on_event, h) || attach_all(p, h->children);
}

static int tick(struct tracker *t, uint64_t now_ns)
{
	struct pyhandoff *h = (struct pyhandoff *)t;

	t->done = pidwatch_all_gone(&h->watch, now_ns);
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

static void report_process(struct pyhandoff *h, __u32 pid, const char *comm, const struct handoff_proc_counts *c)
{
	json_t *sum = json_object();

	json_set_str(sum, "metric", process_schema.metric);
	json_set_int(sum, "pid", pid);
	json_set_str(sum, "comm", comm);
	json_set_str(sum, "model", model_name(c));
	json_set_int(sum, "handoffs", (json_int_t)c->handoffs);
	json_set_int(sum, "same_thread_reads", (json_int_t)c->same_thread);
	json_set_int(sum, "accept_queue", (json_int_t)c->accepts);
	json_set_int(sum, "fd_reused", (json_int_t)c->stale);
	json_set_int(sum, "client_closes", (json_int_t)c->closes);
	sink_result_titled(h->base.sink, &process_schema, "process", sum);
}

/*
 * Per process (those alive at the end, then those that exited): the server model its
 * syscalls showed, and its counts.
 */
static int report_processes(struct pyhandoff *h)
{
	int fd = bpfprog_table_fd(h->base.prog, "procs");
	__u32 key, next, *prev = NULL;
	struct handoff_proc_counts c;
	char comm[64];
	int procs = 0;

	while (fd >= 0 && bpf_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_lookup_elem(fd, &key, &c))
			continue;
		procs++;
		report_process(h, key, procinfo_comm((pid_t)key, (pid_t)key, comm, sizeof(comm)) ? "?" : comm, &c);
	}
	for (size_t i = 0; i < h->nexited; i++, procs++)
		report_process(h, h->exited[i].pid, "?", &h->exited[i].counts);
	return procs + (int)h->exited_untabled;
}

static int by_pid_then_kind(const void *a, const void *b)
{
	const struct waits *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->accept_queue - y->accept_queue;
}

/*
 * Per process (by pid) and kind of wait: a histogram in ms, the unit of the events'
 * WAIT_MS, with the results (stdout; stderr in JSON mode), and the percentiles.
 */
static void report_latencies(struct pyhandoff *h)
{
	FILE *text = sink_text(h->base.sink);

	if (!text)
		text = stderr;
	if (h->nwaits)
		qsort(h->waits, h->nwaits, sizeof(*h->waits), by_pid_then_kind);
	for (size_t i = 0; i < h->nwaits; i++) {
		struct waits *w = &h->waits[i];
		json_t *sum;

		if (!w->hist->count)
			continue;
		fprintf(text, "\npid %u (%s), %s waits:\n", w->pid, w->comm,
			w->accept_queue ? "accept queue" : "handoff");
		lathist_print_log2_ms(w->hist, text);
		sum = json_object();
		json_set_str(sum, "metric", latency_schema.metric);
		json_set_int(sum, "pid", w->pid);
		json_set_str(sum, "kind", w->accept_queue ? "accept_queue" : "handoff");
		json_set_int(sum, "count", (json_int_t)w->hist->count);
		json_set_real(sum, "p50_ms", (double)lathist_percentile_ns(w->hist, 50) / 1e6);
		json_set_real(sum, "p90_ms", (double)lathist_percentile_ns(w->hist, 90) / 1e6);
		json_set_real(sum, "p99_ms", (double)lathist_percentile_ns(w->hist, 99) / 1e6);
		json_set_real(sum, "max_ms", (double)w->hist->max_ns / 1e6);
		sink_result_titled(h->base.sink, &latency_schema, "latency", sum);
	}
}

static void finish(struct tracker *t)
{
	struct pyhandoff *h = (struct pyhandoff *)t;
	json_t *sum;
	int procs = report_processes(h);

	report_latencies(h);
	if (!procs && h->master)
		log_info("no accept or handoff seen in the traced processes: pid %d's workers do "
			 "that; run again with --children", h->master);
	else if (!procs)
		log_info("no accept or handoff seen in the traced processes");
	sum = summary_begin(t, &summary_schema, counters);
	json_set_int(sum, "events", (json_int_t)h->events);
	json_set_int(sum, "printed", (json_int_t)h->printed);
	json_set_int(sum, "client_closes", (json_int_t)h->closes);
	json_set_int(sum, "waits_untabled", (json_int_t)h->untabled);
	json_set_int(sum, "processes_untabled", (json_int_t)h->exited_untabled);
	record_set_targets(sum, h->watch.skipped,
			   h->watch.exits + bpfprog_table_sum_u64(t->prog, "counters", HANDOFF_CNT_CHILDREN_EXITED));
	summary_end(t, &summary_schema, sum, 0);
}

static void destroy(struct tracker *t)
{
	struct pyhandoff *h = (struct pyhandoff *)t;

	for (size_t i = 0; i < h->nwaits; i++)
		free(h->waits[i].hist);
	free(h->waits);
	free(h->exited);
	pytargets_free(&h->named);
}

/* What pymonitor calls it, and the original monitor's flags as its own options. */
static const struct monitor_entry monitor[] = {
	{ .name = "handoff", .flags = { { "handoff-min-ms", "min-ms", "MS", "handoff: only waits of MS or more" } } },
	{ 0 },
};

const struct tracker_ops pyhandoff_tracker = {
	.name = "pyhandoff",
	.size = sizeof(struct pyhandoff),
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
