/* Native addresses as names through libbcc's symcaches; see symbols.h for why. */
#include "symbols.h"

#include <bcc/bcc_syms.h>
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bccguard.h"
#include "bccmodules.h"
#include "caps.h"
#include "jsonfmt.h"
#include "kallsyms.h"
#include "log.h"

/* the least time between two refreshes of one process's symcache */
#define REFRESH_NS 1000000000ULL
/* ... after misses that refreshes did not name, up to this */
#define MISS_REFRESH_MAX_NS (64 * REFRESH_NS)
/* the most time between two looks at /proc/PID/exe while resolving (see proc_check_exe) */
#define EXE_CHECK_NS 10000000ULL
/* files warned about, each once (more are refused all the same, silently) */
#define WARNED_MAX 64

struct proc_syms {
	pid_t pid;           /* 0: a free slot */
	void *cache;         /* libbcc's symcache of pid; NULL: refused, or dropped (below) */
	uint64_t used;       /* s->clock at its last resolve: the LRU order */
	uint64_t loaded_ns;  /* when its maps were read (and checked) */
	uint64_t checked_ns; /* when /proc/PID/exe was last compared */
	uint64_t miss_gap_ns; /* least time from a refresh to one for a miss */
	dev_t exe_dev;       /* what /proc/PID/exe was then (0, 0: unreadable) */
	ino_t exe_ino;
};

struct symbols {
	struct bcc_symbol_option opt, opt_no_debug;
	struct bccguard *guard; /* what libbcc may read, and the files it has seen */
	struct kallsyms *kernel; /* read at symbols_load_kernel or the first kernel address */
	bool kernel_read;        /* ... once: NULL or empty after it, kernel frames stay addresses */
	uint64_t clock;    /* one tick per resolve, for the LRU order */
	unsigned n, max;   /* slots in use, slots */
	unsigned nwarned;
	struct {
		dev_t dev;
		ino_t ino;
	} warned[WARNED_MAX];
	struct proc_syms procs[];
};

struct symbols *symbols_open(unsigned max_procs)
{
	unsigned max = max_procs ? max_procs : SYMBOLS_MAX_PROCS;
	struct symbols *s = calloc(1, sizeof(*s) + max * sizeof(s->procs[0]));

	if (!s)
		return NULL;
	s->guard = bccguard_new();
	if (!s->guard) {
		free(s);
		return NULL;
	}
	s->max = max;
	/* libbcc's defaults, spelled out: functions only, debug files checked */
	s->opt.use_debug_file = 1;
	s->opt.check_debug_file_crc = 1;
	s->opt.lazy_symbolize = 1;
	s->opt.use_symbol_type = (1 << STT_FUNC) | (1 << STT_GNU_IFUNC);
	s->opt_no_debug = s->opt;
	s->opt_no_debug.use_debug_file = 0;
	return s;
}

static void proc_drop(struct proc_syms *p)
{
	if (p->cache)
		bcc_free_symcache(p->cache, p->pid);
	p->cache = NULL;
}

static void proc_free(struct symbols *s, struct proc_syms *p)
{
	proc_drop(p);
	memset(p, 0, sizeof(*p));
	s->n--;
}

void symbols_close(struct symbols *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->max; i++)
		if (s->procs[i].pid)
			proc_free(s, &s->procs[i]);
	kallsyms_free(s->kernel);
	bccguard_free(s->guard);
	free(s);
}

void symbols_forget(struct symbols *s, pid_t pid)
{
	for (unsigned i = 0; i < s->max; i++)
		if (pid > 0 && s->procs[i].pid == pid)
			proc_free(s, &s->procs[i]);
}

unsigned symbols_nprocs(const struct symbols *s)
{
	return s->n;
}

static void exe_identity(pid_t pid, dev_t *dev, ino_t *ino)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &st)) {
		*dev = 0;
		*ino = 0;
		return;
	}
	*dev = st.st_dev;
	*ino = st.st_ino;
}

/* One warning per file libbcc is kept from. */
static void warn_once(struct symbols *s, pid_t pid, const struct bccguard_finding *f)
{
	if (f->verdict == BCCGUARD_SAFE)
		return;
	for (unsigned i = 0; i < s->nwarned; i++)
		if (s->warned[i].dev == f->dev && s->warned[i].ino == f->ino)
			return;
	if (s->nwarned == WARNED_MAX)
		return;
	s->warned[s->nwarned].dev = f->dev;
	s->warned[s->nwarned++].ino = f->ino;
	log_warn("native frames of pid %d %s: %s: %s, which libbcc 0.26 cannot read safely", (int)pid,
		 f->verdict == BCCGUARD_UNSAFE ? "stay addresses" : "are named without debug files",
		 f->path, f->why);
}

