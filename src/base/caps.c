#include "caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

static unsigned errors;

void caps_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s", msg);
	errors++;
}

unsigned caps_errors(void)
{
	return errors;
}

bool caps_have(int cap)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (cap < 0 || cap >= 64)
		return false;
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d))
		return false;
	return d[cap / 32].effective & (1u << (cap % 32));
}

const char *caps_name(int cap)
{
	static char other[16];

	switch (cap) {
	case CAP_BPF: return "CAP_BPF";
	case CAP_PERFMON: return "CAP_PERFMON";
	case CAP_SYS_ADMIN: return "CAP_SYS_ADMIN";
	case CAP_SYS_PTRACE: return "CAP_SYS_PTRACE";
	case CAP_DAC_READ_SEARCH: return "CAP_DAC_READ_SEARCH";
	case CAP_DAC_OVERRIDE: return "CAP_DAC_OVERRIDE";
	case CAP_IPC_LOCK: return "CAP_IPC_LOCK";
	case CAP_SYSLOG: return "CAP_SYSLOG";
	}
	snprintf(other, sizeof(other), "CAP_%d", cap);
	return other;
}

int caps_missing(const int *caps, int n, char *buf, size_t len)
{
	int missing[64], m = 0;
	size_t used = 0;

	for (int i = 0; i < n && m < 64; i++)
		if (!caps_have(caps[i]))
			missing[m++] = caps[i];
	if (len)
		buf[0] = 0;
	for (int i = 0; i < m && used < len; i++) {
		const char *sep = i == 0 ? "" : i == m - 1 ? " and " : ", ";
		int w = snprintf(buf + used, len - used, "%s%s", sep, caps_name(missing[i]));
		if (w < 0)
			break;
		used += (size_t)w;
	}
	return m;
}

bool caps_explain_ptrace(pid_t pid, const char *what, int err, char *buf, size_t len)
{
	char path[32];
	struct stat st;

	if ((err != EACCES && err != EPERM) || caps_have(CAP_SYS_PTRACE))
		return false;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	/* /proc/PID belongs to the process's effective uid (root when it is not dumpable) */
	if (stat(path, &st))
		return false;
	if (st.st_uid != geteuid())
		snprintf(buf, len, "needs CAP_SYS_PTRACE to read pid %d's %s (owned by uid %u)", (int)pid,
			 what, (unsigned)st.st_uid);
	else
		snprintf(buf, len, "needs CAP_SYS_PTRACE to read pid %d's %s (it runs with other ids "
			 "than this tool, or is not dumpable)", (int)pid, what);
	return true;
}
