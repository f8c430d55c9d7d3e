/* tcphandshake: the event record, shared by the BPF text and tools/tcphandshake.c. */
#ifndef PYEBPF_TCPHANDSHAKE_H
#define PYEBPF_TCPHANDSHAKE_H

enum tcphs_kind { TCPHS_CONNECT = 1, TCPHS_ACCEPT = 2 };

enum tcphs_outcome {
	TCPHS_SUCCESS = 1,    /* connect: SYN_SENT -> ESTABLISHED; accept: the app accepted it */
	TCPHS_REFUSED = 2,    /* connect: a RST answered the SYN */
	TCPHS_TIMEOUT = 3,    /* connect: closed in SYN_SENT without a RST */
	TCPHS_UNACCEPTED = 4, /* accept: reset in the accept queue, or still there at exit */
};

/* Indexes into the "counters" array: things that did not go as planned. */
enum tcphs_counter {
	TCPHS_CNT_MAP_FULL = 0, /* a tracking map was full: a handshake was not followed */
	TCPHS_CNT_NO_SYN = 1,   /* an accepted connection whose SYN was not seen */
	TCPHS_CNT_MAX = 2,
};

struct tcphs_event {
	__u64 ts_ns;           /* bpf_ktime_get_ns() at the end of the handshake / the accept */
	__u64 handshake_ns;    /* connect: SYN_SENT time; accept: first SYN seen to ESTABLISHED; 0 unknown */
	__u64 accept_queue_ns; /* accept: ESTABLISHED to the app's accept(); 0 when not accepted */
	__u32 pid, tid;        /* host ids; 0 when unknown */
	__u32 nspid, nstid;    /* ids in the task's own PID namespace */
	__u32 srtt_us;
	__u16 family;          /* AF_INET or AF_INET6 */
	__u16 sport, dport;    /* local and remote port, host order */
	__u8 kind;             /* enum tcphs_kind */
	__u8 outcome;          /* enum tcphs_outcome */
	__u8 saddr[16];        /* local address (IPv4 in the first 4 bytes) */
	__u8 daddr[16];        /* remote address */
	char comm[16];
};

#endif
