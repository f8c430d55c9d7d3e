#include "lifecycle.h"

#include <linux/capability.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "out.h"
#include "procinfo.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

static volatile sig_atomic_t stop_signal;
static uint64_t deadline_ns;

#define MAX_WATCHED 64
static pid_t watched[MAX_WATCHED];
static int nwatched, nalive;
static uint64_t next_check_ns;

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

void lifecycle_start(unsigned duration_s)
{
	lifecycle_install_signals();
	deadline_ns = duration_s ? time_mono_ns() + (uint64_t)duration_s * 1000000000ull : 0;
}

void lifecycle_watch_pids(const pid_t *pids, int npids)
{
	nwatched = nalive = npids < MAX_WATCHED ? npids : MAX_WATCHED;
	memcpy(watched, pids, (size_t)nwatched * sizeof(*pids));
}

/* Looks at the targets at most every 200 ms: /proc reads are not free. */
static bool targets_gone(uint64_t now)
{
	if (!nwatched || now < next_check_ns)
		return false;
	next_check_ns = now + 200000000ull;
	for (int i = 0; i < nwatched; i++) {
		if (watched[i] && !procinfo_alive(watched[i])) {
			log_warn("target pid %d exited", watched[i]);
			watched[i] = 0;
			nalive--;
		}
	}
	return nalive == 0;
}

bool lifecycle_stopping(void)
{
	uint64_t now = time_mono_ns();

	return stop_signal || (deadline_ns && now >= deadline_ns) || targets_gone(now);
}

int lifecycle_poll_timeout_ms(int max_ms)
{
	uint64_t now;

	if (!deadline_ns)
		return max_ms;
	now = time_mono_ns();
	if (now >= deadline_ns)
		return 0;
	return (deadline_ns - now) / 1000000 < (uint64_t)max_ms ? (int)((deadline_ns - now) / 1000000) + 1
								 : max_ms;
}

int lifecycle_signal(void)
{
	return stop_signal;
}
