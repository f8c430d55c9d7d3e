/*
 * tcploss: retransmits, RTO losses, resets sent and received, zero-window episodes,
 * from tcp:* tracepoints only, with the socket's addresses and congestion context read
 * through BTF offsets (-DOFF_*). Most of these fire in softirq or timer context, where
 * the current task is whoever happened to run: the socket's owner is learned in process
 * context instead (connect, accept, send) and kept per socket in an LRU map.
 *
 * The programs on the softirq path are raw tracepoints: the kernel skips a (perf event)
 * tracepoint program while any other tracepoint, kprobe or uprobe program runs on the
 * same CPU, ours or anyone's (a softirq that interrupts a program running in a system
 * call or on a socket's backlog): the "missed" of the summary, hundreds a second in a
 * retransmit storm. A raw tracepoint program is skipped only while that same program
 * runs on the CPU. tcp_send_reset stays a tracepoint: without a socket, its addresses
 * come from the packet, which the tracepoint has already parsed.
 *
 * That still happens: tcp_probe and tcp_retransmit_skb also run in process context
 * (the backlog a socket's owner processes in release_sock, with softirqs enabled), and
 * a softirq that retransmits or receives on this CPU meanwhile was skipped (~0.2% of
 * their runs in a storm). Those two hooks therefore have two programs each, run one
 * after the other: the primary, and a backup that takes over exactly the hits the
 * kernel skipped the primary for (see hit_seen).
 * Options: -DPORT, -DFAMILY, -DFILTER_IP_*, -DFILTER_PIDS, -DCONN_COUNTS,
 * -DHAVE_RST_REASON, -DHAVE_RETRANS_ERR.
 */
// The build also checks the text with these options (src/bpf/bpfcheck.sh):
// bpfcheck: -p {pid} --connections --port 80 --filter-ip 10.0.0.7
// bpfcheck: --filter-ip ::1
// bpfcheck: -p {pid} --children
#ifdef HAVE_RST_REASON
/*
 * libbcc 0.26 copies tcp_send_reset's "enum sk_rst_reason reason" field into the
 * args struct verbatim and fails on the incomplete type: declare it (4 bytes, as the
 * format file says). The names are read from the format file in user space.
 */
enum sk_rst_reason { SK_RST_REASON_PLACEHOLDER = 0 };
#endif
#include "tcploss.h"
#define PYEBPF_NCOUNTERS TCPLOSS_CNT_MAX
#define PYEBPF_CNT_CHILDREN_FULL TCPLOSS_CNT_CHILDREN_FULL
#define PYEBPF_CNT_CHILDREN_EXITED TCPLOSS_CNT_CHILDREN_EXITED
#include "pyebpf.bpf.h"

#define TCP_SYN_SENT 2
#define TCP_TIME_WAIT 6
#define TCP_CLOSE 7
#define TCP_NEW_SYN_RECV 12
#define TCP_CA_LOSS 4
#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define SOCK_STREAM 1

/* Who a socket belongs to, learned where the current task is the right one. */
BPF_TABLE("lru_hash", u64, struct task_head, owners, 65536); /* by sock address */
BPF_TABLE("lru_hash", u64, u8, ca_states, 65536);          /* last congestion state seen */
BPF_HASH(zero_windows, u64, u64, 16384);                    /* open episodes: start time */
BPF_ARRAY(zero_windows_open, u64, 1); /* how many: lets tcp_probe skip the lookup when none */

#ifdef CONN_COUNTS
BPF_HASH(conn_counts, struct tcploss_conn_key, struct tcploss_conn_counts, 16384);
BPF_PERCPU_ARRAY(conn_zero, struct tcploss_conn_counts, 1); /* never written: off the 512-byte stack */

/*
 * -c: counted here, before the perf buffer, so the table is exact under any load;
 * events 0 adds only ev's segments (retrans_settle).
 */
