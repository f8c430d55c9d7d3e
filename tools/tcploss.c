/*
 * tcploss: TCP retransmits, RTO losses, resets sent and received and zero-window
 * episodes, with each connection's congestion context and owning process, from
 * tracepoints only (this kernel has no kprobes).
 */
#include <bcc/libbpf.h>
#include <linux/types.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bpfprog.h"
#include "inetfmt.h"
#include "kbtf.h"
#include "lifecycle.h"
#include "log.h"
#include "opts.h"
#include "out.h"
#include "pyebpf_bpf.h"
#include "tcploss.h"
#include "tpformat.h"

extern const char tcploss_bpf_text[];

/* The longest a lone event waits for its line (wakeups come every 64 records). */
enum { POLL_MS = 100 };

static const struct tool_doc doc = {
	.name = "tcploss",
	.summary = "Trace TCP retransmits, losses, resets and zero windows, with congestion context and owning process.",
	.examples = "  tcploss                        # every event on the host\n"
		    "  tcploss -p 4242                # connections owned by pid 4242\n"
		    "  tcploss --filter-ip 10.0.0.7   # connections to or from 10.0.0.7\n"
		    "  tcploss --port 443 -c -d 60    # port 443 for a minute, then a per-connection table\n"
		    "  tcploss -c -i 10               # which connections had trouble, every 10 s\n"
		    "  tcploss -j -e prod             # JSON lines tagged env=prod\n",
};

enum { OPT_FILTER_IP = OPT_TOOL_BASE, OPT_PORT, OPT_CONNECTIONS = 'c', OPT_INTERVAL = 'i' };

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_FILTER_IP, 0, "filter-ip", "IP", "only connections with IP (IPv4 or IPv6) on either side" },
	{ OPT_PORT, 0, "port", "PORT", "only connections with PORT on either side" },
	{ OPT_CONNECTIONS, 'c', "connections", NULL, "print per-connection event counts at the end" },
	{ OPT_INTERVAL, 'i', "interval", "SECONDS", "with -c: print the table every SECONDS, counting that interval" },
	OPT_ENTRIES_BPF_TOOL_TAIL,
};

static const struct out_column columns[] = {
	{ "time", "TIME", -27 },
	{ "event", "EVENT", -15 },
	{ "pid", "PID", 7 },
	{ "comm", "COMM", -15 },
	{ "src_ip", "SRC", 15 },
	{ "src_port", "SPORT", 5 },
	{ "dst_ip", "DST", 15 },
	{ "dst_port", "DPORT", 5 },
	{ "tcp_state", "STATE", -11 },
	{ "segments", "SEGS", 4 },
	{ "snd_cwnd", "CWND", 5 },
	{ "srtt_us", "SRTT_US", 8 },
	{ "total_retrans", "RETRANS", 7 },
	{ "lost_out", "LOST", 5 },
	{ "snd_wnd", "SND_WND", 8 },
	{ "rcv_wnd", "RCV_WND", 8 },
	{ "duration_ms", "DUR_MS", 9 },
	{ "reason", "REASON", -1 },
	{ NULL, NULL, 0 },
};

struct settings {
	struct common_opts common;
	unsigned long port;
	int filter_family;
	uint8_t filter_ip[16];
	bool connections;
	double interval_s;
};

struct conn_row {
	struct tcploss_conn_key k;
	struct tcploss_conn_counts c;
};

struct conn_table {
	struct conn_row *rows;
	size_t n;
};

struct run {
	struct out *out;
	struct tpformat_symbols rst_reasons;
	unsigned long long events, by_kind[TCPLOSS_KIND_MAX], segments, unowned;
	struct conn_table conns_before; /* -c: the counts at the last table */
};

