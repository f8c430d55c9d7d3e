#include "sockdiag.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

static int dump_family(struct sockdiag *sd, int family, unsigned lo, unsigned hi,
		       struct sockdiag_counts *c)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = { 0 };
	struct sockaddr_nl nladdr = { .nl_family = AF_NETLINK };
	unsigned seq = ++sd->seq;

	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.nlh.nlmsg_seq = seq;
	req.r.sdiag_family = (uint8_t)family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u; /* every state, including TIME_WAIT and request sockets */
	if (sendto(sd->fd, &req, sizeof(req), 0, (struct sockaddr *)&nladdr, sizeof(nladdr)) < 0)
		return -errno;

	for (;;) {
		ssize_t n = recv(sd->fd, sd->buf, RECV_BUF, 0);
		struct nlmsghdr *h;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		for (h = (struct nlmsghdr *)sd->buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				/* a kernel without IPv6 has nothing to dump for it */
				if (family == AF_INET6 && e->error == -ENOENT)
					return 0;
				return e->error ? e->error : -EPROTO;
			}
			if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
			    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
				count_one(sd, NLMSG_DATA(h), lo, hi, c);
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
	int err;

	memset(c, 0, sizeof(*c));
	memset(sd->listening, 0, sizeof(sd->listening));
	memset(sd->est_by_port, 0, 65536 * sizeof(*sd->est_by_port));
	memset(sd->tw, 0, sd->tw_cap * sizeof(*sd->tw));
	sd->tw_used = 0;

	err = dump_family(sd, AF_INET, port_lo, port_hi, c);
	if (!err)
		err = dump_family(sd, AF_INET6, port_lo, port_hi, c);
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
