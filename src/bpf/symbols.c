/* Native addresses as names through libbcc's symcaches; see symbols.h for why. */
#include "symbols.h"

#include <bcc/bcc_syms.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps.h"
#include "jsonfmt.h"
#include "log.h"

/* the least time between two refreshes of one process's symcache */
#define REFRESH_NS 1000000000ULL
/* ... after misses that refreshes did not name, up to this */
#define MISS_REFRESH_MAX_NS (64 * REFRESH_NS)

struct proc_syms {
	pid_t pid;           /* 0: a free slot */
	void *cache;         /* libbcc's symcache of pid */
	uint64_t used;       /* s->clock at its last resolve: the LRU order */
	uint64_t loaded_ns;  /* when its maps were read */
	uint64_t checked_ns; /* when /proc/PID/exe was last compared */
	uint64_t miss_gap_ns; /* least time from a refresh to one for a miss */
	dev_t exe_dev;       /* what /proc/PID/exe was then (0, 0: unreadable) */
	ino_t exe_ino;
};

struct symbols {
	struct bcc_symbol_option opt;
	void *kernel;      /* libbcc's kernel symcache, made at the first kernel address */
	bool kernel_empty; /* kallsyms gave no symbol: not root, or addresses hidden */
	uint64_t clock;    /* one tick per resolve, for the LRU order */
	unsigned n, max;   /* slots in use, slots */
	struct proc_syms procs[];
};

struct symbols *symbols_open(unsigned max_procs)
{
	unsigned max = max_procs ? max_procs : SYMBOLS_MAX_PROCS;
	struct symbols *s = calloc(1, sizeof(*s) + max * sizeof(s->procs[0]));

	if (!s)
		return NULL;
	s->max = max;
	/* libbcc's defaults, spelled out: functions only, debug files checked */
	s->opt.use_debug_file = 1;
	s->opt.check_debug_file_crc = 1;
	s->opt.lazy_symbolize = 1;
	s->opt.use_symbol_type = (1 << STT_FUNC) | (1 << STT_GNU_IFUNC);
	return s;
}

static void proc_free(struct symbols *s, struct proc_syms *p)
{
	bcc_free_symcache(p->cache, p->pid);
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
	if (s->kernel)
		bcc_free_symcache(s->kernel, SYMBOLS_KERNEL_PID);
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

/* pid's slot, made (evicting the least recently used one when full); NULL if no memory. */
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
	p->cache = bcc_symcache_new(pid, &s->opt);
	if (!p->cache)
		return NULL;
	p->pid = pid;
	p->loaded_ns = p->checked_ns = now;
	p->miss_gap_ns = REFRESH_NS;
	exe_identity(pid, &p->exe_dev, &p->exe_ino);
	s->n++;
	return p;
}

static void proc_refresh(struct proc_syms *p, uint64_t now)
{
	bcc_symcache_refresh(p->cache);
	p->loaded_ns = now;
}

/*
 * Another executable than at the last look (an exec, or the pid reused): read the
 * maps again. One look a second, and none within a second of a read.
 */
