/*
 * The hostnet tracker: a periodic host network health snapshot, entirely in user
 * space (no BPF): TCP socket states from netlink sock_diag, ephemeral port use,
 * interface and NIC allowance counters, conntrack fill, and fd usage of the processes
 * that matter. It reads the network namespace it runs in (works under `ip netns exec`).
 * Its ticks come from the runner's poll timeout: poll_ms is the time to the next snapshot.
 */
#include <errno.h>
#include <math.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ethtool_stats.h"
#include "fdusage.h"
#include "ifstats.h"
#include "log.h"
#include "netroute.h"
#include "netsysctl.h"
#include "jsonfmt.h"
#include "record.h"
#include "sockdiag.h"
#include "monitor.h"
#include "tracker.h"

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
	OPT_ENTRY_WIDE,
	OPT_ENTRIES_TRACKER_TAIL_NO_BPF,
};

/*
 * A count: its name, meaning, then its COLUMN if it has one. The default table fits
 * 120 columns: packets and allowance counters with -w (warnings say when those rise).
 */
#define COUNT_FIELD(name_, meaning_, ...) { .name = name_, .type = FIELD_INT, .meaning = meaning_, __VA_ARGS__ }

static const struct field snapshot_fields[] = {
	FIELD_METRIC,
	FIELD_TIME(1),
	{ .name = "interval_s", .type = FIELD_REAL, .unit = "s",
	  .meaning = "seconds since the previous snapshot; null on the first" },
	{ .name = "established_inbound", .type = FIELD_INT, COLUMN(2, "EST_IN", 6),
	  .meaning = "ESTABLISHED sockets whose local port is a listening port" },
	{ .name = "established_outbound", .type = FIELD_INT, COLUMN(3, "EST_OUT", 7),
	  .meaning = "the other ESTABLISHED sockets" },
	COUNT_FIELD("listen", "listening TCP sockets"),
	{ .name = "syn_sent", .type = FIELD_INT, COLUMN(4, "SYN_S", 5), .meaning = "sockets in SYN_SENT" },
	{ .name = "syn_recv", .type = FIELD_INT, COLUMN(5, "SYN_R", 5), .meaning = "sockets in SYN_RECV" },
	COUNT_FIELD("fin_wait1", "sockets in FIN_WAIT1"),
	COUNT_FIELD("fin_wait2", "sockets in FIN_WAIT2"),
	{ .name = "time_wait", .type = FIELD_INT, COLUMN(6, "TW", 6), .meaning = "sockets in TIME_WAIT" },
	{ .name = "close_wait", .type = FIELD_INT, COLUMN(7, "CW", 5), .meaning = "sockets in CLOSE_WAIT" },
	COUNT_FIELD("last_ack", "sockets in LAST_ACK"),
	COUNT_FIELD("closing", "sockets in CLOSING"),
	COUNT_FIELD("tcp_sockets", "TCP sockets in any state"),
	{ .name = "max_time_wait_one_dst", .type = FIELD_INT, COLUMN(8, "TW_1DST", 7),
	  .meaning = "the most TIME_WAIT sockets to one destination" },
	{ .name = "max_time_wait_dst", .type = FIELD_STR,
	  .meaning = "that destination, ip:port; null without TIME_WAIT sockets" },
	COUNT_FIELD("ephemeral_sockets", "non-listening sockets with a local port in the ephemeral range"),
	COUNT_FIELD("port_range_size", "ports in net.ipv4.ip_local_port_range"),
	{ .name = "port_util_pct", .type = FIELD_REAL, .unit = "%", COLUMN(9, "PORT%", 7),
	  .meaning = "ephemeral_sockets over port_range_size" },
	{ .name = "interface", .type = FIELD_STR, .meaning = "the interface of the counters; null without one" },
	/* the cloud NIC's counters of packets over its allowance (ENA's names), not traffic */
	COUNT_FIELD("delta_bw_in_allowance_exceeded", "rise of bw_in_allowance_exceeded; null when absent", COLUMN(FIELD_WIDE(15), "BWIN_EXC", 8)),
	COUNT_FIELD("delta_bw_out_allowance_exceeded", "rise of bw_out_allowance_exceeded; null when absent", COLUMN(FIELD_WIDE(16), "BWOUT_EXC", 9)),
	COUNT_FIELD("delta_pps_allowance_exceeded", "rise of pps_allowance_exceeded; null when absent", COLUMN(FIELD_WIDE(17), "PPS_EXC", 7)),
	COUNT_FIELD("delta_conntrack_allowance_exceeded", "rise of conntrack_allowance_exceeded; null when absent", COLUMN(FIELD_WIDE(18), "CT_EXC", 6)),
	{ .name = "delta_rx_bytes", .type = FIELD_INT, .unit = "bytes", .meaning = "bytes received in the interval" },
	{ .name = "delta_tx_bytes", .type = FIELD_INT, .unit = "bytes", .meaning = "bytes sent" },
	{ .name = "rx_bytes_per_s", .type = FIELD_REAL, .unit = "bytes/s", COLUMN(10, "RX_B/S", 10), .fmt = "%.0f",
	  .meaning = "delta_rx_bytes over interval_s" },
	{ .name = "tx_bytes_per_s", .type = FIELD_REAL, .unit = "bytes/s", COLUMN(11, "TX_B/S", 10), .fmt = "%.0f",
	  .meaning = "delta_tx_bytes over interval_s" },
	COUNT_FIELD("delta_rx_packets", "packets received", COLUMN(FIELD_WIDE(12), "RX_PKTS", 8)),
	COUNT_FIELD("delta_tx_packets", "packets sent", COLUMN(FIELD_WIDE(13), "TX_PKTS", 8)),
	COUNT_FIELD("delta_rx_dropped", "received packets dropped", COLUMN(14, "RX_DROP", 7)),
	COUNT_FIELD("delta_tx_dropped", "packets dropped on the way out"),
	COUNT_FIELD("delta_rx_errors", "receive errors"),
	COUNT_FIELD("delta_tx_errors", "transmit errors"),
	COUNT_FIELD("conntrack_count", "nf_conntrack entries; null without nf_conntrack"),
	COUNT_FIELD("conntrack_max", "nf_conntrack's limit; null without nf_conntrack"),
	{ .name = "fd_usage_json", .type = FIELD_STR,
	  .meaning = "fd usage per --procs name, as the JSON text of a list" },
	{ .name = "warnings", .type = FIELD_ARRAY, .meaning = "\"kind: detail\" strings; empty when all is well" },
	{ .name = "snapshot_ms", .type = FIELD_REAL, .unit = "ms", .meaning = "how long taking the snapshot took" },
	FIELD_ENV,
	FIELD_END,
};

