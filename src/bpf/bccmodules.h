/*
 * libbcc's symcache of a process, without its stray close(2).
 *
 * libbcc 0.26 keeps the path of each module of a process symcache in a ModulePath,
 * whose destructor closes its fd when above 0. A module handed to it without
 * enter_ns leaves that fd unset: the host's /tmp/perf-PID.map, which every symcache
 * tries, and each memfd mapping. Dropping such a module (no perf map is there) or the
 * symcache closes whatever number the heap held at that place: the tool's stdout, a BPF
 * map, a ring buffer (seen: pyoffcpu's stdout closed at the first native stack it
 * named, as a non-root user, in 2 of 24 runs; which number it is depends on the heap).
 * libbcc initializes the fd since 2025 ("syms: Initialize ModulePath::fd_ to invalid
 * FD"); Debian 12 ships 0.26.
 *
 * bccmodules.c defines libbcc's bcc_procutils_each_module in the tool itself, where the
 * dynamic linker finds it before libbcc's own (as ksyms.c does for the kernel's
 * symbols), and passes libbcc's modules on, each with enter_ns. A module without it
 * names a file in the tool's own root and mount namespace; when the process shares both,
 * libbcc opening the same name in the process's root (through /proc/PID/root, with the
 * fd set) reads the same file. When it does not (a container), the module is left out:
 * the process's own perf map (in its root) is still read, but a perf map written for it
 * into the host's /tmp by another program and its memfd mappings (JIT code) stay
 * addresses.
 */
#ifndef PYEBPF_BCCMODULES_H
#define PYEBPF_BCCMODULES_H

#include <stdbool.h>
#include <sys/types.h>

struct bcc_symbol_option;

/* Whether a name opens the same file in pid's root as in ours: the same root and mount namespace. */
bool bccmodules_shares_root(pid_t pid);

/* bcc_symcache_new(pid, opt), with the module walk above; NULL when libbcc made none. */
void *bccmodules_symcache_new(pid_t pid, struct bcc_symbol_option *opt);

#endif