static void proc_check_exe(struct proc_syms *p, uint64_t now)
{
	dev_t dev;
	ino_t ino;

	if (now - p->checked_ns < REFRESH_NS || now - p->loaded_ns < REFRESH_NS)
		return;
	p->checked_ns = now;
	exe_identity(p->pid, &dev, &ino);
	if (!dev && !ino)
		return; /* exited: what the symcache has is all there is */
	if (dev != p->exe_dev || ino != p->exe_ino) {
		p->exe_dev = dev;
		p->exe_ino = ino;
		proc_refresh(p, now);
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

static int resolve_user(struct symbols *s, pid_t pid, uint64_t addr, char *buf, size_t len)
{
	uint64_t now = time_mono_ns();
	struct bcc_symbol sym;
	struct proc_syms *p;
	int named;

	p = proc_get(s, pid, now);
	if (!p)
		goto raw;
	p->used = ++s->clock;
	proc_check_exe(p, now);
	named = !bcc_symcache_resolve(p->cache, addr, &sym);
	if (!named && (!sym.module || is_perf_map(sym.module)) &&
	    now - p->loaded_ns >= p->miss_gap_ns) {
		bcc_symbol_free_demangle_name(&sym);
		proc_refresh(p, now);
		named = !bcc_symcache_resolve(p->cache, addr, &sym);
		/*
		 * a frame-pointer walk through code built without them gives addresses
		 * (heap, stack) that no refresh names: wait longer after each such one
		 */
		p->miss_gap_ns = named ? REFRESH_NS
				       : (p->miss_gap_ns * 2 < MISS_REFRESH_MAX_NS ? p->miss_gap_ns * 2
										 : MISS_REFRESH_MAX_NS);
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

static int resolve_kernel(struct symbols *s, uint64_t addr, char *buf, size_t len)
{
	struct bcc_symbol sym;

	if (!s->kernel && !s->kernel_empty) {
		s->kernel = bcc_symcache_new(SYMBOLS_KERNEL_PID, NULL);
		s->kernel_empty = !s->kernel;
	}
	if (!s->kernel_empty && !bcc_symcache_resolve_no_demangle(s->kernel, addr, &sym)) {
		snprintf(buf, len, "%s", sym.name);
		return 1;
	}
	/*
	 * libbcc reads kallsyms again at every address while it has no symbol; the top
	 * address is above every symbol, so a miss there means it has none.
	 */
	if (!s->kernel_empty && bcc_symcache_resolve_no_demangle(s->kernel, UINT64_MAX, &sym)) {
		s->kernel_empty = true;
		/*
		 * libbcc reads kallsyms for euid 0 only (bcc_procutils_each_ksym), and the kernel
		 * shows its addresses to CAP_SYSLOG only (kptr_restrict 1, or 0 with
		 * perf_event_paranoid above 1)
		 */
		if (geteuid() != 0)
			log_warn("kernel stacks stay addresses: libbcc reads kernel symbols as root (euid 0) only");
		else if (!caps_have(CAP_SYSLOG))
			log_warn("kernel stacks stay addresses: their names (/proc/kallsyms) need CAP_SYSLOG");
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

/*
 * The USDT notes of a .note.stapsdt section as libbcc reads them: each note whole
 * inside the section, its descriptor three addresses and three NUL-terminated strings
 * (provider, name, arguments) of sane length. libbcc trusts the sizes (a stack
 * overflow on tests/fuzz/corpus/elf/bcc-note-*).
 */
static bool notes_sane(Elf_Scn *scn)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	if (!data)
		return false;
	while (off < data->d_size) {
		const char *desc;
		size_t at = 24;
		next = gelf_getnote(data, off, &nh, &name_off, &desc_off);
		if (!next || next <= off || next > data->d_size)
			return false;
		if (nh.n_type == 3 && nh.n_namesz == 8 &&
		    !memcmp((const char *)data->d_buf + name_off, "stapsdt", 8)) {
			if (nh.n_descsz < 24 + 3 || desc_off + nh.n_descsz > data->d_size)
				return false;
			desc = (const char *)data->d_buf + desc_off;
			for (int i = 0; i < 3; i++) {
				const char *end = memchr(desc + at, 0, nh.n_descsz - at);
				if (!end || end - (desc + at) > 1024)
					return false;
				at = (size_t)(end - desc) + 1;
				if (i < 2 && at >= nh.n_descsz)
					return false;
			}
		}
		off = next;
	}
	return true;
}

/*
 * libbcc formats a build-id note's bytes as hex into a 128-byte stack buffer, however
 * long the note is (a stack overflow on tests/fuzz/corpus/elf/bcc-build-id-long): a
 * real build id is 20 or 32 bytes after the note's 16-byte header and "GNU".
 */
static bool build_id_sane(Elf_Scn *scn)
{
	Elf_Data *data = elf_getdata(scn, NULL);

	return data && data->d_size <= 16 + 63;
}

/* one place libbcc looks for a debug file: absent, or a regular file it can mmap */
static bool debug_candidate_sane(const char *dir, const char *sub, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	if ((size_t)snprintf(path, sizeof(path), "%s%s/%s", dir, sub, name) >= sizeof(path))
		return false;
	return stat(path, &st) ? errno == ENOENT || errno == ENOTDIR : S_ISREG(st.st_mode);
}

/*
 * libbcc reads a .gnu_debuglink's name as a C string without a bound, and opens and
 * checksums whatever file it names: a FIFO there hangs it in open(2), and a harness's
 * file /proc/self/fd/N makes a name like "0" its stdin (tests/fuzz/corpus/elf/
 * bcc-debuglink-stdin). Only a plain
 * file name is taken, and each of libbcc's three places for it (beside binary, in
 * .debug/ there, under /usr/lib/debug) must hold a regular file or nothing.
 */
static bool debuglink_sane(Elf_Scn *scn, const char *binary)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	char dir[PATH_MAX], global[PATH_MAX + 16];
	const char *name, *slash;

	if (!data || data->d_size <= 5)
		return true; /* libbcc ignores it */
	name = data->d_buf;
	if (!memchr(name, 0, data->d_size) || !*name || strchr(name, '/') ||
	    !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	slash = strrchr(binary, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if ((size_t)snprintf(dir, sizeof(dir), "%.*s", (int)(slash - binary), binary) >= sizeof(dir))
		return false;
	snprintf(global, sizeof(global), "/usr/lib/debug%s", dir);
	return debug_candidate_sane(dir, "", name) && debug_candidate_sane(dir, "/.debug", name) &&
	       debug_candidate_sane(global, "", name);
}

bool symbols_elf_sane(const char *binary)
{
	Elf_Scn *scn = NULL;
	bool sane = false;
	size_t stridx;
	Elf *elf;
	int fd;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return false;
	fd = open(binary, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF) {
		sane = true;
		if (elf_getshdrstrndx(elf, &stridx))
			stridx = 0; /* libbcc then finds no section by name */
		while (sane && (scn = elf_nextscn(elf, scn))) {
			const char *name;
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh)) {
				sane = false;
				continue;
			}
			name = stridx ? elf_strptr(elf, stridx, sh.sh_name) : NULL;
			if (name && !strcmp(name, ".note.gnu.build-id"))
				sane = build_id_sane(scn);
			else if (name && !strcmp(name, ".gnu_debuglink"))
				sane = debuglink_sane(scn, binary);
			if (!sane)
				break;
			if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM)
				sane = sh.sh_entsize == gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
			else if (sh.sh_type == SHT_NOTE)
				sane = notes_sane(scn);
		}
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return sane;
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
