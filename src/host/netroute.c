#include "netroute.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RTF_UP_FLAG 0x1

static void keep_best(const char *dev, unsigned long metric, unsigned long *best, char *buf,
		      size_t len)
{
	if (metric < *best) {
		*best = metric;
		snprintf(buf, len, "%s", dev);
	}
}

/* "Iface Destination Gateway Flags RefCnt Use Metric Mask ..." with hex fields */
int netroute_parse_ipv4(const char *text, char *buf, size_t len)
{
	unsigned long best = (unsigned long)-1;
	const char *line = text;

	while (line && *line) {
		char dev[64];
		unsigned long dst, gw, flags, refcnt, use, metric, mask;
		const char *eol = strchr(line, '\n');

		if (sscanf(line, "%63s %lx %lx %lx %lu %lu %lu %lx", dev, &dst, &gw, &flags, &refcnt,
			   &use, &metric, &mask) == 8 &&
		    dst == 0 && mask == 0 && (flags & RTF_UP_FLAG))
			keep_best(dev, metric, &best, buf, len);
		line = eol ? eol + 1 : NULL;
	}
	return best == (unsigned long)-1 ? -ENOENT : 0;
}

/* "dst dstlen src srclen nexthop metric refcnt use flags dev", 32-hex-digit addresses */
int netroute_parse_ipv6(const char *text, char *buf, size_t len)
{
	unsigned long best = (unsigned long)-1;
	const char *line = text;

	while (line && *line) {
		char dst[40], src[40], nh[40], dev[64];
		unsigned dstlen, srclen;
		unsigned long metric, refcnt, use, flags;
		const char *eol = strchr(line, '\n');

		if (sscanf(line, "%39s %x %39s %x %39s %lx %lx %lx %lx %63s", dst, &dstlen, src, &srclen,
			   nh, &metric, &refcnt, &use, &flags, dev) == 10 &&
		    dstlen == 0 && strspn(dst, "0") == 32 && (flags & RTF_UP_FLAG) &&
		    strcmp(dev, "lo") != 0) /* the unreachable default sits on lo */
			keep_best(dev, metric, &best, buf, len);
		line = eol ? eol + 1 : NULL;
	}
	return best == (unsigned long)-1 ? -ENOENT : 0;
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "re");
	char *text = NULL;
	size_t cap = 0, len = 0, n;

	if (!f)
		return NULL;
	do {
		if (len + 4097 > cap) {
			char *t = realloc(text, cap = cap ? cap * 2 : 16384);
			if (!t) {
				free(text);
				fclose(f);
				return NULL;
			}
			text = t;
		}
		n = fread(text + len, 1, cap - len - 1, f);
		len += n;
	} while (n > 0);
	fclose(f);
	text[len] = 0;
	return text;
}

int netroute_default_iface(char *buf, size_t len)
{
	char *text = read_text("/proc/self/net/route");
	int err = text ? netroute_parse_ipv4(text, buf, len) : -ENOENT;

	free(text);
	if (err) {
		text = read_text("/proc/self/net/ipv6_route");
		err = text ? netroute_parse_ipv6(text, buf, len) : -ENOENT;
		free(text);
	}
	return err;
}
