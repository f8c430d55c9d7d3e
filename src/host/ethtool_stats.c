#include "ethtool_stats.h"

#include <errno.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

void ethtool_stats_match(const char *strings, size_t nstrings, const char *const *names, int n,
			 int *index)
{
	for (int i = 0; i < n; i++) {
		index[i] = -1;
		for (size_t j = 0; j < nstrings; j++)
			if (strncmp(strings + j * ETH_GSTRING_LEN, names[i], ETH_GSTRING_LEN) == 0) {
				index[i] = (int)j;
				break;
			}
	}
}

static int ethtool_ioctl(int fd, const char *ifname, void *cmd)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	ifr.ifr_data = cmd;
	return ioctl(fd, SIOCETHTOOL, &ifr) ? -errno : 0;
}

int ethtool_stats_read(const char *ifname, const char *const *names, int n, uint64_t *vals,
		       bool *present)
{
	struct ethtool_drvinfo drv = { .cmd = ETHTOOL_GDRVINFO };
	struct ethtool_gstrings *strs = NULL;
	struct ethtool_stats *stats = NULL;
	int *index = calloc((size_t)n, sizeof(*index));
	int fd, err = 0;
	uint32_t count;

	for (int i = 0; i < n; i++) {
		vals[i] = 0;
		present[i] = false;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || !index) {
		err = fd < 0 ? -errno : -ENOMEM;
		goto out;
	}
	err = ethtool_ioctl(fd, ifname, &drv);
	if (err == -EOPNOTSUPP) /* no ethtool at all: no counters, not an error */
		err = 0;
	count = err ? 0 : drv.n_stats;
	if (err || count == 0)
		goto out;

	/* the names each time: a driver may change its set (queues added) */
	strs = calloc(1, sizeof(*strs) + (size_t)count * ETH_GSTRING_LEN);
	stats = calloc(1, sizeof(*stats) + (size_t)count * sizeof(uint64_t));
	if (!strs || !stats) {
		err = -ENOMEM;
		goto out;
	}
	strs->cmd = ETHTOOL_GSTRINGS;
	strs->string_set = ETH_SS_STATS;
	strs->len = count;
	stats->cmd = ETHTOOL_GSTATS;
	stats->n_stats = count;
	if (ethtool_ioctl(fd, ifname, strs) || ethtool_ioctl(fd, ifname, stats))
		goto out; /* counted as absent: the driver refused, the set changed meanwhile */
	if (strs->len < count)
		count = strs->len;
	if (stats->n_stats < count)
		count = stats->n_stats;
	ethtool_stats_match((const char *)strs->data, count, names, n, index);
	for (int i = 0; i < n; i++)
		if (index[i] >= 0) {
			vals[i] = stats->data[index[i]];
			present[i] = true;
		}
out:
	if (fd >= 0)
		close(fd);
	free(index);
	free(strs);
	free(stats);
	return err;
}
