/*
 * Named NIC driver counters through the ethtool statistics ioctl (what
 * `ethtool -S DEV` prints). Drivers name their counters freely, so a counter a
 * driver lacks is reported absent, never as zero: a cloud NIC's
 * "bw_in_allowance_exceeded" exists on ENA and nowhere else.
 */
#ifndef PYEBPF_ETHTOOL_STATS_H
#define PYEBPF_ETHTOOL_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Reads the counters called names[0..n-1] of interface ifname (in the caller's
 * network namespace): vals[i] and present[i]. A driver without statistics (lo)
 * gives all absent and 0. Returns -errno when the interface cannot be asked at all.
 */
int ethtool_stats_read(const char *ifname, const char *const *names, int n, uint64_t *vals,
		       bool *present);

/*
 * Finds each of names[] among nstrings counter names laid out as the ioctl returns
 * them (fixed 32-byte slots): index[i] is the slot, or -1. Pure, for unit tests.
 */
void ethtool_stats_match(const char *strings, size_t nstrings, const char *const *names, int n,
			 int *index);

#endif
