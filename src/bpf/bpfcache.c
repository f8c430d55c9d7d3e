/* The compile cache (bpfcache.h). */
#define _GNU_SOURCE
#include "bpfcache.h"

#include <bcc/bcc_common.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "fnv.h"
#include "log.h"

enum {
	FILE_MAGIC = 0x31636270, /* "pbc1" */
	MAX_FILE = 64 << 20,
	STALE_TMP_S = 600,       /* a writer that died left its temporary file */
};

/* A file: this head, the key, then the program's image (bpfobj_save). */
struct file_head {
	uint32_t magic, zero;
	uint64_t key_len;
};

/* The identity of a file's present content, as stat tells it: false when it has none. */
static bool put_file_id(FILE *f, const char *what, const char *path)
{
	struct stat st;

	if (stat(path, &st))
		return false;
	fprintf(f, "%s %s %llu:%llu:%lld:%lld.%09ld\n", what, path, (unsigned long long)st.st_dev,
		(unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
		st.st_mtim.tv_nsec);
	return true;
}

char *bpfcache_key(const char *text, const struct cflags *cf, const struct kheaders *kh, size_t *len)
{
	char *key = NULL, cpus[64] = "", autoconf[PATH_MAX + 40];
	struct utsname u;
	Dl_info bcc;
	FILE *f, *c;
	bool ok;

	*len = 0;
	c = fopen("/sys/devices/system/cpu/possible", "re");
	if (c) {
		if (!fgets(cpus, sizeof(cpus), c))
			cpus[0] = 0;
		fclose(c);
	}
	if (!cpus[0] || uname(&u) || !dladdr((void *)bpf_module_create_c_from_string, &bcc) || !bcc.dli_fname)
		return NULL;
	f = open_memstream(&key, len);
	if (!f)
		return NULL;
	fprintf(f, "pyebpf compile cache 1\nkernel %s %s %s\npossible cpus %s", u.release, u.version, u.machine,
		cpus);
	/* this executable covers pyebpf's own part (the built-in headers, the image format) */
	ok = put_file_id(f, "exe", "/proc/self/exe") && put_file_id(f, "libbcc", bcc.dli_fname);
	if (kh->builtin) {
		fputs("headers built-in\n", f);
	} else {
		/* a package update rewrites the generated config; the merged trees' own folders are new each run */
		snprintf(autoconf, sizeof(autoconf), "%s/include/generated/autoconf.h", kh->dir);
		fprintf(f, "headers %s\n", kh->what);
		if (!put_file_id(f, "autoconf", autoconf))
			ok = ok && put_file_id(f, "headers-dir", kh->dir);
	}
	for (int i = 0; cf && i < cf->n; i++)
		fprintf(f, "cflag %s\n", cf->v[i]);
	fprintf(f, "text\n%s", text);
	if (fclose(f) || !ok) {
		free(key);
		*len = 0;
		return NULL;
	}
	return key;
}

/* Whether st is ours alone: the effective user's, writable by nobody else. */
static bool ours_alone(const struct stat *st)
{
	return st->st_uid == geteuid() && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* mkdir -p of path's parents (0755: they may hold others' files) and of path itself (0700). */
static void make_dirs(const char *path)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		mkdir(p, 0755);
		*s = '/';
	}
	mkdir(p, 0700);
}

const char *bpfcache_dir(void)
{
	static char dir[PATH_MAX];
	static int state; /* 0: not looked yet, 1: dir, -1: none */
	const char *env = getenv("PYEBPF_CACHE_DIR"), *base;
	struct stat st;

	if (state)
		return state > 0 ? dir : NULL;
	state = -1;
	if (env && !*env) {
		log_debug("no compile cache: PYEBPF_CACHE_DIR is empty");
		return NULL;
	}
	if (env)
		snprintf(dir, sizeof(dir), "%s", env);
	else if (geteuid() == 0)
		snprintf(dir, sizeof(dir), "/var/cache/pyebpf/bpf");
	else if ((base = getenv("XDG_CACHE_HOME")) && base[0] == '/')
		snprintf(dir, sizeof(dir), "%s/pyebpf/bpf", base);
	else if ((base = getenv("HOME")) && base[0] == '/')
		snprintf(dir, sizeof(dir), "%s/.cache/pyebpf/bpf", base);
	else {
		log_debug("no compile cache: no HOME");
		return NULL;
	}
	make_dirs(dir);
	if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || !ours_alone(&st)) {
		/* someone else could put programs there that this process would load */
		const char *why = lstat(dir, &st) ? strerror(errno) : "not a folder of this user's that only it can write";
		if (env)
			log_warn("not using the compile cache %s: %s", dir, why);
		else
			log_debug("not using the compile cache %s: %s", dir, why);
		return NULL;
	}
	state = 1;
	return dir;
}

