#include "lifecycle.h"

#include <linux/capability.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

/* The one process-wide state: a signal handler can set nothing else. */
static volatile sig_atomic_t stop_signal;

static bool has_cap(const struct __user_cap_data_struct d[2], int cap)
{
	return d[cap / 32].effective & (1u << (cap % 32));
}

int lifecycle_check_privileges(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) == 0 &&
	    (has_cap(d, CAP_SYS_ADMIN) || (has_cap(d, CAP_BPF) && has_cap(d, CAP_PERFMON))))
		return 0;
	log_error("needs root, or the capabilities CAP_BPF and CAP_PERFMON (run with sudo)");
	return -1;
}

static void on_signal(int sig)
{
	stop_signal = sig;
}

void lifecycle_install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	/* a stdout write blocked on a full pipe must not fail with EINTR at Ctrl-C (poll still wakes) */
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* a closed stdout (| head) becomes a write error we notice, not a silent death */
	signal(SIGPIPE, SIG_IGN);
}

int lifecycle_signal(void)
{
	return stop_signal;
}
