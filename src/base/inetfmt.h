/* Socket addresses as users read them. */
#ifndef PYEBPF_INETFMT_H
#define PYEBPF_INETFMT_H

#include <netinet/in.h>
#include <stdint.h>

/* addr: 4 bytes (AF_INET) or 16 (AF_INET6), network order. IPv4-mapped IPv6 prints as IPv4. */
void inet_format(int family, const uint8_t *addr, char *buf, size_t len);
/* Parses an IPv4 or IPv6 address; returns its family, or 0 when it is not one. */
int inet_parse(const char *s, uint8_t addr[16]);

#endif
