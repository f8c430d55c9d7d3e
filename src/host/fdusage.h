/*
 * Open file descriptors against their limit, per process name: one pass over
 * /proc, counting /proc/PID/fd entries and reading "Max open files" from
 * /proc/PID/limits. A name matches a comm that starts with it ("python" matches
 * python3.11), since interpreters and servers rename themselves by suffix.
 */
#ifndef PYEBPF_FDUSAGE_H
#define PYEBPF_FDUSAGE_H

#include <stdbool.h>

#define FDUSAGE_NAME_MAX 16 /* comm length, with the NUL */

struct fdusage {
	char name[FDUSAGE_NAME_MAX];
	unsigned pids;            /* processes matched */
	unsigned long fds;        /* open fds, summed over them */
	unsigned long fd_limit;   /* the smallest soft limit among them; 0 when none */
	double util_pct;          /* the highest fds/limit of a single process */
	unsigned long max_fds;    /* open fds of the process with the highest utilisation */
	int max_pid;              /* that process */
	unsigned unreadable;      /* matched, but fd/limits could not be read (permissions) */
};

/* Scans /proc once and fills entries[i] for entries[i].name (others zeroed). Returns 0 or -errno. */
int fdusage_scan(struct fdusage *entries, int n);

/* The soft "Max open files" limit from /proc/PID/limits text; "unlimited" gives 0.
 * Returns 0 or -EINVAL. Pure, for unit tests. */
int fdusage_parse_limit(const char *text, unsigned long *soft);
/* Whether comm matches a --procs name. */
bool fdusage_name_matches(const char *name, const char *comm);

#endif
