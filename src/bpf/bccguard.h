/*
 * What libbcc 0.26 may read of a target's files. Its ELF readers trust what a file
 * says: they divide by a symbol table's entry size (SIGFPE at 0), hex-format a build id
 * of any length into a 128-byte stack buffer, read notes' sizes unchecked, take a
 * .gnu_debuglink's name as a C string and open and checksum whatever file it names (a
 * FIFO hangs open(2); a name like "0" beside a /proc/self/fd/N path is one of the tool's
 * own fds). Its symcache (bcc_symcache_new) opens every executable mapping of
 * /proc/PID/maps by its path in the process's root, a FIFO put there included, then the
 * process's perf map, and reads each maps line into a PATH_MAX buffer. So a hostile or
 * broken file in a traced container would crash or hang the tool
 * (tests/fuzz/corpus/elf/bcc-*, tests/integration/test_hostile_elf.py). These checks
 * look first, at the paths libbcc will open, and say whether it may.
 *
 * A file's ELF facts are kept per (dev, inode, size, mtime, ctime), so a file is read
 * once however many processes map it; what lies beside it (debug-file candidates) is
 * looked at again each time (a stat).
 *
 * What no look beforehand can do: a file changed or replaced between the look and
 * libbcc's read is read as it is then. libbcc 0.26 (Debian's build, seen with strace)
 * opens a module by its /proc/PID/root path again to read its symbol table, at the
 * first address in it, and again for each name (with its debug file); a target that
 * swaps a FIFO in for a mapped library after the look can still hang it.
 */
#ifndef PYEBPF_BCCGUARD_H
#define PYEBPF_BCCGUARD_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

enum bccguard_verdict {
	BCCGUARD_SAFE,     /* libbcc may read it all */
	BCCGUARD_NO_DEBUG, /* only without separate debug files (use_debug_file 0) */
	BCCGUARD_UNSAFE,   /* not at all */
};

/* The worst file a check met (the first of them): which and why. */
struct bccguard_finding {
	enum bccguard_verdict verdict;
	char path[PATH_MAX]; /* as the tool opens it (/proc/PID/root/...) */
	char why[PATH_MAX + 96];
	dev_t dev; /* the file's identity; 0 and a hash of path when it has none */
	ino_t ino;
};

struct bccguard;

/* A cache of ELF facts (bounded); NULL when out of memory. */
struct bccguard *bccguard_new(void);
void bccguard_free(struct bccguard *g);

/*
 * binary as libbcc reads it by that path with its debug files (bcc_resolve_symname,
 * bcc_elf_foreach_sym, bcc_elf_foreach_usdt, bcc_usdt_new_frompath): true when it is
 * an ELF file it may read. g may be NULL (no cache), f too.
 */
bool bccguard_file(struct bccguard *g, const char *binary, struct bccguard_finding *f);

/*
 * Every file a symcache of pid (bcc_symcache_new, and its lookups) would open now: the
 * executable mappings (memfd ones through /proc/PID/fd, as libbcc finds them), their
 * debug files, the perf maps. A process without maps (gone) is SAFE: libbcc reads
 * nothing of it either. f may be NULL.
 */
enum bccguard_verdict bccguard_process(struct bccguard *g, pid_t pid, struct bccguard_finding *f);

#endif