static void path_of(char *path, size_t size, const char *dir, const char *key, size_t len)
{
	snprintf(path, size, "%s/%016llx.bpfobj", dir, (unsigned long long)fnv1a64(key, len));
}

int bpfcache_get(const char *key, size_t len, struct bpfobj *o)
{
	const char *dir = bpfcache_dir();
	char path[PATH_MAX], *buf = NULL;
	struct file_head h;
	struct stat st;
	size_t at = 0;
	int fd, r = -1;

	memset(o, 0, sizeof(*o));
	if (!dir)
		return -1;
	path_of(path, sizeof(path), dir, key, len);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !ours_alone(&st) || st.st_size > MAX_FILE ||
	    (size_t)st.st_size < sizeof(h) + len || !(buf = malloc((size_t)st.st_size)))
		goto out;
	while (at < (size_t)st.st_size) {
		ssize_t n = pread(fd, buf + at, (size_t)st.st_size - at, (off_t)at);
		if (n <= 0)
			goto out;
		at += (size_t)n;
	}
	memcpy(&h, buf, sizeof(h));
	/* another key with the same hash, or an older file's: not this program */
	if (h.magic != FILE_MAGIC || h.key_len != len || memcmp(buf + sizeof(h), key, len))
		goto out;
	errno = 0;
	r = bpfobj_from_image(buf + sizeof(h) + len, (size_t)st.st_size - sizeof(h) - len, o);
	if (r)
		log_debug("the compile cache's %s is not usable: %s", path, strerror(errno ? errno : EINVAL));
	else
		futimens(fd, NULL); /* used now: evicted last */
out:
	free(buf);
	close(fd);
	return r;
}

struct entry {
	char name[NAME_MAX + 1];
	struct timespec used;
};

static int by_use(const void *a, const void *b)
{
	const struct timespec *x = &((const struct entry *)a)->used, *y = &((const struct entry *)b)->used;

	return x->tv_sec != y->tv_sec ? (x->tv_sec < y->tv_sec ? -1 : 1) :
	       (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

/* Leaves the BPFCACHE_ENTRIES most recently used programs, and no stale temporary file. */
static void evict(const char *dir)
{
	struct entry e[BPFCACHE_ENTRIES * 2];
	int n = 0, dfd;
	DIR *d = opendir(dir);
	struct dirent *de;
	time_t now = time(NULL);

	if (!d)
		return;
	dfd = dirfd(d);
	while ((de = readdir(d))) {
		struct stat st;
		size_t l = strlen(de->d_name);

		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (!strncmp(de->d_name, ".tmp.", 5) && now - st.st_mtim.tv_sec > STALE_TMP_S) {
			unlinkat(dfd, de->d_name, 0);
		} else if (l > 7 && !strcmp(de->d_name + l - 7, ".bpfobj")) {
			if (n == BPFCACHE_ENTRIES * 2) { /* full: keep the newer half of what was seen */
				qsort(e, (size_t)n, sizeof(e[0]), by_use);
				for (int i = 0; i < BPFCACHE_ENTRIES; i++)
					unlinkat(dfd, e[i].name, 0);
				memmove(e, e + BPFCACHE_ENTRIES, BPFCACHE_ENTRIES * sizeof(e[0]));
				n = BPFCACHE_ENTRIES;
			}
			snprintf(e[n].name, sizeof(e[n].name), "%s", de->d_name);
			e[n++].used = st.st_mtim;
		}
	}
	if (n > BPFCACHE_ENTRIES) {
		qsort(e, (size_t)n, sizeof(e[0]), by_use);
		for (int i = 0; i < n - BPFCACHE_ENTRIES; i++)
			unlinkat(dfd, e[i].name, 0);
	}
	closedir(d);
}

void bpfcache_put(const char *key, size_t len, const struct bpfobj *o)
{
	const char *dir = bpfcache_dir();
	struct file_head h = { FILE_MAGIC, 0, len };
	char path[PATH_MAX], tmp[PATH_MAX];
	bool bad;
	FILE *f;
	int fd;

	if (!dir)
		return;
	path_of(path, sizeof(path), dir, key, len);
	snprintf(tmp, sizeof(tmp), "%s/.tmp.XXXXXX", dir);
	fd = mkostemp(tmp, O_CLOEXEC); /* 0600 */
	if (fd < 0) {
		log_debug("cannot write to the compile cache %s: %s", dir, strerror(errno));
		return;
	}
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		return;
	}
	bad = fwrite(&h, sizeof(h), 1, f) != 1 || fwrite(key, 1, len, f) != len || fflush(f) || bpfobj_save(fd, o);
	bad = fclose(f) || bad;
	if (bad || rename(tmp, path)) {
		log_debug("cannot write to the compile cache %s: %s", dir, strerror(errno ? errno : EIO));
		unlink(tmp);
		return;
	}
	evict(dir);
}
