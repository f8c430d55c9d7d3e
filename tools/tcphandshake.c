/*
 * tcphandshake: TCP connect and accept handshake latency, outcome and srtt, per
 * process, from tracepoints only (this kernel has no kprobes).
 */
#include <bcc/libbpf.h>
#include <linux/types.h>
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
#include "tcphandshake.h"

extern const char tcphandshake_bpf_text[];

/* Ring buffer pages; how often it is read (the kernel does not wake us: see emit_event). */
enum { RING_PAGES = 256, POLL_MS = 100 };

static const struct tool_doc doc = {
	.name = "tcphandshake",
	.summary = "Trace TCP connect and accept handshakes: latency, outcome, srtt, accept-queue wait.",
	.examples = "  tcphandshake                 # every handshake on the host\n"
		    "  tcphandshake -p 4242         # connects and accepts of pid 4242\n"
		    "  tcphandshake --min-us 10000  # handshakes slower than 10 ms\n"
		    "  tcphandshake --port 443 -j   # port 443, JSON lines\n",
};

enum { OPT_MIN_US = OPT_TOOL_BASE, OPT_PORT, OPT_IPV4 = '4', OPT_IPV6 = '6' };

static const struct opt options[] = {
	OPT_ENTRY_PID,
	{ OPT_MIN_US, 0, "min-us", "US", "only successful handshakes slower than US microseconds" },
	{ OPT_PORT, 0, "port", "PORT", "only connections with PORT on either side" },
	{ OPT_IPV4, '4', "ipv4", NULL, "IPv4 only" },
	{ OPT_IPV6, '6', "ipv6", NULL, "IPv6 only" },
	OPT_ENTRIES_BPF_TOOL_TAIL,
};

static const struct out_column columns[] = {
	{ "time", "TIME", -27 },
	{ "metric", "METRIC", -11 },
	{ "pid", "PID", 7 },
	{ "comm", "COMM", -15 },
	{ "src_ip", "SRC", 15 },
	{ "src_port", "SPORT", 5 },
	{ "dst_ip", "DST", 15 },
	{ "dst_port", "DPORT", 5 },
	{ "handshake_us", "HS_US", 9 },
	{ "srtt_us", "SRTT_US", 8 },
	{ "accept_queue_ms", "ACCQ_MS", 8 },
	{ "outcome", "OUTCOME", -10 },
	{ NULL, NULL, 0 },
};

struct settings {
	struct common_opts common;
	unsigned long min_us;
	unsigned long port;
	int family;
};

struct run {
	struct out *out;
	unsigned long long events;
};

static int handle_option(int id, const char *arg, void *ctx)
{
	struct settings *s = ctx;

	switch (id) {
	case OPT_MIN_US:
		return opts_parse_ulong("min-us", arg, 0, 3600000000ul, &s->min_us);
	case OPT_PORT:
		return opts_parse_ulong("port", arg, 1, 65535, &s->port);
	case OPT_IPV4:
	case OPT_IPV6:
		if (s->family)
			return opts_usage_error("-4 and -6 exclude each other");
		s->family = id == OPT_IPV4 ? AF_INET : AF_INET6;
		return 0;
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
	    kbtf_offset_cflag(b, cf, "OFF_TCP_SOCK_SRTT_US", "tcp_sock", "srtt_us") ||
	    kbtf_offset_cflag(b, cf, "OFF_SK_BUFF_DATA", "sk_buff", "data"))
		goto out;
	if (s->port)
		cflags_add(cf, "-DPORT=%lu", s->port);
	if (s->family)
		cflags_add(cf, "-DFAMILY=%d", s->family);
	if (s->min_us)
		cflags_add(cf, "-DMIN_NS=%lluull", (unsigned long long)s->min_us * 1000);
	/*
	 * One 1 MiB ring for all CPUs: events come out in the order they happened (the
	 * connect and accept of one connection run on different CPUs), and a storm of
	 * 20000 connections a second (40000 records of 112 bytes) fills less than half of
	 * it between two reads.
	 */
	cflags_add(cf, "-DPYEBPF_RINGBUF_PAGES=%d", RING_PAGES);
	r = 0;
out:
	kbtf_close(b);
	return r;
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

static void set_or_null(json_t *o, const char *key, json_int_t v, int known)
{
	json_object_set_new(o, key, known ? json_integer(v) : json_null());
}

static void print_event(struct run *run, const struct tcphs_event *ev)
{
	char local[INET6_ADDRSTRLEN], remote[INET6_ADDRSTRLEN], when[40];
	int accept = ev->kind == TCPHS_ACCEPT, known = ev->pid != 0;
	json_t *o = json_object();

	inet_format(ev->family, ev->saddr, local, sizeof(local));
	inet_format(ev->family, ev->daddr, remote, sizeof(remote));
	time_format_mono_ns(ev->ts_ns, when, sizeof(when));
	json_set_str(o, "metric", accept ? "tcp_accept" : "tcp_connect");
	set_or_null(o, "pid", ev->pid, known);
	set_or_null(o, "tid", ev->tid, known);
	set_or_null(o, "container_pid", ev->nspid, known && ev->nspid);
	set_or_null(o, "container_tid", ev->nstid, known && ev->nstid);
	if (known)
		json_set_strn(o, "comm", ev->comm, sizeof(ev->comm));
	else
		json_object_set_new(o, "comm", json_null());
	json_set_str(o, "family", ev->family == AF_INET6 ? "ipv6" : "ipv4");
	/* src is the side that connected, dst the side that accepted */
	json_set_str(o, "src_ip", accept ? remote : local);
	json_set_int(o, "src_port", accept ? ev->dport : ev->sport);
	json_set_str(o, "dst_ip", accept ? local : remote);
	json_set_int(o, "dst_port", accept ? ev->sport : ev->dport);
	set_or_null(o, "handshake_us", (json_int_t)(ev->handshake_ns / 1000), ev->handshake_ns != 0);
	set_or_null(o, "srtt_us", ev->srtt_us, ev->srtt_us != 0);
	if (accept && ev->outcome == TCPHS_SUCCESS)
		json_set_real(o, "accept_queue_ms", (double)ev->accept_queue_ns / 1e6);
	else
		json_object_set_new(o, "accept_queue_ms", json_null());
	json_set_str(o, "outcome", outcome_name(ev->outcome));
	json_set_str(o, "time", when);
	out_event(run->out, o);
	run->events++;
}

static void on_event(void *ctx, void *data, int size)
{
	if (size >= (int)sizeof(struct tcphs_event))
		print_event(ctx, data);
}

static bool pid_wanted(const struct common_opts *c, __u32 pid)
{
	for (int i = 0; i < c->npids; i++)
		if ((__u32)c->pids[i] == pid)
			return true;
	return c->npids == 0;
}

/* Connections still waiting in an accept queue when tracing stops (pid: the listener's). */
static void report_unaccepted(struct bpfprog *p, struct run *run, const struct common_opts *c)
{
	int fd = bpfprog_table_fd(p, "accept_queue");
	__u64 key, next, *prev = NULL;
	struct tcphs_event ev;

	while (fd >= 0 && bpf_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_lookup_elem(fd, &key, &ev) == 0 && pid_wanted(c, ev.pid)) {
			ev.outcome = TCPHS_UNACCEPTED;
			ev.ts_ns = time_mono_ns();
			print_event(run, &ev);
		}
	}
}

