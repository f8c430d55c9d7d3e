/*
 * Finding kernel headers for libbcc's compile (pyebpf(7), KERNEL PITFALLS). The BPF
 * text uses no kernel-internal header, so any tree will do, down to a minimal
 * built-in set; struct layouts never come from these headers (see kbtf.h).
 */
#ifndef PYEBPF_KHEADERS_H
#define PYEBPF_KHEADERS_H

#include <limits.h>
#include <stdbool.h>

struct kheaders {
	char dir[PATH_MAX];  /* what BCC_KERNEL_SOURCE is set to */
	char what[PATH_MAX + 96]; /* one line for the user: which headers, found how */
	bool temporary;      /* dir was made by us and is removed by kheaders_release */
	bool builtin;        /* dir holds the built-in set (kheaders_write_builtin) */
};

/*
 * Order: user_dir (--kernel-headers), $BCC_KERNEL_SOURCE, /lib/modules/$(uname -r)/
 * {build,source}, the newest /usr/src/linux-headers-*-common with its arch tree
 * merged into a temporary folder, then the built-in set. Returns 0, or -1 when even
 * the built-in set could not be written (errno set).
 */
int kheaders_find(const char *user_dir, struct kheaders *kh);
void kheaders_release(struct kheaders *kh);

/* Whether dir looks like a kernel header tree libbcc can use. */
bool kheaders_usable(const char *dir);
/* Writes the built-in minimal header set under dir (which must exist). */
int kheaders_write_builtin(const char *dir);

#endif
