/*
 * What a libbcc compile leaves that a run needs: its maps (fds, with their type and
 * sizes) and its functions' instructions, which refer to the maps by fd. Taken out of
 * the libbcc module, which is then destroyed (with it most of what LLVM kept), and
 * movable to another process over a Unix socket: compiles of several programs run in
 * child processes at once (bpfprog_compile_many), each sending its object back. Also
 * storable as an image whose instructions name the maps by number, from which the
 * same object is made again with new maps (the compile cache, bpfcache.h).
 */
#ifndef PYEBPF_BPFOBJ_H
#define PYEBPF_BPFOBJ_H

#include <stddef.h>
#include <stdint.h>

struct bpfobj_table {
	char *name;
	int fd;
	int type; /* enum bpf_map_type */
	uint32_t key_size, leaf_size, max_entries, flags;
};

struct bpfobj_func {
	char *name;
	void *insns; /* struct bpf_insn[], size bytes */
	size_t size;
};

struct bpfobj {
	struct bpfobj_table *tables;
	int ntables;
	struct bpfobj_func *funcs;
	int nfuncs;
	char license[64];
	unsigned kern_version;
};

/* mod's tables (their fds duplicated) and functions into o: 0, or -1 (o left empty). */
int bpfobj_from_module(void *mod, struct bpfobj *o);

/* Closes o's fds and frees what it holds (o is then empty). */
void bpfobj_free(struct bpfobj *o);

const struct bpfobj_table *bpfobj_table(const struct bpfobj *o, const char *name);
const struct bpfobj_func *bpfobj_func(const struct bpfobj *o, const char *name);

/*
 * o through the connected Unix stream socket sock, its fds as SCM_RIGHTS: 0, or -1.
 * bpfobj_recv builds the receiver's o, with each function's map references changed to
 * the fds this process got: 0, or -1 (o left empty: a short or malformed message).
 */
int bpfobj_send(int sock, const struct bpfobj *o);
int bpfobj_recv(int sock, struct bpfobj *o);

/*
 * o as an image written to fd: 0, or -1. bpfobj_from_image makes o from the len bytes
 * of such an image at buf, with maps created anew (empty) and the instructions
 * changed to name them: 0, or -1 (o left empty: a malformed image, or a map the
 * kernel refused; errno says which).
 */
int bpfobj_save(int fd, const struct bpfobj *o);
int bpfobj_from_image(const void *buf, size_t len, struct bpfobj *o);

#endif
