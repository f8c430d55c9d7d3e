/*
 * The kernel's own interface counters, from /proc/self/net/dev: the table of the
 * caller's network namespace (/sys/class/net shows whichever namespace sysfs was
 * mounted in, which is not the caller's after a plain setns).
 */
#ifndef PYEBPF_IFSTATS_H
#define PYEBPF_IFSTATS_H

#include <stdint.h>

struct ifstats {
	uint64_t rx_bytes, rx_packets, rx_errors, rx_dropped;
	uint64_t tx_bytes, tx_packets, tx_errors, tx_dropped;
};

/* Returns 0, -ENODEV when ifname is not in the table, or -errno. */
int ifstats_read(const char *ifname, struct ifstats *out);
/* The same from the text of a /proc/net/dev file. Pure, for unit tests. */
int ifstats_parse(const char *text, const char *ifname, struct ifstats *out);

/* cur - prev; a counter that went backwards was reset (driver reload): cur. */
uint64_t ifstats_delta(uint64_t prev, uint64_t cur);

#endif