static const struct field summary_fields[] = {
	FIELD_METRIC,
	{ .name = "snapshots", .type = FIELD_INT, .meaning = "snapshots printed" },
	{ .name = "sockdiag_failures", .type = FIELD_INT, .meaning = "snapshots whose sock_diag dump failed" },
	{ .name = "interface_failures", .type = FIELD_INT, .meaning = "reads of the interface counters that failed" },
	FIELD_ENV,
	FIELD_END,
};

static const struct schema snapshot_schema = { "host_net_health", SCHEMA_EVENT, snapshot_fields };
static const struct schema summary_schema = { "host_net_summary", SCHEMA_SUMMARY, summary_fields };
static const struct schema *const schemas[] = { &snapshot_schema, &summary_schema, NULL };

/* The cloud NIC's "allowance exceeded" counters (ENA names) and their JSON keys. */
enum { ALLOW_BW_IN, ALLOW_BW_OUT, ALLOW_PPS, ALLOW_CONNTRACK, ALLOW_N };
static const char *const allowance_names[ALLOW_N] = {
	"bw_in_allowance_exceeded", "bw_out_allowance_exceeded", "pps_allowance_exceeded",
	"conntrack_allowance_exceeded",
};
static const char *const allowance_keys[ALLOW_N] = {
	"delta_bw_in_allowance_exceeded", "delta_bw_out_allowance_exceeded",
	"delta_pps_allowance_exceeded", "delta_conntrack_allowance_exceeded",
};

#define MAX_PROCS 32
#define MAX_NUMBER 1000000000ul /* for counts and thresholds: beyond any host */

/* The counters a snapshot reports as deltas since the one before. */
struct counters {
	uint64_t mono_ns;
	bool if_ok;
	struct ifstats ifs;
	uint64_t allow[ALLOW_N];
	bool allow_present[ALLOW_N];
};

