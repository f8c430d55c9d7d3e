/* Messages on stderr, prefixed with the tool's name (stdout carries results only). */
#ifndef PYEBPF_LOG_H
#define PYEBPF_LOG_H

#include <stdbool.h>

/* Exit codes shared by every tool. */
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

extern const char *log_progname;
extern bool log_verbose;

void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Only with -v: details a user needs when something looks wrong. */
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
