/*
 * The interface a host's traffic leaves by: the device of its default route, read
 * from /proc/self/net/route (IPv4) and then /proc/self/net/ipv6_route, so it is
 * the caller's network namespace that answers. Names like eth0 are not fixed.
 */
#ifndef PYEBPF_NETROUTE_H
#define PYEBPF_NETROUTE_H

#include <stddef.h>

/* Writes the device of the default route with the lowest metric. Returns 0, or -ENOENT. */
int netroute_default_iface(char *buf, size_t len);

/* The same from the text of /proc/net/route or /proc/net/ipv6_route. Pure, for unit tests. */
int netroute_parse_ipv4(const char *text, char *buf, size_t len);
int netroute_parse_ipv6(const char *text, char *buf, size_t len);

#endif