struct hostnet {
	struct tracker base;
	double interval_s;
	unsigned long count;
	char iface[IF_NAMESIZE];
	bool iface_given;
	struct fdusage procs[MAX_PROCS];
	int nprocs;
	double warn_port_pct, warn_fd_pct;
	unsigned long warn_close_wait, warn_time_wait_dst, warn_allowance;
	struct sockdiag *sd;
	struct counters prev;
	uint64_t interval_ns, next_ns; /* when the next snapshot is due */
	unsigned long snapshots, sockdiag_failures, if_failures;
};

static int set_procs(struct hostnet *h, const char *arg)
{
	char buf[1024], *tok, *save = NULL;

	if (strlen(arg) >= sizeof(buf))
		return opts_usage_error("invalid --procs: too long");
	strcpy(buf, arg);
	h->nprocs = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strlen(tok) >= FDUSAGE_NAME_MAX)
			return opts_usage_error("invalid --procs name '%s': a process name (comm) has at most %d characters",
						tok, FDUSAGE_NAME_MAX - 1);
		if (h->nprocs == MAX_PROCS)
			return opts_usage_error("too many --procs names (at most %d)", MAX_PROCS);
		snprintf(h->procs[h->nprocs++].name, FDUSAGE_NAME_MAX, "%s", tok);
	}
	if (!h->nprocs)
		return opts_usage_error("invalid --procs '%s': expected a comma list of process names", arg);
	return 0;
}

static void init(struct tracker *t)
{
	struct hostnet *h = (struct hostnet *)t;

	h->interval_s = 30;
	h->warn_port_pct = 80;
	h->warn_fd_pct = 80;
	h->warn_close_wait = 100;
	h->warn_time_wait_dst = 5000;
	h->warn_allowance = 0;
	set_procs(h, "python,gunicorn,uwsgi,nginx");
}

static int option(struct tracker *t, int id, const char *arg)
{
	struct hostnet *h = (struct hostnet *)t;

	switch (id) {
	case OPT_INTERVAL:
		return opts_parse_seconds("interval", arg, &h->interval_s);
	case OPT_COUNT:
		return opts_parse_ulong("count", arg, 1, MAX_NUMBER, &h->count);
	case OPT_INTERFACE:
		if (!*arg || strlen(arg) >= IF_NAMESIZE || !if_nametoindex(arg))
			return opts_usage_error("no interface '%s' in this network namespace (see: ip link)", arg);
		snprintf(h->iface, sizeof(h->iface), "%s", arg);
		h->iface_given = true;
		return 0;
	case OPT_PROCS:
		return set_procs(h, arg);
	case OPT_WARN_PORT_PCT:
		return opts_parse_double("warn-port-pct", arg, 0, 100, &h->warn_port_pct);
	case OPT_WARN_FD_PCT:
		return opts_parse_double("warn-fd-pct", arg, 0, 100, &h->warn_fd_pct);
	case OPT_WARN_CLOSE_WAIT:
		return opts_parse_ulong("warn-close-wait", arg, 0, MAX_NUMBER, &h->warn_close_wait);
	case OPT_WARN_TIME_WAIT_DST:
		return opts_parse_ulong("warn-time-wait-dst", arg, 0, MAX_NUMBER, &h->warn_time_wait_dst);
	case OPT_WARN_ALLOWANCE:
		return opts_parse_ulong("warn-allowance", arg, 0, MAX_NUMBER, &h->warn_allowance);
	}
	return -1;
}

/* The default route's interface, unless --interface named one. */
static int prepare(struct tracker *t)
{
	struct hostnet *h = (struct hostnet *)t;
	char dev[64];

	if (h->iface_given)
		return 0;
	if (netroute_default_iface(dev, sizeof(dev)) == 0 && strlen(dev) < sizeof(h->iface)) {
		snprintf(h->iface, sizeof(h->iface), "%s", dev);
		log_debug("default route leaves by %s", h->iface);
	} else {
		log_warn("no default route in this network namespace: no interface counters (pick one with --interface)");
	}
	return 0;
}

