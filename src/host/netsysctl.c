#include "netsysctl.h"

#include <errno.h>
#include <stdio.h>

static int read_numbers(const char *path, const char *fmt, int want, unsigned long *a,
			unsigned long *b)
{
	char full[256];
	FILE *f;
	int n;

	snprintf(full, sizeof(full), "/proc/sys/%s", path);
	f = fopen(full, "re");
	if (!f)
		return -errno;
	n = want == 2 ? fscanf(f, fmt, a, b) : fscanf(f, fmt, a);
	fclose(f);
	return n == want ? 0 : -EINVAL;
}

int netsysctl_port_range(unsigned *lo, unsigned *hi)
{
	unsigned long a, b;
	int err = read_numbers("net/ipv4/ip_local_port_range", "%lu %lu", 2, &a, &b);

	if (err)
		return err;
	if (a > b || b > 65535)
		return -EINVAL;
	*lo = (unsigned)a;
	*hi = (unsigned)b;
	return 0;
}

int netsysctl_read_ulong(const char *path, unsigned long *out)
{
	return read_numbers(path, "%lu", 1, out, NULL);
}