/*
 * (Re)makes p's symcache, after a look at every file it would read (bccguard.h): none
 * when one of them is unsafe, one without debug files when only those are. A new
 * symcache rather than bcc_symcache_refresh: libbcc opens the modules through the
 * /proc/PID/root it opened with the symcache, and the look is through today's.
 */
static void proc_load(struct symbols *s, struct proc_syms *p, uint64_t now)
{
	struct bccguard_finding f;
	enum bccguard_verdict v;

	proc_drop(p);
	v = bccguard_process(s->guard, p->pid, &f);
	warn_once(s, p->pid, &f);
	if (v != BCCGUARD_UNSAFE)
		p->cache = bccmodules_symcache_new(p->pid, v == BCCGUARD_SAFE ? &s->opt : &s->opt_no_debug);
	p->loaded_ns = p->checked_ns = now;
	exe_identity(p->pid, &p->exe_dev, &p->exe_ino);
}

/* pid's slot, made (evicting the least recently used one when full). */
static struct proc_syms *proc_get(struct symbols *s, pid_t pid, uint64_t now)
{
	struct proc_syms *p = NULL, *lru = NULL;

	for (unsigned i = 0; i < s->max; i++) {
		struct proc_syms *q = &s->procs[i];

		if (q->pid == pid)
			return q;
		if (!q->pid)
			p = p ? p : q;
		else if (!lru || q->used < lru->used)
			lru = q;
	}
	if (!p) {
		proc_free(s, lru);
		p = lru;
	}
	p->pid = pid;
	p->miss_gap_ns = REFRESH_NS;
	s->n++;
	proc_load(s, p, now);
	return p;
}

/*
 * Another executable than at the last look (an exec, or the pid reused): read the maps
 * again, or, within a second of the last read, drop the symcache until then. Looked at
 * every EXE_CHECK_NS while resolving, not once a second: libbcc refreshes a symcache on
 * its own, unchecked, when the executable and the root or mount namespace changed.
 */
static void proc_check_exe(struct symbols *s, struct proc_syms *p, uint64_t now)
{
	dev_t dev;
	ino_t ino;

	if (now - p->checked_ns < EXE_CHECK_NS)
		return;
	p->checked_ns = now;
	exe_identity(p->pid, &dev, &ino);
	if (!dev && !ino)
		return; /* exited: what the symcache has is all there is */
	if (dev == p->exe_dev && ino == p->exe_ino)
		return;
	if (now - p->loaded_ns >= REFRESH_NS) {
		proc_load(s, p, now);
	} else {
		proc_drop(p);
		p->miss_gap_ns = REFRESH_NS;
	}
}

static const char *basename_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* libbcc names the perf map module when the address was in no other module. */
static bool is_perf_map(const char *module)
{
	const char *b = basename_of(module);
	size_t len = strlen(b);

	return !strncmp(b, "perf-", 5) && len > 9 && !strcmp(b + len - 4, ".map");
}

/* a refresh for a miss that did not name it: wait longer for the next one */
static void miss_backoff(struct proc_syms *p, bool named)
{
	p->miss_gap_ns = named ? REFRESH_NS
			       : (p->miss_gap_ns * 2 < MISS_REFRESH_MAX_NS ? p->miss_gap_ns * 2
									 : MISS_REFRESH_MAX_NS);
}

