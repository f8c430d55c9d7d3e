/* BCC builds tracepoint argument structs from tracefs format files: it must be mounted. */
#ifndef PYEBPF_TRACEFS_H
#define PYEBPF_TRACEFS_H

/*
 * Mounts tracefs (and debugfs) when missing. Returns 0, or -1 after saying (once per
 * process) what is missing: the mount and how to make it, or CAP_DAC_READ_SEARCH when
 * it is mounted root-only (mode 0700).
 */
int tracefs_ensure(void);

#endif
