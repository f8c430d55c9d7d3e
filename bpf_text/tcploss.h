/* tcploss: the event record, shared by the BPF text and src/trackers/tcploss.c. */
#ifndef PYEBPF_TCPLOSS_H
#define PYEBPF_TCPLOSS_H

#include "pyebpf.h"

enum tcploss_kind {
	TCPLOSS_RETRANSMIT = 1,     /* tcp:tcp_retransmit_skb the kernel counted in TcpRetransSegs */
	TCPLOSS_LOSS = 2,           /* tcp:tcp_cong_state_set entering TCP_CA_Loss (an RTO) */
	TCPLOSS_RESET_SENT = 3,     /* tcp:tcp_send_reset */
	TCPLOSS_RESET_RECEIVED = 4, /* tcp:tcp_receive_reset */
	TCPLOSS_ZERO_WINDOW = 5,    /* the peer advertised a zero window: an episode starts */
	TCPLOSS_ZERO_WINDOW_END = 6, /* the window opened again, or the socket went away */
	TCPLOSS_KIND_MAX = 7,
};

/*
 * The program's counters (pyebpf.h): what the events alone do not show. Two lists,
 * because the summary puts them in two places.
 */
#define TCPLOSS_RETRANS_COUNTERS(X)                                                               \
	X(TCPLOSS_CNT_RETRANS_DROPPED, "retransmit_dropped",                                      \
	  "retransmit events whose copy the local stack dropped after the kernel counted it")    \
	X(TCPLOSS_CNT_RETRANS_DROPPED_SEGS, "retransmit_dropped_segments",                        \
	  "their segments (the kernel's TCPRetransFail)")                                         \
	X(TCPLOSS_CNT_RETRANS_FAILED, "retransmit_failed",                                        \
	  "retransmit attempts given up before sending: no event, in no kernel counter")          \
	X(TCPLOSS_CNT_RETRANS_FAILED_SEGS, "retransmit_failed_segments", "their segments")       \
	X(TCPLOSS_CNT_RETRANS_UNSEEN_SEGS, "retransmit_unseen_segments",                          \
	  "segments retransmitted after a socket's last hit seen, added to -c at its close")
#define TCPLOSS_MAP_COUNTERS(X) \
	X(TCPLOSS_CNT_MAP_FULL, "map_full", "a tracking map was full: an episode or a connection was not followed") \
	X(TCPLOSS_CNT_CHILDREN_FULL, "children_not_followed",                                    \
	  "--children: new child processes that could not be followed (the pid filter was full)") \
	X(TCPLOSS_CNT_CHILDREN_EXITED, "children_exited", "--children: followed children that exited")
#define TCPLOSS_COUNTERS(X) TCPLOSS_RETRANS_COUNTERS(X) TCPLOSS_MAP_COUNTERS(X)
enum tcploss_counter { TCPLOSS_COUNTERS(PYEBPF_COUNTER_ID) TCPLOSS_CNT_MAX };

struct tcploss_event {
	/* the socket's owner (pid 0 when unknown); ts_ns: when the event fired */
	struct task_head task;
	__u64 duration_ns; /* zero_window_end: how long the window stayed zero */
	__u32 srtt_us, snd_cwnd, total_retrans, lost_out, snd_wnd, rcv_wnd; /* valid when has_ctx */
	__u32 segments;    /* retransmit: segments the kernel counted (tcploss.bpf.c, retrans_segments) */
	__u32 reason;      /* reset_sent: enum sk_rst_reason; valid when has_reason */
	__u16 family;      /* AF_INET or AF_INET6 */
	__u16 sport, dport; /* local and remote port, host order */
	__u8 kind;         /* enum tcploss_kind */
	__u8 tcp_state;    /* sk_state (TCP_ESTABLISHED = 1 ...); 0 when there is no socket */
	__u8 has_ctx;      /* the tcp_sock fields above were read (a full socket) */
	__u8 has_reason;
	__u8 saddr[16];    /* local address (IPv4 in the first 4 bytes) */
	__u8 daddr[16];    /* remote address */
};

/* -c: per-connection counts kept in the kernel, exact even when events are lost. */
struct tcploss_conn_key {
	__u8 saddr[16], daddr[16];
	__u16 family, sport, dport, pad;
};

struct tcploss_conn_counts {
	__u64 n[TCPLOSS_KIND_MAX]; /* events by enum tcploss_kind */
	__u64 segments;            /* retransmitted segments */
	__u32 pid, pad;            /* the last known owner */
	char comm[16];
};

#endif
