/*
 * The tcploss tracker: TCP retransmits, RTO losses, resets sent and received and
 * zero-window episodes, with each connection's congestion context and owning
 * process, from tracepoints only (no kprobes: see pyebpf(7)).
 */
#include <bcc/libbpf.h>
#include <linux/types.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "inetfmt.h"
#include "kbtf.h"
#include "jsonfmt.h"
#include "pidwatch.h"
#include "pyebpf_bpf.h"
#include "pytargets.h"
#include "record.h"
#include "tcploss.h"
#include "tpformat.h"
#include "monitor.h"
#include "summary.h"
#include "tracker.h"

extern const char tcploss_bpf_text[];

/* no -c: in pyebpf -c is --count (hostnet), so --connections has no short name */
enum { OPT_FILTER_IP = OPT_TOOL_BASE, OPT_PORT, OPT_CONNECTIONS, OPT_CHILDREN, OPT_INTERVAL = 'i' };

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_CHILDREN, 0, "children", NULL, "also trace the child processes of the -p pids (and new ones)" },
	{ OPT_FILTER_IP, 0, "filter-ip", "IP", "only connections with IP (IPv4 or IPv6) on either side" },
	{ OPT_PORT, 0, "port", "PORT", "only connections with PORT on either side" },
	{ OPT_CONNECTIONS, 0, "connections", NULL, "print per-connection event counts at the end" },
	{ OPT_INTERVAL, 'i', "interval", "SECONDS", "print the --connections table every SECONDS, counting that interval" },
	OPT_ENTRY_WIDE,
	OPT_ENTRIES_TRACKER_TAIL,
};

static const struct field event_fields[] = {
	FIELD_METRIC,
	{ .name = "event", .type = FIELD_STR, COLUMN_LEFT(2, "EVENT", 15),
	  .meaning = "retransmit, loss, reset_sent, reset_received, zero_window or zero_window_end" },
	FIELD_PID(3),
	FIELD_TID(0),
	FIELD_CONTAINER_PID,
	FIELD_CONTAINER_TID,
	FIELD_COMM(4),
	FIELD_THREAD_NAME(0),
	FIELD_FAMILY,
	/*
	 * Without a socket (a RST for a closed port) src is the RST's sender. The default
	 * table fits 120 columns; -w adds the source port and the congestion context.
	 */
	FIELD_ENDPOINTS_NARROW(5, "the local side", "the remote side"),
	{ .name = "tcp_state", .type = FIELD_STR, COLUMN_LEFT(FIELD_WIDE(9), "STATE", 11),
	  .meaning = "the socket's state (ESTABLISHED, ...); null without a socket" },
	{ .name = "srtt_us", .type = FIELD_INT, .unit = "us", COLUMN(FIELD_WIDE(12), "SRTT_US", 8),
	  .meaning = "smoothed round-trip time; null without a full socket" },
	{ .name = "snd_cwnd", .type = FIELD_INT, .unit = "segments", COLUMN(FIELD_WIDE(11), "CWND", 5),
	  .meaning = "congestion window" },
	{ .name = "total_retrans", .type = FIELD_INT, .unit = "segments", COLUMN(FIELD_WIDE(13), "RETRANS", 7),
	  .meaning = "segments the socket retransmitted over its life" },
	{ .name = "lost_out", .type = FIELD_INT, .unit = "segments", COLUMN(FIELD_WIDE(14), "LOST", 5),
	  .meaning = "segments the sender considers lost" },
	{ .name = "snd_wnd", .type = FIELD_INT, .unit = "bytes", COLUMN(FIELD_WIDE(15), "SND_WND", 8),
	  .meaning = "the peer's advertised window (0 for zero_window)" },
	{ .name = "rcv_wnd", .type = FIELD_INT, .unit = "bytes", COLUMN(FIELD_WIDE(16), "RCV_WND", 8),
	  .meaning = "this side's receive window" },
	{ .name = "segments", .type = FIELD_INT, COLUMN(10, "SEGS", 4),
	  .meaning = "retransmit: segments the kernel counted since the socket's previous one" },
	{ .name = "reason", .type = FIELD_STR, COLUMN_LEFT(18, "REASON", 1),
	  .meaning = "reset_sent: the kernel's reason (Linux 6.10+)" },
	{ .name = "duration_ms", .type = FIELD_REAL, .unit = "ms", COLUMN(FIELD_WIDE(17), "DUR_MS", 9),
	  .meaning = "zero_window_end: how long the window stayed zero" },
	FIELD_TIME(1),
	FIELD_ENV,
	FIELD_END,
};

