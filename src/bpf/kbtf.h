/*
 * Kernel struct member offsets from the running kernel's BTF
 * (/sys/kernel/btf/vmlinux), never from headers: the headers on hand may belong to
 * another kernel, and a read through a wrong offset returns garbage, not an error.
 */
#ifndef PYEBPF_KBTF_H
#define PYEBPF_KBTF_H

#include "bpfprog.h"

struct kbtf;

struct kbtf_member {
	unsigned offset; /* bytes from the start of the struct */
	unsigned size;   /* bytes */
};

/* NULL after an error message (no BTF: the kernel lacks CONFIG_DEBUG_INFO_BTF). */
struct kbtf *kbtf_open(void);
void kbtf_close(struct kbtf *b);

/*
 * path: members separated by dots, through anonymous and named nested structs,
 * e.g. kbtf_member(b, "tcp_sock", "inet_conn.icsk_inet.sk.__sk_common.skc_state").
 * Returns 0, or -1 after an error naming the field (missing, or a bit-field).
 */
int kbtf_member(struct kbtf *b, const char *struct_name, const char *path,
		struct kbtf_member *out);

/* sizeof(struct name); -1 after an error. */
int kbtf_struct_size(struct kbtf *b, const char *name, unsigned *size);

/* The value of enumerator name in any of the kernel's enums; -1 when there is none. */
int kbtf_enum_value(struct kbtf *b, const char *name, long long *value);

/* Adds -D<macro>=<offset> (and -D<macro>_SIZE=<size>); -1 after an error. */
int kbtf_offset_cflag(struct kbtf *b, struct cflags *cf, const char *macro,
		      const char *struct_name, const char *path);

/* The arguments of one kbtf_offset_cflag, for a table of them. */
struct kbtf_offset {
	const char *macro, *struct_name, *path;
};
/* kbtf_offset_cflag for each of offs (ending with a NULL macro); -1 after an error. */
int kbtf_offset_cflags(struct kbtf *b, struct cflags *cf, const struct kbtf_offset *offs);

#endif
