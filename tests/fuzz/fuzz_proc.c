/*
 * The /proc and /sys text the tools parse: /proc/PID/maps (src/python/pyproc.c),
 * /proc/PID/task/TID/status, stat and comm (src/host/procinfo.c), /proc/net/dev,
 * route and ipv6_route, /proc/PID/limits and the ethtool statistics names
 * (src/host). A process can name its mappings (memfd, a file in its own mount
 * namespace), its threads and itself as it likes. The input is one byte choosing the
 * file, then its text; pyproc.c and procinfo.c are compiled in here with fopen()
 * answering that text, so their own readers run.
 */
#include "fuzz.h"

#include <stdio.h>

static const uint8_t *text;
static size_t text_len;

static FILE *fuzz_fopen(const char *path, const char *mode)
{
	(void)path;
	(void)mode;
	/* fmemopen refuses an empty buffer */
	return text_len ? fmemopen((void *)text, text_len, "r") : fopen("/dev/null", "r");
}

#define fopen(path, mode) fuzz_fopen(path, mode)
#include "host/procinfo.c"
#include "python/pyproc.c"
#undef fopen

#include "ethtool_stats.h"
#include "fdusage.h"
#include "ifstats.h"
#include "netroute.h"

enum { MAPS, STATUS, STAT, COMM, NETDEV, ROUTE, ROUTE6, LIMITS, ETHTOOL, NKINDS };

static void maps(void)
{
	struct pyproc p = { .pid = getpid() };
	struct map_entry *m = NULL;
	char path[256], host[256];
	int n = read_maps(p.pid, &m), major, minor;

	for (int i = 0; i < n; i++) {
		python_named(m[i].path);
		version_from_name(m[i].path, &major, &minor);
	}
	free(m);
	pyproc_libc(&p, path, sizeof(path), host, sizeof(host));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nsids ids;
	struct ifstats st;
	char buf[64], *s;
	unsigned long v;

	if (!size)
		return 0;
	text = data + 1;
	text_len = size - 1;
	switch (data[0] % NKINDS) {
	case MAPS:
		maps();
		break;
	case STATUS:
		procinfo_nsids(1, 1, &ids);
		procinfo_ppid(1);
		break;
	case STAT:
		procinfo_alive(1);
		procinfo_start_time(1);
		break;
	case COMM:
		for (size_t len = 1; len <= sizeof(buf); len *= 4)
			procinfo_comm(1, 1, buf, len);
		break;
	case ETHTOOL: {
		const char *names[] = { "rx_dropped", "tx_timeout", "" };
		int index[3];
		ethtool_stats_match((const char *)text, text_len / 32, names, 3, index);
		break;
	}
	default:
		s = fuzz_string(text, text_len);
		if (!s)
			return 0;
		if (data[0] % NKINDS == NETDEV)
			ifstats_parse(s, "eth0", &st), ifstats_parse(s, "lo", &st);
		else if (data[0] % NKINDS == ROUTE)
			netroute_parse_ipv4(s, buf, sizeof(buf));
		else if (data[0] % NKINDS == ROUTE6)
			netroute_parse_ipv6(s, buf, sizeof(buf));
		else
			fdusage_parse_limit(s, &v);
		free(s);
	}
	return 0;
}
