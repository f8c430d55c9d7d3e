/*
 * What the parts of pyproc share and nobody else sees: the handle, and the readers
 * of target objects that the thread, code and opening parts build on.
 * pyobjects.c: memory, str, int, dict and instance attributes; pythreads.c: threads
 * and their names; pycode.c: code objects and lines; pyproc.c: finding and opening
 * the interpreter, and the walker's configuration.
 */
#ifndef PYEBPF_PYPROC_IMPL_H
#define PYEBPF_PYPROC_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "pyproc.h"

#define CODE_CACHE_SIZE 4096 /* power of two */
#define NAME_CACHE_MAX 1024 /* threading names read at most */
#define MAX_INTERPS 16
#define MAX_THREADS 4096
#define NAMES_MAX 256 /* threads kept for their names */
#define UNNAMED_MAX 8 /* tids remembered as left unnamed by a reread (pythreads.c) */

struct code_entry {
	uint64_t code; /* 0: empty slot */
	int firstlineno;
	char func[256];
	char file[512];
	uint8_t *table;
	size_t table_len;
};

/*
 * Target pages pyproc_read serves reads from while it is on (pytasks_read: a task's
 * object, coroutine, frame and code are many small reads in a few pages). Emptied when
 * turned on; pyproc_read_fresh bypasses it (the rereads that detect a change).
 */
#define PAGE_CACHE_SLOTS 512 /* power of two; 2 MiB */
#define PAGE_CACHE_SIZE 4096
struct page_cache {
	bool on;
	uint64_t page[PAGE_CACHE_SLOTS]; /* page address + 1 of each slot, 0: empty */
	uint8_t (*data)[PAGE_CACHE_SIZE];
};

struct pyproc {
	int refs;                   /* pyproc_open()s not closed yet */
	unsigned long long started; /* procinfo_start_time() */
	pid_t pid, ns_pid;
	bool ns_nested;             /* in a PID namespace of its own: its tids differ there */
	int mem_fd;
	bool use_mem_fd;
	struct pyversion version;
	struct pymodule module;
	char path[4096], host_path[4200];
	struct elfsyms *elf;
	uint64_t runtime;
	struct pyoffsets off;
	struct code_entry *codes; /* CODE_CACHE_SIZE slots, by address */
	struct pythread *names;   /* NAMES_MAX threads, for their names (pythreads.c) */
	int nnames;
	uint64_t names_read_ns;   /* when names was read */
	uint64_t names_took_ns;   /* how long that took */
	uint64_t active, active_type; /* threading._active once found, and its type */
	int64_t reread_budget_ns; /* for rereads on behalf of new threads (pythreads.c) */
	uint64_t budget_at_ns;    /* when the budget last grew */
	struct {
		pid_t tid;
		uint64_t at_ns;
	} unnamed[UNNAMED_MAX];   /* tids a reread did not name, and when */
	unsigned unnamed_next;
	struct pytasks *tasks;    /* asyncio tasks (pytasks.c), NULL until asked */
	/* when set, what pyproc_read and pyproc_symbol answer instead of the process and its
	   ELF file: tests/fuzz/fuzz_pymem.c's memory image */
	int (*read_mem)(const struct pyproc *p, uint64_t addr, void *buf, size_t len);
	uint64_t (*symbol)(const struct pyproc *p, const char *name);
	struct page_cache *pages; /* NULL until pyproc_cache_on */
	struct {                  /* pyproc_overlay's bytes, len 0: none */
		uint64_t addr;
		const void *bytes;
		size_t len;
	} overlay;
};

/* pyobjects.c */
/* Reads through a page cache from now on (emptied first), or no longer; 0, or -1 (no memory). */
int pyproc_cache_on(struct pyproc *p, bool on);
void pyproc_cache_free(struct pyproc *p);
/*
 * Until pyproc_overlay(p, 0, NULL, 0): a read within [addr, addr + len) is answered
 * from bytes (memory the BPF program read earlier, at a sample: the object may be gone
 * now), and a read that crosses an end of it fails, so that no answer mixes the two
 * moments. Reads elsewhere go to the process as before.
 */
void pyproc_overlay(struct pyproc *p, uint64_t addr, const void *bytes, size_t len);
/* pyproc_read, never from the cache. */
int pyproc_read_fresh(const struct pyproc *p, uint64_t addr, void *buf, size_t len);
/* One of the reads of pyproc_read_pieces: err is set to 0 or an errno value. */
struct pyproc_piece {
	uint64_t addr;
	void *buf;
	size_t len;
	int err;
};
/*
 * Each piece as pyproc_read_fresh reads it, but n of them in one system call (as many
 * as the kernel takes at once): the rereads of many tasks cost one call, not two each.
 * Returns the pieces read.
 */
int pyproc_read_pieces(const struct pyproc *p, struct pyproc_piece *v, int n);
int pyproc_rd_u64(const struct pyproc *p, uint64_t addr, uint64_t *v);
uint64_t pyproc_u64_or0(const struct pyproc *p, uint64_t addr);
/* A PyLong (small ints such as thread idents and native ids). */
int pyproc_read_long(const struct pyproc *p, uint64_t obj, int64_t *out);

struct dict_view {
	uint64_t keys;   /* PyDictKeysObject */
	uint64_t values; /* split/inline values array, or 0 */
};
typedef int (*dict_visit)(const struct pyproc *p, uint64_t key, uint64_t value, void *ctx);
/* Calls visit for each item; stops when visit returns non-zero (and returns that). */
int pyproc_dict_foreach(const struct pyproc *p, const struct dict_view *d, dict_visit visit, void *ctx);
void pyproc_dict_of(const struct pyproc *p, uint64_t dict, struct dict_view *d);
/* The value of a str key, or 0. */
uint64_t pyproc_dict_get(const struct pyproc *p, const struct dict_view *d, const char *name);

/*
 * Where a key was found: instances of a class share one keys object, so the next
 * instance's value is one read away, once the key object is seen in the same entry.
 */
struct dict_slot {
	uint64_t keys;  /* 0: not found yet */
	uint64_t entry; /* the address of the entry's key; its value follows (every layout) */
	uint64_t key;
	int64_t index;
};
/* pyproc_dict_get, through (and filling) a slot. */
uint64_t pyproc_dict_get_slot(const struct pyproc *p, const struct dict_view *d, const char *name,
			      struct dict_slot *slot);
int pyproc_instance_attrs(const struct pyproc *p, uint64_t obj, struct dict_view *d);

#endif
