#define _GNU_SOURCE
#include "kheaders.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "log.h"

static bool is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool kheaders_usable(const char *dir)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/include/linux/kconfig.h", dir);
	return access(path, R_OK) == 0;
}

/* Makes dst the union of trees a and b (b wins), with symlinks wherever only one has an entry. */
static int merge_trees(const char *dst, const char *a, const char *b)
{
	const char *srcs[2] = { a, b };

	for (int i = 0; i < 2; i++) {
		DIR *d = opendir(srcs[i]);
		struct dirent *e;

		if (!d)
			return -1;
		while ((e = readdir(d))) {
			char src[PATH_MAX], other[PATH_MAX], to[PATH_MAX];

			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(src, sizeof(src), "%s/%s", srcs[i], e->d_name);
			snprintf(other, sizeof(other), "%s/%s", srcs[1 - i], e->d_name);
			snprintf(to, sizeof(to), "%s/%s", dst, e->d_name);
			if (is_dir(src) && is_dir(other)) {
				if (i == 1)
					continue; /* merged while walking a */
				if (mkdir(to, 0755) || merge_trees(to, src, other)) {
					closedir(d);
					return -1;
				}
			} else if (i == 1 || access(other, F_OK) != 0) {
				unlink(to);
				if (symlink(src, to)) {
					closedir(d);
					return -1;
				}
			}
		}
		closedir(d);
	}
	return 0;
}

static int make_tempdir(struct kheaders *kh, const char *kind)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(kh->dir, sizeof(kh->dir), "%s/pyebpf-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", kind);
	if (!mkdtemp(kh->dir))
		return -1;
	kh->temporary = true;
	return 0;
}

static int merge_into_temp(struct kheaders *kh, const char *common, const char *arch)
{
	if (make_tempdir(kh, "kheaders"))
		return -1;
	if (merge_trees(kh->dir, common, arch)) {
		kheaders_release(kh);
		return -1;
	}
	return 0;
}

/*
 * Debian-style split headers of the running kernel: linux-headers-<release> (the arch
 * half, with include/generated) plus the linux-headers-*-common it was built from,
 * which the arch half's Makefile names. Only the release that runs: another kernel's
 * headers add nothing the BPF text uses, only seconds of parsing and a risk of clashes.
 */
static int find_usr_src(struct kheaders *kh, const char *release)
{
	char arch[PATH_MAX], generated[PATH_MAX + 32], common[PATH_MAX];
	struct dirent **names;
	int n, found = -1;

	snprintf(arch, sizeof(arch), "/usr/src/linux-headers-%s", release);
	snprintf(generated, sizeof(generated), "%s/include/generated", arch);
	if (!is_dir(generated))
		return -1;
	if (kheaders_usable(arch)) {
		snprintf(kh->dir, sizeof(kh->dir), "%s", arch);
		snprintf(kh->what, sizeof(kh->what), "%s", arch);
		return 0;
	}
	n = scandir("/usr/src", &names, NULL, versionsort);
	for (int i = n - 1; i >= 0 && found < 0; i--) {
		const char *name = names[i]->d_name;
		size_t len = strlen(name);

		/* linux-headers-6.1.0-57-common belongs to linux-headers-6.1.0-57-amd64 */
		if (strncmp(name, "linux-headers-", 14) || len < 7 || strcmp(name + len - 7, "-common") ||
		    strncmp(arch + 9, name, len - 6))
			continue;
		snprintf(common, sizeof(common), "/usr/src/%s", name);
		if (kheaders_usable(common) && merge_into_temp(kh, common, arch) == 0) {
			snprintf(kh->what, sizeof(kh->what), "%s + %s (merged)", common, arch);
			found = 0;
		}
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	if (n >= 0)
		free(names);
	return found;
}

/* The newest /usr/src/linux-headers-* that is not the running kernel's: only named, never used. */
static void other_usr_src(char *out, size_t size)
{
	struct dirent **names;
	int n = scandir("/usr/src", &names, NULL, versionsort);

	*out = 0;
	for (int i = n - 1; i >= 0; i--) {
		if (!*out && !strncmp(names[i]->d_name, "linux-headers-", 14))
			snprintf(out, size, "/usr/src/%s", names[i]->d_name);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

static bool use_dir(struct kheaders *kh, const char *dir, const char *how)
{
	if (!dir || !*dir)
		return false;
	if (!kheaders_usable(dir)) {
		log_warn("%s %s has no kernel headers (no include/linux/kconfig.h)", how, dir);
		snprintf(kh->why, sizeof(kh->why), "%s %s has none", how, dir);
		return false;
	}
	snprintf(kh->dir, sizeof(kh->dir), "%s", dir);
	snprintf(kh->what, sizeof(kh->what), "%s", dir);
	snprintf(kh->why, sizeof(kh->why), "%s", how);
	return true;
}

int kheaders_find(const char *user_dir, struct kheaders *kh)
{
	char build[PATH_MAX], source[PATH_MAX], other[PATH_MAX];
	struct utsname u;

	memset(kh, 0, sizeof(*kh));
	if (use_dir(kh, user_dir, "--kernel-headers") ||
	    use_dir(kh, getenv("BCC_KERNEL_SOURCE"), "BCC_KERNEL_SOURCE"))
		return 0;
	if (!user_dir) {
		uname(&u);
		snprintf(build, sizeof(build), "/lib/modules/%s/build", u.release);
		snprintf(source, sizeof(source), "/lib/modules/%s/source", u.release);
		if (kheaders_usable(build) && use_dir(kh, build, "the running kernel's"))
			return 0;
		if (kheaders_usable(source) && is_dir(build) &&
		    merge_into_temp(kh, source, build) == 0) {
			snprintf(kh->what, sizeof(kh->what), "%s + %s (merged)", source, build);
			snprintf(kh->why, sizeof(kh->why), "the running kernel's");
			return 0;
		}
		if (find_usr_src(kh, u.release) == 0) {
			snprintf(kh->why, sizeof(kh->why), "the running kernel's");
			return 0;
		}
		other_usr_src(other, sizeof(other));
		if (*other)
			snprintf(kh->why, sizeof(kh->why), "%s is not the running kernel %s", other, u.release);
		else
			snprintf(kh->why, sizeof(kh->why), "no headers of the running kernel %s", u.release);
	}
	if (make_tempdir(kh, "builtin-headers") || kheaders_write_builtin(kh->dir)) {
		kheaders_release(kh);
		return -1;
	}
	snprintf(kh->what, sizeof(kh->what), "pyebpf's built-in minimal headers");
	kh->builtin = true;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

void kheaders_release(struct kheaders *kh)
{
	if (kh->temporary)
		nftw(kh->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	kh->temporary = false;
}
