/* tcphandshake: the event record, shared by the BPF text and tools/tcphandshake.c. */
#ifndef PYEBPF_TCPHANDSHAKE_H
#define PYEBPF_TCPHANDSHAKE_H

#include "pyebpf.h"

enum tcphs_kind { TCPHS_CONNECT = 1, TCPHS_ACCEPT = 2 };

enum tcphs_outcome {
	TCPHS_SUCCESS = 1,    /* connect: SYN_SENT -> ESTABLISHED; accept: the app accepted it */
	TCPHS_REFUSED = 2,    /* connect: a RST answered the SYN */
	TCPHS_TIMEOUT = 3,    /* connect: closed in SYN_SENT without a RST */
	TCPHS_UNACCEPTED = 4, /* accept: reset in the accept queue, or still there at exit */
};

/* The program's counters (pyebpf.h): things that did not go as planned. */
#define TCPHS_COUNTERS(X)                                                                       \
	X(TCPHS_CNT_MAP_FULL, "map_full", "handshakes not followed because a tracking map was full") \
	X(TCPHS_CNT_NO_SYN, "accepted_without_syn", "accepted connections whose first SYN was not seen") \
	X(TCPHS_CNT_CHILDREN_FULL, "children_not_followed",                                    \
	  "--children: new child processes that could not be followed (the pid filter was full)") \
	X(TCPHS_CNT_CHILDREN_EXITED, "children_exited", "--children: followed children that exited")
enum tcphs_counter { TCPHS_COUNTERS(PYEBPF_COUNTER_ID) TCPHS_CNT_MAX };

struct tcphs_event {
	struct task_head task; /* ts_ns: the end of the handshake / the accept */
	__u64 handshake_ns;    /* connect: SYN_SENT time; accept: first SYN seen to ESTABLISHED; 0 unknown */
	__u64 accept_queue_ns; /* accept: ESTABLISHED to the app's accept(); 0 when not accepted */
	__u32 srtt_us;
	__u16 family;          /* AF_INET or AF_INET6 */
	__u16 sport, dport;    /* local and remote port, host order */
	__u8 kind;             /* enum tcphs_kind */
	__u8 outcome;          /* enum tcphs_outcome */
	__u8 saddr[16];        /* local address (IPv4 in the first 4 bytes) */
	__u8 daddr[16];        /* remote address */
};

#endif
