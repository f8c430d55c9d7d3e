/*
 * TCP socket counts by state, IPv4 and IPv6, from netlink sock_diag (what ss
 * reads): one dump per family, no /proc/net/tcp text to parse, and TIME_WAIT and
 * SYN_RECV (request) sockets included as the kernel holds them. Also a process's
 * listening sockets, in its own network namespace.
 */
#ifndef PYEBPF_SOCKDIAG_H
#define PYEBPF_SOCKDIAG_H

#include <netinet/in.h>
#include <stdbool.h>
#include <sys/types.h>

/* Kernel TCP states (include/net/tcp_states.h); index into counts.states. */
enum {
	SOCKDIAG_ESTABLISHED = 1,
	SOCKDIAG_SYN_SENT,
	SOCKDIAG_SYN_RECV,
	SOCKDIAG_FIN_WAIT1,
	SOCKDIAG_FIN_WAIT2,
	SOCKDIAG_TIME_WAIT,
	SOCKDIAG_CLOSE,
	SOCKDIAG_CLOSE_WAIT,
	SOCKDIAG_LAST_ACK,
	SOCKDIAG_LISTEN,
	SOCKDIAG_CLOSING,
	SOCKDIAG_NSTATES = 16,
};

struct sockdiag_counts {
	unsigned long states[SOCKDIAG_NSTATES];
	unsigned long total;
	/* ESTABLISHED split by whether the local port is a listening port */
	unsigned long established_inbound, established_outbound;
	/* non-listening sockets whose local port lies in the ephemeral range */
	unsigned long ephemeral;
	/* the destination (address and port) holding the most TIME_WAIT sockets */
	unsigned long max_time_wait_one_dst;
	char max_time_wait_dst[INET6_ADDRSTRLEN + 8]; /* "ip:port", "[ip6]:port", or "" */
};

struct sockdiag;

struct sockdiag *sockdiag_open(void);
/* Counts every TCP socket of the caller's network namespace. Returns 0, or -errno. */
int sockdiag_count(struct sockdiag *sd, unsigned port_lo, unsigned port_hi,
		   struct sockdiag_counts *out);
void sockdiag_close(struct sockdiag *sd);

/*
 * The inodes of the listening TCP sockets (IPv4 and IPv6) of the network namespace
 * of process pid (entered for the query when it is not the tool's), at most max.
 * Returns how many, or -errno.
 */
int sockdiag_listening_inodes(pid_t pid, unsigned long *inodes, int max);
/*
 * Whether pid holds one of them (a fd of its /proc/PID/fd): whether it is a server.
 * 1 or 0; -errno when that cannot be told: -EPERM when entering its network namespace
 * was refused (CAP_SYS_ADMIN), -EACCES when its fds could not be read (another user's
 * process: CAP_DAC_READ_SEARCH lists them, CAP_SYS_PTRACE reads them).
 */
int sockdiag_holds_listener(pid_t pid);

#endif