static __always_inline void conn_add(const struct tcploss_event *ev, u32 events)
{
	struct tcploss_conn_key k = {};
	struct tcploss_conn_counts *zero, *c;
	u32 kind = ev->kind, idx = 0;

	zero = conn_zero.lookup(&idx);
	if (kind >= TCPLOSS_KIND_MAX || !zero)
		return;
	__builtin_memcpy(k.saddr, ev->saddr, 16);
	__builtin_memcpy(k.daddr, ev->daddr, 16);
	k.family = ev->family;
	k.sport = ev->sport;
	k.dport = ev->dport;
	c = conn_counts.lookup_or_try_init(&k, zero);
	if (!c) {
		counter_add(TCPLOSS_CNT_MAP_FULL, 1);
		return;
	}
	if (events)
		__sync_fetch_and_add(&c->n[kind], events);
	if (kind == TCPLOSS_RETRANSMIT)
		__sync_fetch_and_add(&c->segments, ev->segments);
	if (ev->task.pid) {
		c->pid = ev->task.pid;
		__builtin_memcpy(c->comm, ev->task.comm, sizeof(c->comm));
	}
}
#else
static __always_inline void conn_add(const struct tcploss_event *ev, u32 events) {}
#endif

static __always_inline void conn_count(const struct tcploss_event *ev)
{
	conn_add(ev, 1);
}

/* Addresses and ports as the tracepoint gave them (BCC's args exist only inside a probe). */
struct sock_addrs {
	u16 family, sport, dport;
	u8 saddr[16], daddr[16];
};

/*
 * The tracepoints that pack an address as a 28-byte sockaddr_in/sockaddr_in6: read
 * the parts straight from the record (copies of both would cost 56 bytes of stack).
 */
static __always_inline void addrs_from_sockaddr(struct sock_addrs *a, const u8 *src, const u8 *dst)
{
	u8 port[2];

	bpf_probe_read_kernel(&a->family, 2, src);
	bpf_probe_read_kernel(port, 2, src + 2);
	a->sport = (u16)port[0] << 8 | port[1];
	bpf_probe_read_kernel(port, 2, dst + 2);
	a->dport = (u16)port[0] << 8 | port[1];
	if (a->family == AF_INET6) {
		bpf_probe_read_kernel(a->saddr, 16, src + 8);
		bpf_probe_read_kernel(a->daddr, 16, dst + 8);
	} else {
		bpf_probe_read_kernel(a->saddr, 4, src + 4);
		bpf_probe_read_kernel(a->daddr, 4, dst + 4);
	}
}

/*
 * What the tcp tracepoints store of a full socket (TP_STORE_ADDRS in the kernel's
 * include/trace/events/tcp.h): its family, local and remote port and address; the
 * local port in host order, the remote one in network order.
 */
static __always_inline void addrs_from_sock(struct sock_addrs *a, u64 sk)
{
	u8 port[2];

	bpf_probe_read_kernel(&a->family, 2, (void *)sk + OFF_SKC_FAMILY);
	bpf_probe_read_kernel(&a->sport, 2, (void *)sk + OFF_SKC_NUM);
	bpf_probe_read_kernel(port, 2, (void *)sk + OFF_SKC_DPORT);
	a->dport = (u16)port[0] << 8 | port[1];
	if (a->family == AF_INET6) {
		bpf_probe_read_kernel(a->saddr, 16, (void *)sk + OFF_SKC_V6_RCV_SADDR);
		bpf_probe_read_kernel(a->daddr, 16, (void *)sk + OFF_SKC_V6_DADDR);
	} else {
		bpf_probe_read_kernel(a->saddr, 4, (void *)sk + OFF_SKC_RCV_SADDR);
		bpf_probe_read_kernel(a->daddr, 4, (void *)sk + OFF_SKC_DADDR);
	}
}

#ifdef FILTER_IP_FAMILY
static __always_inline bool addr_is_filter_ip(u16 family, const u8 *addr)
{
	u32 w[4];

	if (family != FILTER_IP_FAMILY)
		return false;
	__builtin_memcpy(w, addr, 16);
	if (family == AF_INET)
		return w[0] == FILTER_IP0;
	return w[0] == FILTER_IP0 && w[1] == FILTER_IP1 && w[2] == FILTER_IP2 && w[3] == FILTER_IP3;
}
#endif

