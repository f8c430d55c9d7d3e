/* Facts about processes and threads from /proc, including namespace ids (containers). */
#ifndef PYEBPF_PROCINFO_H
#define PYEBPF_PROCINFO_H

#include <stdbool.h>
#include <sys/types.h>

struct nsids {
	pid_t pid; /* innermost PID namespace's ids: what the container sees */
	pid_t tid;
	bool nested; /* in a PID namespace below that of our /proc: other ids there */
};

/* The innermost NSpid of pid/tid (both the host ids when not in a namespace). 0 or -1. */
int procinfo_nsids(pid_t pid, pid_t tid, struct nsids *out);
/* /proc/PID/task/TID/comm without the newline; 0 or -1. */
int procinfo_comm(pid_t pid, pid_t tid, char *buf, size_t len);
bool procinfo_exists(pid_t pid);
/* Thread tid of process pid is there (/proc/PID/task/TID), not only some task with that id. */
bool procinfo_thread_exists(pid_t pid, pid_t tid);
/* Exists and is not a zombie: a process that exited but was not reaped yet is gone. */
bool procinfo_alive(pid_t pid);
/*
 * When pid started (clock ticks after boot, /proc/PID/stat's starttime), or 0: tells a
 * process from a later one that got its pid.
 */
unsigned long long procinfo_start_time(pid_t pid);
/* The process's parent pid, or -1. */
pid_t procinfo_ppid(pid_t pid);

#endif
