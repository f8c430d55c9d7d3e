/* What libbcc 0.26 may read of a target's files; see bccguard.h for why. */
#define _GNU_SOURCE
#include "bccguard.h"
#include "bccmodules.h"

#include <ctype.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fnv.h"

/* files whose facts are kept */
#define CACHE_MAX 256
/* build-id bytes whose hex and NUL fit libbcc's 128-byte buffer */
#define BUILD_ID_MAX 63

/* What libbcc takes from one file, read once per identity. */
struct facts {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim, ctim;
	uint64_t used; /* the cache's LRU order; 0: a free slot */
	bool regular;
	bool elf;        /* libelf reads it as ELF (else libbcc takes no symbols from it) */
	bool symtabs_ok; /* every section header readable, symbol tables of ELF symbol size */
	bool notes_ok;   /* .note.stapsdt notes whole and sane (USDT) */
	bool build_id_ok;
	char build_id[2 * BUILD_ID_MAX + 1]; /* hex of the one libbcc takes, "" none */
	bool link_ok;                       /* no .gnu_debuglink, or a plain file name */
	char link[NAME_MAX + 1];            /* that name, "" none */
	char trouble[96];                   /* what is wrong, for a finding */
};

struct bccguard {
	uint64_t clock;
	/*
	 * while bccguard_process looks: /proc/PID/root opened once, and that prefix; paths
	 * under it are looked up from the fd as libbcc does (openat), half the cost of a
	 * walk through /proc each time
	 */
	int rootfd;
	char root[32];
	size_t rootlen;
	struct facts cache[CACHE_MAX];
};

struct bccguard *bccguard_new(void)
{
	struct bccguard *g = calloc(1, sizeof(struct bccguard));

	if (g)
		g->rootfd = -1;
	return g;
}

/* path under g's root, relative to its fd, or NULL */
static const char *under_root(const struct bccguard *g, const char *path)
{
	const char *rest;

	if (!g || g->rootfd < 0 || strncmp(path, g->root, g->rootlen))
		return NULL;
	rest = path + g->rootlen;
	rest += strspn(rest, "/");
	return *rest ? rest : NULL;
}

static int look_stat(const struct bccguard *g, const char *path, struct stat *st)
{
	const char *rel = under_root(g, path);

	return rel ? fstatat(g->rootfd, rel, st, 0) : stat(path, st);
}

static int look_open(const struct bccguard *g, const char *path, int flags)
{
	const char *rel = under_root(g, path);

	return rel ? openat(g->rootfd, rel, flags) : open(path, flags);
}

void bccguard_free(struct bccguard *g)
{
	free(g);
}

/*
 * The USDT notes of a .note.stapsdt section as libbcc reads them: each note whole
 * inside the section, its descriptor three addresses and three NUL-terminated strings
 * (provider, name, arguments) of sane length. libbcc trusts the sizes (a stack
 * overflow on tests/fuzz/corpus/elf/bcc-note-*).
 */
