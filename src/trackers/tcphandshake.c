/*
 * The tcphandshake tracker: TCP connect and accept handshake latency, outcome and
 * srtt, per process, from tracepoints only (no kprobes: see pyebpf(7)).
 */
#include <bcc/libbpf.h>
#include <linux/types.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kbtf.h"
#include "log.h"
#include "jsonfmt.h"
#include "pidwatch.h"
#include "pyebpf_bpf.h"
#include "pytargets.h"
#include "record.h"
#include "tcphandshake.h"
#include "monitor.h"
#include "summary.h"
#include "tracker.h"

extern const char tcphandshake_bpf_text[];

/* Ring buffer pages (the kernel does not wake us: the runner reads it every poll_ms). */
enum { RING_PAGES = 256 };

enum { OPT_MIN_US = OPT_TOOL_BASE, OPT_PORT, OPT_CHILDREN, OPT_IPV4 = '4', OPT_IPV6 = '6' };

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_CHILDREN, 0, "children", NULL, "also trace the child processes of the -p pids (and new ones)" },
	{ OPT_MIN_US, 0, "min-us", "US", "only successful handshakes slower than US microseconds" },
	{ OPT_PORT, 0, "port", "PORT", "only connections with PORT on either side" },
	{ OPT_IPV4, '4', "ipv4", NULL, "IPv4 only" },
	{ OPT_IPV6, '6', "ipv6", NULL, "IPv6 only" },
	OPT_ENTRY_WIDE,
	OPT_ENTRIES_TRACKER_TAIL,
};

/* tcp_connect and tcp_accept records have the same fields. */
static const struct field handshake_fields[] = {
	{ .name = "metric", .type = FIELD_STR, COLUMN_LEFT(2, "METRIC", 11),
	  .meaning = "tcp_connect (this host connected) or tcp_accept (it accepted)" },
	FIELD_PID(3),
	FIELD_TID(0),
	FIELD_CONTAINER_PID,
	FIELD_CONTAINER_TID,
	FIELD_COMM(4),
	FIELD_THREAD_NAME(0),
	FIELD_FAMILY,
	/* the default table fits 120 columns: the source port, srtt and accept wait with -w */
	FIELD_ENDPOINTS_NARROW(5, "the connecting side", "the accepting side"),
	{ .name = "handshake_us", .type = FIELD_INT, .unit = "us", COLUMN(9, "HS_US", 7),
	  .meaning = "SYN sent (or first SYN seen) to ESTABLISHED; null when unknown" },
	{ .name = "srtt_us", .type = FIELD_INT, .unit = "us", COLUMN(FIELD_WIDE(10), "SRTT_US", 8),
	  .meaning = "the kernel's smoothed round-trip time at the end; null when none" },
	{ .name = "accept_queue_ms", .type = FIELD_REAL, .unit = "ms", COLUMN(FIELD_WIDE(11), "ACCQ_MS", 8),
	  .meaning = "accept: ESTABLISHED to the application's accept()" },
	{ .name = "outcome", .type = FIELD_STR, COLUMN_LEFT(12, "OUTCOME", 10),
	  .meaning = "success, refused, timeout or unaccepted" },
	FIELD_TIME(1),
	FIELD_ENV,
	FIELD_END,
};

static const struct field summary_fields[] = {
	FIELD_METRIC,
	{ .name = "events", .type = FIELD_INT, .meaning = "records printed" },
	FIELD_LOST,
	FIELD_MISSED,
	TCPHS_COUNTERS(PYEBPF_COUNTER_FIELD)
	FIELD_TARGETS,
	FIELD_ENV,
	FIELD_END,
};

static const struct counter_name counters[] = { TCPHS_COUNTERS(PYEBPF_COUNTER_NAME) { 0, NULL, NULL } };

static const struct schema connect_schema = { "tcp_connect", SCHEMA_EVENT, handshake_fields };
static const struct schema accept_schema = { "tcp_accept", SCHEMA_EVENT, handshake_fields };
static const struct schema summary_schema = { "tcphandshake_summary", SCHEMA_SUMMARY, summary_fields };
static const struct schema *const schemas[] = { &connect_schema, &accept_schema, &summary_schema, NULL };

