#include "fdusage.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fdusage_parse_limit(const char *text, unsigned long *soft)
{
	const char *p = strstr(text, "Max open files");
	char word[32];

	if (!p || sscanf(p + strlen("Max open files"), "%31s", word) != 1)
		return -EINVAL;
	if (strcmp(word, "unlimited") == 0) {
		*soft = 0;
		return 0;
	}
	return sscanf(word, "%lu", soft) == 1 ? 0 : -EINVAL;
}

bool fdusage_name_matches(const char *name, const char *comm)
{
	return *name && strncmp(comm, name, strlen(name)) == 0;
}

static int read_small(int dirfd, const char *path, char *buf, size_t len)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

/* Entries of /proc/PID/fd; -errno when it cannot be listed. */
static long count_fds(int piddir)
{
	struct stat st;
	struct dirent *de;
	long n = 0;
	DIR *d;
	int fd;

	/* Linux 6.2+ gives the count as the directory's size: no walk of 50k entries */
	if (fstatat(piddir, "fd", &st, 0) == 0 && st.st_size > 0)
		return (long)st.st_size;
	fd = openat(piddir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void add_process(struct fdusage *e, int pid, int piddir)
{
	char limits[4096];
	unsigned long limit = 0;
	long fds;

	fds = count_fds(piddir);
	if (fds == -ENOENT)
		return; /* exited meanwhile: not a process any more */
	e->pids++;
	if (fds < 0 || read_small(piddir, "limits", limits, sizeof(limits)) ||
	    fdusage_parse_limit(limits, &limit)) {
		e->unreadable++;
		return;
	}
	e->fds += (unsigned long)fds;
	if (limit && (!e->fd_limit || limit < e->fd_limit))
		e->fd_limit = limit;
	if (limit) {
		double pct = 100.0 * (double)fds / (double)limit;
		if (pct > e->util_pct || !e->max_pid) {
			e->util_pct = pct;
			e->max_fds = (unsigned long)fds;
			e->max_pid = pid;
		}
	}
}

int fdusage_scan(struct fdusage *entries, int n)
{
	DIR *proc = opendir("/proc");
	struct dirent *de;

	for (int i = 0; i < n; i++) {
		char name[FDUSAGE_NAME_MAX];
		memcpy(name, entries[i].name, sizeof(name));
		memset(&entries[i], 0, sizeof(entries[i]));
		memcpy(entries[i].name, name, sizeof(name));
	}
	if (!proc)
		return -errno;
	while ((de = readdir(proc))) {
		char comm[64];
		int piddir, pid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = atoi(de->d_name);
		if (pid == getpid()) /* hostnet itself is nobody's workload */
			continue;
		piddir = openat(dirfd(proc), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (piddir < 0)
			continue; /* exited meanwhile */
		if (read_small(piddir, "comm", comm, sizeof(comm)) == 0) {
			comm[strcspn(comm, "\n")] = 0;
			for (int i = 0; i < n; i++)
				if (fdusage_name_matches(entries[i].name, comm))
					add_process(&entries[i], pid, piddir);
		}
		close(piddir);
	}
	closedir(proc);
	return 0;
}