static bool notes_sane(Elf_Data *data)
{
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	if (!data || !data->d_buf)
		return !data || !data->d_size;
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
 * A build-id note as libbcc's find_buildid reads it: its bytes after the 16-byte header
 * and "GNU" as hex, into a 128-byte stack buffer however long the note is (a stack
 * overflow on tests/fuzz/corpus/elf/bcc-build-id-long). A real one has 20 or 32 bytes.
 * A section without data (SHT_NOBITS) has a size but no bytes: libbcc reads them all
 * the same (a NULL dereference).
 */
static void read_build_id(Elf_Data *data, bool first, struct facts *f)
{
	const unsigned char *b;

	if (!data || data->d_size <= 16)
		return;
	if (!data->d_buf || data->d_size > 16 + BUILD_ID_MAX) {
		f->build_id_ok = false;
		snprintf(f->trouble, sizeof(f->trouble), "a build id of %zu bytes", data->d_size - 16);
		return;
	}
	b = data->d_buf;
	if (!first || memcmp(b + 12, "GNU", 4))
		return;
	for (size_t i = 16; i < data->d_size; i++)
		snprintf(f->build_id + 2 * (i - 16), 3, "%02x", b[i]);
}

/*
 * A .gnu_debuglink as libbcc's find_debuglink reads it: a C string at the start (read
 * without a bound) and a CRC in the last four bytes (read through a NULL pointer for a
 * section without data). Only a plain file name is taken, and not one of digits only:
 * beside a module libbcc opened as /proc/self/fd/N, "0" is the tool's own stdin
 * (tests/fuzz/corpus/elf/bcc-debuglink-stdin).
 */
static void read_debuglink(Elf_Data *data, bool first, struct facts *f)
{
	const char *name;
	size_t len;

	if (!data || data->d_size <= 5)
		return; /* libbcc ignores it */
	name = data->d_buf;
	len = name ? strnlen(name, data->d_size) : data->d_size;
	if (!name || len == data->d_size || !len || len > NAME_MAX || strchr(name, '/') ||
	    !strcmp(name, ".") || !strcmp(name, "..") || strspn(name, "0123456789") == len) {
		f->link_ok = false;
		snprintf(f->trouble, sizeof(f->trouble), "a .gnu_debuglink that is no plain file name");
		return;
	}
	if (first)
		memcpy(f->link, name, len + 1);
}

/* fd's ELF facts (section headers, symbol tables, notes, build id, debug link). */
static void read_facts(int fd, struct facts *f)
{
	bool seen_id = false, seen_link = false;
	Elf_Scn *scn = NULL;
	size_t stridx;
	Elf *elf;

	f->symtabs_ok = f->notes_ok = f->build_id_ok = f->link_ok = true;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	f->elf = elf && elf_kind(elf) == ELF_K_ELF;
	if (!f->elf)
		goto out;
	if (elf_getshdrstrndx(elf, &stridx))
		stridx = 0; /* libbcc then finds no section by name */
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh)) {
			f->symtabs_ok = false;
			snprintf(f->trouble, sizeof(f->trouble), "a section header libelf cannot read");
			break;
		}
		name = stridx ? elf_strptr(elf, stridx, sh.sh_name) : NULL;
		if (name && !strcmp(name, ".note.gnu.build-id")) {
			read_build_id(elf_getdata(scn, NULL), !seen_id, f);
			seen_id = true;
		} else if (name && !strcmp(name, ".gnu_debuglink")) {
			read_debuglink(elf_getdata(scn, NULL), !seen_link, f);
			seen_link = true;
		}
		if ((sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) &&
		    sh.sh_entsize != gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT)) {
			f->symtabs_ok = false;
			snprintf(f->trouble, sizeof(f->trouble),
				 "a symbol table of entry size %ju (libbcc divides by it)",
				 (uintmax_t)sh.sh_entsize);
			break;
		}
		if (sh.sh_type == SHT_NOTE && f->notes_ok && !notes_sane(elf_getdata(scn, NULL))) {
			f->notes_ok = false;
			if (f->build_id_ok && f->link_ok)
				snprintf(f->trouble, sizeof(f->trouble), "notes whose sizes libbcc would overrun");
		}
	}
out:
	if (elf)
		elf_end(elf);
}

static bool same_identity(const struct facts *f, const struct stat *st)
{
	return f->dev == st->st_dev && f->ino == st->st_ino && f->size == st->st_size &&
	       f->mtim.tv_sec == st->st_mtim.tv_sec && f->mtim.tv_nsec == st->st_mtim.tv_nsec &&
	       f->ctim.tv_sec == st->st_ctim.tv_sec && f->ctim.tv_nsec == st->st_ctim.tv_nsec;
}

/*
 * The facts of the file at path (from g's cache when it has them, else into *tmp), or
 * NULL when there is no file there: libbcc's open or access(2) fails then too. Only a
 * regular file is opened (so that looking never hangs nor touches a device), and
 * without blocking, in case it was swapped for a FIFO since the stat.
 */
static const struct facts *facts_of(struct bccguard *g, const char *path, struct facts *tmp)
{
	struct facts *f = tmp;
	struct stat st, fst;
	int fd;

	if (look_stat(g, path, &st))
		return NULL;
	memset(tmp, 0, sizeof(*tmp));
	tmp->dev = st.st_dev;
	tmp->ino = st.st_ino;
	if (!S_ISREG(st.st_mode))
		return tmp;
	if (g) {
		struct facts *lru = &g->cache[0];

		for (int i = 0; i < CACHE_MAX; i++) {
			struct facts *c = &g->cache[i];

			if (c->used && same_identity(c, &st)) {
				c->used = ++g->clock;
				return c;
			}
			if (c->used < lru->used)
				lru = c;
		}
		f = lru;
	}
	fd = look_open(g, path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &fst) || !S_ISREG(fst.st_mode) || fst.st_dev != st.st_dev ||
	    fst.st_ino != st.st_ino) {
		if (fd >= 0)
			close(fd);
		return tmp; /* changed under the look: not regular, as far as this look knows */
	}
	memset(f, 0, sizeof(*f));
	f->dev = fst.st_dev;
	f->ino = fst.st_ino;
	f->size = fst.st_size;
	f->mtim = fst.st_mtim;
	f->ctim = fst.st_ctim;
	f->regular = true;
	read_facts(fd, f);
	close(fd);
	if (g)
		f->used = ++g->clock;
	return f;
}

