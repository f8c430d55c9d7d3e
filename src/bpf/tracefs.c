#include "tracefs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "log.h"

static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };

static const char *tracefs_root(void)
{
	char path[128];

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		snprintf(path, sizeof(path), "%s/events", roots[i]);
		if (access(path, F_OK) == 0)
			return roots[i];
	}
	return NULL;
}

int tracefs_ensure(void)
{
	if (tracefs_root())
		return 0;
	if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) && errno != EBUSY) {
		log_error("tracefs is not mounted and mounting it failed (%s); run: "
			  "mount -t tracefs nodev /sys/kernel/tracing",
			  strerror(errno));
		return -1;
	}
	/* libbcc still looks under debugfs for some files; failure here is harmless */
	if (access("/sys/kernel/debug/tracing", F_OK) != 0)
		mount("nodev", "/sys/kernel/debug", "debugfs", 0, NULL);
	log_debug("mounted tracefs at /sys/kernel/tracing");
	return tracefs_root() ? 0 : -1;
}