/* --connections: a row per connection; time is the table's, which the columns print above it. */
static const struct field connection_fields[] = {
	FIELD_METRIC,
	{ .name = "pid", .type = FIELD_INT, COLUMN_LEFT(1, "PID", 7),
	  .meaning = "host process id of the last known owner" },
	{ .name = "comm", .type = FIELD_STR, COLUMN_LEFT(2, "COMM", 15), .meaning = "its comm" },
	FIELD_ENDPOINTS(3, "the local side", "the remote side"),
	{ .name = "retransmits", .type = FIELD_INT, COLUMN(7, "RETRANS", 7),
	  .meaning = "retransmit events in the interval" },
	{ .name = "retransmit_segments", .type = FIELD_INT, COLUMN(8, "SEGS", 7), .meaning = "their segments" },
	{ .name = "losses", .type = FIELD_INT, COLUMN(9, "LOSS", 5), .meaning = "loss events" },
	{ .name = "resets_sent", .type = FIELD_INT, COLUMN(10, "RST_OUT", 7), .meaning = "reset_sent events" },
	{ .name = "resets_received", .type = FIELD_INT, COLUMN(11, "RST_IN", 7), .meaning = "reset_received events" },
	{ .name = "zero_windows", .type = FIELD_INT, COLUMN(12, "ZWIN", 5), .meaning = "zero-window episodes" },
	{ .name = "time", .type = FIELD_TIME, .meaning = "wall-clock time of the table (the end of its interval)" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field summary_fields[] = {
	FIELD_METRIC,
	{ .name = "events", .type = FIELD_INT, .meaning = "events printed" },
	FIELD_LOST,
	FIELD_MISSED,
	{ .name = "retransmits", .type = FIELD_INT, .meaning = "retransmit events" },
	{ .name = "retransmit_segments", .type = FIELD_INT, .meaning = "their segments" },
	TCPLOSS_RETRANS_COUNTERS(PYEBPF_COUNTER_FIELD)
	{ .name = "losses", .type = FIELD_INT, .meaning = "loss events" },
	{ .name = "resets_sent", .type = FIELD_INT, .meaning = "reset_sent events" },
	{ .name = "resets_received", .type = FIELD_INT, .meaning = "reset_received events" },
	{ .name = "zero_windows", .type = FIELD_INT, .meaning = "zero_window events" },
	{ .name = "zero_windows_open", .type = FIELD_INT, .meaning = "episodes still going on at the end" },
	{ .name = "unowned", .type = FIELD_INT, .meaning = "events printed without an owner" },
	TCPLOSS_MAP_COUNTERS(PYEBPF_COUNTER_FIELD)
	FIELD_TARGETS,
	FIELD_ENV,
	FIELD_END,
};

static const struct counter_name retrans_counters[] = { TCPLOSS_RETRANS_COUNTERS(PYEBPF_COUNTER_NAME) { 0, NULL, NULL } };
static const struct counter_name map_counters[] = { TCPLOSS_MAP_COUNTERS(PYEBPF_COUNTER_NAME) { 0, NULL, NULL } };

static const struct schema event_schema = { "tcp_loss", SCHEMA_EVENT, event_fields };
static const struct schema connection_schema = { "tcp_loss_connection", SCHEMA_ROW, connection_fields };
static const struct schema summary_schema = { "tcploss_summary", SCHEMA_SUMMARY, summary_fields };
static const struct schema *const schemas[] = { &event_schema, &connection_schema, &summary_schema, NULL };

struct conn_row {
	struct tcploss_conn_key k;
	struct tcploss_conn_counts c;
};

struct conn_table {
	struct conn_row *rows;
	size_t n;
};

struct tcploss {
	struct tracker base;
	unsigned long port;
	int filter_family;
	uint8_t filter_ip[16];
	bool connections, children;
	double interval_s;
	uint64_t every_ns, next_table_ns; /* -i */
	struct tpformat_symbols rst_reasons;
	unsigned long long events, by_kind[TCPLOSS_KIND_MAX], segments, unowned;
	struct conn_table conns_before; /* -c: the counts at the last table */
	struct pidwatch targets;
	struct pytargets named; /* the processes seen in events: Python thread names */
};

static void init(struct tracker *t)
{
	struct tcploss *l = (struct tcploss *)t;

	pytargets_init_named(&l->named);
}

static int option(struct tracker *t, int id, const char *arg)
{
	struct tcploss *l = (struct tcploss *)t;

	switch (id) {
	case OPT_FILTER_IP:
		l->filter_family = inet_parse(arg, l->filter_ip);
		if (!l->filter_family)
			return opts_usage_error("invalid --filter-ip '%s': not an IPv4 or IPv6 address", arg);
		return 0;
	case OPT_PORT:
		return opts_parse_ulong("port", arg, 1, 65535, &l->port);
	case OPT_CONNECTIONS:
		l->connections = true;
		return 0;
	case OPT_CHILDREN:
		l->children = true;
		return 0;
	case OPT_INTERVAL:
		return opts_parse_seconds("interval", arg, &l->interval_s);
	}
	return -1;
}

static int check(struct tracker *t)
{
	struct tcploss *l = (struct tcploss *)t;

	if (l->children && !t->common->npids)
		return opts_usage_error("--children needs -p (the parent processes to follow)");
	l->every_ns = (uint64_t)llround(l->interval_s * 1e9);
	l->connections |= l->every_ns != 0; /* the table is all -i prints */
	return 0;
}

/* Kernel struct offsets (from BTF), tracepoint fields this kernel has, and settings. */
static int prepare(struct tracker *t)
{
	static const struct kbtf_offset offsets[] = {
		{ "OFF_SKC_STATE", "sock_common", "skc_state" },
		{ "OFF_SKC_FAMILY", "sock_common", "skc_family" },
		{ "OFF_SKC_NUM", "sock_common", "skc_num" },
		{ "OFF_SKC_DPORT", "sock_common", "skc_dport" },
		{ "OFF_SKC_RCV_SADDR", "sock_common", "skc_rcv_saddr" },
		{ "OFF_SKC_DADDR", "sock_common", "skc_daddr" },
		{ "OFF_SKC_V6_RCV_SADDR", "sock_common", "skc_v6_rcv_saddr" },
		{ "OFF_SKC_V6_DADDR", "sock_common", "skc_v6_daddr" },
		{ "OFF_SK_PROTOCOL", "sock", "sk_protocol" },
		{ "OFF_SK_TYPE", "sock", "sk_type" },
		{ "OFF_TCP_SOCK_SRTT_US", "tcp_sock", "srtt_us" },
		{ "OFF_TCP_SOCK_SND_CWND", "tcp_sock", "snd_cwnd" },
		{ "OFF_TCP_SOCK_TOTAL_RETRANS", "tcp_sock", "total_retrans" },
		{ "OFF_TCP_SOCK_LOST_OUT", "tcp_sock", "lost_out" },
		{ "OFF_TCP_SOCK_SND_WND", "tcp_sock", "snd_wnd" },
		{ "OFF_TCP_SOCK_RCV_WND", "tcp_sock", "rcv_wnd" },
		{ "OFF_SK_BUFF_CB", "sk_buff", "cb" },
		{ "OFF_SK_BUFF_DATA", "sk_buff", "data" },
		{ "OFF_TCP_SKB_CB_GSO_SEGS", "tcp_skb_cb", "tcp_gso_segs" },
		{ NULL, NULL, NULL },
	};
	struct tcploss *l = (struct tcploss *)t;
	struct cflags *cf = &t->cflags;

	if (pyebpf_bpf_offsets_cflags(cf, t->common, offsets) || (l->children && pyebpf_bpf_children_cflags(cf)))
		return -1;
	/* fields that came with newer kernels: 6.10 added the reset reason, 6.13 err */
	if (tpformat_has_field("tcp", "tcp_send_reset", "reason"))
		cflags_add(cf, "-DHAVE_RST_REASON");
	if (tpformat_has_field("tcp", "tcp_retransmit_skb", "err"))
		cflags_add(cf, "-DHAVE_RETRANS_ERR");
	if (l->connections)
		cflags_add(cf, "-DCONN_COUNTS");
	if (l->port)
		cflags_add(cf, "-DPORT=%lu", l->port);
	if (l->filter_family) {
		uint32_t w[4];
		memcpy(w, l->filter_ip, sizeof(w)); /* compared as the BPF side reads the bytes */
		cflags_add(cf, "-DFILTER_IP_FAMILY=%d", l->filter_family);
		for (int i = 0; i < 4; i++)
			cflags_add(cf, "-DFILTER_IP%d=0x%xu", i, w[i]);
	}
	t->text = tcploss_bpf_text;
	if (!t->common->print_ebpf && t->common->npids &&
	    !pidwatch_init(&l->targets, t->common->pids, t->common->npids))
		return tracker_no_targets(t);
	return 0;
}

static const char *kind_name(unsigned kind)
{
	static const char *const names[TCPLOSS_KIND_MAX] = {
		[TCPLOSS_RETRANSMIT] = "retransmit",
		[TCPLOSS_LOSS] = "loss",
		[TCPLOSS_RESET_SENT] = "reset_sent",
		[TCPLOSS_RESET_RECEIVED] = "reset_received",
		[TCPLOSS_ZERO_WINDOW] = "zero_window",
		[TCPLOSS_ZERO_WINDOW_END] = "zero_window_end",
	};
	return kind < TCPLOSS_KIND_MAX && names[kind] ? names[kind] : "unknown";
}

/* include/net/tcp_states.h: part of the kernel's ABI (ss and tracepoints print the same). */
static const char *state_name(unsigned state)
{
	static const char *const names[] = {
		"UNKNOWN",  "ESTABLISHED", "SYN_SENT",   "SYN_RECV",  "FIN_WAIT1",
		"FIN_WAIT2", "TIME_WAIT",  "CLOSE",      "CLOSE_WAIT", "LAST_ACK",
		"LISTEN",   "CLOSING",     "NEW_SYN_RECV", "BOUND_INACTIVE",
	};
	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "UNKNOWN";
}

/*
 * Strings this tracker makes itself (names, times, and reason names that the kernel's
 * format file spells in ASCII): no UTF-8 repair, no second check in jansson. A storm
 * prints tens of thousands of events a second.
 */
static void set_ascii(json_t *o, const char *key, const char *s)
{
	json_object_set_new_nocheck(o, key, s ? json_string_nocheck(s) : json_null());
}

static void emit(struct tcploss *l, const struct tcploss_event *ev)
{
	int known = ev->task.pid != 0, ctx = ev->has_ctx;
	const char *reason = NULL;
	char when[40], num[24];
	json_t *o = json_object();

	time_format_mono_ns(ev->task.ts_ns, when, sizeof(when));
	if (ev->has_reason) {
		reason = tpformat_symbol_name(&l->rst_reasons, ev->reason);
		if (!reason) {
			snprintf(num, sizeof(num), "%u", ev->reason);
			reason = num;
		}
	}
	set_ascii(o, "metric", event_schema.metric);
	set_ascii(o, "event", kind_name(ev->kind));
	record_set_task(o, &ev->task);
	pytargets_set_thread_name(&l->named, o, &ev->task);
	record_set_family(o, ev->family);
	record_set_endpoints(o, ev->family, ev->saddr, ev->sport, ev->daddr, ev->dport);
	set_ascii(o, "tcp_state", ev->tcp_state ? state_name(ev->tcp_state) : NULL);
	record_set_int_or_null(o, "srtt_us", ev->srtt_us, ctx);
	record_set_int_or_null(o, "snd_cwnd", ev->snd_cwnd, ctx);
	record_set_int_or_null(o, "total_retrans", ev->total_retrans, ctx);
	record_set_int_or_null(o, "lost_out", ev->lost_out, ctx);
	record_set_int_or_null(o, "snd_wnd", ev->snd_wnd, ctx);
	record_set_int_or_null(o, "rcv_wnd", ev->rcv_wnd, ctx);
	record_set_int_or_null(o, "segments", ev->segments, ev->kind == TCPLOSS_RETRANSMIT);
	set_ascii(o, "reason", reason);
	if (ev->kind == TCPLOSS_ZERO_WINDOW_END)
		json_set_real(o, "duration_ms", (double)ev->duration_ns / 1e6);
	else
		json_object_set_new(o, "duration_ms", json_null());
	set_ascii(o, "time", when);
	sink_record(l->base.sink, &event_schema, o);
	l->events++;
	l->by_kind[ev->kind < TCPLOSS_KIND_MAX ? ev->kind : 0]++;
	if (ev->kind == TCPLOSS_RETRANSMIT)
		l->segments += ev->segments;
	if (!known)
		l->unowned++;
}

static void on_event(void *ctx, void *data, int size)
{
	if (size >= (int)sizeof(struct tcploss_event))
		emit(ctx, data);
}

static int by_key(const void *a, const void *b)
{
	return memcmp(&((const struct conn_row *)a)->k, &((const struct conn_row *)b)->k,
		      sizeof(struct tcploss_conn_key));
}

static __u64 row_total(const struct conn_row *r)
{
	__u64 t = r->c.segments;
	for (int i = TCPLOSS_LOSS; i <= TCPLOSS_ZERO_WINDOW; i++) /* an episode counts once */
		t += r->c.n[i];
	return t;
}

/* Most troubled first; ties in a stable order (ports, then addresses). */
static int by_trouble(const void *a, const void *b)
{
	const struct conn_row *x = a, *y = b;
	__u64 tx = row_total(x), ty = row_total(y);

	if (tx != ty)
		return tx > ty ? -1 : 1;
	if (x->k.sport != y->k.sport)
		return x->k.sport < y->k.sport ? -1 : 1;
	if (x->k.dport != y->k.dport)
		return x->k.dport < y->k.dport ? -1 : 1;
	return by_key(a, b);
}

/* The kernel's per-connection counts as they are now, sorted by key. */
static struct conn_table read_conn_counts(struct bpfprog *p)
{
	int fd = bpfprog_table_fd(p, "conn_counts");
	struct tcploss_conn_key key, next, *prev = NULL;
	struct conn_table t = { 0 };
	size_t cap = 0;

	while (fd >= 0 && bpf_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (t.n == cap) {
			struct conn_row *r = realloc(t.rows, (cap = cap ? cap * 2 : 64) * sizeof(*r));
			if (!r)
				break;
			t.rows = r;
		}
		if (bpf_lookup_elem(fd, &key, &t.rows[t.n].c) == 0)
			t.rows[t.n++].k = key;
	}
	if (t.n) /* qsort(NULL, 0, ...) is undefined */
		qsort(t.rows, t.n, sizeof(*t.rows), by_key);
	return t;
}

/*
 * The counts since the previous table: the kernel's counters only grow (nothing is
 * reset under a running program, so nothing is lost between reads). Rows without a
 * new event are dropped; the rest is sorted most troubled first.
 */
static struct conn_table conn_deltas(const struct conn_table *now, const struct conn_table *before)
{
	struct conn_table d = { malloc((now->n ? now->n : 1) * sizeof(struct conn_row)), 0 };

	for (size_t i = 0; d.rows && i < now->n; i++) {
		const struct conn_row *old = before->n ? bsearch(&now->rows[i], before->rows, before->n,
								 sizeof(struct conn_row), by_key)
						       : NULL;
		struct conn_row r = now->rows[i];

		if (old) {
			for (int j = 0; j < TCPLOSS_KIND_MAX; j++)
				r.c.n[j] -= old->c.n[j];
			r.c.segments -= old->c.segments;
		}
		if (row_total(&r) || r.c.n[TCPLOSS_RETRANSMIT])
			d.rows[d.n++] = r;
	}
	if (d.n)
		qsort(d.rows, d.n, sizeof(*d.rows), by_trouble);
	return d;
}

static void emit_connection(struct tcploss *l, const struct conn_row *r, const char *when)
{
	const struct tcploss_conn_counts *c = &r->c;
	json_t *o = json_object();

	set_ascii(o, "metric", connection_schema.metric);
	record_set_int_or_null(o, "pid", c->pid, c->pid != 0);
	if (c->pid)
		json_set_strn(o, "comm", c->comm, strnlen(c->comm, sizeof(c->comm)));
	else
		json_object_set_new(o, "comm", json_null());
	record_set_endpoints(o, r->k.family, r->k.saddr, r->k.sport, r->k.daddr, r->k.dport);
	json_set_int(o, "retransmits", (json_int_t)c->n[TCPLOSS_RETRANSMIT]);
	json_set_int(o, "retransmit_segments", (json_int_t)c->segments);
	json_set_int(o, "losses", (json_int_t)c->n[TCPLOSS_LOSS]);
	json_set_int(o, "resets_sent", (json_int_t)c->n[TCPLOSS_RESET_SENT]);
	json_set_int(o, "resets_received", (json_int_t)c->n[TCPLOSS_RESET_RECEIVED]);
	json_set_int(o, "zero_windows", (json_int_t)c->n[TCPLOSS_ZERO_WINDOW]);
	set_ascii(o, "time", when);
	sink_table_row(l->base.sink, &connection_schema, o);
}

/* -c: one row per connection that had events since the last table, from the kernel's counts. */
static void print_connections(struct tcploss *l)
{
	struct conn_table now = read_conn_counts(l->base.prog), d = conn_deltas(&now, &l->conns_before);
	char title[64];

	/* in columns, a blank line and the table's time above its header */
	title[0] = '\n';
	time_format_mono_ns(time_mono_ns(), title + 1, sizeof(title) - 1);
	free(l->conns_before.rows);
	l->conns_before = now;
	sink_table_begin(l->base.sink, &connection_schema, title);
	for (size_t i = 0; i < d.n; i++)
		emit_connection(l, &d.rows[i], title + 1);
	free(d.rows);
}

static int attach_all(struct bpfprog *p)
{
	/* the softirq path: raw tracepoints, which no other BPF program makes the kernel skip */
	static const char *const raw[] = {
		"tcp_retransmit_skb", "tcp_cong_state_set", "tcp_receive_reset", "tcp_probe", "tcp_destroy_sock",
	};
	static const char *const tps[][2] = {
		{ "tcp", "tcp_send_reset" },       { "sock", "inet_sock_set_state" },
		{ "syscalls", "sys_exit_accept4" }, { "syscalls", "sys_exit_accept" },
		{ "syscalls", "sys_enter_sendto" }, { "syscalls", "sys_enter_sendmsg" },
	};
	/* each primary's backup after it (tcploss.bpf.c, hit_seen) */
	static const char *const backed_up[] = { "tcp_retransmit_skb", "tcp_probe" };
	char fn[64];

	for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
		snprintf(fn, sizeof(fn), "raw_tracepoint__%s", raw[i]);
		if (bpfprog_attach_raw_tracepoint(p, fn, raw[i]))
			return -1;
		for (size_t k = 0; k < sizeof(backed_up) / sizeof(backed_up[0]); k++) {
			snprintf(fn, sizeof(fn), "raw_tracepoint__%s__backup", raw[i]);
			if (!strcmp(raw[i], backed_up[k]) && bpfprog_attach_raw_tracepoint(p, fn, raw[i]))
				return -1;
		}
	}
	for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++)
		if (bpfprog_attach_tracepoint(p, tps[i][0], tps[i][1]))
			return -1;
	return 0;
}