static void finding(struct bccguard_finding *out, enum bccguard_verdict v, const char *path,
		    dev_t dev, ino_t ino, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Keeps the first of the worst findings. */
static void finding(struct bccguard_finding *out, enum bccguard_verdict v, const char *path,
		    dev_t dev, ino_t ino, const char *fmt, ...)
{
	va_list ap;

	if (!out || v <= out->verdict)
		return;
	out->verdict = v;
	snprintf(out->path, sizeof(out->path), "%s", path);
	va_start(ap, fmt);
	vsnprintf(out->why, sizeof(out->why), fmt, ap);
	va_end(ap);
	if (!dev && !ino) {
		/* FNV-1a of the path: an identity for warning once */
		ino = (ino_t)fnv1a64(path, strlen(path));
	}
	out->dev = dev;
	out->ino = ino;
}

/*
 * A debug file libbcc would read the symbol tables of (after access(2), or straight
 * open(2)): absent, or a regular file whose symbol tables it can read.
 */
static bool debug_file_ok(struct bccguard *g, const char *path, char *why, size_t len)
{
	struct facts tmp;
	const struct facts *f = facts_of(g, path, &tmp);

	if (!f)
		return true;
	if (!f->regular)
		snprintf(why, len, "%s, not a regular file", path);
	else if (f->elf && !f->symtabs_ok)
		snprintf(why, len, "%s with %s", path, f->trouble);
	else
		return true;
	return false;
}

/* /proc/self/fd or /proc/PID/fd */
static bool fd_dir(const char *dir)
{
	int n = -1;

	if (!strcmp(dir, "/proc/self/fd"))
		return true;
	sscanf(dir, "/proc/%*[0-9]/fd%n", &n);
	return n > 0 && !dir[n];
}

/*
 * The debug files libbcc's find_debug_file would try for a module it opened as
 * bcc_path: the build id's under BCC_DEBUGINFO_ROOT (or /usr/lib/debug), then the
 * debug link's beside bcc_path, in .debug/ there and under /usr/lib/debug; the same
 * paths, truncated the same way. (BCC_SYMFS, when set, is trusted: its user made it.)
 */
static bool debug_files_ok(struct bccguard *g, const struct facts *f, const char *const *bcc_paths,
			   int npaths, char *why, size_t len)
{
	char fullpath[PATH_MAX], tmppath[PATH_MAX];

	if (f->build_id[0]) {
		const char *root = getenv("BCC_DEBUGINFO_ROOT");

		snprintf(fullpath, sizeof(fullpath), "%s/.build-id/%c%c/%s.debug",
			 root ? root : "/usr/lib/debug", f->build_id[0], f->build_id[1], f->build_id + 2);
		if (!debug_file_ok(g, fullpath, why, len))
			return false;
	}
	for (int i = 0; f->link[0] && i < npaths; i++) {
		const char *bindir;

		snprintf(tmppath, sizeof(tmppath), "%s", bcc_paths[i]); /* libbcc's strncpy, cut the same */
		bindir = dirname(tmppath);
		/* beside /proc/self/fd/N there are numbers only, and the name is none */
		snprintf(fullpath, sizeof(fullpath), "%s/%s", bindir, f->link);
		if (!fd_dir(bindir) && !debug_file_ok(g, fullpath, why, len))
			return false;
		snprintf(fullpath, sizeof(fullpath), "%s/.debug/%s", bindir, f->link);
		if (!fd_dir(bindir) && !debug_file_ok(g, fullpath, why, len))
			return false;
		snprintf(fullpath, sizeof(fullpath), "/usr/lib/debug%s/%s", bindir, f->link);
		if (!debug_file_ok(g, fullpath, why, len))
			return false;
	}
	return true;
}

/*
 * One file libbcc opens at path (also under the names bcc_paths, which decide where it
 * looks for debug files): its verdict, into out. Returns the file's facts (NULL: none).
 */
static const struct facts *check_file(struct bccguard *g, const char *path, const char *const *bcc_paths,
				      int npaths, struct facts *tmp, struct bccguard_finding *out,
				      enum bccguard_verdict *v)
{
	const struct facts *f = facts_of(g, path, tmp);
	char why[sizeof(out->why)];

	*v = BCCGUARD_SAFE;
	if (!f)
		return NULL;
	if (f != tmp) {
		/* the debug files' looks below may reuse cache slots: keep a copy */
		*tmp = *f;
		f = tmp;
	}
	if (!f->regular) {
		*v = BCCGUARD_UNSAFE;
		finding(out, *v, path, f->dev, f->ino, "not a regular file (libbcc's open(2) may hang on it)");
	} else if (f->elf && !f->symtabs_ok) {
		*v = BCCGUARD_UNSAFE;
		finding(out, *v, path, f->dev, f->ino, "%s", f->trouble);
	} else if (f->elf && (!f->build_id_ok || !f->link_ok)) {
		*v = BCCGUARD_NO_DEBUG;
		finding(out, *v, path, f->dev, f->ino, "%s", f->trouble);
	} else if (f->elf && !debug_files_ok(g, f, bcc_paths, npaths, why, sizeof(why))) {
		*v = BCCGUARD_NO_DEBUG;
		finding(out, *v, path, f->dev, f->ino, "its debug file %s", why);
	}
	return f;
}

bool bccguard_file(struct bccguard *g, const char *binary, struct bccguard_finding *out)
{
	const char *paths[] = { binary };
	enum bccguard_verdict v;
	struct facts tmp;
	const struct facts *f;

	if (out)
		memset(out, 0, sizeof(*out));
	f = check_file(g, binary, paths, 1, &tmp, out, &v);
	if (f && v == BCCGUARD_SAFE && f->elf && !f->notes_ok) {
		v = BCCGUARD_UNSAFE;
		finding(out, v, binary, f->dev, f->ino, "%s", "notes whose sizes libbcc would overrun");
	}
	return f && f->elf && v == BCCGUARD_SAFE;
}

/* libbcc's bcc_mapping_is_file_backed */
static bool file_backed(const char *name)
{
	static const char *const not_files[] = { "//anon", "/dev/zero", "/anon_hugepage", "[stack",
						 "/SYSV", "[heap]", "[vsyscall]" };

	if (!*name)
		return false;
	for (size_t i = 0; i < sizeof(not_files) / sizeof(not_files[0]); i++)
		if (!strncmp(name, not_files[i], strlen(not_files[i])))
			return false;
	return true;
}

/* libbcc's _procutils_memfd_path: the first entry of /proc/PID/fd with that inode. */
static bool memfd_path(pid_t pid, unsigned long inode, char *out, size_t len)
{
	char dir[64];
	struct dirent *d;
	struct stat st;
	bool found = false;
	DIR *dp;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	dp = opendir(dir);
	if (!dp)
		return false;
	while (!found && (d = readdir(dp))) {
		snprintf(out, len, "%s/%s", dir, d->d_name);
		found = !stat(out, &st) && st.st_ino == inode;
	}
	closedir(dp);
	return found;
}

/*
 * A module libbcc's symcache adds: it opens name in the process's root (openat on
 * /proc/PID/root, then reads it as /proc/self/fd/N), or when that fails as
 * /proc/PID/root followed by name. One libbcc gives without enter_ns (a memfd's
 * /proc/PID/fd/N, the host's perf map) is opened so too, or not at all when the process
 * has a root of its own (bccmodules.h).
 */
static enum bccguard_verdict check_module(struct bccguard *g, pid_t pid, const char *name,
					  bool enter_ns, struct bccguard_finding *out)
{
	char at[PATH_MAX + 64], fallback[PATH_MAX + 64];
	const char *paths[] = { "/proc/self/fd/3", fallback };
	enum bccguard_verdict v, v2;
	struct facts tmp;

	if (!enter_ns && !bccmodules_shares_root(pid))
		return BCCGUARD_SAFE;
	snprintf(at, sizeof(at), "/proc/%d/root/%s", (int)pid, name + strspn(name, "/"));
	snprintf(fallback, sizeof(fallback), "/proc/%d/root%s", (int)pid, name);
	check_file(g, at, paths, 2, &tmp, out, &v);
	if (strcmp(at, fallback) && *name != '/') {
		check_file(g, fallback, paths + 1, 1, &tmp, out, &v2);
		v = v2 > v ? v2 : v;
	}
	return v;
}

/* libbcc's bcc_perf_map_nstgid: the last number of the last line naming Tgid. */
static int perf_map_nstgid(pid_t pid)
{
	char path[64], line[256];
	int nstgid = pid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *tab = strrchr(line, '\t');
		if (strstr(line, "Tgid:") && tab)
			nstgid = (int)strtol(tab, NULL, 10);
	}
	fclose(f);
	return nstgid;
}

