#define _GNU_SOURCE
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* path's directory with "/.NAME.XXXXXX": a mkstemp template that stays next to it. */
static int temp_name(char *buf, size_t len, const char *path)
{
	const char *slash = strrchr(path, '/');
	int n = slash ? snprintf(buf, len, "%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1)
		      : snprintf(buf, len, ".%s.XXXXXX", path);

	if (n < 0 || (size_t)n >= len)
		return errno = ENAMETOOLONG, -1;
	return 0;
}

static int make_temp(char *buf, size_t len, const char *path)
{
	mode_t mask;
	int fd;

	if (temp_name(buf, len, path))
		return -1;
	fd = mkostemp(buf, O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* as fopen would have made it, not mkstemp's 0600 */
	mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask)) {
		int e = errno;
		close(fd);
		unlink(buf);
		return errno = e, -1;
	}
	return fd;
}

int outfile_check(const char *path)
{
	char tmp[PATH_MAX];
	struct stat st;
	int fd;

	/* open, not access(): access() tests the real uid and ignores capabilities */
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return errno = EISDIR, -1;
		fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd < 0)
			return -1;
		close(fd);
	} else if (errno != ENOENT) {
		return -1;
	}
	fd = make_temp(tmp, sizeof(tmp), path);
	if (fd < 0)
		return -1;
	close(fd);
	unlink(tmp);
	return 0;
}

int outfile_open(struct outfile *o, const char *path)
{
	int fd;

	o->path = path;
	o->f = NULL;
	fd = make_temp(o->tmp, sizeof(o->tmp), path);
	if (fd < 0)
		return -1;
	o->f = fdopen(fd, "w");
	if (!o->f) {
		int e = errno;
		close(fd);
		unlink(o->tmp);
		return errno = e, -1;
	}
	return 0;
}

int outfile_close(struct outfile *o, bool ok)
{
	int e = 0;

	if (o->f && fclose(o->f))
		e = errno;
	o->f = NULL;
	if (ok && !e && rename(o->tmp, o->path) == 0)
		return 0;
	if (ok && !e)
		e = errno;
	unlink(o->tmp);
	errno = e ? e : EIO;
	return -1;
}