static __always_inline bool conn_wanted(const struct sock_addrs *a)
{
#ifdef FAMILY
	if (a->family != FAMILY)
		return false;
#else
	if (a->family != AF_INET && a->family != AF_INET6)
		return false;
#endif
#ifdef PORT
	if (a->sport != PORT && a->dport != PORT)
		return false;
#endif
#ifdef FILTER_IP_FAMILY
	if (!addr_is_filter_ip(a->family, a->saddr) && !addr_is_filter_ip(a->family, a->daddr))
		return false;
#endif
	return true;
}

static __always_inline u8 sk_state(u64 sk)
{
	u8 state = 0;

	if (sk)
		bpf_probe_read_kernel(&state, 1, (void *)sk + OFF_SKC_STATE);
	return state;
}

/* The congestion context of a full socket (time-wait and request socks are smaller). */
static __always_inline void read_ctx(struct tcploss_event *ev, u64 sk)
{
	const void *tp = (const void *)sk;

	ev->tcp_state = sk_state(sk);
	if (!ev->tcp_state || ev->tcp_state == TCP_TIME_WAIT || ev->tcp_state == TCP_NEW_SYN_RECV)
		return;
	ev->srtt_us = read_u32(tp + OFF_TCP_SOCK_SRTT_US) >> 3; /* the kernel keeps 8 * srtt */
	ev->snd_cwnd = read_u32(tp + OFF_TCP_SOCK_SND_CWND);
	ev->total_retrans = read_u32(tp + OFF_TCP_SOCK_TOTAL_RETRANS);
	ev->lost_out = read_u32(tp + OFF_TCP_SOCK_LOST_OUT);
	ev->snd_wnd = read_u32(tp + OFF_TCP_SOCK_SND_WND);
	ev->rcv_wnd = read_u32(tp + OFF_TCP_SOCK_RCV_WND);
	ev->has_ctx = 1;
}

/* Fills the common part of ev; false when the filters do not want this connection. */
static __always_inline bool event_init(struct tcploss_event *ev, u8 kind, u64 sk,
				       const struct sock_addrs *a)
{
	struct task_head *o;

	if (!conn_wanted(a))
		return false;
	o = sk ? owners.lookup(&sk) : 0;
#ifdef FILTER_PIDS
	if (!o || !pid_wanted(o->pid))
		return false;
#endif
	if (o)
		ev->task = *o;
	ev->task.ts_ns = bpf_ktime_get_ns();
	ev->kind = kind;
	ev->family = a->family;
	ev->sport = a->sport;
	ev->dport = a->dport;
	__builtin_memcpy(ev->saddr, a->saddr, 16);
	__builtin_memcpy(ev->daddr, a->daddr, 16);
	return true;
}

/*
 * The current task owns sk from now on (connect, accept); only_if_new: a send. False
 * when the task is not traced.
 */
static __always_inline bool owner_learn(u64 sk, bool only_if_new)
{
	struct task_head o;

	if (!sk || !pid_wanted(bpf_get_current_pid_tgid() >> 32))
		return false;
	if (only_if_new && owners.lookup(&sk))
		return true;
	task_head_fill(&o);
	owners.update(&sk, &o);
	return true;
}

/*
 * A primary program and its backup (NAME and NAME__backup, attached in that order) see
 * every hit of a hook, except that the kernel skips either one while that same program
 * runs on the CPU: it was interrupted by a softirq that hits the hook again. The two
 * never run at the same time, so at least one of them sees each hit. The primary notes
 * each hit it handled here (per CPU, by socket: one socket's hits never nest, its
 * lock defers them); the backup handles a hit not noted, else forgets the note and
 * those of the hits nested above it. A note whose backup was skipped (it was running)
 * goes stale: it is ignored after a millisecond (hits nest for microseconds), and a
 * full stack starts over. backup_recovered counts the hits the backup handled, so that
 * bpfprog_missed() tells the hits neither program saw (src/bpf/bpfprog.h).
 */