/* The perf maps libbcc adds last: /tmp/perf-NSTGID.map in the process's root, then the host's /tmp/perf-PID.map. */
static enum bccguard_verdict check_perf_maps(struct bccguard *g, pid_t pid, struct bccguard_finding *out)
{
	char link[64], target[4096], name[4096 + 64];
	enum bccguard_verdict v = BCCGUARD_SAFE, v2;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/root", (int)pid);
	n = readlink(link, target, sizeof(target) - 1);
	if (n >= 0) {
		target[n] = 0;
		if (!strcmp(target, "/"))
			target[0] = 0;
		snprintf(name, sizeof(name), "%s/tmp/perf-%d.map", target, perf_map_nstgid(pid));
		v = check_module(g, pid, name, true, out);
	}
	snprintf(name, sizeof(name), "/tmp/perf-%d.map", (int)pid);
	v2 = check_module(g, pid, name, false, out);
	return v2 > v ? v2 : v;
}

/* The module names already checked in one look at a process's maps (libbcc adds each once). */
struct names {
	char **v;
	int n, cap;
};

static bool names_add(struct names *s, const char *name)
{
	char **nv;

	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], name))
			return false;
	if (s->n == s->cap) {
		nv = realloc(s->v, (size_t)(s->cap ? 2 * s->cap : 32) * sizeof(*nv));
		if (!nv)
			return true;
		s->v = nv;
		s->cap = s->cap ? 2 * s->cap : 32;
	}
	s->v[s->n] = strdup(name);
	if (s->v[s->n])
		s->n++;
	return true;
}

