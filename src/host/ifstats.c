#include "ifstats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ifstats_parse(const char *text, const char *ifname, struct ifstats *out)
{
	size_t namelen = strlen(ifname);
	const char *line = text;

	/* lines look like "  eth0: rxbytes rxpackets errs drop fifo frame compressed multicast
	 * txbytes txpackets errs drop ..."; the two header lines have no "NAME:" prefix */
	while (line && *line) {
		const char *p = line, *eol = strchr(line, '\n');

		while (*p == ' ')
			p++;
		if (strncmp(p, ifname, namelen) == 0 && p[namelen] == ':') {
			uint64_t v[16];
			int n = sscanf(p + namelen + 1,
				       "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
				       " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
				       " %" SCNu64 " %" SCNu64,
				       &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8],
				       &v[9], &v[10], &v[11]);
			if (n < 12)
				return -EINVAL;
			*out = (struct ifstats){
				.rx_bytes = v[0], .rx_packets = v[1], .rx_errors = v[2], .rx_dropped = v[3],
				.tx_bytes = v[8], .tx_packets = v[9], .tx_errors = v[10], .tx_dropped = v[11],
			};
			return 0;
		}
		line = eol ? eol + 1 : NULL;
	}
	return -ENODEV;
}

int ifstats_read(const char *ifname, struct ifstats *out)
{
	FILE *f = fopen("/proc/self/net/dev", "re");
	char *text = NULL;
	size_t cap = 0, len = 0;
	int err;

	if (!f)
		return -errno;
	/* read whole: a host with many interfaces has a long table */
	for (;;) {
		if (len + 4096 + 1 > cap) {
			char *t = realloc(text, cap = cap ? cap * 2 : 16384);
			if (!t) {
				free(text);
				fclose(f);
				return -ENOMEM;
			}
			text = t;
		}
		size_t n = fread(text + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	fclose(f);
	text[len] = 0;
	err = ifstats_parse(text, ifname, out);
	free(text);
	return err;
}

uint64_t ifstats_delta(uint64_t prev, uint64_t cur)
{
	return cur >= prev ? cur - prev : cur;
}
