/*
 * tcphandshake: connect and accept handshake latency from tracepoints only.
 * Outbound: CLOSE->SYN_SENT (in the connecting thread) to ESTABLISHED or CLOSE.
 * Inbound: the first SYN seen arriving (net:netif_receive_skb) to the child socket's
 * ESTABLISHED, then to the application's accept() (syscall exit, in its thread).
 * Options: -DPORT, -DFAMILY, -DMIN_NS, -DFILTER_PIDS; offsets -DOFF_* from BTF.
 */
// The build also checks the text with these options (src/bpf/bpfcheck.sh):
// bpfcheck: -p {pid} --port 80 --min-us 5 -4
// bpfcheck: -6
// bpfcheck: -p {pid} --children
#include "tcphandshake.h"
#define PYEBPF_NCOUNTERS TCPHS_CNT_MAX
#define PYEBPF_CNT_CHILDREN_FULL TCPHS_CNT_CHILDREN_FULL
#define PYEBPF_CNT_CHILDREN_EXITED TCPHS_CNT_CHILDREN_EXITED
#include "pyebpf.bpf.h"

#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_SYN_RECV 3
#define TCP_CLOSE 7
#define TCP_LISTEN 10
#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6

/* the connecting thread, and when (ts_ns) it sent the SYN */
struct connect_start {
	struct task_head task;
};

/* a SYN as it travelled: saddr/sport are the client's */
struct flow_key {
	u8 saddr[16];
	u8 daddr[16];
	u16 sport, dport;
	u32 family;
};


BPF_HASH(connects, u64, struct connect_start, 16384);   /* by sock address */
BPF_HASH(resets, u64, u8, 16384);                       /* connects that got a RST */
BPF_TABLE("lru_hash", struct flow_key, u64, syns, 16384); /* first SYN time */
/* children not yet accepted: the event so far, ts_ns = when it became ESTABLISHED */
BPF_HASH(accept_queue, u64, struct tcphs_event, 16384);

/* who listens on a port, learned in listen(): names the owner of unaccepted connections */
struct listen_key {
	u32 family;
	u32 port;
};
struct listener {
	struct task_head task;
};
BPF_HASH(listeners, struct listen_key, struct listener, 4096);


static __always_inline bool port_wanted(u16 sport, u16 dport)
{
#ifdef PORT
	return sport == PORT || dport == PORT;
#else
	return true;
#endif
}

static __always_inline bool family_wanted(u16 family)
{
#ifdef FAMILY
	return family == FAMILY;
#else
	return family == AF_INET || family == AF_INET6;
#endif
}

/*
 * The socket's addresses and ports from sock:inet_sock_set_state's own copy (BCC
 * declares the tracepoint's struct only inside its probe, so helpers get this).
 */
struct sock_addrs {
	u16 family, sport, dport;
	u8 saddr[16], daddr[16];
};

static __always_inline void fill_addrs(struct tcphs_event *ev, const struct sock_addrs *a)
{
	ev->family = a->family;
	ev->sport = a->sport;
	ev->dport = a->dport;
	__builtin_memcpy(ev->saddr, a->saddr, 16);
	__builtin_memcpy(ev->daddr, a->daddr, 16);
}

static __always_inline u32 srtt_us(u64 sk)
{
	/* tcp_sock.srtt_us holds the smoothed RTT times 8 */
	return read_u32((void *)sk + OFF_TCP_SOCK_SRTT_US) >> 3;
}

static __always_inline void connect_started(u64 sk)
{
	struct connect_start s;

	if (!pid_wanted(bpf_get_current_pid_tgid() >> 32))
		return;
	task_head_fill(&s.task);
	if (connects.insert(&sk, &s))
		counter_add(TCPHS_CNT_MAP_FULL, 1);
}

