#define _GNU_SOURCE
#include "sockdiag.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inetfmt.h"

/* A dump of 50k sockets is ~250 of these; bigger reads mean fewer syscalls. */
#define RECV_BUF (256 * 1024)

/* TIME_WAIT sockets per destination: open addressing, cleared per snapshot. */
struct tw_slot {
	uint8_t addr[16];
	uint16_t port;
	uint8_t family; /* 0: empty */
	unsigned long count;
};

struct sockdiag {
	int fd;
	unsigned seq;
	char *buf;
	uint32_t *est_by_port;  /* ESTABLISHED sockets per local port */
	uint8_t listening[65536 / 8];
	struct tw_slot *tw;
	size_t tw_cap, tw_used;
};

struct sockdiag *sockdiag_open(void)
{
	struct sockdiag *sd = calloc(1, sizeof(*sd));

	if (!sd)
		return NULL;
	sd->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	sd->buf = malloc(RECV_BUF);
	sd->est_by_port = calloc(65536, sizeof(*sd->est_by_port));
	sd->tw_cap = 4096;
	sd->tw = calloc(sd->tw_cap, sizeof(*sd->tw));
	if (sd->fd < 0 || !sd->buf || !sd->est_by_port || !sd->tw) {
		int err = errno;
		sockdiag_close(sd);
		errno = err ? err : ENOMEM;
		return NULL;
	}
	return sd;
}

void sockdiag_close(struct sockdiag *sd)
{
	if (!sd)
		return;
	if (sd->fd >= 0)
		close(sd->fd);
	free(sd->buf);
	free(sd->est_by_port);
	free(sd->tw);
	free(sd);
}

static size_t tw_hash(int family, const uint8_t *addr, uint16_t port)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)family;

	for (int i = 0; i < 16; i++)
		h = (h ^ addr[i]) * 1099511628211ull;
	h = (h ^ port) * 1099511628211ull;
	return (size_t)(h ^ (h >> 29));
}

static struct tw_slot *tw_find(struct tw_slot *tab, size_t cap, int family, const uint8_t *addr,
			       uint16_t port)
{
	size_t i = tw_hash(family, addr, port) & (cap - 1);

	while (tab[i].family && (tab[i].family != family || tab[i].port != port ||
				 memcmp(tab[i].addr, addr, 16)))
		i = (i + 1) & (cap - 1);
	return &tab[i];
}

/* Keeps the load under one half so probes stay short. */
static int tw_grow(struct sockdiag *sd)
{
	size_t cap = sd->tw_cap * 2;
	struct tw_slot *tab = calloc(cap, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < sd->tw_cap; i++)
		if (sd->tw[i].family)
			*tw_find(tab, cap, sd->tw[i].family, sd->tw[i].addr, sd->tw[i].port) = sd->tw[i];
	free(sd->tw);
	sd->tw = tab;
	sd->tw_cap = cap;
	return 0;
}

static int tw_add(struct sockdiag *sd, int family, const uint8_t *addr, uint16_t port)
{
	struct tw_slot *s;

	if (sd->tw_used * 2 >= sd->tw_cap && tw_grow(sd))
		return -ENOMEM;
	s = tw_find(sd->tw, sd->tw_cap, family, addr, port);
	if (!s->family) {
		s->family = (uint8_t)family;
		memcpy(s->addr, addr, 16);
		s->port = port;
		sd->tw_used++;
	}
	s->count++;
	return 0;
}

static void count_one(struct sockdiag *sd, const struct inet_diag_msg *m, unsigned lo, unsigned hi,
		      struct sockdiag_counts *c)
{
	unsigned state = m->idiag_state < SOCKDIAG_NSTATES ? m->idiag_state : 0;
	unsigned sport = ntohs(m->id.idiag_sport);
	uint8_t dst[16] = { 0 };

	c->states[state]++;
	c->total++;
	if (state == SOCKDIAG_LISTEN) {
		sd->listening[sport / 8] |= (uint8_t)(1u << (sport % 8));
		return;
	}
	if (sport >= lo && sport <= hi)
		c->ephemeral++;
	if (state == SOCKDIAG_ESTABLISHED)
		sd->est_by_port[sport]++;
	if (state == SOCKDIAG_TIME_WAIT) {
		memcpy(dst, m->id.idiag_dst, m->idiag_family == AF_INET6 ? 16 : 4);
		tw_add(sd, m->idiag_family, dst, ntohs(m->id.idiag_dport));
	}
}

struct count_ctx {
	struct sockdiag *sd;
	unsigned lo, hi;
	struct sockdiag_counts *c;
};

static void on_count(const struct inet_diag_msg *m, void *ctx)
{
	struct count_ctx *x = ctx;

	count_one(x->sd, m, x->lo, x->hi, x->c);
}

/* Dumps the TCP sockets of family in states (a bit mask) on fd, calling visit for each. */
static int dump_family(int fd, unsigned seq, char *buf, size_t buflen, int family, uint32_t states,
		       void (*visit)(const struct inet_diag_msg *m, void *ctx), void *ctx)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = { 0 };
	struct sockaddr_nl nladdr = { .nl_family = AF_NETLINK };

	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.nlh.nlmsg_seq = seq;
	req.r.sdiag_family = (uint8_t)family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = states;
	if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&nladdr, sizeof(nladdr)) < 0)
		return -errno;

	for (;;) {
		ssize_t n = recv(fd, buf, buflen, 0);
		struct nlmsghdr *h;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		/*
		 * n stays signed: NLMSG_NEXT takes a length rounded up to 4 from it, which
		 * leaves it negative after a last message of odd length; as a size_t that was
		 * huge and NLMSG_OK read on past the datagram (tests/fuzz/corpus/sockdiag/crash-*)
		 */
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				/* too short to hold its error code (tests/fuzz/corpus/sockdiag/errors) */
				if (h->nlmsg_len < NLMSG_LENGTH(sizeof(e->error)))
					return -EPROTO;
				/* a kernel without IPv6 has nothing to dump for it */
				if (family == AF_INET6 && e->error == -ENOENT)
					return 0;
				return e->error ? e->error : -EPROTO;
			}
			if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
			    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
				visit(NLMSG_DATA(h), ctx);
		}
	}
}

