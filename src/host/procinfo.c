#include "procinfo.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Reads the value of "Key:" from a /proc status file into buf. */
static int status_field(pid_t pid, pid_t tid, const char *key, char *buf, size_t len)
{
	char path[64], line[512];
	size_t klen = strlen(key);
	FILE *f;
	int r = -1;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			snprintf(buf, len, "%s", line + klen + 1);
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

/* The last number of an NSpid/NStgid line: the innermost namespace's id. */
static pid_t last_number(const char *s)
{
	const char *end = s + strlen(s);
	long v = -1;

	while (end > s && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
		end--;
	while (end > s && end[-1] >= '0' && end[-1] <= '9')
		end--;
	if (*end >= '0' && *end <= '9')
		v = strtol(end, NULL, 10);
	return (pid_t)v;
}

/* How many numbers an NSpid/NStgid line holds: one per PID namespace level. */
static int numbers_in(const char *s)
{
	int n = 0;

	for (s += strspn(s, " \t\n"); *s; s += strspn(s, " \t\n")) {
		size_t digits = strspn(s, "0123456789");
		n += digits > 0;
		s += digits ? digits : 1;
	}
	return n;
}

int procinfo_nsids(pid_t pid, pid_t tid, struct nsids *out)
{
	char buf[256];

	if (status_field(pid, tid, "NStgid", buf, sizeof(buf)))
		return -1;
	out->pid = last_number(buf);
	out->nested = numbers_in(buf) > 1;
	if (status_field(pid, tid, "NSpid", buf, sizeof(buf)))
		return -1;
	out->tid = last_number(buf);
	return out->pid > 0 && out->tid > 0 ? 0 : -1;
}

int procinfo_comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char path[64];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	while (n && buf[n - 1] == '\n')
		n--;
	buf[n] = 0;
	return 0;
}

bool procinfo_exists(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

bool procinfo_thread_exists(pid_t pid, pid_t tid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/task/%d", pid, tid);
	return stat(path, &st) == 0;
}

/*
 * /proc/PID/stat into buf; returns the fields after the comm (which may itself
 * contain ')'), from the state on, or NULL.
 */
static const char *stat_fields(pid_t pid, char *buf, size_t len)
{
	char path[64];
	const char *paren;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' ? paren + 2 : NULL;
}

bool procinfo_alive(pid_t pid)
{
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));

	return f && *f != 'Z' && *f != 'X';
}

unsigned long long procinfo_start_time(pid_t pid)
{
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));

	/* starttime is field 22; the state is field 3 */
	for (int field = 3; f && field < 22; field++) {
		f = strchr(f, ' ');
		f = f ? f + 1 : NULL;
	}
	return f ? strtoull(f, NULL, 10) : 0;
}

pid_t procinfo_ppid(pid_t pid)
{
	char buf[64];

	if (status_field(pid, pid, "PPid", buf, sizeof(buf)))
		return -1;
	return (pid_t)strtol(buf, NULL, 10);
}
