/*
 * hostnet: a periodic host network health snapshot, entirely in user space: TCP
 * socket states from netlink sock_diag, ephemeral port use, interface and NIC
 * allowance counters, conntrack fill, and fd usage of the processes that matter.
 * It reads the network namespace it runs in (works under `ip netns exec`).
 */
#include <errno.h>
#include <math.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ethtool_stats.h"
#include "fdusage.h"
#include "ifstats.h"
#include "lifecycle.h"
#include "log.h"
#include "netroute.h"
#include "netsysctl.h"
#include "opts.h"
#include "out.h"
#include "sockdiag.h"

static const struct tool_doc doc = {
	.name = "hostnet",
	.summary = "Print a periodic host network health snapshot: TCP states, ports, NIC counters, fds.",
	.examples = "  hostnet                          # every 30 s, default-route interface\n"
		    "  hostnet -i 5 -c 3                # three snapshots, 5 s apart\n"
		    "  hostnet --interface eth1 -j      # eth1, JSON lines\n"
		    "  hostnet --procs java,node        # fd usage of java and node processes\n"
		    "  ip netns exec NS hostnet -c 1    # inside a network namespace\n",
};

enum {
	OPT_INTERVAL = 'i',
	OPT_COUNT = 'c',
	OPT_INTERFACE = OPT_TOOL_BASE,
	OPT_PROCS,
	OPT_WARN_PORT_PCT,
	OPT_WARN_FD_PCT,
	OPT_WARN_CLOSE_WAIT,
	OPT_WARN_TIME_WAIT_DST,
	OPT_WARN_ALLOWANCE,
};

static const struct opt options[] = {
	{ OPT_INTERVAL, 'i', "interval", "SECONDS", "seconds between snapshots (default 30; fractions allowed)" },
	{ OPT_COUNT, 'c', "count", "COUNT", "stop after COUNT snapshots (default: until Ctrl-C)" },
	{ OPT_INTERFACE, 0, "interface", "IFACE", "interface counters of IFACE (default: the default route's)" },
	{ OPT_PROCS, 0, "procs", "LIST", "fd usage of these process names (default python,gunicorn,uwsgi,nginx)" },
	{ OPT_WARN_PORT_PCT, 0, "warn-port-pct", "PCT", "warn when ephemeral port use exceeds PCT% (default 80)" },
	{ OPT_WARN_FD_PCT, 0, "warn-fd-pct", "PCT", "warn when a process uses over PCT% of its fd limit (default 80)" },
	{ OPT_WARN_CLOSE_WAIT, 0, "warn-close-wait", "N", "warn when over N sockets sit in CLOSE_WAIT (default 100)" },
	{ OPT_WARN_TIME_WAIT_DST, 0, "warn-time-wait-dst", "N", "warn when one destination holds over N TIME_WAIT sockets (default 5000)" },
	{ OPT_WARN_ALLOWANCE, 0, "warn-allowance", "N", "warn when an allowance counter rises by over N (default 0)" },
	OPT_ENTRY_ENV,
	OPT_ENTRY_DURATION,
	OPT_ENTRY_JSON,
	OPT_ENTRY_VERBOSE,
	OPT_ENTRY_HELP,
	OPT_ENTRY_VERSION,
	OPT_END,
};

static const struct out_column columns[] = {
	{ "time", "TIME", -27 },
	{ "established_inbound", "EST_IN", 6 },
	{ "established_outbound", "EST_OUT", 7 },
	{ "syn_sent", "SYN_S", 5 },
	{ "syn_recv", "SYN_R", 5 },
	{ "time_wait", "TW", 6 },
	{ "close_wait", "CW", 5 },
	{ "max_time_wait_one_dst", "TW_1DST", 7 },
	{ "port_util_pct", "PORT%", 7 },
	{ "delta_rx_packets", "RX_PKTS", 8 },
	{ "delta_tx_packets", "TX_PKTS", 8 },
	{ "delta_rx_dropped", "RX_DROP", 7 },
	{ "delta_bw_in", "BW_IN", 5 },
	{ "delta_bw_out", "BW_OUT", 6 },
	{ "delta_pps", "PPS", 5 },
	{ "delta_conntrack", "CT", 4 },
	{ NULL, NULL, 0 },
};