static __always_inline void connect_ended(void *ctx, u64 sk, int newstate,
					  const struct sock_addrs *a)
{
	struct connect_start *s = connects.lookup(&sk);
	struct tcphs_event ev = {};

	if (!s)
		return;
	ev.task = s->task;
	ev.task.ts_ns = bpf_ktime_get_ns();
	ev.handshake_ns = ev.task.ts_ns - s->task.ts_ns;
	ev.kind = TCPHS_CONNECT;
	connects.delete(&sk);
	if (newstate == TCP_ESTABLISHED) {
		ev.outcome = TCPHS_SUCCESS;
		ev.srtt_us = srtt_us(sk);
	} else {
		ev.outcome = resets.lookup(&sk) ? TCPHS_REFUSED : TCPHS_TIMEOUT;
	}
	resets.delete(&sk);
	fill_addrs(&ev, a);
	if (!port_wanted(ev.sport, ev.dport))
		return;
#ifdef MIN_NS
	if (ev.outcome == TCPHS_SUCCESS && ev.handshake_ns < MIN_NS)
		return;
#endif
	emit_event(ctx, &ev, sizeof(ev));
}

/* The server side's child socket is ESTABLISHED: the handshake is over. */
static __always_inline void child_established(u64 sk,
					      const struct sock_addrs *a)
{
	struct tcphs_event ev = { .task.ts_ns = bpf_ktime_get_ns(), .kind = TCPHS_ACCEPT };
	struct listen_key lk = { .family = a->family, .port = a->sport };
	struct listener *owner;
	struct flow_key k = {};
	u64 *syn;

	fill_addrs(&ev, a);
	if (!port_wanted(ev.sport, ev.dport))
		return;
	k.family = ev.family;
	k.sport = ev.dport;
	k.dport = ev.sport;
	__builtin_memcpy(k.saddr, ev.daddr, 16);
	__builtin_memcpy(k.daddr, ev.saddr, 16);
	syn = syns.lookup(&k);
	if (syn) {
		ev.handshake_ns = ev.task.ts_ns - *syn;
		syns.delete(&k);
	} else {
		counter_add(TCPHS_CNT_NO_SYN, 1);
	}
	ev.srtt_us = srtt_us(sk);
	owner = listeners.lookup(&lk);
	if (owner) {
		__u64 established = ev.task.ts_ns;
		ev.task = owner->task;
		ev.task.ts_ns = established;
	}
	if (accept_queue.insert(&sk, &ev))
		counter_add(TCPHS_CNT_MAP_FULL, 1);
}

static __always_inline void listen_started(const struct sock_addrs *a)
{
	struct listen_key k = { .family = a->family, .port = a->sport };
	struct listener l;

	task_head_fill(&l.task);
	listeners.update(&k, &l);
}

/*
 * A child reset while still in the accept queue: nobody will accept it. Its pid is
 * the listener's, when listen() was seen; with -p, only known wanted listeners count.
 */
static __always_inline void child_closed(void *ctx, u64 sk)
{
	struct tcphs_event *e = accept_queue.lookup(&sk);
	struct tcphs_event ev;

	if (!e)
		return;
	ev = *e;
	accept_queue.delete(&sk);
#ifdef FILTER_PIDS
	if (!ev.task.pid || !pid_wanted(ev.task.pid))
		return;
#endif
	ev.task.ts_ns = bpf_ktime_get_ns();
	ev.outcome = TCPHS_UNACCEPTED;
	emit_event(ctx, &ev, sizeof(ev));
}