struct tcphandshake {
	struct tracker base;
	unsigned long min_us, port;
	int family;
	bool children;
	unsigned long long events;
	struct pidwatch targets;
	struct pytargets named; /* the processes seen in events: Python thread names */
};

static void init(struct tracker *t)
{
	struct tcphandshake *h = (struct tcphandshake *)t;

	pytargets_init_named(&h->named);
}

static int option(struct tracker *t, int id, const char *arg)
{
	struct tcphandshake *h = (struct tcphandshake *)t;

	switch (id) {
	case OPT_MIN_US:
		return opts_parse_ulong("min-us", arg, 0, 3600000000ul, &h->min_us);
	case OPT_PORT:
		return opts_parse_ulong("port", arg, 1, 65535, &h->port);
	case OPT_CHILDREN:
		h->children = true;
		return 0;
	case OPT_IPV4:
	case OPT_IPV6:
		if (h->family)
			return opts_usage_error("-4 and -6 exclude each other");
		h->family = id == OPT_IPV4 ? AF_INET : AF_INET6;
		return 0;
	}
	return -1;
}

static int check(struct tracker *t)
{
	if (((struct tcphandshake *)t)->children && !t->common->npids)
		return opts_usage_error("--children needs -p (the parent processes to follow)");
	return 0;
}

/* Kernel struct offsets (from BTF) and settings, as the BPF text's -D options. */
static int prepare(struct tracker *t)
{
	static const struct kbtf_offset offsets[] = {
		{ "OFF_TCP_SOCK_SRTT_US", "tcp_sock", "srtt_us" },
		{ "OFF_SK_BUFF_DATA", "sk_buff", "data" },
		{ NULL, NULL, NULL },
	};
	struct tcphandshake *h = (struct tcphandshake *)t;
	struct cflags *cf = &t->cflags;

	if (pyebpf_bpf_offsets_cflags(cf, t->common, offsets) || (h->children && pyebpf_bpf_children_cflags(cf)))
		return -1;
	if (h->port)
		cflags_add(cf, "-DPORT=%lu", h->port);
	if (h->family)
		cflags_add(cf, "-DFAMILY=%d", h->family);
	if (h->min_us)
		cflags_add(cf, "-DMIN_NS=%lluull", (unsigned long long)h->min_us * 1000);
	/*
	 * One 1 MiB ring for all CPUs: events come out in the order they happened (the
	 * connect and accept of one connection run on different CPUs), and a storm of
	 * 20000 connections a second (40000 records of 112 bytes) fills less than half of
	 * it between two reads.
	 */
	cflags_add(cf, "-DPYEBPF_RINGBUF_PAGES=%d", RING_PAGES);
	t->text = tcphandshake_bpf_text;
	if (!t->common->print_ebpf && t->common->npids &&
	    !pidwatch_init(&h->targets, t->common->pids, t->common->npids))
		return tracker_no_targets(t);
	return 0;
}

static const char *outcome_name(unsigned outcome)
{
	switch (outcome) {
	case TCPHS_SUCCESS:
		return "success";
	case TCPHS_REFUSED:
		return "refused";
	case TCPHS_TIMEOUT:
		return "timeout";
	case TCPHS_UNACCEPTED:
		return "unaccepted";
	}
	return "unknown";
}

static void emit(struct tcphandshake *h, const struct tcphs_event *ev)
{
	int accept = ev->kind == TCPHS_ACCEPT;
	json_t *o = json_object();

	json_set_str(o, "metric", accept ? "tcp_accept" : "tcp_connect");
	record_set_task(o, &ev->task);
	pytargets_set_thread_name(&h->named, o, &ev->task);
	record_set_family(o, ev->family);
	/* src is the side that connected, dst the side that accepted */
	if (accept)
		record_set_endpoints(o, ev->family, ev->daddr, ev->dport, ev->saddr, ev->sport);
	else
		record_set_endpoints(o, ev->family, ev->saddr, ev->sport, ev->daddr, ev->dport);
	record_set_int_or_null(o, "handshake_us", (json_int_t)(ev->handshake_ns / 1000), ev->handshake_ns != 0);
	record_set_int_or_null(o, "srtt_us", ev->srtt_us, ev->srtt_us != 0);
	if (accept && ev->outcome == TCPHS_SUCCESS)
		json_set_real(o, "accept_queue_ms", (double)ev->accept_queue_ns / 1e6);
	else
		json_object_set_new(o, "accept_queue_ms", json_null());
	json_set_str(o, "outcome", outcome_name(ev->outcome));
	record_set_time(o, ev->task.ts_ns);
	sink_record(h->base.sink, accept ? &accept_schema : &connect_schema, o);
	h->events++;
}