static int resolve_user(struct symbols *s, pid_t pid, uint64_t addr, char *buf, size_t len)
{
	uint64_t now = time_mono_ns();
	struct bcc_symbol sym;
	struct proc_syms *p;
	int named;

	p = proc_get(s, pid, now);
	p->used = ++s->clock;
	proc_check_exe(s, p, now);
	if (!p->cache) {
		/* refused (or dropped): look again when a refresh for a miss would */
		if (now - p->loaded_ns < p->miss_gap_ns)
			goto raw;
		proc_load(s, p, now);
		miss_backoff(p, p->cache != NULL);
		if (!p->cache)
			goto raw;
	}
	named = !bcc_symcache_resolve(p->cache, addr, &sym);
	if (!named && (!sym.module || is_perf_map(sym.module)) &&
	    now - p->loaded_ns >= p->miss_gap_ns) {
		bcc_symbol_free_demangle_name(&sym);
		proc_load(s, p, now);
		/*
		 * a frame-pointer walk through code built without them gives addresses
		 * (heap, stack) that no refresh names: wait longer after each such one
		 */
		named = p->cache && !bcc_symcache_resolve(p->cache, addr, &sym);
		miss_backoff(p, named);
		if (!p->cache)
			goto raw;
	}
	if (named)
		snprintf(buf, len, "%s+0x%" PRIx64 " (%s)",
			 sym.demangle_name ? sym.demangle_name : sym.name, sym.offset,
			 basename_of(sym.module));
	else if (sym.module && !is_perf_map(sym.module))
		snprintf(buf, len, "[unknown] (%s)", basename_of(sym.module));
	else
		snprintf(buf, len, "0x%" PRIx64, addr);
	bcc_symbol_free_demangle_name(&sym);
	return named;
raw:
	snprintf(buf, len, "0x%" PRIx64, addr);
	return 0;
}

void symbols_load_kernel(struct symbols *s)
{
	if (s->kernel_read)
		return;
	s->kernel_read = true;
	if (!(s->kernel = kallsyms_load(NULL)))
		log_warn("kernel stacks stay addresses: cannot read /proc/kallsyms: %s", strerror(errno));
	else if (!kallsyms_count(s->kernel) && !caps_have(CAP_SYSLOG))
		/* kptr_restrict 1, or 0 with perf_event_paranoid above 1 */
		log_warn("kernel stacks stay addresses: their names (/proc/kallsyms) need CAP_SYSLOG");
	else if (!kallsyms_count(s->kernel))
		log_warn("kernel stacks stay addresses: /proc/kallsyms hides them (kernel.kptr_restrict 2)");
}

static int resolve_kernel(struct symbols *s, uint64_t addr, char *buf, size_t len)
{
	const char *name;

	symbols_load_kernel(s);
	if (s->kernel && (name = kallsyms_name(s->kernel, addr, NULL))) {
		snprintf(buf, len, "%s", name);
		return 1;
	}
	snprintf(buf, len, "0x%" PRIx64, addr);
	return 0;
}

int symbols_resolve(struct symbols *s, pid_t pid, uint64_t addr, char *buf, size_t len)
{
	if (!len) {
		errno = EINVAL;
		return -1;
	}
	if (pid <= 0 || addr >= SYMBOLS_KERNEL_START)
		return resolve_kernel(s, addr, buf, len);
	return resolve_user(s, pid, addr, buf, len);
}

void symbols_frame_name(struct symbols *s, pid_t pid, uint64_t addr, char *buf, size_t len)
{
	char raw[512];
	char *mod, *plus;
	size_t n;

	if (addr >= SYMBOLS_KERNEL_START) {
		symbols_resolve(s, SYMBOLS_KERNEL_PID, addr, raw, sizeof(raw));
		snprintf(buf, len, "%s [kernel]", raw);
		return;
	}
	symbols_resolve(s, pid, addr, raw, sizeof(raw));
	n = strlen(raw);
	mod = n > 2 && raw[n - 1] == ')' ? strrchr(raw, '(') : NULL;
	if (!mod || mod == raw || mod[-1] != ' ') {
		snprintf(buf, len, "%s", raw);
		return;
	}
	mod[-1] = '\0';
	raw[n - 1] = '\0';
	plus = strstr(raw, "+0x");
	if (plus)
		*plus = '\0';
	snprintf(buf, len, "%s [%s]", raw, mod + 1);
}

bool symbols_elf_sane(const char *binary)
{
	return bccguard_file(NULL, binary, NULL);
}

int symbols_file_offset(const char *binary, const char *name, uint64_t vaddr, uint64_t *offset)
{
	struct bcc_symbol sym = { 0 };

	if (!symbols_elf_sane(binary))
		return -1;

	/* with no symbol name, libbcc only maps the address through the PT_LOAD segments */
	if (bcc_resolve_symname(binary, name, name ? 0 : vaddr, 0, NULL, &sym) < 0)
		return -1;
	*offset = sym.offset;
	free((void *)sym.module);
	return 0;
}
