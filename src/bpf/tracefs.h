/* BCC builds tracepoint argument structs from tracefs format files: it must be mounted. */
#ifndef PYEBPF_TRACEFS_H
#define PYEBPF_TRACEFS_H

/* Mounts tracefs (and debugfs) when missing. Returns 0, or -1 after saying what to run. */
int tracefs_ensure(void);

#endif