#define HITS_DEPTH 4
enum { HOOK_RETRANSMIT, HOOK_PROBE, HOOK_MAX };
struct hits_seen {
	u64 sk[HITS_DEPTH], ts[HITS_DEPTH];
	u32 n;
};
BPF_PERCPU_ARRAY(hits_seen, struct hits_seen, HOOK_MAX);
BPF_PERCPU_ARRAY(backup_recovered, u64, 1);

static __always_inline void hit_seen(u32 hook, u64 sk)
{
	struct hits_seen *h = hits_seen.lookup(&hook);
	u32 n;

	if (!h)
		return;
	n = h->n;
	if (n >= HITS_DEPTH)
		n = 0;
	n &= HITS_DEPTH - 1;
	h->sk[n] = sk;
	h->ts[n] = bpf_ktime_get_ns();
	h->n = n + 1;
}

/* The backup's question: did the primary handle this hit? */
static __always_inline bool hit_was_seen(u32 hook, u64 sk)
{
	struct hits_seen *h = hits_seen.lookup(&hook);
	u32 zero = 0;
	u64 now, *n;

	if (!h)
		return false;
	now = bpf_ktime_get_ns();
#pragma unroll
	for (int i = HITS_DEPTH - 1; i >= 0; i--)
		if (i < h->n && h->sk[i] == sk && now - h->ts[i] < 1000000) {
			h->n = i;
			return true;
		}
	n = backup_recovered.lookup(&zero);
	if (n)
		*n += 1;
	return false;
}

/* ---- the events ---- */

/*
 * Since 6.13 the tracepoint fires for every attempt, at the end of
 * __tcp_retransmit_skb (net/ipv4/tcp_output.c); before, only for a copy sent. An
 * attempt given up early (err < 0: the previous copy still in the host's queue, no
 * window, no memory, no route) is counted nowhere. Past that point the kernel adds
 * the segments to TcpRetransSegs and to tcp_sock.total_retrans, then transmits; a
 * copy the local stack dropped (err > 0 from the device, or err < 0 from netfilter, a
 * clone failure...) is also added to TCPRetransFail. err alone cannot tell the two
 * kinds of err < 0 apart, but total_retrans grows exactly where TcpRetransSegs does:
 * its growth since the socket's previous hit is what the kernel counted.
 *
 * That growth is also what an event reports, not the skb's segment count: on 6.18,
 * in retransmit storms, a socket's total_retrans now and then grows by tens to
 * hundreds of segments more between two hits than the later skb holds. ftrace sees
 * more hits of the tracepoint than our programs were run for or skipped at; the
 * kernel counts no miss for them (tcploss(8), STABILITY, has the measurement).
 * Counting the growth keeps the events' sum equal to TcpRetransSegs.
 * tcp_rtx_synack of a fast-open socket adds to both as well; tcp_disconnect zeroes
 * total_retrans.
 */
BPF_TABLE("lru_hash", u64, u32, retrans_seen, 65536); /* by sock: total_retrans last seen */

/* The early returns of __tcp_retransmit_skb, for a socket without a previous attempt. */
static __always_inline bool early_errno(int err)
{
	return err == -16 /* EBUSY */ || err == -11 /* EAGAIN */ || err == -22 /* EINVAL */ ||
	       err == -12 /* ENOMEM */ || err == -113 /* EHOSTUNREACH */;
}

/*
 * The segments the kernel counted in TcpRetransSegs for sk since its previous hit,
 * this attempt's included (0: it counted none); skb_segs is this attempt's skb's count,
 * used at a socket's first hit.
 */
static __always_inline u32 retrans_segments(u64 sk, u32 skb_segs, int err)
{
	u32 total = read_u32((const void *)sk + OFF_TCP_SOCK_TOTAL_RETRANS), *seen, got;

	seen = retrans_seen.lookup(&sk);
	if (!seen)
		got = err >= 0 || !early_errno(err) ? skb_segs : 0;
	else
		got = total >= *seen ? total - *seen : total; /* less: tcp_disconnect zeroed it */
	retrans_seen.update(&sk, &total);
	return got;
}

