/* libbcc's module walk with every module passed with enter_ns; see bccmodules.h for why. */
#define _GNU_SOURCE
#include "bccmodules.h"

#include <bcc/bcc_proc.h>
#include <bcc/bcc_syms.h>
#include <dlfcn.h>
#include <stdio.h>
#include <sys/stat.h>

struct walk {
	bcc_procutils_modulecb callback;
	void *payload;
	int pid;
	int shares_root; /* -1: not asked yet */
};

static bool same_file(const char *a, const char *b)
{
	struct stat x, y;

	return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

bool bccmodules_shares_root(pid_t pid)
{
	char root[64], mnt[64];

	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	snprintf(mnt, sizeof(mnt), "/proc/%d/ns/mnt", (int)pid);
	return same_file(root, "/") && same_file(mnt, "/proc/self/ns/mnt");
}

static int each(mod_info *mod, int enter_ns, void *payload)
{
	struct walk *w = payload;

	if (enter_ns)
		return w->callback(mod, enter_ns, w->payload);
	if (w->shares_root < 0)
		w->shares_root = bccmodules_shares_root(w->pid);
	return w->shares_root ? w->callback(mod, 1, w->payload) : 0;
}

int bcc_procutils_each_module(int pid, bcc_procutils_modulecb callback, void *payload)
{
	static int (*libbccs_own)(int, bcc_procutils_modulecb, void *);
	struct walk w = { callback, payload, pid, -1 };

	if (!libbccs_own)
		libbccs_own = (int (*)(int, bcc_procutils_modulecb, void *))dlsym(RTLD_NEXT,
										 "bcc_procutils_each_module");
	return libbccs_own ? libbccs_own(pid, each, &w) : -1;
}

void *bccmodules_symcache_new(pid_t pid, struct bcc_symbol_option *opt)
{
	return bcc_symcache_new(pid, opt);
}