static int start(struct tracker *t)
{
	struct tcploss *l = (struct tcploss *)t;

	tpformat_symbols("tcp", "tcp_send_reset", "reason", &l->rst_reasons);
	/*
	 * A retransmit storm delivers tens of thousands of events a second: 1024 pages
	 * (4 MiB) per CPU absorb bursts, the kernel wakes us once per 64 records (each
	 * wakeup costs an IPI in the softirq that retransmits; the runner drains every
	 * poll_ms anyway), and stdout is written once per poll rather than per line.
	 */
	sink_batch(t->sink);
	if (pyebpf_bpf_set_pid_list(t->prog, l->targets.pids, l->targets.npids) ||
	    (l->children && (pidwatch_follow_children(&l->targets, t->prog, "pid_filter", PYEBPF_PID_CHILD) ||
			     pyebpf_bpf_attach_children(t->prog))) ||
	    bpfprog_open_perf_buffer(t->prog, "events", on_event, l, 1024, 64) || attach_all(t->prog))
		return -1;
	snprintf(t->banner, sizeof(t->banner), "Tracing TCP retransmits, losses, resets and zero windows.");
	l->next_table_ns = time_mono_ns() + l->every_ns;
	return 0;
}

static int tick(struct tracker *t, uint64_t now_ns)
{
	struct tcploss *l = (struct tcploss *)t;

	t->done = pidwatch_all_gone(&l->targets, now_ns);
	if (l->every_ns && now_ns >= l->next_table_ns) {
		print_connections(l);
		l->next_table_ns += l->every_ns;
		if (l->next_table_ns <= time_mono_ns()) /* fell behind: no burst of tables */
			l->next_table_ns = time_mono_ns() + l->every_ns;
	}
	return 0;
}