/* tcp_retransmit_skb(const struct sock *sk, const struct sk_buff *skb, int err) */
static __always_inline void retransmit_hit(struct bpf_raw_tracepoint_args *ctx)
{
	u64 sk = ctx->args[0];
	const void *skb = (const void *)ctx->args[1];
	struct tcploss_event ev = {};
	struct sock_addrs a = {};
	u16 segs = 0;

	addrs_from_sock(&a, sk);
	if (!event_init(&ev, TCPLOSS_RETRANSMIT, sk, &a))
		return;
	/* tcp_skb_pcount(): TCP_SKB_CB(skb)->tcp_gso_segs, in skb->cb */
	bpf_probe_read_kernel(&segs, sizeof(segs), skb + OFF_SK_BUFF_CB + OFF_TCP_SKB_CB_GSO_SEGS);
#ifdef HAVE_RETRANS_ERR
	int err = (int)ctx->args[2];
#else
	int err = 0;
#endif
	ev.segments = retrans_segments(sk, segs, err);
	if (!ev.segments) {
		/* err >= 0 and nothing counted: a hit the other program of the pair handled */
		if (err < 0) {
			counter_add(TCPLOSS_CNT_RETRANS_FAILED, 1);
			counter_add(TCPLOSS_CNT_RETRANS_FAILED_SEGS, segs);
		}
		return;
	}
	if (err) { /* TCPRetransFail gets this attempt's segments */
		counter_add(TCPLOSS_CNT_RETRANS_DROPPED, 1);
		counter_add(TCPLOSS_CNT_RETRANS_DROPPED_SEGS, segs);
	}
	read_ctx(&ev, sk);
	conn_count(&ev);
	emit_event(ctx, &ev, sizeof(ev));
}

RAW_TRACEPOINT_PROBE(tcp_retransmit_skb)
{
	retransmit_hit(ctx);
	hit_seen(HOOK_RETRANSMIT, ctx->args[0]);
	return 0;
}

int raw_tracepoint__tcp_retransmit_skb__backup(struct bpf_raw_tracepoint_args *ctx)
{
	if (!hit_was_seen(HOOK_RETRANSMIT, ctx->args[0]))
		retransmit_hit(ctx);
	return 0;
}

/* tcp_cong_state_set(struct sock *sk, const u8 ca_state) */
RAW_TRACEPOINT_PROBE(tcp_cong_state_set)
{
	u64 sk = ctx->args[0];
	u8 state = (u8)ctx->args[1], *prev = ca_states.lookup(&sk);
	bool entering = state == TCP_CA_LOSS && !(prev && *prev == TCP_CA_LOSS);
	struct tcploss_event ev = {};
	struct sock_addrs a = {};

	/* fires before icsk_ca_state changes; repeated RTOs set Loss again: report the entry */
	ca_states.update(&sk, &state);
	if (!entering)
		return 0;
	addrs_from_sock(&a, sk);
	if (!event_init(&ev, TCPLOSS_LOSS, sk, &a))
		return 0;
	read_ctx(&ev, sk);
	conn_count(&ev);
	emit_event(ctx, &ev, sizeof(ev));
	return 0;
}

TRACEPOINT_PROBE(tcp, tcp_send_reset)
{
	u64 sk = (u64)args->skaddr; /* NULL when no socket matched (a closed port) */
	struct tcploss_event ev = {};
	struct sock_addrs a = {};

	/* without a socket saddr is still the RST's sender: the tracepoint swaps the skb's */
	addrs_from_sockaddr(&a, (const u8 *)args->saddr, (const u8 *)args->daddr);
	if (!event_init(&ev, TCPLOSS_RESET_SENT, sk, &a))
		return 0;
#ifdef HAVE_RST_REASON
	ev.reason = (u32)args->reason;
	ev.has_reason = 1;
#endif
	read_ctx(&ev, sk);
	conn_count(&ev);
	emit_event(args, &ev, sizeof(ev));
	return 0;
}

