#include "tracefs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps.h"
#include "log.h"

static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };

/*
 * stat, not access(): access() tests the real uid and ignores capabilities, so a
 * non-root tool with CAP_DAC_READ_SEARCH would be told that a mounted tracefs is not
 * there. 0 when a root's events/ can be reached; else -1 with errno of the first root
 * (EACCES: mounted, but its directory is closed to us), and its mode and owner.
 */
static int tracefs_reach(struct stat *denied)
{
	char path[128];
	struct stat st;
	int first_errno = 0;

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		snprintf(path, sizeof(path), "%s/events", roots[i]);
		if (stat(path, &st) == 0)
			return 0;
		if (errno == EACCES && !first_errno && stat(roots[i], denied) == 0)
			first_errno = EACCES;
	}
	errno = first_errno ? first_errno : ENOENT;
	return -1;
}

static int ensure(void)
{
	struct stat denied;

	if (tracefs_reach(&denied) == 0)
		return 0;
	if (errno == EACCES) {
		caps_error("needs CAP_DAC_READ_SEARCH to read the tracepoint formats and ids in %s "
			  "(mode %04o, owned by uid %u)",
			  roots[0], (unsigned)(denied.st_mode & 07777), (unsigned)denied.st_uid);
		return -1;
	}
	if (mount("nodev", roots[0], "tracefs", 0, NULL) && errno != EBUSY) {
		if (errno == EPERM && !caps_have(CAP_SYS_ADMIN))
			caps_error("tracefs is not mounted, and mounting it needs CAP_SYS_ADMIN; run as "
				  "root: mount -t tracefs nodev %s", roots[0]);
		else
			log_error("tracefs is not mounted and mounting it failed (%s); run: "
				  "mount -t tracefs nodev %s", strerror(errno), roots[0]);
		return -1;
	}
	/* libbcc still looks under debugfs for some files; failure here is harmless */
	if (stat(roots[1], &denied) != 0 && errno == ENOENT)
		mount("nodev", "/sys/kernel/debug", "debugfs", 0, NULL);
	log_debug("mounted tracefs at %s", roots[0]);
	return tracefs_reach(&denied) == 0 ? 0 : -1;
}

int tracefs_ensure(void)
{
	/* said once: the format reads and the compile of every tracker ask again */
	static int failed;

	if (failed)
		return -1;
	failed = ensure() != 0;
	return failed ? -1 : 0;
}