TRACEPOINT_PROBE(sock, inet_sock_set_state)
{
	u64 sk = (u64)args->skaddr;
	int oldstate = args->oldstate, newstate = args->newstate;

	struct sock_addrs a = { .family = args->family, .sport = args->sport, .dport = args->dport };

	if (args->protocol != IPPROTO_TCP || !family_wanted(args->family))
		return 0;
	if (a.family == AF_INET) {
		__builtin_memcpy(a.saddr, args->saddr, 4);
		__builtin_memcpy(a.daddr, args->daddr, 4);
	} else {
		__builtin_memcpy(a.saddr, args->saddr_v6, 16);
		__builtin_memcpy(a.daddr, args->daddr_v6, 16);
	}
	if (oldstate == TCP_CLOSE && newstate == TCP_SYN_SENT)
		connect_started(sk);
	else if (oldstate == TCP_SYN_SENT)
		connect_ended(args, sk, newstate, &a);
	else if (oldstate == TCP_SYN_RECV && newstate == TCP_ESTABLISHED)
		child_established(sk, &a);
	else if (newstate == TCP_CLOSE)
		child_closed(args, sk);
	else if (newstate == TCP_LISTEN)
		listen_started(&a);
	return 0;
}

TRACEPOINT_PROBE(tcp, tcp_receive_reset)
{
	u64 sk = (u64)args->skaddr;
	u8 one = 1;

	if (connects.lookup(&sk))
		resets.update(&sk, &one);
	return 0;
}

/* Remembers when each connection's first SYN arrived (retransmitted SYNs keep it). */
TRACEPOINT_PROBE(net, netif_receive_skb)
{
	const void *skb = args->skbaddr;
	const u8 *data = (const u8 *)read_u64(skb + OFF_SK_BUFF_DATA);
	struct flow_key k = {};
	u8 ip[40], tcp[14];
	u32 l4;
	u64 now;

	if (bpf_probe_read_kernel(ip, 20, data))
		return 0;
	if ((ip[0] >> 4) == 4) {
		if (ip[9] != IPPROTO_TCP)
			return 0;
		l4 = (ip[0] & 0xf) * 4;
		k.family = AF_INET;
		__builtin_memcpy(k.saddr, &ip[12], 4);
		__builtin_memcpy(k.daddr, &ip[16], 4);
	} else if ((ip[0] >> 4) == 6) {
		if (bpf_probe_read_kernel(ip, 40, data) || ip[6] != IPPROTO_TCP)
			return 0;
		l4 = 40;
		k.family = AF_INET6;
		__builtin_memcpy(k.saddr, &ip[8], 16);
		__builtin_memcpy(k.daddr, &ip[24], 16);
	} else {
		return 0;
	}
	if (!family_wanted(k.family) || bpf_probe_read_kernel(tcp, sizeof(tcp), data + (l4 & 0x3f)))
		return 0;
	if ((tcp[13] & 0x12) != 0x02) /* SYN without ACK */
		return 0;
	k.sport = (u16)tcp[0] << 8 | tcp[1];
	k.dport = (u16)tcp[2] << 8 | tcp[3];
	if (!port_wanted(k.sport, k.dport))
		return 0;
	now = bpf_ktime_get_ns();
	syns.insert(&k, &now);
	return 0;
}

static __always_inline void accepted(void *ctx, long fd)
{
	struct tcphs_event *e, ev;
	u64 sk, established;

	if (fd < 0)
		return;
	sk = current_fd_sock(fd);
	e = sk ? accept_queue.lookup(&sk) : 0;
	if (!e)
		return;
	ev = *e;
	/* taken off the queue whoever accepts it; reported only for the processes wanted */
	accept_queue.delete(&sk);
	if (!pid_wanted(bpf_get_current_pid_tgid() >> 32))
		return;
#ifdef MIN_NS
	if (ev.handshake_ns && ev.handshake_ns < MIN_NS)
		return;
#endif
	/* the accepting thread, now */
	established = ev.task.ts_ns;
	task_head_fill(&ev.task);
	ev.accept_queue_ns = ev.task.ts_ns - established;
	ev.outcome = TCPHS_SUCCESS;
	emit_event(ctx, &ev, sizeof(ev));
}

TRACEPOINT_PROBE(syscalls, sys_exit_accept4)
{
	accepted(args, args->ret);
	return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_accept)
{
	accepted(args, args->ret);
	return 0;
}