static void read_counters(struct hostnet *h, struct counters *c)
{
	int err;

	memset(c, 0, sizeof(*c));
	c->mono_ns = time_mono_ns();
	if (!h->iface[0])
		return;
	err = ifstats_read(h->iface, &c->ifs);
	c->if_ok = err == 0;
	if (err && h->if_failures++ == 0)
		log_warn("cannot read the counters of %s: %s", h->iface, strerror(-err));
	ethtool_stats_read(h->iface, allowance_names, ALLOW_N, c->allow, c->allow_present);
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

static void add_sockets(struct hostnet *h, json_t *o, json_t *warnings)
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
	int err = sockdiag_count(h->sd, lo, range_ok ? hi : 0, &c);

	ok = err == 0;
	if (!ok && h->sockdiag_failures++ == 0)
		log_error("sock_diag dump failed: %s", strerror(-err));
	record_set_int_or_null(o, "established_inbound", (json_int_t)c.established_inbound, ok);
	record_set_int_or_null(o, "established_outbound", (json_int_t)c.established_outbound, ok);
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		record_set_int_or_null(o, states[i].key, (json_int_t)c.states[states[i].state], ok);
	record_set_int_or_null(o, "tcp_sockets", (json_int_t)c.total, ok);
	record_set_int_or_null(o, "max_time_wait_one_dst", (json_int_t)c.max_time_wait_one_dst, ok);
	json_set_str(o, "max_time_wait_dst", ok && c.max_time_wait_dst[0] ? c.max_time_wait_dst : NULL);
	record_set_int_or_null(o, "ephemeral_sockets", (json_int_t)c.ephemeral, ok && range_ok);
	record_set_int_or_null(o, "port_range_size", (json_int_t)range, range_ok);
	if (ok && range_ok) {
		pct = 100.0 * (double)c.ephemeral / (double)range;
		json_set_real(o, "port_util_pct", pct);
	} else {
		json_object_set_new(o, "port_util_pct", json_null());
	}
	if (!ok)
		return;
	if (range_ok && pct > h->warn_port_pct)
		warn(warnings, "port_exhaustion: %lu sockets on %lu ephemeral ports (%.1f%% > %g%%)",
		     c.ephemeral, range, pct, h->warn_port_pct);
	if (c.states[SOCKDIAG_CLOSE_WAIT] > h->warn_close_wait)
		warn(warnings, "close_wait_buildup: %lu sockets in CLOSE_WAIT (> %lu): an application does not close them",
		     c.states[SOCKDIAG_CLOSE_WAIT], h->warn_close_wait);
	if (c.max_time_wait_one_dst > h->warn_time_wait_dst)
		warn(warnings, "time_wait_concentration: %lu TIME_WAIT sockets to %s (> %lu)",
		     c.max_time_wait_one_dst, c.max_time_wait_dst, h->warn_time_wait_dst);
}

/* Deltas and rates over the interval: null in the first snapshot, which has none. */
static void add_interface(struct hostnet *h, const struct counters *cur, json_t *o, json_t *warnings)
{
	const struct counters *prev = &h->prev;
	bool first = h->snapshots == 0, ok = !first && prev->if_ok && cur->if_ok;
	const struct ifstats *a = &prev->ifs, *b = &cur->ifs;
	double secs = (double)(cur->mono_ns - prev->mono_ns) / 1e9;

	json_set_str(o, "interface", h->iface[0] ? h->iface : NULL);
	for (int i = 0; i < ALLOW_N; i++) {
		bool known = !first && prev->allow_present[i] && cur->allow_present[i];
		uint64_t d = known ? ifstats_delta(prev->allow[i], cur->allow[i]) : 0;

		record_set_int_or_null(o, allowance_keys[i], (json_int_t)d, known);
		if (known && d > h->warn_allowance)
			warn(warnings, "allowance_exceeded: %s rose by %llu on %s (> %lu)",
			     allowance_names[i], (unsigned long long)d, h->iface, h->warn_allowance);
	}
	record_set_int_or_null(o, "delta_rx_bytes", (json_int_t)ifstats_delta(a->rx_bytes, b->rx_bytes), ok);
	record_set_int_or_null(o, "delta_tx_bytes", (json_int_t)ifstats_delta(a->tx_bytes, b->tx_bytes), ok);
	if (ok && secs > 0) {
		json_set_real(o, "rx_bytes_per_s", (double)ifstats_delta(a->rx_bytes, b->rx_bytes) / secs);
		json_set_real(o, "tx_bytes_per_s", (double)ifstats_delta(a->tx_bytes, b->tx_bytes) / secs);
	} else {
		json_object_set_new(o, "rx_bytes_per_s", json_null());
		json_object_set_new(o, "tx_bytes_per_s", json_null());
	}
	record_set_int_or_null(o, "delta_rx_packets", (json_int_t)ifstats_delta(a->rx_packets, b->rx_packets), ok);
	record_set_int_or_null(o, "delta_tx_packets", (json_int_t)ifstats_delta(a->tx_packets, b->tx_packets), ok);
	record_set_int_or_null(o, "delta_rx_dropped", (json_int_t)ifstats_delta(a->rx_dropped, b->rx_dropped), ok);
	record_set_int_or_null(o, "delta_tx_dropped", (json_int_t)ifstats_delta(a->tx_dropped, b->tx_dropped), ok);
	record_set_int_or_null(o, "delta_rx_errors", (json_int_t)ifstats_delta(a->rx_errors, b->rx_errors), ok);
	record_set_int_or_null(o, "delta_tx_errors", (json_int_t)ifstats_delta(a->tx_errors, b->tx_errors), ok);
}

