/*
 * The compile cache: a program libbcc compiled, kept on disk as a bpfobj image under
 * the whole of what the compile depended on (the key: the text and its -D options,
 * the kernel and its headers, libbcc's file, the tool's own executable, the possible
 * CPUs), so that a later run with the same key skips the compile; its maps are made
 * anew and every function still goes through the kernel's verifier when it is loaded.
 *
 * Where: $PYEBPF_CACHE_DIR (empty: no cache), else /var/cache/pyebpf/bpf for root,
 * else $XDG_CACHE_HOME/pyebpf/bpf or ~/.cache/pyebpf/bpf. The directory must belong
 * to the effective user and be writable by nobody else, and so must each file: a
 * program is loaded into the kernel with the tool's privileges. At most
 * BPFCACHE_ENTRIES files; the least recently used go first. pyebpf(7), Compiles.
 */
#ifndef PYEBPF_BPFCACHE_H
#define PYEBPF_BPFCACHE_H

#include <stddef.h>

#include "bpfobj.h"
#include "cflags.h"
#include "kheaders.h"

#define BPFCACHE_ENTRIES 64

/* The key of compiling text with cf against kh, malloc'd (*len bytes); NULL when it cannot be told. */
char *bpfcache_key(const char *text, const struct cflags *cf, const struct kheaders *kh, size_t *len);

/* The program stored under key, with new maps, into o: 0, or -1 (none, or not usable: o left empty). */
int bpfcache_get(const char *key, size_t len, struct bpfobj *o);

/* Stores o under key (best effort: a cache that cannot be written is no error). */
void bpfcache_put(const char *key, size_t len, const struct bpfobj *o);

/* The cache's directory as this process would use it, or NULL (none, or not safe: said with -v). */
const char *bpfcache_dir(void);

#endif
