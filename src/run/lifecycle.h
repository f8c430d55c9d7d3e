/*
 * What every run shares with the process it runs in: privileges, and the signals
 * that end it (SIGINT, SIGTERM, SIGHUP). The runner owns the rest of a run's life
 * (--duration, exited targets, a closed stdout).
 */
#ifndef PYEBPF_LIFECYCLE_H
#define PYEBPF_LIFECYCLE_H

/* Returns 0, or -1 after saying which privileges are missing. */
int lifecycle_check_privileges(void);
/* SIGINT, SIGTERM and SIGHUP end the run (lifecycle_signal); SIGPIPE becomes a write error. */
void lifecycle_install_signals(void);
/* The signal that ended the run, or 0. */
int lifecycle_signal(void);

#endif