static void finish(struct tracker *t)
{
	struct tcploss *l = (struct tcploss *)t;
	int fd = bpfprog_table_fd(t->prog, "zero_windows");
	__u64 key, next, *prev = NULL;
	json_int_t open = 0;
	json_t *sum;

	if (l->connections)
		print_connections(l);
	/* episodes still going on: the peer's window was still zero when tracing stopped */
	while (fd >= 0 && bpf_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		open++;
	}
	sum = summary_begin(t, &summary_schema, retrans_counters);
	json_set_int(sum, "events", (json_int_t)l->events);
	json_set_int(sum, "retransmits", (json_int_t)l->by_kind[TCPLOSS_RETRANSMIT]);
	json_set_int(sum, "retransmit_segments", (json_int_t)l->segments);
	json_set_int(sum, "losses", (json_int_t)l->by_kind[TCPLOSS_LOSS]);
	json_set_int(sum, "resets_sent", (json_int_t)l->by_kind[TCPLOSS_RESET_SENT]);
	json_set_int(sum, "resets_received", (json_int_t)l->by_kind[TCPLOSS_RESET_RECEIVED]);
	json_set_int(sum, "zero_windows", (json_int_t)l->by_kind[TCPLOSS_ZERO_WINDOW]);
	json_set_int(sum, "zero_windows_open", open);
	json_set_int(sum, "unowned", (json_int_t)l->unowned);
	pyebpf_bpf_set_counters(sum, t->prog, map_counters);
	record_set_targets(sum, l->targets.skipped,
			   l->targets.exits + bpfprog_table_sum_u64(t->prog, "counters", TCPLOSS_CNT_CHILDREN_EXITED));
	summary_end(t, &summary_schema, sum, 0);
}

static void destroy(struct tracker *t)
{
	struct tcploss *l = (struct tcploss *)t;

	tpformat_symbols_free(&l->rst_reasons);
	pytargets_free(&l->named);
	free(l->conns_before.rows);
}

/* What pymonitor calls it, and the original monitor's flags as its own options. */
static const struct monitor_entry monitor[] = {
	{ .name = "tcp_loss",
	  .flags = { { "loss-filter-ip", "filter-ip", "IP", "tcp_loss: only connections with IP on either side" } } },
	{ 0 },
};

const struct tracker_ops tcploss_tracker = {
	.name = "tcploss",
	.size = sizeof(struct tcploss),
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
