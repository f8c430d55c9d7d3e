/* -D options for a compile: how settings and BTF offsets reach BPF text. */
#ifndef PYEBPF_CFLAGS_H
#define PYEBPF_CFLAGS_H

struct cflags {
	char **v;
	int n, cap;
};
void cflags_add(struct cflags *cf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cflags_free(struct cflags *cf);

#endif