static void add_conntrack(json_t *o)
{
	unsigned long count = 0, max = 0;
	/* absent until nf_conntrack is loaded; per network namespace */
	bool known = netsysctl_read_ulong("net/netfilter/nf_conntrack_count", &count) == 0;

	record_set_int_or_null(o, "conntrack_count", (json_int_t)count, known);
	known = netsysctl_read_ulong("net/netfilter/nf_conntrack_max", &max) == 0;
	record_set_int_or_null(o, "conntrack_max", (json_int_t)max, known);
}

/*
 * fd_usage_json is a JSON text, as in the seed (one string column for a database):
 * a list of {proc, pids, fd_count, fd_limit, fd_util_pct}, the seed's keys, and ours after them.
 */
static void add_fd_usage(struct hostnet *h, json_t *o, json_t *warnings)
{
	json_t *usage = json_array();
	char *text;

	if (fdusage_scan(h->procs, h->nprocs))
		log_warn("cannot list /proc: %s", strerror(errno));
	for (int i = 0; i < h->nprocs; i++) {
		const struct fdusage *e = &h->procs[i];
		json_t *u = json_object(); /* not a record (keycheck.sh) */

		json_set_str(u, "proc", e->name);
		json_set_int(u, "pids", e->pids);
		json_set_int(u, "fd_count", (json_int_t)e->fds);
		record_set_int_or_null(u, "fd_limit", (json_int_t)e->fd_limit, e->fd_limit != 0);
		if (e->max_pid) {
			json_set_real(u, "fd_util_pct", e->util_pct);
			json_set_int(u, "max_pid", e->max_pid);
			json_set_int(u, "max_pid_fds", (json_int_t)e->max_fds);
		} else {
			json_object_set_new(u, "fd_util_pct", json_null());
			json_object_set_new(u, "max_pid", json_null());
			json_object_set_new(u, "max_pid_fds", json_null());
		}
		json_set_int(u, "unreadable", e->unreadable);
		json_array_append_new(usage, u);
		if (e->max_pid && e->util_pct > h->warn_fd_pct)
			warn(warnings, "fd_exhaustion: %s pid %d has %lu of %lu fds open (%.1f%% > %g%%)",
			     e->name, e->max_pid, e->max_fds, e->fd_limit, e->util_pct, h->warn_fd_pct);
	}
	text = json_dumps(usage, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_set_str(o, "fd_usage_json", text ? text : "[]");
	free(text);
	json_decref(usage);
}

static void snapshot(struct hostnet *h)
{
	uint64_t start = time_mono_ns();
	json_t *o = json_object(), *warnings = json_array();
	struct counters cur;
	size_t i;
	json_t *w;

	read_counters(h, &cur);
	json_set_str(o, "metric", snapshot_schema.metric);
	record_set_time(o, cur.mono_ns);
	if (h->snapshots)
		json_set_real(o, "interval_s", (double)(cur.mono_ns - h->prev.mono_ns) / 1e9);
	else
		json_object_set_new(o, "interval_s", json_null());
	add_sockets(h, o, warnings);
	add_interface(h, &cur, o, warnings);
	add_conntrack(o);
	add_fd_usage(h, o, warnings);
	json_object_set_new(o, "warnings", warnings);
	json_set_real(o, "snapshot_ms", (double)(time_mono_ns() - start) / 1e6);
	json_incref(warnings);
	sink_record(h->base.sink, &snapshot_schema, o);
	/* columns have no room for sentences: there the warnings go to stderr, after the row */
	if (!h->base.common->json)
		json_array_foreach(warnings, i, w) log_warn("%s", json_string_value(w));
	json_decref(warnings);
	h->prev = cur;
	h->snapshots++;
}

/* The runner waits for its poll timeout: ours is the time left to the next snapshot. */
static void set_poll(struct hostnet *h, uint64_t now_ns)
{
	uint64_t left_ms = h->next_ns > now_ns ? (h->next_ns - now_ns + 999999) / 1000000 : 0;

	h->base.poll_ms = left_ms > 1000 ? 1000 : (int)left_ms;
}

/* The procs names, "a,b,c", cut with "..." where they do not fit. */
static void procs_list(const struct hostnet *h, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (int i = 0; i < h->nprocs && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "", h->procs[i].name);
	if (used >= len && len > 4)
		strcpy(buf + len - 4, "...");
}

static int start(struct tracker *t)
{
	struct hostnet *h = (struct hostnet *)t;
	char names[64];

	h->sd = sockdiag_open();
	if (!h->sd) {
		log_error("cannot open a sock_diag netlink socket: %s", strerror(errno));
		return -1;
	}
	/* as vmstat: the first snapshot at once, deltas and rates from the second on */
	h->interval_ns = (uint64_t)llround(h->interval_s * 1e9);
	h->next_ns = time_mono_ns();
	set_poll(h, h->next_ns);
	procs_list(h, names, sizeof(names));
	snprintf(t->banner, sizeof(t->banner), "Sampling every %g s (interface %s, fd usage of %s).",
		 h->interval_s, h->iface[0] ? h->iface : "none", names);
	return 0;
}

static int tick(struct tracker *t, uint64_t now_ns)
{
	struct hostnet *h = (struct hostnet *)t;

	if (now_ns >= h->next_ns) {
		snapshot(h);
		/* the schedule starts at the first snapshot and does not drift with late polls */
		h->next_ns = (h->snapshots == 1 ? h->prev.mono_ns : h->next_ns) + h->interval_ns;
		if (h->next_ns < time_mono_ns()) /* a slow snapshot: keep the interval, skip the backlog */
			h->next_ns = time_mono_ns() + h->interval_ns;
		t->done = h->count && h->snapshots >= h->count;
	}
	set_poll(h, time_mono_ns());
	return 0;
}

static void finish(struct tracker *t)
{
	struct hostnet *h = (struct hostnet *)t;
	json_t *sum = json_object();

	json_set_str(sum, "metric", summary_schema.metric);
	json_set_int(sum, "snapshots", (json_int_t)h->snapshots);
	json_set_int(sum, "sockdiag_failures", (json_int_t)h->sockdiag_failures);
	json_set_int(sum, "interface_failures", (json_int_t)h->if_failures);
	sink_summary(t->sink, &summary_schema, sum);
}

static void destroy(struct tracker *t)
{
	sockdiag_close(((struct hostnet *)t)->sd);
}

/* What pymonitor calls it, and the original monitor's flags as its own options. */
static const struct monitor_entry monitor[] = {
	{ .name = "host_net_health",
	  .flags = { { "hnh-interface", "interface", "IFACE", "host_net_health: counters of IFACE (default: the default route's)" },
		     { "hnh-interval", "interval", "SECONDS", "host_net_health: seconds between snapshots (default 30)" },
		     { "hnh-procs", "procs", "LIST", "host_net_health: fd usage of these process names" } } },
	{ 0 },
};

const struct tracker_ops hostnet_tracker = {
	.name = "hostnet",
	.size = sizeof(struct hostnet),
	.options = options,
	.schemas = schemas,
	.monitor = monitor,
	.init = init,
	.option = option,
	.prepare = prepare,
	.start = start,
	.tick = tick,
	.finish = finish,
	.destroy = destroy,
};
