/*
 * The parts of a tool's life every tool shares: privileges, stop requests
 * (SIGINT, SIGTERM, SIGHUP, a closed stdout, --duration).
 */
#ifndef PYEBPF_LIFECYCLE_H
#define PYEBPF_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Returns 0, or -1 after saying which privileges are missing. */
int lifecycle_check_privileges(void);
/* SIGINT, SIGTERM and SIGHUP end the run (lifecycle_signal); SIGPIPE becomes a write error. */
void lifecycle_install_signals(void);
/* Installs the signal handlers and starts the --duration clock (0: none). */
void lifecycle_start(unsigned duration_s);
/*
 * With -p: from now on a target that exits is reported on stderr, and when the last
 * one is gone the tool stops (exit 0, with the summary). Call after
 * lifecycle_start.
 */
void lifecycle_watch_pids(const pid_t *pids, int npids);
/* Whether a signal, the duration or the end of every -p target asks the tool to stop. */
bool lifecycle_stopping(void);
/*
 * How long the event loop may wait before looking again (ms): max_ms, or less when the
 * duration ends sooner. The loop also notices signals and exited -p targets no later.
 */
int lifecycle_poll_timeout_ms(int max_ms);
/* The signal that ended the run, or 0. */
int lifecycle_signal(void);

#endif