static int attach_all(struct bpfprog *p)
{
	return bpfprog_attach_tracepoint(p, "sock", "inet_sock_set_state") ||
	       bpfprog_attach_tracepoint(p, "tcp", "tcp_receive_reset") ||
	       bpfprog_attach_tracepoint(p, "net", "netif_receive_skb") ||
	       bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_accept4") ||
	       bpfprog_attach_tracepoint(p, "syscalls", "sys_exit_accept");
}

int main(int argc, char **argv)
{
	struct settings s = { 0 };
	struct cflags cf = { 0 };
	struct bpfprog *prog = NULL;
	struct run run = { 0 };
	int rc = EXIT_RUNTIME;

	if (opts_parse(&doc, options, argc, argv, &s.common, handle_option, &s) < 0)
		return EXIT_USAGE;
	if (build_cflags(&s, &cf))
		goto cleanup;
	if (s.common.print_ebpf) {
		bpfprog_print_text(stdout, tcphandshake_bpf_text, &cf);
		rc = EXIT_OK;
		goto cleanup;
	}
	if (lifecycle_check_privileges())
		goto cleanup;

	prog = bpfprog_compile(tcphandshake_bpf_text, &cf, s.common.kernel_headers);
	if (!prog || pyebpf_bpf_set_pids(prog, &s.common))
		goto cleanup;
	run.out = out_open(s.common.json, s.common.env, columns);
	if (!run.out || bpfprog_open_ring_buffer(prog, "events", on_event, &run))
		goto cleanup;
	if (attach_all(prog))
		goto cleanup;

	lifecycle_start(s.common.duration_s);
	lifecycle_watch_pids(s.common.pids, s.common.npids);
	log_info("Tracing TCP handshakes. Hit Ctrl-C to end.");
	while (!lifecycle_stopping() && !ferror(stdout))
		if (bpfprog_poll(prog, lifecycle_poll_timeout_ms(POLL_MS)) < 0) {
			log_error("reading the ring buffer failed");
			goto cleanup;
		}

	bpfprog_drain(prog);
	report_unaccepted(prog, &run, &s.common);
	{
		json_t *sum = json_object();
		json_set_str(sum, "metric", "tcphandshake_summary");
		json_set_int(sum, "events", (json_int_t)run.events);
		json_set_int(sum, "lost", (json_int_t)bpfprog_lost(prog));
		json_set_int(sum, "missed", (json_int_t)bpfprog_missed(prog));
		json_set_int(sum, "map_full", (json_int_t)bpfprog_table_sum_u64(prog, "counters", TCPHS_CNT_MAP_FULL));
		json_set_int(sum, "accepted_without_syn", (json_int_t)bpfprog_table_sum_u64(prog, "counters", TCPHS_CNT_NO_SYN));
		out_summary(run.out, "summary", sum);
	}
	rc = EXIT_OK;
cleanup:
	if (run.out && out_close(run.out) && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	bpfprog_close(prog);
	cflags_free(&cf);
	return rc;
}
