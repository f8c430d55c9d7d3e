/*
 * The parts of a tool's life every tool shares: privileges, stop requests
 * (SIGINT, SIGTERM, SIGHUP, a closed stdout, --duration).
 */
#ifndef PYEBPF_LIFECYCLE_H
#define PYEBPF_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>

/* Returns 0, or -1 after saying which privileges are missing. */
int lifecycle_check_privileges(void);
/* Installs the signal handlers and starts the --duration clock (0: none). */
void lifecycle_start(unsigned duration_s);
/* Whether a signal or the duration asks the tool to stop. */
bool lifecycle_stopping(void);
/* How long the event loop may wait before looking again (ms). */
int lifecycle_poll_timeout_ms(void);
/* The signal that ended the run, or 0. */
int lifecycle_signal(void);

#endif
