/* Kernel symbols in one sorted array and one block of names; see kallsyms.h for why. */
#define _GNU_SOURCE /* mremap */
#include "kallsyms.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct ksym {
	uint64_t addr;
	uint32_t name; /* offset into names */
	uint32_t line; /* order in the file: of symbols at one address, the first stays */
};

/*
 * Both arrays are mappings of their own, grown and shrunk with mremap: a realloc would
 * leave the old copies in the heap once glibc's mmap threshold has risen above them
 * (libbpf's BTF parse frees 5 MB blocks before this is read): 3.5 MB more of RSS in
 * pymonitor when it was ready.
 */
struct kallsyms {
	struct ksym *v;
	size_t n, v_size;
	char *names;
	size_t names_size;
};

static int by_addr(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static size_t page_up(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (n + page - 1) / page * page;
}

/* Makes the mapping *p of *size bytes (0: none yet) hold need bytes, or -1. */
static int reserve(void **p, size_t *size, size_t need)
{
	size_t want = *size ? *size : 256 * 1024;
	void *q;

	if (need <= *size)
		return 0;
	while (want < need)
		want *= 2;
	q = *size ? mremap(*p, *size, want, MREMAP_MAYMOVE)
		  : mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q == MAP_FAILED)
		return -1;
	*p = q, *size = want;
	return 0;
}

/* Gives back the pages of *p beyond used bytes. */
static void shrink(void **p, size_t *size, size_t used)
{
	size_t want = page_up(used ? used : 1);
	void *q;

	if (*size > want && (q = mremap(*p, *size, want, 0)) != MAP_FAILED)
		*p = q, *size = want;
}

/*
 * "ffffffff81000000 T _stext" or "... t name\t[module]": 0 and the parts, or -1. Code
 * only (t, T and weak w, W): stacks hold code addresses, and a data symbol between
 * two functions would name the end of the first (libbcc skips them too).
 */
static int parse(char *line, uint64_t *addr, char **name, size_t *len)
{
	char *end;

	errno = 0;
	*addr = strtoull(line, &end, 16);
	if (errno || end == line || end[0] != ' ' || !end[1] || end[2] != ' ' || !strchr("tTwW", end[1]))
		return -1;
	*name = end + 3;
	*len = strcspn(*name, " \t\n");
	return *len ? 0 : -1;
}

struct kallsyms *kallsyms_load(const char *path)
{
	struct kallsyms *k = calloc(1, sizeof(*k));
	FILE *f = fopen(path ? path : "/proc/kallsyms", "re");
	size_t names_len = 0, line_cap = 0;
	char *line = NULL, *name;
	uint32_t lineno = 0;
	uint64_t addr;
	size_t len;
	int err = 0;

	if (!k || !f) {
		err = errno;
		goto fail;
	}
	while (getline(&line, &line_cap, f) > 0) {
		lineno++;
		if (parse(line, &addr, &name, &len) || !addr)
			continue;
		if (reserve((void **)&k->v, &k->v_size, (k->n + 1) * sizeof(*k->v)) ||
		    reserve((void **)&k->names, &k->names_size, names_len + len + 1)) {
			err = ENOMEM;
			goto fail;
		}
		memcpy(k->names + names_len, name, len);
		k->names[names_len + len] = '\0';
		k->v[k->n++] = (struct ksym){ addr, (uint32_t)names_len, lineno };
		names_len += len + 1;
	}
	if (ferror(f)) {
		err = errno ? errno : EIO;
		goto fail;
	}
	fclose(f);
	free(line);
	if (!k->n) /* addresses hidden from this reader */
		return k;
	qsort(k->v, k->n, sizeof(*k->v), by_addr);
	/* one symbol per address: the first listed */
	size_t kept = 1;
	for (size_t i = 1; i < k->n; i++)
		if (k->v[kept - 1].addr != k->v[i].addr)
			k->v[kept++] = k->v[i];
	k->n = kept;
	/* give back what doubling reserved (names of dropped duplicates stay: few) */
	shrink((void **)&k->v, &k->v_size, k->n * sizeof(*k->v));
	shrink((void **)&k->names, &k->names_size, names_len);
	return k;
fail:
	if (f)
		fclose(f);
	free(line);
	kallsyms_free(k);
	errno = err ? err : ENOMEM;
	return NULL;
}

void kallsyms_free(struct kallsyms *k)
{
	if (!k)
		return;
	if (k->v_size)
		munmap(k->v, k->v_size);
	if (k->names_size)
		munmap(k->names, k->names_size);
	free(k);
}

size_t kallsyms_count(const struct kallsyms *k)
{
	return k->n;
}

const char *kallsyms_name(const struct kallsyms *k, uint64_t addr, uint64_t *at)
{
	size_t lo = 0, hi = k->n; /* the answer is v[lo - 1]: v[< lo] <= addr < v[>= hi] */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->v[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	if (at)
		*at = k->v[lo - 1].addr;
	return k->names + k->v[lo - 1].name;
}
