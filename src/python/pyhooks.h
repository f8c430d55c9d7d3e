/*
 * Hook plans for Python trackers: which uprobes and USDT probes go on which
 * interpreter binary (the python executable, or the libpython3.X.so it loads), for
 * the -p processes or for every CPython on the host, and what the run says about
 * the hook it chose.
 *
 * A plan is a list of hooks, each (binary, symbol or USDT provider:name, file
 * offset, pid filter, BPF function). pyhooks_text() appends the USDT entry
 * functions to the tracker's BPF text; pyhooks_attach() attaches the list.
 *
 * The tracker's planner decides, per binary, which hook is best; usually
 *  1. USDT probes where the build has them (pyhooks_add_usdt): attached with their
 *     semaphore's file offset, so the kernel raises it while the probe exists (also
 *     in processes started later) and lowers it when the tool's fds close;
 *  2. else uprobes on a function and its compiler clones (pyhooks_add_function, or
 *     pyhooks_clones + pyhooks_add_uprobe when each clone needs its own handler),
 *     or on a function of another library at an offset the tracker resolved
 *     (pyhooks_add_uprobe_at, e.g. libc's pthread_cond_timedwait@@GLIBC_2.3.2);
 *  3. else nothing, and it says why.
 * pyhooks_plan_pids and pyhooks_plan_system find the binaries and call it.
 */
#ifndef PYEBPF_PYHOOKS_H
#define PYEBPF_PYHOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpfprog.h"
#include "pyproc.h"

struct pyhook_plan;

struct pyhook_plan *pyhooks_new(void);
void pyhooks_free(struct pyhook_plan *plan);

enum pyhook_kind {
	PYHOOK_UPROBE,    /* a function's entry (or any instruction, by offset) */
	PYHOOK_URETPROBE, /* a function's return */
	PYHOOK_USDT,      /* one location of a USDT probe (a uprobe with its semaphore) */
};

struct pyhook {
	enum pyhook_kind kind;
	char *binary;     /* the file the uprobe goes on, openable from here */
	char *what;       /* the symbol, or the USDT probe as provider:name */
	uint64_t offset;  /* file offset in binary */
	uint32_t ref_ctr; /* USDT: the semaphore's file offset (0: ungated) */
	pid_t pid;        /* > 0: that process only; -1: every process running binary */
	char *fn;         /* the BPF function it runs */
};

/* The planned hooks, in the order they attach. */
int pyhooks_count(const struct pyhook_plan *plan);
const struct pyhook *pyhooks_get(const struct pyhook_plan *plan, int i);

/* A USDT probe and the BPF handler its entry functions call (usdt.h). */
struct pyhook_usdt {
	const char *probe;
	const char *handler;
};

/*
 * Every probe of probes (ending with a NULL probe) of provider in binary, or none:
 * 0 when all were added, 1 when binary lacks one of them, -1 after an error message
 * (then nothing of them is in the plan). pid > 0: that process only; else every
 * process running binary.
 */
int pyhooks_add_usdt(struct pyhook_plan *plan, const char *binary, pid_t pid,
		     const char *provider, const struct pyhook_usdt *probes);

/*
 * A uprobe (ret: a uretprobe) running fn on function symbol of binary (its .symtab,
 * .dynsym or separate debug file). 0, 1 when binary has no such symbol, -1 out of memory.
 */
int pyhooks_add_uprobe(struct pyhook_plan *plan, const char *binary, pid_t pid,
		       const char *symbol, const char *fn, bool ret);
/* The same at a file offset the caller found; label names it in messages. 0 or -1. */
int pyhooks_add_uprobe_at(struct pyhook_plan *plan, const char *binary, pid_t pid,
			  const char *label, uint64_t offset, const char *fn, bool ret);

/*
 * A function and its compiler clones: symbol itself and symbol.<suffix>, e.g. GCC's
 * .constprop.N, .isra.N, .part.N, which are functions of their own (each needs its
 * own uprobe). At most PYHOOKS_MAX_CLONES, each name once.
 */
