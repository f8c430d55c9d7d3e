#include "conncount.h"

#include <stdlib.h>
#include <string.h>

/* Open addressing on a power-of-two table: a retransmit storm looks up every event. */
struct conncount {
	struct conncount_entry **slots;
	size_t cap, n;
	uint64_t seq;
	struct conncount_entry **sorted;
};

static uint64_t key_hash(const struct conncount_key *k)
{
	const uint8_t *p = (const uint8_t *)k;
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (size_t i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

struct conncount *conncount_new(void)
{
	struct conncount *c = calloc(1, sizeof(*c));

	if (c && !(c->slots = calloc(c->cap = 256, sizeof(*c->slots)))) {
		free(c);
		return NULL;
	}
	return c;
}

void conncount_free(struct conncount *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->cap; i++)
		free(c->slots[i]);
	free(c->slots);
	free(c->sorted);
	free(c);
}

static struct conncount_entry **slot_of(struct conncount_entry **slots, size_t cap,
					const struct conncount_key *k)
{
	size_t i = key_hash(k) & (cap - 1);

	while (slots[i] && memcmp(&slots[i]->key, k, sizeof(*k)))
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int grow(struct conncount *c)
{
	size_t cap = c->cap * 2;
	struct conncount_entry **slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -1;
	for (size_t i = 0; i < c->cap; i++)
		if (c->slots[i])
			*slot_of(slots, cap, &c->slots[i]->key) = c->slots[i];
	free(c->slots);
	c->slots = slots;
	c->cap = cap;
	return 0;
}

struct conncount_entry *conncount_get(struct conncount *c, const struct conncount_key *key)
{
	struct conncount_key k;
	struct conncount_entry **s;

	memset(&k, 0, sizeof(k)); /* padding takes part in hashing and comparing */
	memcpy(k.saddr, key->saddr, 16);
	memcpy(k.daddr, key->daddr, 16);
	k.family = key->family, k.sport = key->sport, k.dport = key->dport;
	s = slot_of(c->slots, c->cap, &k);
	if (*s)
		return *s;
	if ((c->n + 1) * 2 > c->cap) {
		if (grow(c))
			return NULL;
		s = slot_of(c->slots, c->cap, &k);
	}
	if (!(*s = calloc(1, sizeof(**s))))
		return NULL;
	(*s)->key = k;
	(*s)->first_seen = c->seq++;
	c->n++;
	return *s;
}

static int by_first_seen(const void *a, const void *b)
{
	const struct conncount_entry *x = *(struct conncount_entry *const *)a;
	const struct conncount_entry *y = *(struct conncount_entry *const *)b;

	return x->first_seen < y->first_seen ? -1 : x->first_seen > y->first_seen;
}

int conncount_list(struct conncount *c, struct conncount_entry ***out)
{
	size_t n = 0;

	free(c->sorted);
	c->sorted = malloc((c->n ? c->n : 1) * sizeof(*c->sorted));
	if (!c->sorted)
		return -1;
	for (size_t i = 0; i < c->cap; i++)
		if (c->slots[i])
			c->sorted[n++] = c->slots[i];
	qsort(c->sorted, n, sizeof(*c->sorted), by_first_seen);
	*out = c->sorted;
	return (int)n;
}
