/*
 * USDT probes (.note.stapsdt) as uprobes, for one process or for every process that
 * runs a binary, including semaphore-gated probes (all of CPython's are).
 *
 * How: libbcc reads the notes (bcc_usdt_new_frompath: locations, argument specs,
 * semaphore file offset). This module then
 *  - writes the argument readers itself, one BPF entry function per probe and group,
 *    reading registers through the x86_64 pt_regs ABI layout (no kernel header
 *    needed, so it also compiles against the built-in header set), and
 *  - attaches each location with bpf_attach_uprobe(..., ref_ctr_offset): the kernel
 *    raises the semaphore while the uprobe exists, also in processes started later,
 *    and lowers it when the fd closes, even after kill -9.
 * libbcc's own per-pid path (enable_probe + genargs) pokes the semaphore through
 * /proc/PID/mem instead, which a killed tool leaves raised; and genargs needs
 * enable, which fails system-wide for semaphore-gated probes.
 *
 * The tool's BPF text defines, for each probe it wants, a handler
 *     static __always_inline int HANDLER(struct pt_regs *ctx, const s64 *args)
 * args[i] is argument i+1 of the probe, sign- or zero-extended as its spec says
 * (at most USDT_MAX_ARGS). usdt_text() appends the entry functions that call it.
 */
#ifndef PYEBPF_USDT_H
#define PYEBPF_USDT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define USDT_MAX_ARGS 6

struct usdt;

struct usdt *usdt_new(void);
void usdt_free(struct usdt *u);

/*
 * Adds provider:probe of binary (a path openable from here, e.g. /proc/PID/root/usr/
 * bin/python3.11) with BPF handler HANDLER. pid > 0: only that process; pid <= 0:
 * every process running binary, now and later. Returns 0, 1 when binary has no such
 * probe (nothing said), or -1 after an error message (unreadable notes, argument
 * specs this module cannot read).
 */
int usdt_add(struct usdt *u, const char *binary, pid_t pid, const char *provider,
	     const char *probe, const char *handler);

/* Whether binary has the probe provider:probe (false also when it cannot be read). */
bool usdt_binary_has_probe(const char *binary, const char *provider, const char *probe);

/*
 * tool_text followed by the generated entry functions, as one malloc'd string (the
 * caller frees it); NULL when out of memory.
 */
char *usdt_text(const struct usdt *u, const char *tool_text);

/* How many probe locations were added (one uprobe each). */
int usdt_locations(const struct usdt *u);

/* One added probe location: what its uprobe needs (pyhooks.c attaches it). */
struct usdt_location {
	const char *binary;  /* the file the uprobe goes on */
	const char *probe;   /* provider:name */
	uint64_t offset;     /* file offset of the location */
	uint32_t ref_ctr;    /* file offset of its semaphore, 0 when ungated */
	pid_t pid;           /* -1: every process running binary */
	const char *fn;      /* the generated entry function */
};

/* Location i (0 <= i < usdt_locations), valid until u is freed; 0, or -1 out of range. */
int usdt_location(const struct usdt *u, int i, struct usdt_location *out);

#endif
