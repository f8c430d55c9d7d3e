/*
 * Native addresses (from BPF stack maps: user and kernel stacks) as names, through
 * libbcc's symbolizer (bcc_symcache_*), not one of our own: it already knows what a
 * correct one needs. It reads /proc/PID/maps (executable mappings, memfd ones
 * included), opens each module through /proc/PID/root (a container's files) and
 * keeps it open (its symbols stay readable after the process exited), turns
 * addresses into ELF virtual addresses (PIE, shared objects, the vDSO), prefers the
 * separate debug file (.gnu_debuglink, build-id under /usr/lib/debug) when the
 * binary is stripped, falls back to /tmp/perf-PID.map for JIT code and demangles C++.
 * Kernel addresses are named from a table of our own (kallsyms.h: a third of the
 * memory of libbcc's, and readable without euid 0).
 *
 * What this module adds: one symcache per process, a bounded number of them (the
 * least recently used first out, freed too by symbols_forget() when a process
 * exits), the kernel's table, and a refresh when a process changed under its
 * symcache. libbcc reads the maps once; so a miss in no module (a dlopen since, or a
 * JIT entry newer than the perf map) refreshes it, and so does another executable
 * behind /proc/PID/exe (an exec, or the pid reused: libbcc's own look at
 * /proc/PID/exe sees an exec only sometimes); both at most once a second per
 * process, because a refresh reads the maps and then each symbol table again. A
 * refresh for a miss that still did not name it doubles the wait before the next
 * one for a miss (up to 64 s): frame-pointer walks through code built without frame
 * pointers give addresses in no module (heap, stack) all the time.
 *
 * A symcache is made (and remade, instead of refreshed) only after a look at every file
 * libbcc would read for it (bccguard_process, a few stats per module; each file's ELF
 * facts are read once): when one of them would crash or hang libbcc, the process gets
 * no symcache (its native frames stay addresses), when only a debug file of one would,
 * a symcache that reads no debug files; one warning names each such file. For the same
 * reason /proc/PID/exe is compared every 10 ms while resolving (libbcc refreshes on its
 * own when the executable and the root changed) and a change drops the symcache.
 *
 * Costs: a symcache keeps its symbol tables (names read lazily) and one fd per
 * module it knows plus one for the process's root (14 for a python3.11 that
 * imported ssl, sqlite3 and decimal; more with more extension modules), so 64 of
 * them may need more than a soft RLIMIT_NOFILE of 1024 (libbcc falls back
 * to /proc/PID/root paths when it gets no fd; the tool's own fds may fail too). And
 * resolve a process's stacks before forgetting it: a symcache made after the exit
 * knows nothing. Not thread-safe; no global state (each tracker may have its own).
 */
#ifndef PYEBPF_SYMBOLS_H
#define PYEBPF_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* processes with a symcache at a time, unless symbols_open() is told otherwise */
#define SYMBOLS_MAX_PROCS 64
/* pid of kernel addresses (as for bcc_symcache_new) */
#define SYMBOLS_KERNEL_PID (-1)
/* from here up an address is the kernel's (x86_64 and arm64 alike) */
#define SYMBOLS_KERNEL_START 0x8000000000000000ULL

struct symbols;

/*
 * At most max_procs processes' symcaches at a time (0: SYMBOLS_MAX_PROCS). NULL when
 * out of memory. Nothing is read until the first resolve.
 */
struct symbols *symbols_open(unsigned max_procs);
void symbols_close(struct symbols *s);

/*
 * addr of process pid (a host pid) into buf (truncated to len, always terminated):
 *   user space:  "func+0xoff (module)", module the file's basename;
 *                "[unknown] (module)" in a module without a symbol there;
 *                "0xADDR" in no module;
 *   kernel:      "func", or "0xADDR"; kernel means pid <= 0 (SYMBOLS_KERNEL_PID) or
 *                addr >= SYMBOLS_KERNEL_START.
 * Returns 1 when a name was found, 0 when not, -1 when len is 0.
 */
int symbols_resolve(struct symbols *s, pid_t pid, uint64_t addr, char *buf, size_t len);

/*
 * addr as a frame of a folded stack or picture: symbols_resolve()'s "func+0xoff
 * (module)" as "func [module]" (offsets would split a flame graph), a kernel address
 * as "func [kernel]", anything else as symbols_resolve() wrote it ("0xADDR").
 */
void symbols_frame_name(struct symbols *s, pid_t pid, uint64_t addr, char *buf, size_t len);

/*
 * Reads the kernel's symbols now rather than at the first kernel address (5.1 MB and
 * about 54 ms here, bench/kallsyms.sh), so that a long run's memory does not step up later; says once on
 * stderr when kernel frames will stay addresses. Once per s; later calls do nothing.
 */
void symbols_load_kernel(struct symbols *s);

/* Frees pid's symcache (its process exited); the next resolve makes a new one. */
void symbols_forget(struct symbols *s, pid_t pid);

/* How many processes have a symcache now (at most max_procs). */
unsigned symbols_nprocs(const struct symbols *s);

/*
 * The other direction, what a uprobe needs: the file offset in binary of function
 * symbol name (its .symtab, .dynsym or separate debug file), or with name NULL of
 * the ELF virtual address vaddr (through the PT_LOAD segments). The one place the
 * tools turn a symbol or an address into a file offset. 0, or -1 when there is none.
 */
int symbols_file_offset(const char *binary, const char *name, uint64_t vaddr, uint64_t *offset);

/*
 * Whether libbcc may read binary's symbols and notes, with its debug files (bccguard.h:
 * SIGFPE, stack overflows, hangs on a hostile or broken file:
 * tests/fuzz/corpus/elf/bcc-*). symbols_file_offset, pyhooks.c and usdt.c ask before
 * they hand it a file; the symcaches here ask bccguard_process() about every file of a
 * process before libbcc reads it.
 */
bool symbols_elf_sane(const char *binary);

#endif