static int handle_option(int id, const char *arg, void *ctx)
{
	struct settings *s = ctx;

	switch (id) {
	case OPT_FILTER_IP:
		s->filter_family = inet_parse(arg, s->filter_ip);
		if (!s->filter_family)
			return opts_usage_error("invalid --filter-ip '%s': not an IPv4 or IPv6 address", arg);
		return 0;
	case OPT_PORT:
		return opts_parse_ulong("port", arg, 1, 65535, &s->port);
	case OPT_CONNECTIONS:
		s->connections = true;
		return 0;
	case OPT_INTERVAL:
		return opts_parse_double("interval", arg, 0.001, 86400.0, &s->interval_s);
	}
	return -1;
}

/* Kernel struct offsets (from BTF), tracepoint fields this kernel has, and settings. */
static int build_cflags(const struct settings *s, struct cflags *cf)
{
	struct kbtf *b = kbtf_open();
	int r = -1;

	if (!b)
		return -1;
	if (pyebpf_bpf_cflags(b, cf, &s->common) ||
	    kbtf_offset_cflag(b, cf, "OFF_SKC_STATE", "sock_common", "skc_state") ||
	    kbtf_offset_cflag(b, cf, "OFF_SKC_FAMILY", "sock_common", "skc_family") ||
	    kbtf_offset_cflag(b, cf, "OFF_SK_PROTOCOL", "sock", "sk_protocol") ||
	    kbtf_offset_cflag(b, cf, "OFF_SK_TYPE", "sock", "sk_type") ||
	    kbtf_offset_cflag(b, cf, "OFF_TCP_SOCK_SRTT_US", "tcp_sock", "srtt_us") ||
	    kbtf_offset_cflag(b, cf, "OFF_TCP_SOCK_SND_CWND", "tcp_sock", "snd_cwnd") ||
	    kbtf_offset_cflag(b, cf, "OFF_TCP_SOCK_TOTAL_RETRANS", "tcp_sock", "total_retrans") ||
	    kbtf_offset_cflag(b, cf, "OFF_TCP_SOCK_LOST_OUT", "tcp_sock", "lost_out") ||
	    kbtf_offset_cflag(b, cf, "OFF_TCP_SOCK_SND_WND", "tcp_sock", "snd_wnd") ||
	    kbtf_offset_cflag(b, cf, "OFF_TCP_SOCK_RCV_WND", "tcp_sock", "rcv_wnd") ||
	    kbtf_offset_cflag(b, cf, "OFF_SK_BUFF_CB", "sk_buff", "cb") ||
	    kbtf_offset_cflag(b, cf, "OFF_SK_BUFF_DATA", "sk_buff", "data") ||
	    kbtf_offset_cflag(b, cf, "OFF_TCP_SKB_CB_GSO_SEGS", "tcp_skb_cb", "tcp_gso_segs"))
		goto out;
	/* fields that came with newer kernels: 6.10 added the reset reason, 6.13 err */
	if (tpformat_has_field("tcp", "tcp_send_reset", "reason"))
		cflags_add(cf, "-DHAVE_RST_REASON");
	if (tpformat_has_field("tcp", "tcp_retransmit_skb", "err"))
		cflags_add(cf, "-DHAVE_RETRANS_ERR");
	if (s->connections)
		cflags_add(cf, "-DCONN_COUNTS");
	if (s->port)
		cflags_add(cf, "-DPORT=%lu", s->port);
	if (s->filter_family) {
		uint32_t w[4];
		memcpy(w, s->filter_ip, sizeof(w)); /* compared as the BPF side reads the bytes */
		cflags_add(cf, "-DFILTER_IP_FAMILY=%d", s->filter_family);
		for (int i = 0; i < 4; i++)
			cflags_add(cf, "-DFILTER_IP%d=0x%xu", i, w[i]);
	}
	r = 0;
out:
	kbtf_close(b);
	return r;
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

static void set_or_null(json_t *o, const char *key, json_int_t v, int known)
{
	json_object_set_new_nocheck(o, key, known ? json_integer(v) : json_null());
}

/*
 * Strings this tool makes itself (names, addresses, times, and reason names that the
 * kernel's format file spells in ASCII): no UTF-8 repair, no second check in jansson.
 * A storm prints tens of thousands of events a second.
 */
static void set_ascii(json_t *o, const char *key, const char *s)
{
	json_object_set_new_nocheck(o, key, s ? json_string_nocheck(s) : json_null());
}

static void print_event(struct run *run, const struct tcploss_event *ev)
{
	char local[INET6_ADDRSTRLEN], remote[INET6_ADDRSTRLEN], when[40];
	int known = ev->pid != 0, ctx = ev->has_ctx;
	const char *reason = NULL;
	json_t *o = json_object();

	inet_format(ev->family, ev->saddr, local, sizeof(local));
	inet_format(ev->family, ev->daddr, remote, sizeof(remote));
	time_format_mono_ns(ev->ts_ns, when, sizeof(when));
	if (ev->has_reason) {
		reason = tpformat_symbol_name(&run->rst_reasons, ev->reason);
		if (!reason) {
			static char num[24];
			snprintf(num, sizeof(num), "%u", ev->reason);
			reason = num;
		}
	}
	set_ascii(o, "metric", "tcp_loss");
	set_ascii(o, "event", kind_name(ev->kind));
	set_or_null(o, "pid", ev->pid, known);
	set_or_null(o, "tid", ev->tid, known);
	set_or_null(o, "container_pid", ev->nspid, known && ev->nspid);
	set_or_null(o, "container_tid", ev->nstid, known && ev->nstid);
	if (known)
		json_set_strn(o, "comm", ev->comm, strnlen(ev->comm, sizeof(ev->comm)));
	else
		json_object_set_new(o, "comm", json_null());
	set_ascii(o, "family", ev->family == AF_INET6 ? "ipv6" : "ipv4");
	set_ascii(o, "src_ip", local);
	set_or_null(o, "src_port", ev->sport, 1);
	set_ascii(o, "dst_ip", remote);
	set_or_null(o, "dst_port", ev->dport, 1);
	set_ascii(o, "tcp_state", ev->tcp_state ? state_name(ev->tcp_state) : NULL);
	set_or_null(o, "srtt_us", ev->srtt_us, ctx);
	set_or_null(o, "snd_cwnd", ev->snd_cwnd, ctx);
	set_or_null(o, "total_retrans", ev->total_retrans, ctx);
	set_or_null(o, "lost_out", ev->lost_out, ctx);
	set_or_null(o, "snd_wnd", ev->snd_wnd, ctx);
	set_or_null(o, "rcv_wnd", ev->rcv_wnd, ctx);
	set_or_null(o, "segments", ev->segments, ev->kind == TCPLOSS_RETRANSMIT);
	set_ascii(o, "reason", reason);
	if (ev->kind == TCPLOSS_ZERO_WINDOW_END)
		json_set_real(o, "duration_ms", (double)ev->duration_ns / 1e6);
	else
		json_object_set_new(o, "duration_ms", json_null());
	set_ascii(o, "time", when);
	out_event(run->out, o);
	run->events++;
	run->by_kind[ev->kind < TCPLOSS_KIND_MAX ? ev->kind : 0]++;
	if (ev->kind == TCPLOSS_RETRANSMIT)
		run->segments += ev->segments;
	if (!known)
		run->unowned++;
}

static void on_event(void *ctx, void *data, int size)
{
	if (size >= (int)sizeof(struct tcploss_event))
		print_event(ctx, data);
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

/* -c: one row per connection that had events since the last table, from the kernel's counts. */
static void print_connections(struct bpfprog *p, struct run *run, bool json)
{
	static const char *const keys[] = { "retransmits", "retransmit_segments", "losses", "resets_sent",
					    "resets_received", "zero_windows" };
	struct conn_table now = read_conn_counts(p), d = conn_deltas(&now, &run->conns_before);
	char when[64];

	time_format_mono_ns(time_mono_ns(), when, sizeof(when));
	free(run->conns_before.rows);
	run->conns_before = now;
	if (!json)
		printf("\n%s\n%-7s %-15s %15s %5s %15s %5s %7s %7s %5s %7s %7s %5s\n", when, "PID", "COMM",
		       "SRC", "SPORT", "DST", "DPORT", "RETRANS", "SEGS", "LOSS", "RST_OUT", "RST_IN", "ZWIN");
	for (size_t i = 0; i < d.n; i++) {
		const struct tcploss_conn_counts *c = &d.rows[i].c;
		const struct tcploss_conn_key *k = &d.rows[i].k;
		unsigned long long v[] = { c->n[TCPLOSS_RETRANSMIT], c->segments, c->n[TCPLOSS_LOSS],
					   c->n[TCPLOSS_RESET_SENT], c->n[TCPLOSS_RESET_RECEIVED],
					   c->n[TCPLOSS_ZERO_WINDOW] };
		char local[INET6_ADDRSTRLEN], remote[INET6_ADDRSTRLEN];
		json_t *o = json_object();

		inet_format(k->family, k->saddr, local, sizeof(local));
		inet_format(k->family, k->daddr, remote, sizeof(remote));
		if (c->pid)
			json_set_strn(o, "comm", c->comm, strnlen(c->comm, sizeof(c->comm)));
		else
			json_object_set_new(o, "comm", json_null());
		if (json) {
			json_t *row = json_object();
			set_ascii(row, "metric", "tcp_loss_connection");
			set_or_null(row, "pid", c->pid, c->pid != 0);
			json_object_set(row, "comm", json_object_get(o, "comm"));
			set_ascii(row, "src_ip", local);
			set_or_null(row, "src_port", k->sport, 1);
			set_ascii(row, "dst_ip", remote);
			set_or_null(row, "dst_port", k->dport, 1);
			for (size_t j = 0; j < sizeof(keys) / sizeof(keys[0]); j++)
				set_or_null(row, keys[j], (json_int_t)v[j], 1);
			set_ascii(row, "time", when);
			out_event(run->out, row);
		} else {
			char pid[16];
			const char *comm = json_string_value(json_object_get(o, "comm"));
			snprintf(pid, sizeof(pid), c->pid ? "%u" : "-", c->pid);
			printf("%-7s %-15s %15s %5u %15s %5u %7llu %7llu %5llu %7llu %7llu %5llu\n", pid,
			       comm ? comm : "-", local, k->sport, remote, k->dport, v[0], v[1], v[2], v[3], v[4], v[5]);
		}
		json_decref(o);
	}
	free(d.rows);
}

static void print_summary(struct bpfprog *p, struct run *run)
{
	int fd = bpfprog_table_fd(p, "zero_windows");
	__u64 key, next, *prev = NULL;
	json_int_t open = 0;
	json_t *sum = json_object();

	/* episodes still going on: the peer's window was still zero when tracing stopped */
	while (fd >= 0 && bpf_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		open++;
	}
	json_set_str(sum, "metric", "tcploss_summary");
	json_set_int(sum, "events", (json_int_t)run->events);
	json_set_int(sum, "lost", (json_int_t)bpfprog_lost(p));
	json_set_int(sum, "missed", (json_int_t)bpfprog_missed(p));
	json_set_int(sum, "retransmits", (json_int_t)run->by_kind[TCPLOSS_RETRANSMIT]);
	json_set_int(sum, "retransmit_segments", (json_int_t)run->segments);
	json_set_int(sum, "retransmit_failed", (json_int_t)bpfprog_table_sum_u64(p, "counters", TCPLOSS_CNT_RETRANS_FAILED));
	json_set_int(sum, "retransmit_failed_segments", (json_int_t)bpfprog_table_sum_u64(p, "counters", TCPLOSS_CNT_RETRANS_FAILED_SEGS));
	json_set_int(sum, "losses", (json_int_t)run->by_kind[TCPLOSS_LOSS]);
	json_set_int(sum, "resets_sent", (json_int_t)run->by_kind[TCPLOSS_RESET_SENT]);
	json_set_int(sum, "resets_received", (json_int_t)run->by_kind[TCPLOSS_RESET_RECEIVED]);
	json_set_int(sum, "zero_windows", (json_int_t)run->by_kind[TCPLOSS_ZERO_WINDOW]);
	json_set_int(sum, "zero_windows_open", open);
	json_set_int(sum, "unowned", (json_int_t)run->unowned);
	json_set_int(sum, "map_full", (json_int_t)bpfprog_table_sum_u64(p, "counters", TCPLOSS_CNT_MAP_FULL));
	out_summary(run->out, "summary", sum);
}

static int attach_all(struct bpfprog *p)
{
	static const char *const tps[][2] = {
		{ "tcp", "tcp_retransmit_skb" }, { "tcp", "tcp_cong_state_set" },
		{ "tcp", "tcp_send_reset" },     { "tcp", "tcp_receive_reset" },
		{ "tcp", "tcp_probe" },          { "tcp", "tcp_destroy_sock" },
		{ "sock", "inet_sock_set_state" }, { "syscalls", "sys_exit_accept4" },
		{ "syscalls", "sys_exit_accept" }, { "syscalls", "sys_enter_sendto" },
		{ "syscalls", "sys_enter_sendmsg" },
	};
	for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++)
		if (bpfprog_attach_tracepoint(p, tps[i][0], tps[i][1]))
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct settings s = { 0 };
	struct cflags cf = { 0 };
	struct bpfprog *prog = NULL;
	struct run run = { 0 };
	uint64_t every_ns, next_table;
	int rc = EXIT_RUNTIME;

	if (opts_parse(&doc, options, argc, argv, &s.common, handle_option, &s) < 0)
		return EXIT_USAGE;
	every_ns = (uint64_t)llround(s.interval_s * 1e9);
	s.connections |= every_ns != 0; /* the table is all -i prints */
	if (build_cflags(&s, &cf))
		goto cleanup;
	if (s.common.print_ebpf) {
		bpfprog_print_text(stdout, tcploss_bpf_text, &cf);
		rc = EXIT_OK;
		goto cleanup;
	}
	if (lifecycle_check_privileges())
		goto cleanup;
	tpformat_symbols("tcp", "tcp_send_reset", "reason", &run.rst_reasons);

	prog = bpfprog_compile(tcploss_bpf_text, &cf, s.common.kernel_headers);
	if (!prog || pyebpf_bpf_set_pids(prog, &s.common))
		goto cleanup;
	run.out = out_open(s.common.json, s.common.env, columns);
	/*
	 * A retransmit storm delivers tens of thousands of events a second: 1024 pages
	 * (4 MiB) per CPU absorb bursts, the kernel wakes us once per 64 records (each
	 * wakeup costs an IPI in the softirq that retransmits; the loop drains every
	 * POLL_MS anyway), and stdout is written once per batch rather than per line.
	 */
	if (run.out)
		setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	if (!run.out || bpfprog_open_perf_buffer(prog, "events", on_event, &run, 1024, 64))
		goto cleanup;
	if (attach_all(prog))
		goto cleanup;

	lifecycle_start(s.common.duration_s);
	lifecycle_watch_pids(s.common.pids, s.common.npids);
	log_info("Tracing TCP retransmits, losses, resets and zero windows. Hit Ctrl-C to end.");
	next_table = time_mono_ns() + every_ns;
	while (!lifecycle_stopping() && !ferror(stdout)) {
		if (bpfprog_poll(prog, lifecycle_poll_timeout_ms(POLL_MS)) < 0) {
			log_error("polling the perf buffers failed");
			goto cleanup;
		}
		if (every_ns && time_mono_ns() >= next_table) {
			print_connections(prog, &run, s.common.json);
			next_table += every_ns;
			if (next_table <= time_mono_ns()) /* fell behind: no burst of tables */
				next_table = time_mono_ns() + every_ns;
		}
		fflush(stdout);
	}

	bpfprog_drain(prog);
	if (s.connections)
		print_connections(prog, &run, s.common.json);
	print_summary(prog, &run);
	rc = EXIT_OK;
cleanup:
	if (run.out && out_close(run.out) && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	bpfprog_close(prog);
	tpformat_symbols_free(&run.rst_reasons);
	free(run.conns_before.rows);
	cflags_free(&cf);
	return rc;
}