static void format_dst(const struct tw_slot *s, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	inet_format(s->family, s->addr, ip, sizeof(ip));
	if (strchr(ip, ':'))
		snprintf(buf, len, "[%s]:%u", ip, s->port);
	else
		snprintf(buf, len, "%s:%u", ip, s->port);
}

int sockdiag_count(struct sockdiag *sd, unsigned port_lo, unsigned port_hi,
		   struct sockdiag_counts *c)
{
	const struct tw_slot *best = NULL;
	struct count_ctx x = { sd, port_lo, port_hi, c };
	int err;

	memset(c, 0, sizeof(*c));
	memset(sd->listening, 0, sizeof(sd->listening));
	memset(sd->est_by_port, 0, 65536 * sizeof(*sd->est_by_port));
	memset(sd->tw, 0, sd->tw_cap * sizeof(*sd->tw));
	sd->tw_used = 0;

	/* every state, including TIME_WAIT and request sockets */
	err = dump_family(sd->fd, ++sd->seq, sd->buf, RECV_BUF, AF_INET, ~0u, on_count, &x);
	if (!err)
		err = dump_family(sd->fd, ++sd->seq, sd->buf, RECV_BUF, AF_INET6, ~0u, on_count, &x);
	if (err)
		return err;

	/* inbound once the whole dump is in: a listener may come after its connections */
	for (unsigned p = 0; p < 65536; p++)
		if (sd->est_by_port[p] && (sd->listening[p / 8] & (1u << (p % 8))))
			c->established_inbound += sd->est_by_port[p];
	c->established_outbound = c->states[SOCKDIAG_ESTABLISHED] - c->established_inbound;

	for (size_t i = 0; i < sd->tw_cap; i++)
		if (sd->tw[i].family && (!best || sd->tw[i].count > best->count))
			best = &sd->tw[i];
	if (best) {
		c->max_time_wait_one_dst = best->count;
		format_dst(best, c->max_time_wait_dst, sizeof(c->max_time_wait_dst));
	}
	return 0;
}

/*
 * A sock_diag socket of the network namespace of pid: a socket stays in the
 * namespace it was made in, so this thread enters pid's for the socket() call and
 * goes back (nothing to do when it is ours already).
 */
static int diag_socket_of(pid_t pid)
{
	char path[64];
	struct stat theirs, ours;
	int fd, err, self = -1, ns = -1;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	if (stat(path, &theirs) || stat("/proc/thread-self/ns/net", &ours))
		return -errno;
	if (theirs.st_dev != ours.st_dev || theirs.st_ino != ours.st_ino) {
		self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		ns = open(path, O_RDONLY | O_CLOEXEC);
		if (self < 0 || ns < 0 || setns(ns, CLONE_NEWNET)) {
			err = -errno;
			goto out;
		}
	}
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	err = fd < 0 ? -errno : fd;
	if (self >= 0 && setns(self, CLONE_NEWNET)) {
		/* every later socket of this thread would be made in pid's namespace */
		perror("sockdiag: cannot return to the tool's network namespace");
		abort();
	}
out:
	if (self >= 0)
		close(self);
	if (ns >= 0)
		close(ns);
	return err;
}

struct inodes_ctx {
	unsigned long *inodes;
	int n, max;
};

static void on_listener(const struct inet_diag_msg *m, void *ctx)
{
	struct inodes_ctx *x = ctx;

	if (x->n < x->max && m->idiag_inode)
		x->inodes[x->n++] = m->idiag_inode;
}

int sockdiag_listening_inodes(pid_t pid, unsigned long *inodes, int max)
{
	struct inodes_ctx x = { inodes, 0, max };
	char *buf = malloc(RECV_BUF);
	int fd = diag_socket_of(pid), err = fd < 0 ? fd : 0;

	if (!buf)
		err = -ENOMEM;
	if (!err)
		err = dump_family(fd, 1, buf, RECV_BUF, AF_INET, 1u << SOCKDIAG_LISTEN, on_listener, &x);
	if (!err)
		err = dump_family(fd, 2, buf, RECV_BUF, AF_INET6, 1u << SOCKDIAG_LISTEN, on_listener, &x);
	if (fd >= 0)
		close(fd);
	free(buf);
	return err ? err : x.n;
}

int sockdiag_holds_listener(pid_t pid)
{
	unsigned long inodes[1024];
	int n = sockdiag_listening_inodes(pid, inodes, 1024);
	char path[64];
	struct dirent *d;
	int found = 0, err = 0;
	DIR *dir;

	if (n <= 0)
		return n;
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while (!found && (d = readdir(dir))) {
		char fdpath[300], target[64];
		unsigned long ino;
		ssize_t len;

		if (d->d_name[0] == '.')
			continue;
		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, d->d_name);
		len = readlink(fdpath, target, sizeof(target) - 1);
		if (len <= 0) {
			/* another user's fds: listed with CAP_DAC_READ_SEARCH, read with CAP_SYS_PTRACE */
			if (errno == EACCES || errno == EPERM)
				err = -EACCES;
			continue;
		}
		target[len] = 0;
		if (sscanf(target, "socket:[%lu]", &ino) != 1)
			continue;
		for (int i = 0; i < n && !found; i++)
			found = inodes[i] == ino;
	}
	closedir(dir);
	return found ? 1 : err;
}