/* tcp_receive_reset(struct sock *sk) */
RAW_TRACEPOINT_PROBE(tcp_receive_reset)
{
	u64 sk = ctx->args[0];
	struct tcploss_event ev = {};
	struct sock_addrs a = {};

	addrs_from_sock(&a, sk);
	if (!event_init(&ev, TCPLOSS_RESET_RECEIVED, sk, &a))
		return 0;
	read_ctx(&ev, sk);
	conn_count(&ev);
	emit_event(ctx, &ev, sizeof(ev));
	return 0;
}

/* ev: the caller's (zeroed) record: one per program keeps under the 512-byte stack. */
static __always_inline void zero_window_ended(void *ctx, u64 sk, const struct sock_addrs *a,
					      struct tcploss_event *ev)
{
	u64 *start = zero_windows.lookup(&sk), began, *open;
	u32 zero = 0;

	if (!start)
		return;
	began = *start;
	if (zero_windows.delete(&sk))
		return; /* another CPU ended it first */
	open = zero_windows_open.lookup(&zero);
	if (open)
		__sync_fetch_and_add(open, -1);
	if (!event_init(ev, TCPLOSS_ZERO_WINDOW_END, sk, a))
		return;
	ev->duration_ns = ev->task.ts_ns - began;
	read_ctx(ev, sk);
	conn_count(ev);
	emit_event(ctx, ev, sizeof(*ev));
}

/*
 * tcp_probe(struct sock *sk, const struct sk_buff *skb) fires for every segment an
 * established socket receives, before the segment is processed (tcp_sock still has
 * the old window): read the window the segment itself advertises from its TCP header.
 * Zero is zero whatever the scale.
 */
static __always_inline void probe_hit(struct bpf_raw_tracepoint_args *ctx)
{
	u64 sk = ctx->args[0], now;
	const void *skb = (const void *)ctx->args[1];
	const u8 *th = (const u8 *)read_u64(skb + OFF_SK_BUFF_DATA);
	struct tcploss_event ev = {};
	struct sock_addrs a = {};
	u8 hdr[16];

	if (!th || bpf_probe_read_kernel(hdr, sizeof(hdr), th))
		return;
	/* an ACK without SYN or RST (a RST carries window 0 and means something else) */
	if ((hdr[13] & 0x16) != 0x10)
		return;
	if (hdr[14] | hdr[15]) {
		u32 zero = 0;
		u64 *open = zero_windows_open.lookup(&zero);
		/* the common case: an open window and no episode anywhere */
		if ((open && !*open) || !zero_windows.lookup(&sk))
			return;
		addrs_from_sock(&a, sk);
		zero_window_ended(ctx, sk, &a, &ev);
		return;
	}
	if (zero_windows.lookup(&sk))
		return;
	addrs_from_sock(&a, sk);
	if (!event_init(&ev, TCPLOSS_ZERO_WINDOW, sk, &a))
		return;
	now = ev.task.ts_ns;
	if (zero_windows.insert(&sk, &now)) {
		if (!zero_windows.lookup(&sk)) /* else another CPU started it first */
			counter_add(TCPLOSS_CNT_MAP_FULL, 1);
		return;
	}
	{
		u32 zero = 0;
		u64 *open = zero_windows_open.lookup(&zero);
		if (open)
			__sync_fetch_and_add(open, 1);
	}
	read_ctx(&ev, sk);
	ev.snd_wnd = 0; /* what this ACK advertises; tcp_sock still has the old window */
	conn_count(&ev);
	emit_event(ctx, &ev, sizeof(ev));
}

RAW_TRACEPOINT_PROBE(tcp_probe)
{
	probe_hit(ctx);
	hit_seen(HOOK_PROBE, ctx->args[0]);
	return 0;
}

int raw_tracepoint__tcp_probe__backup(struct bpf_raw_tracepoint_args *ctx)
{
	if (!hit_was_seen(HOOK_PROBE, ctx->args[0]))
		probe_hit(ctx);
	return 0;
}

/*
 * A socket's segments counted after its last hit that a program saw (its last hits
 * the kernel ran no program for): into the table, not as an event, at its end.
 */
