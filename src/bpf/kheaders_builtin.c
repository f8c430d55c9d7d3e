/*
 * The smallest header tree libbcc 0.26 compiles against: what its own helpers.h and
 * bpf.h include, nothing more. Enough because pyebpf's BPF text includes no kernel
 * header and reads kernel structs only through BTF offsets.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "kheaders.h"

static const char types_h[] =
	"#ifndef _PYEBPF_LINUX_TYPES_H\n"
	"#define _PYEBPF_LINUX_TYPES_H\n"
	"typedef signed char __s8;\ntypedef unsigned char __u8;\n"
	"typedef short __s16;\ntypedef unsigned short __u16;\n"
	"typedef int __s32;\ntypedef unsigned int __u32;\n"
	"typedef long long __s64;\ntypedef unsigned long long __u64;\n"
	"typedef __u64 __aligned_u64 __attribute__((aligned(8)));\n"
	"typedef __u16 __be16;\ntypedef __u32 __be32;\ntypedef __u64 __be64;\n"
	"typedef __u16 __le16;\ntypedef __u32 __le32;\ntypedef __u64 __le64;\n"
	"typedef __u32 __wsum;\ntypedef __u16 __sum16;\n"
	"typedef __u8 u8;\ntypedef __u16 u16;\ntypedef __u32 u32;\ntypedef __u64 u64;\n"
	"typedef __s8 s8;\ntypedef __s16 s16;\ntypedef __s32 s32;\ntypedef __s64 s64;\n"
	"typedef _Bool bool;\nenum { false = 0, true = 1 };\n"
	"typedef unsigned long size_t;\ntypedef long ssize_t;\ntypedef int pid_t;\n"
	"typedef unsigned long uintptr_t;\n"
	"#define NULL ((void *)0)\n"
	"#ifndef __always_inline\n#define __always_inline inline __attribute__((always_inline))\n#endif\n"
	"#endif\n";

static const char kconfig_h[] = "#define CONFIG_BPF_SYSCALL 1\n";

static const char version_fmt[] =
	"#define LINUX_VERSION_CODE %u\n"
	"#define KERNEL_VERSION(a, b, c) (((a) << 16) + ((b) << 8) + ((c) > 255 ? 255 : (c)))\n";

static int write_file(const char *root, const char *rel, const char *text)
{
	char path[PATH_MAX], *slash;
	int fd;
	ssize_t n, len = (ssize_t)strlen(text);

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (slash = strchr(path + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = 0;
		if (mkdir(path, 0755) && errno != EEXIST)
			return -1;
		*slash = '/';
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	n = write(fd, text, (size_t)len);
	return close(fd) || n != len ? -1 : 0;
}

int kheaders_write_builtin(const char *dir)
{
	static const char *const empty[] = {
		"include/linux/bpf_common.h", "include/linux/log2.h", "include/uapi/linux/bpf.h",
		"include/uapi/linux/if_packet.h",
	};
	unsigned a = 0, b = 0, c = 0;
	char version[sizeof(version_fmt) + 16], page_h[64];
	struct utsname u;

	uname(&u);
	sscanf(u.release, "%u.%u.%u", &a, &b, &c);
	snprintf(version, sizeof(version), version_fmt, (a << 16) + (b << 8) + (c > 255 ? 255 : c));
	/* BPF_RINGBUF_OUTPUT sizes its map in pages */
	snprintf(page_h, sizeof(page_h), "#define PAGE_SIZE %ld\n", sysconf(_SC_PAGESIZE));
	if (write_file(dir, "include/linux/types.h", types_h) ||
	    write_file(dir, "include/linux/kconfig.h", kconfig_h) ||
	    write_file(dir, "include/linux/version.h", version) ||
	    write_file(dir, "include/asm/page.h", page_h))
		return -1;
	for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++)
		if (write_file(dir, empty[i], ""))
			return -1;
	return 0;
}
