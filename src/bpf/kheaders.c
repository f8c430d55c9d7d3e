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

/* The newest Debian-style split: linux-headers-V-common plus linux-headers-V-<arch>. */
static int find_usr_src(struct kheaders *kh)
{
	struct dirent **names;
	int n = scandir("/usr/src", &names, NULL, versionsort), found = -1;

	if (n < 0)
		return -1;
	for (int i = n - 1; i >= 0 && found < 0; i--) {
		const char *name = names[i]->d_name;
		size_t len = strlen(name);
		char common[PATH_MAX], arch[PATH_MAX], generated[PATH_MAX + 32];

		if (strncmp(name, "linux-headers-", 14) || len < 7 || strcmp(name + len - 7, "-common"))
			continue;
		snprintf(common, sizeof(common), "/usr/src/%s", name);
		if (!kheaders_usable(common))
			continue;
		/* the arch half has the same version and include/generated */
		for (int j = 0; j < n && found < 0; j++) {
			if (j == i || strncmp(names[j]->d_name, name, len - 6))
				continue;
			snprintf(arch, sizeof(arch), "/usr/src/%s", names[j]->d_name);
			snprintf(generated, sizeof(generated), "%s/include/generated", arch);
			if (is_dir(generated) && merge_into_temp(kh, common, arch) == 0) {
				snprintf(kh->what, sizeof(kh->what), "%s + %s (merged)", common, arch);
				found = 0;
			}
		}
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return found;
}

static bool use_dir(struct kheaders *kh, const char *dir, const char *how)
{
	if (!dir || !*dir)
		return false;
	if (!kheaders_usable(dir)) {
		log_warn("%s %s has no kernel headers (no include/linux/kconfig.h)", how, dir);
		return false;
	}
	snprintf(kh->dir, sizeof(kh->dir), "%s", dir);
	snprintf(kh->what, sizeof(kh->what), "%s (%s)", dir, how);
	return true;
}

int kheaders_find(const char *user_dir, struct kheaders *kh)
{
	char build[PATH_MAX], source[PATH_MAX];
	struct utsname u;

	memset(kh, 0, sizeof(*kh));
	if (use_dir(kh, user_dir, "--kernel-headers") ||
	    use_dir(kh, getenv("BCC_KERNEL_SOURCE"), "BCC_KERNEL_SOURCE"))
		return 0;
	if (!user_dir) {
		uname(&u);
		snprintf(build, sizeof(build), "/lib/modules/%s/build", u.release);
		snprintf(source, sizeof(source), "/lib/modules/%s/source", u.release);
		if (kheaders_usable(build) && use_dir(kh, build, "running kernel"))
			return 0;
		if (kheaders_usable(source) && is_dir(build) &&
		    merge_into_temp(kh, source, build) == 0) {
			snprintf(kh->what, sizeof(kh->what), "%s + %s (merged)", source, build);
			return 0;
		}
		if (find_usr_src(kh) == 0)
			return 0;
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
