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
	char what[PATH_MAX * 2 + 16]; /* for the user: which headers */
	char why[PATH_MAX + 96];      /* for the user: why these */
	bool temporary;      /* dir was made by us and is removed by kheaders_release */
	bool builtin;        /* dir holds the built-in set (kheaders_write_builtin) */
};

/*
 * Order: user_dir (--kernel-headers), $BCC_KERNEL_SOURCE, the running kernel's own
 * headers (/lib/modules/$(uname -r)/{build,source}, or /usr/src/linux-headers-$(uname
 * -r) with its -common half merged into a temporary folder), then the built-in set.
 * Another kernel's headers are never picked by themselves: they only cost compile
 * time. A user_dir without headers selects the built-in set. Returns 0, or -1 when
 * even the built-in set could not be written (errno set).
 */
int kheaders_find(const char *user_dir, struct kheaders *kh);
void kheaders_release(struct kheaders *kh);

/* Whether dir looks like a kernel header tree libbcc can use. */
bool kheaders_usable(const char *dir);
/* Writes the built-in minimal header set under dir (which must exist). */
int kheaders_write_builtin(const char *dir);

#endif