/* The cloud NIC's "allowance exceeded" counters (ENA names) and their JSON keys. */
enum { ALLOW_BW_IN, ALLOW_BW_OUT, ALLOW_PPS, ALLOW_CONNTRACK, ALLOW_N };
static const char *const allowance_names[ALLOW_N] = {
	"bw_in_allowance_exceeded", "bw_out_allowance_exceeded", "pps_allowance_exceeded",
	"conntrack_allowance_exceeded",
};
static const char *const allowance_keys[ALLOW_N] = {
	"delta_bw_in", "delta_bw_out", "delta_pps", "delta_conntrack",
};

#define MAX_PROCS 32
#define MAX_NUMBER 1000000000ul /* for counts and thresholds: beyond any host */

struct settings {
	struct common_opts common;
	double interval_s;
	unsigned long count;
	char iface[IF_NAMESIZE];
	bool iface_given;
	struct fdusage procs[MAX_PROCS];
	int nprocs;
	double warn_port_pct, warn_fd_pct;
	unsigned long warn_close_wait, warn_time_wait_dst, warn_allowance;
};

/* The counters a snapshot reports as deltas since the one before. */
struct counters {
	uint64_t mono_ns;
	bool if_ok;
	struct ifstats ifs;
	uint64_t allow[ALLOW_N];
	bool allow_present[ALLOW_N];
};

struct run {
	struct out *out;
	struct sockdiag *sd;
	struct counters prev;
	unsigned long snapshots, sockdiag_failures, if_failures;
};

static int set_procs(struct settings *s, const char *arg)
{
	char buf[1024], *tok, *save = NULL;

	if (strlen(arg) >= sizeof(buf))
		return opts_usage_error("invalid --procs: too long");
	strcpy(buf, arg);
	s->nprocs = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strlen(tok) >= FDUSAGE_NAME_MAX)
			return opts_usage_error("invalid --procs name '%s': a process name (comm) has at most %d characters",
						tok, FDUSAGE_NAME_MAX - 1);
		if (s->nprocs == MAX_PROCS)
			return opts_usage_error("too many --procs names (at most %d)", MAX_PROCS);
		snprintf(s->procs[s->nprocs++].name, FDUSAGE_NAME_MAX, "%s", tok);
	}
	if (!s->nprocs)
		return opts_usage_error("invalid --procs '%s': expected a comma list of process names", arg);
	return 0;
}

static int handle_option(int id, const char *arg, void *ctx)
{
	struct settings *s = ctx;

	switch (id) {
	case OPT_INTERVAL:
		return opts_parse_double("interval", arg, 0.001, 86400.0, &s->interval_s);
	case OPT_COUNT:
		return opts_parse_ulong("count", arg, 1, MAX_NUMBER, &s->count);
	case OPT_INTERFACE:
		if (!*arg || strlen(arg) >= IF_NAMESIZE || !if_nametoindex(arg))
			return opts_usage_error("no interface '%s' in this network namespace (see: ip link)", arg);
		snprintf(s->iface, sizeof(s->iface), "%s", arg);
		s->iface_given = true;
		return 0;
	case OPT_PROCS:
		return set_procs(s, arg);
	case OPT_WARN_PORT_PCT:
		return opts_parse_double("warn-port-pct", arg, 0, 100, &s->warn_port_pct);
	case OPT_WARN_FD_PCT:
		return opts_parse_double("warn-fd-pct", arg, 0, 100, &s->warn_fd_pct);
	case OPT_WARN_CLOSE_WAIT:
		return opts_parse_ulong("warn-close-wait", arg, 0, MAX_NUMBER, &s->warn_close_wait);
	case OPT_WARN_TIME_WAIT_DST:
		return opts_parse_ulong("warn-time-wait-dst", arg, 0, MAX_NUMBER, &s->warn_time_wait_dst);
	case OPT_WARN_ALLOWANCE:
		return opts_parse_ulong("warn-allowance", arg, 0, MAX_NUMBER, &s->warn_allowance);
	}
	return -1;
}

