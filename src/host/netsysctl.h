/*
 * Network sysctls of the caller's network namespace (/proc/sys/net is per
 * namespace): the ephemeral port range and the conntrack table fill.
 */
#ifndef PYEBPF_NETSYSCTL_H
#define PYEBPF_NETSYSCTL_H

/* net.ipv4.ip_local_port_range (it also governs IPv6). Returns 0 or -errno. */
int netsysctl_port_range(unsigned *lo, unsigned *hi);
/* One number from /proc/sys/<path>, e.g. "net/netfilter/nf_conntrack_count".
 * Returns 0, or -errno (-ENOENT: the module is not loaded). */
int netsysctl_read_ulong(const char *path, unsigned long *out);

#endif