#define PYHOOKS_MAX_CLONES 8
struct pyhook_clones {
	int n;
	char names[PYHOOKS_MAX_CLONES][128];
};
/* Fills out (n 0 when there is none, or binary cannot be read); returns out->n. */
int pyhooks_clones(const char *binary, const char *symbol, struct pyhook_clones *out);

/*
 * entry_fn on the entry of symbol and of each of its clones, return_fn (NULL: none) on
 * their returns. Returns how many functions were hooked (0: none found), or -1.
 */
int pyhooks_add_function(struct pyhook_plan *plan, const char *binary, pid_t pid,
			 const char *symbol, const char *entry_fn, const char *return_fn);

/*
 * The path to hook a file by for every process (pid -1): host_path (/proc/PID/root/...,
 * pyproc's) dies with PID, which may be a short-lived process, so path, the file as
 * the process sees it, when it names the same file from here (no container in
 * between); else host_path.
 */
const char *pyhooks_every_process_path(const char *path, const char *host_path);

/* What a planner is asked to hook: one interpreter binary. */
struct pyhook_target {
	const char *binary;      /* where the hooks go: a path openable from here */
	const struct pyproc *py; /* a CPython running it (version, module); NULL for an
				    installed interpreter no process runs yet */
	pid_t pid;               /* > 0: that process only (-p); -1: every process running binary */
};

struct pyhook_planner {
	/*
	 * Plans the hooks of t. 0: planned, how says which ("USDT python:gc__start/
	 * gc__done"); 1: t has none of the hooks, how says why as the end of a sentence
	 * about it ("has no USDT gc probes ...: its collections cannot be traced");
	 * -1 after an error message. On 1 and -1, what it planned for t is dropped.
	 */
	int (*plan)(void *ctx, struct pyhook_plan *plan, const struct pyhook_target *t,
		    char *how, size_t howlen);
	/*
	 * Each CPython process found (NULL: none is kept). It may keep py (returns true;
	 * then it closes it, and py stays valid for plan) or not (then it is closed).
	 */
	bool (*keep)(void *ctx, struct pyproc *py);
	void *ctx;
	/* system-wide: plan each process by its pid instead of each binary once for all */
	bool each_process;
	/*
	 * -p with --children: each binary once, for every process running it (pid -1;
	 * the tracker's BPF filter picks the targets and their children)
	 */
	bool children;
};

/*
 * -p: each pid that is a CPython the planner can hook ("pid N: CPython 3.11.2 in
 * /usr/bin/python3.11: <how>" on stderr); a pid that is gone, not CPython or not
 * hookable is skipped with one warning (pytargets_say_skipped). How many pids were
 * planned (0: none is left to trace), or -1 after an error message.
 */
int pyhooks_plan_pids(struct pyhook_plan *plan, const pid_t *pids, int npids,
		      const struct pyhook_planner *p);

/*
 * Without -p: every interpreter binary a running CPython uses, once per file (by
 * device and inode) for every process running it, also ones started later; then
 * the installed /usr/bin/python3.* and /usr/local/bin/python3.* no process runs
 * yet (t->py NULL). Says on stderr what each got. Returns how many binaries got
 * hooks (0: the caller says what to do), or -1 after an error message.
 */
int pyhooks_plan_system(struct pyhook_plan *plan, const struct pyhook_planner *p);

/*
 * tool_text followed by the plan's USDT entry functions, as one malloc'd string
 * (the caller frees it); NULL when out of memory.
 */
char *pyhooks_text(const struct pyhook_plan *plan, const char *tool_text);

/*
 * Attaches every hook of the plan to p's functions; those of a pid that has exited
 * since are left out with a warning. 0, or -1 after an error message.
 */
int pyhooks_attach(const struct pyhook_plan *plan, struct bpfprog *p);

#endif