static void names_free(struct names *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
}

enum bccguard_verdict bccguard_process(struct bccguard *g, pid_t pid, struct bccguard_finding *out)
{
	struct bccguard_finding local;
	struct bccguard *own = NULL;
	enum bccguard_verdict worst = BCCGUARD_SAFE, v;
	struct names seen = { 0 };
	char path[64], memfd[PATH_MAX];
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	FILE *maps;

	if (!out)
		out = &local;
	memset(out, 0, sizeof(*out));
	if (!g && !(g = own = bccguard_new()))
		return BCCGUARD_UNSAFE; /* no memory to look with */
	g->rootlen = (size_t)snprintf(g->root, sizeof(g->root), "/proc/%d/root/", (int)pid);
	g->rootfd = open(g->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	maps = fopen(path, "re");
	/* read as libbcc's _procfs_maps_each_module does: fscanf, %[^\n] into PATH_MAX + 1 */
	while (maps && worst != BCCGUARD_UNSAFE && (len = getline(&line, &cap, maps)) > 0) {
		unsigned long start, end, major, minor, inode;
		unsigned long long off;
		char perm[5], *name;
		int pos = -1;

		if (line[len - 1] == '\n')
			line[--len] = 0;
		if (sscanf(line, "%lx-%lx %4s %llx %lx:%lx %lu%n", &start, &end, perm, &off, &major,
			   &minor, &inode, &pos) != 7 || pos < 0 || !line[pos])
			break; /* libbcc stops there too */
		if (strlen(line + pos) > PATH_MAX) {
			worst = BCCGUARD_UNSAFE;
			/* the path, cut: all of it is of no use in a message */
			snprintf(memfd, 100, "%s", line + pos + strspn(line + pos, " "));
			strcpy(memfd + strlen(memfd), "...");
			finding(out, worst, memfd, 0, 0,
				"a mapping whose %s line is %zu characters long, more than libbcc's buffer of %d",
				path, strlen(line), PATH_MAX + 1);
			break;
		}
		if (perm[2] != 'x')
			continue;
		name = line + pos;
		while (isspace((unsigned char)*name))
			name++;
		if (!file_backed(name))
			continue;
		if (strstr(name, "/memfd:") && memfd_path(pid, inode, memfd, sizeof(memfd))) {
			if (names_add(&seen, memfd))
				v = check_module(g, pid, memfd, false, out);
			else
				continue;
		} else if (names_add(&seen, name)) {
			v = check_module(g, pid, name, true, out);
		} else {
			continue;
		}
		worst = v > worst ? v : worst;
	}
	free(line);
	if (maps)
		fclose(maps);
	names_free(&seen);
	if (worst != BCCGUARD_UNSAFE) {
		v = check_perf_maps(g, pid, out);
		worst = v > worst ? v : worst;
	}
	if (g->rootfd >= 0)
		close(g->rootfd);
	g->rootfd = -1;
	bccguard_free(own);
	return worst;
}
