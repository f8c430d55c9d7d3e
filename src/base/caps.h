/*
 * The capabilities this process holds (effective set), and one-line messages that
 * name the one an operation lacks. Permission checks here go through capget and the
 * failing call's errno, never access(), which tests the real uid and ignores
 * capabilities.
 */
#ifndef PYEBPF_CAPS_H
#define PYEBPF_CAPS_H

#include <linux/capability.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Older userspace headers lack the two split out of CAP_SYS_ADMIN in Linux 5.8. */
#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

/*
 * log_error for a missing capability (the message names it), counted: a run that goes
 * on without a failed part (pymonitor) does not go on without one for want of a
 * capability, which is a deployment's mistake, not the target's.
 */
void caps_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* How many caps_error messages were said. */
unsigned caps_errors(void);
/* Whether cap (CAP_*) is in this process's effective set. */
bool caps_have(int cap);
/*
 * Into buf, those of the n caps not held, "CAP_A", "CAP_A and CAP_B", "CAP_A, CAP_B and
 * CAP_C"; returns how many.
 */
int caps_missing(const int *caps, int n, char *buf, size_t len);
/* "CAP_SYS_PTRACE" for CAP_SYS_PTRACE; "CAP_<n>" for one it does not know. */
const char *caps_name(int cap);
/*
 * After an open or read of /proc/PID/... failed with err: when err is a permission
 * error and CAP_SYS_PTRACE is not held, writes "needs CAP_SYS_PTRACE to read pid N's
 * WHAT (owned by uid U)" into buf (what: e.g. "memory") and returns true; false, and
 * buf untouched, for any other cause.
 */
bool caps_explain_ptrace(pid_t pid, const char *what, int err, char *buf, size_t len);

#endif