static void read_counters(const struct settings *s, struct run *run, struct counters *c)
{
	int err;

	memset(c, 0, sizeof(*c));
	c->mono_ns = time_mono_ns();
	if (!s->iface[0])
		return;
	err = ifstats_read(s->iface, &c->ifs);
	c->if_ok = err == 0;
	if (err && run->if_failures++ == 0)
		log_warn("cannot read the counters of %s: %s", s->iface, strerror(-err));
	ethtool_stats_read(s->iface, allowance_names, ALLOW_N, c->allow, c->allow_present);
}

static void set_ulong_or_null(json_t *o, const char *key, unsigned long v, bool known)
{
	json_object_set_new(o, key, known ? json_integer((json_int_t)v) : json_null());
}

static void warn(json_t *warnings, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(json_t *warnings, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_array_append_new(warnings, json_string(buf));
}

static void add_sockets(const struct settings *s, struct run *run, json_t *o, json_t *warnings)
{
	static const struct {
		const char *key;
		int state;
	} states[] = {
		{ "listen", SOCKDIAG_LISTEN },       { "syn_sent", SOCKDIAG_SYN_SENT },
		{ "syn_recv", SOCKDIAG_SYN_RECV },   { "fin_wait1", SOCKDIAG_FIN_WAIT1 },
		{ "fin_wait2", SOCKDIAG_FIN_WAIT2 }, { "time_wait", SOCKDIAG_TIME_WAIT },
		{ "close_wait", SOCKDIAG_CLOSE_WAIT }, { "last_ack", SOCKDIAG_LAST_ACK },
		{ "closing", SOCKDIAG_CLOSING },
	};
	struct sockdiag_counts c;
	unsigned lo = 0, hi = 0;
	bool range_ok = netsysctl_port_range(&lo, &hi) == 0, ok;
	unsigned long range = range_ok ? hi - lo + 1 : 0;
	double pct = 0;
	int err = sockdiag_count(run->sd, lo, range_ok ? hi : 0, &c);

	ok = err == 0;
	if (!ok && run->sockdiag_failures++ == 0)
		log_error("sock_diag dump failed: %s", strerror(-err));
	set_ulong_or_null(o, "established_inbound", c.established_inbound, ok);
	set_ulong_or_null(o, "established_outbound", c.established_outbound, ok);
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		set_ulong_or_null(o, states[i].key, c.states[states[i].state], ok);
	set_ulong_or_null(o, "tcp_sockets", c.total, ok);
	set_ulong_or_null(o, "max_time_wait_one_dst", c.max_time_wait_one_dst, ok);
	json_set_str(o, "max_time_wait_dst", ok && c.max_time_wait_dst[0] ? c.max_time_wait_dst : NULL);
	set_ulong_or_null(o, "ephemeral_sockets", c.ephemeral, ok && range_ok);
	set_ulong_or_null(o, "port_range_size", range, range_ok);
	if (ok && range_ok) {
		pct = 100.0 * (double)c.ephemeral / (double)range;
		json_set_real(o, "port_util_pct", pct);
	} else {
		json_object_set_new(o, "port_util_pct", json_null());
	}
	if (!ok)
		return;
	if (range_ok && pct > s->warn_port_pct)
		warn(warnings, "port_exhaustion: %lu sockets on %lu ephemeral ports (%.1f%% > %g%%)",
		     c.ephemeral, range, pct, s->warn_port_pct);
	if (c.states[SOCKDIAG_CLOSE_WAIT] > s->warn_close_wait)
		warn(warnings, "close_wait_buildup: %lu sockets in CLOSE_WAIT (> %lu): an application does not close them",
		     c.states[SOCKDIAG_CLOSE_WAIT], s->warn_close_wait);
	if (c.max_time_wait_one_dst > s->warn_time_wait_dst)
		warn(warnings, "time_wait_concentration: %lu TIME_WAIT sockets to %s (> %lu)",
		     c.max_time_wait_one_dst, c.max_time_wait_dst, s->warn_time_wait_dst);
}

static void add_interface(const struct settings *s, const struct counters *prev,
			  const struct counters *cur, json_t *o, json_t *warnings)
{
	bool ok = prev->if_ok && cur->if_ok;
	const struct ifstats *a = &prev->ifs, *b = &cur->ifs;

	json_set_str(o, "interface", s->iface[0] ? s->iface : NULL);
	for (int i = 0; i < ALLOW_N; i++) {
		bool known = prev->allow_present[i] && cur->allow_present[i];
		uint64_t d = known ? ifstats_delta(prev->allow[i], cur->allow[i]) : 0;

		set_ulong_or_null(o, allowance_keys[i], d, known);
		if (known && d > s->warn_allowance)
			warn(warnings, "allowance_exceeded: %s rose by %llu on %s (> %lu)",
			     allowance_names[i], (unsigned long long)d, s->iface, s->warn_allowance);
	}
	set_ulong_or_null(o, "delta_rx_bytes", ifstats_delta(a->rx_bytes, b->rx_bytes), ok);
	set_ulong_or_null(o, "delta_tx_bytes", ifstats_delta(a->tx_bytes, b->tx_bytes), ok);
	set_ulong_or_null(o, "delta_rx_packets", ifstats_delta(a->rx_packets, b->rx_packets), ok);
	set_ulong_or_null(o, "delta_tx_packets", ifstats_delta(a->tx_packets, b->tx_packets), ok);
	set_ulong_or_null(o, "delta_rx_dropped", ifstats_delta(a->rx_dropped, b->rx_dropped), ok);
	set_ulong_or_null(o, "delta_tx_dropped", ifstats_delta(a->tx_dropped, b->tx_dropped), ok);
	set_ulong_or_null(o, "delta_rx_errors", ifstats_delta(a->rx_errors, b->rx_errors), ok);
	set_ulong_or_null(o, "delta_tx_errors", ifstats_delta(a->tx_errors, b->tx_errors), ok);
}

static void add_conntrack(json_t *o)
{
	unsigned long count = 0, max = 0;
	/* absent until nf_conntrack is loaded; per network namespace */
	bool known = netsysctl_read_ulong("net/netfilter/nf_conntrack_count", &count) == 0;

	set_ulong_or_null(o, "conntrack_count", count, known);
	known = netsysctl_read_ulong("net/netfilter/nf_conntrack_max", &max) == 0;
	set_ulong_or_null(o, "conntrack_max", max, known);
}

/* fd_usage_json is a JSON text, as in the seed (one string column for a database). */
static void add_fd_usage(struct settings *s, json_t *o, json_t *warnings)
{
	json_t *usage = json_object();
	char *text;

	if (fdusage_scan(s->procs, s->nprocs))
		log_warn("cannot list /proc: %s", strerror(errno));
	for (int i = 0; i < s->nprocs; i++) {
		const struct fdusage *e = &s->procs[i];
		json_t *u = json_object();

		json_set_int(u, "pids", e->pids);
		json_set_int(u, "fds", (json_int_t)e->fds);
		set_ulong_or_null(u, "fd_limit", e->fd_limit, e->fd_limit != 0);
		if (e->max_pid) {
			json_set_real(u, "util_pct", e->util_pct);
			json_set_int(u, "max_pid", e->max_pid);
			json_set_int(u, "max_pid_fds", (json_int_t)e->max_fds);
		} else {
			json_object_set_new(u, "util_pct", json_null());
			json_object_set_new(u, "max_pid", json_null());
			json_object_set_new(u, "max_pid_fds", json_null());
		}
		json_set_int(u, "unreadable", e->unreadable);
		json_object_set_new(usage, e->name, u);
		if (e->max_pid && e->util_pct > s->warn_fd_pct)
			warn(warnings, "fd_exhaustion: %s pid %d has %lu of %lu fds open (%.1f%% > %g%%)",
			     e->name, e->max_pid, e->max_fds, e->fd_limit, e->util_pct, s->warn_fd_pct);
	}
	text = json_dumps(usage, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_set_str(o, "fd_usage_json", text ? text : "{}");
	free(text);
	json_decref(usage);
}

static void snapshot(struct settings *s, struct run *run)
{
	uint64_t start = time_mono_ns();
	json_t *o = json_object(), *warnings = json_array();
	struct counters cur;
	char when[40];
	size_t i;
	json_t *w;

	read_counters(s, run, &cur);
	time_format_mono_ns(cur.mono_ns, when, sizeof(when));
	json_set_str(o, "metric", "host_net");
	json_set_str(o, "time", when);
	json_set_real(o, "interval_s", (double)(cur.mono_ns - run->prev.mono_ns) / 1e9);
	add_sockets(s, run, o, warnings);
	add_interface(s, &run->prev, &cur, o, warnings);
	add_conntrack(o);
	add_fd_usage(s, o, warnings);
	json_object_set_new(o, "warnings", warnings);
	json_set_real(o, "snapshot_ms", (double)(time_mono_ns() - start) / 1e6);
	json_incref(warnings);
	out_event(run->out, o);
	/* columns have no room for sentences: there the warnings go to stderr, after the row */
	if (!s->common.json)
		json_array_foreach(warnings, i, w) log_warn("%s", json_string_value(w));
	json_decref(warnings);
	run->prev = cur;
	run->snapshots++;
}

/* Sleeps until deadline_ns; false when asked to stop first. */
static bool wait_until(uint64_t deadline_ns)
{
	for (;;) {
		uint64_t now = time_mono_ns();
		uint64_t left_ms, cap_ms;
		struct timespec ts;

		if (lifecycle_stopping() || ferror(stdout))
			return false;
		if (now >= deadline_ns)
			return true;
		left_ms = (deadline_ns - now + 999999) / 1000000;
		cap_ms = (uint64_t)lifecycle_poll_timeout_ms(200);
		if (left_ms > cap_ms)
			left_ms = cap_ms;
		ts.tv_sec = (time_t)(left_ms / 1000);
		ts.tv_nsec = (long)(left_ms % 1000) * 1000000;
		nanosleep(&ts, NULL);
	}
}

static const char *procs_list(const struct settings *s, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (int i = 0; i < s->nprocs && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "", s->procs[i].name);
	return buf;
}

static void resolve_interface(struct settings *s)
{
	char dev[64];

	if (s->iface_given)
		return;
	if (netroute_default_iface(dev, sizeof(dev)) == 0 && strlen(dev) < sizeof(s->iface)) {
		snprintf(s->iface, sizeof(s->iface), "%s", dev);
		log_debug("default route leaves by %s", s->iface);
	} else {
		log_warn("no default route in this network namespace: no interface counters (pick one with --interface)");
	}
}

int main(int argc, char **argv)
{
	struct settings s = {
		.interval_s = 30,
		.warn_port_pct = 80,
		.warn_fd_pct = 80,
		.warn_close_wait = 100,
		.warn_time_wait_dst = 5000,
		.warn_allowance = 0,
	};
	struct run run = { 0 };
	uint64_t interval_ns, next;
	char names[MAX_PROCS * FDUSAGE_NAME_MAX];
	int rc = EXIT_RUNTIME;

	set_procs(&s, "python,gunicorn,uwsgi,nginx");
	if (opts_parse(&doc, options, argc, argv, &s.common, handle_option, &s) < 0)
		return EXIT_USAGE;
	resolve_interface(&s);

	run.sd = sockdiag_open();
	if (!run.sd) {
		log_error("cannot open a sock_diag netlink socket: %s", strerror(errno));
		goto cleanup;
	}
	run.out = out_open(s.common.json, s.common.env, columns);
	if (!run.out)
		goto cleanup;

	lifecycle_start(s.common.duration_s);
	read_counters(&s, &run, &run.prev);
	interval_ns = (uint64_t)llround(s.interval_s * 1e9);
	log_info("Sampling every %g s (interface %s, fd usage of %s). Hit Ctrl-C to end.",
		 s.interval_s, s.iface[0] ? s.iface : "none", procs_list(&s, names, sizeof(names)));
	next = run.prev.mono_ns + interval_ns;
	while ((!s.count || run.snapshots < s.count) && wait_until(next)) {
		snapshot(&s, &run);
		next += interval_ns;
		if (next < time_mono_ns()) /* a slow snapshot: keep the interval, skip the backlog */
			next = time_mono_ns() + interval_ns;
	}

	{
		json_t *sum = json_object();
		json_set_str(sum, "metric", "host_net_summary");
		json_set_int(sum, "snapshots", (json_int_t)run.snapshots);
		json_set_int(sum, "sockdiag_failures", (json_int_t)run.sockdiag_failures);
		json_set_int(sum, "interface_failures", (json_int_t)run.if_failures);
		out_summary(run.out, "summary", sum);
	}
	rc = EXIT_OK;
cleanup:
	if (run.out && out_close(run.out) && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	sockdiag_close(run.sd);
	return rc;
}
