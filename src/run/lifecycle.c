#include "lifecycle.h"

#include <signal.h>
#include <string.h>

#include "caps.h"
#include "log.h"

/* The one process-wide state: a signal handler can set nothing else. */
static volatile sig_atomic_t stop_signal;

int lifecycle_check_privileges(void)
{
	/* CAP_SYS_ADMIN holds both (the kernel's bpf_capable and perfmon_capable) */
	bool bpf = caps_have(CAP_BPF) || caps_have(CAP_SYS_ADMIN);
	bool perfmon = caps_have(CAP_PERFMON) || caps_have(CAP_SYS_ADMIN);

	if (bpf && perfmon)
		return 0;
	if (!bpf && !perfmon)
		caps_error("needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, which holds both) to load BPF "
			   "programs and attach them; or run as root");
	else if (!bpf)
		caps_error("needs CAP_BPF to load BPF programs and create their maps");
	else
		caps_error("needs CAP_PERFMON to attach BPF programs to tracepoints and perf events and "
			   "read kernel memory in them");
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