static __always_inline void retrans_settle(u64 sk)
{
	u32 *seen = retrans_seen.lookup(&sk), total;
	struct tcploss_event ev = {};
	struct sock_addrs a = {};

	if (!seen)
		return;
	total = read_u32((const void *)sk + OFF_TCP_SOCK_TOTAL_RETRANS);
	if (total <= *seen)
		return;
	addrs_from_sock(&a, sk);
	if (!event_init(&ev, TCPLOSS_RETRANSMIT, sk, &a))
		return;
	ev.segments = total - *seen;
	counter_add(TCPLOSS_CNT_RETRANS_UNSEEN_SEGS, ev.segments);
	conn_add(&ev, 0);
}

/* tcp_destroy_sock(struct sock *sk), its last moment: close an open zero-window episode, forget it. */
RAW_TRACEPOINT_PROBE(tcp_destroy_sock)
{
	u64 sk = ctx->args[0];
	struct tcploss_event ev = {};
	struct sock_addrs a = {};

	if (zero_windows.lookup(&sk)) {
		addrs_from_sock(&a, sk);
		zero_window_ended(ctx, sk, &a, &ev);
	}
	retrans_settle(sk);
	owners.delete(&sk);
	ca_states.delete(&sk);
	retrans_seen.delete(&sk);
	return 0;
}

/* ---- learning who owns a socket, in process context ---- */

/*
 * connect(): CLOSE -> SYN_SENT runs in the connecting thread. The socket has
 * retransmitted nothing yet: its count starts at 0 (retrans_segments), so that a first
 * hit the kernel ran no program for is still counted at the next.
 */
TRACEPOINT_PROBE(sock, inet_sock_set_state)
{
	u64 sk = (u64)args->skaddr;
	u32 none = 0;

	if (args->protocol == IPPROTO_TCP && args->oldstate == TCP_CLOSE &&
	    args->newstate == TCP_SYN_SENT && owner_learn(sk, false))
		retrans_seen.update(&sk, &none);
	return 0;
}

/* The TCP socket behind fd in the current task: task->files->fdt->fd[fd]->private_data->sk. */
static __always_inline u64 current_fd_tcp_sock(long fd)
{
	u64 sk = current_fd_sock(fd);
	u16 family = 0, proto = 0, type = 0;

	if (!sk)
		return 0;
	/* sendto/sendmsg on a UDP or unix socket also get here */
	bpf_probe_read_kernel(&family, 2, (void *)sk + OFF_SKC_FAMILY);
	bpf_probe_read_kernel(&proto, 2, (void *)sk + OFF_SK_PROTOCOL);
	bpf_probe_read_kernel(&type, 2, (void *)sk + OFF_SK_TYPE);
	if ((family != AF_INET && family != AF_INET6) || proto != IPPROTO_TCP || type != SOCK_STREAM)
		return 0;
	return sk;
}

TRACEPOINT_PROBE(syscalls, sys_exit_accept4)
{
	if (args->ret >= 0)
		owner_learn(current_fd_tcp_sock(args->ret), false);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_accept)
{
	if (args->ret >= 0)
		owner_learn(current_fd_tcp_sock(args->ret), false);
	return 0;
}

/*
 * Sockets made before tracing started: the first send names the owner. A process's
 * (pid, fd) is walked once: this runs in process context, and while it runs a softirq
 * retransmit on the same CPU cannot run any BPF program (the kernel skips it, see
 * "missed" in the summary), so it must stay short.
 */
BPF_TABLE("lru_hash", u64, u8, sends_seen, 16384);

static __always_inline void send_learn(long fd)
{
	u64 key = (bpf_get_current_pid_tgid() & 0xffffffff00000000ull) | (u32)fd;
	u8 one = 1;

	if (sends_seen.lookup(&key))
		return;
	sends_seen.update(&key, &one);
	owner_learn(current_fd_tcp_sock(fd), true);
}

TRACEPOINT_PROBE(syscalls, sys_enter_sendto)
{
	send_learn(args->fd);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_sendmsg)
{
	send_learn(args->fd);
	return 0;
}