static void on_event(void *ctx, void *data, int size)
{
	if (size >= (int)sizeof(struct tcphs_event))
		emit(ctx, data);
}

static int start(struct tracker *t)
{
	struct tcphandshake *h = (struct tcphandshake *)t;
	struct bpfprog *p = t->prog;

	snprintf(t->banner, sizeof(t->banner), "Tracing TCP handshakes.");
	return pyebpf_bpf_set_pid_list(p, h->targets.pids, h->targets.npids) ||
	       (h->children && (pidwatch_follow_children(&h->targets, p, "pid_filter", PYEBPF_PID_CHILD) ||
				pyebpf_bpf_attach_children(p))) ||
	       bpfprog_open_ring_buffer(p, "events", on_event, h) ||
	       bpfprog_attach_tracepoint(p, "sock", "inet_sock_set_state") ||
	       bpfprog_attach_tracepoint(p, "tcp", "tcp_receive_reset") ||
	       bpfprog_attach_tracepoint(p, "net", "netif_receive_skb") ||
	       bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_accept4") ||
	       bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_accept");
}

static int tick(struct tracker *t, uint64_t now_ns)
{
	struct tcphandshake *h = (struct tcphandshake *)t;

	t->done = pidwatch_all_gone(&h->targets, now_ns);
	return 0;
}

/* Whether pid is traced: a -p pid, or with --children one the BPF program follows. */
static bool pid_wanted(struct tcphandshake *h, __u32 pid)
{
	const struct common_opts *c = h->base.common;
	int fd = h->children ? bpfprog_table_fd(h->base.prog, "pid_filter") : -1;
	unsigned char v;

	for (int i = 0; i < c->npids; i++)
		if ((__u32)c->pids[i] == pid)
			return true;
	return c->npids == 0 || (fd >= 0 && bpf_lookup_elem(fd, &pid, &v) == 0);
}

/* Connections still waiting in an accept queue when tracing stops (pid: the listener's). */
static void report_unaccepted(struct tcphandshake *h)
{
	int fd = bpfprog_table_fd(h->base.prog, "accept_queue");
	__u64 key, next, *prev = NULL;
	struct tcphs_event ev;

	while (fd >= 0 && bpf_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_lookup_elem(fd, &key, &ev) == 0 && pid_wanted(h, ev.task.pid)) {
			ev.outcome = TCPHS_UNACCEPTED;
			ev.task.ts_ns = time_mono_ns();
			emit(h, &ev);
		}
	}
}

static void finish(struct tracker *t)
{
	struct tcphandshake *h = (struct tcphandshake *)t;
	json_t *sum;

	report_unaccepted(h);
	sum = summary_begin(t, &summary_schema, counters);
	json_set_int(sum, "events", (json_int_t)h->events);
	record_set_targets(sum, h->targets.skipped,
			   h->targets.exits + bpfprog_table_sum_u64(t->prog, "counters", TCPHS_CNT_CHILDREN_EXITED));
	summary_end(t, &summary_schema, sum, 0);
}

static void destroy(struct tracker *t)
{
	pytargets_free(&((struct tcphandshake *)t)->named);
}

/* What pymonitor calls it, and the original monitor's flags as its own options. */
static const struct monitor_entry monitor[] = {
	{ .name = "tcp_accept", .metric = "tcp_accept" },
	{ .name = "tcp_connect", .metric = "tcp_connect" },
	{ 0 },
};

const struct tracker_ops tcphandshake_tracker = {
	.name = "tcphandshake",
	.size = sizeof(struct tcphandshake),
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
