#include "stackagg.h"

#include <stdlib.h>
#include <string.h>

#include "fnv.h"

void stackagg_init(struct stackagg *a)
{
	memset(a, 0, sizeof(*a));
}

void stackagg_limit(struct stackagg *a, size_t max)
{
	a->max = max;
}

void stackagg_clear(struct stackagg *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i].key);
	a->n = 0;
	if (a->slots)
		memset(a->slots, 0, a->nslots * sizeof(*a->slots));
}

void stackagg_free(struct stackagg *a)
{
	stackagg_clear(a);
	free(a->v);
	free(a->slots);
	memset(a, 0, sizeof(*a));
}

static void place(uint32_t *slots, size_t nslots, uint64_t hash, uint32_t value)
{
	size_t i = hash & (nslots - 1);

	while (slots[i])
		i = (i + 1) & (nslots - 1);
	slots[i] = value;
}

/* Keeps the table at most half full. */
static int grow(struct stackagg *a)
{
	size_t nslots = a->nslots ? 2 * a->nslots : 1024;
	uint32_t *slots;

	if (2 * (a->n + 1) <= a->nslots)
		return 0;
	slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return -1;
	for (size_t i = 0; i < a->n; i++)
		place(slots, nslots, a->v[i].hash, (uint32_t)i + 1);
	free(a->slots);
	a->slots = slots;
	a->nslots = nslots;
	return 0;
}

static struct stackagg_entry *find(const struct stackagg *a, const char *key, size_t len, uint64_t h)
{
	for (size_t i = a->nslots ? h & (a->nslots - 1) : 0; a->nslots && a->slots[i];
	     i = (i + 1) & (a->nslots - 1)) {
		struct stackagg_entry *e = &a->v[a->slots[i] - 1];
		if (e->hash == h && !strncmp(e->key, key, len) && !e->key[len])
			return e;
	}
	return NULL;
}

struct stackagg_entry *stackagg_get(struct stackagg *a, const char *key, size_t len)
{
	uint64_t h = fnv1a64(key, len);
	struct stackagg_entry *e = find(a, key, len, h);

	if (e)
		return e;
	if (a->max && a->n >= a->max) {
		/* full: the one entry beyond the limit takes it */
		a->other++;
		key = STACKAGG_OTHER;
		len = strlen(key);
		h = fnv1a64(key, len);
		if ((e = find(a, key, len, h)))
			return e;
	}
	if (grow(a))
		return NULL;
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 256;
		struct stackagg_entry *v = realloc(a->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		a->v = v;
		a->cap = cap;
	}
	e = &a->v[a->n];
	memset(e, 0, sizeof(*e));
	e->key = malloc(len + 1);
	if (!e->key)
		return NULL;
	memcpy(e->key, key, len);
	e->key[len] = 0;
	e->hash = h;
	place(a->slots, a->nslots, h, (uint32_t)++a->n);
	return e;
}

void stackagg_add_stack(struct stackagg *a, const char *key, size_t len)
{
	struct stackagg_entry *e = stackagg_get(a, key, len);

	if (e)
		e->self++;
}

void stackagg_add_weighted(struct stackagg *a, const char *key, size_t len, long long weight)
{
	struct stackagg_entry *e = stackagg_get(a, key, len);

	if (e) {
		e->self++;
		e->total += weight;
	}
}

void stackagg_begin_sample(struct stackagg *a)
{
	a->sample++;
}

void stackagg_add_frame(struct stackagg *a, const char *key, size_t len, bool innermost)
{
	struct stackagg_entry *e = stackagg_get(a, key, len);

	if (!e)
		return;
	e->self += innermost;
	if (e->sample != a->sample) {
		e->sample = a->sample;
		e->total++;
	}
}

static int by_top(const void *x, const void *y)
{
	const struct stackagg_entry *a = *(const struct stackagg_entry *const *)x;
	const struct stackagg_entry *b = *(const struct stackagg_entry *const *)y;

	if (a->self != b->self)
		return a->self < b->self ? 1 : -1;
	if (a->total != b->total)
		return a->total < b->total ? 1 : -1;
	return strcmp(a->key, b->key);
}

const struct stackagg_entry **stackagg_sorted(const struct stackagg *a)
{
	const struct stackagg_entry **v = a->n ? malloc(a->n * sizeof(*v)) : NULL;

	if (!v)
		return NULL;
	for (size_t i = 0; i < a->n; i++)
		v[i] = &a->v[i];
	qsort(v, a->n, sizeof(*v), by_top);
	return v;
}
