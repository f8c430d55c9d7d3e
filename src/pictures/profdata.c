/* The stacks of a struct stackagg taken apart once for every writer (profdata.h). */
#include "profdata.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "utf8.h"

/* "func (file:line)": name, file and line; anything else is all name. */
static int split_frame(struct pframe *f)
{
	size_t n = strlen(f->text);
	const char *open = NULL, *colon;

	if (n > 4 && f->text[n - 1] == ')')
		for (const char *p = f->text + n - 2; p > f->text; p--)
			if (p[0] == '(' && p[-1] == ' ') {
				open = p;
				break;
			}
	colon = open ? strrchr(open, ':') : NULL;
	if (colon && colon[1] >= '0' && colon[1] <= '9') {
		f->name = strndup(f->text, (size_t)(open - 1 - f->text));
		f->file = strndup(open + 1, (size_t)(colon - open - 1));
		f->line = atoi(colon + 1);
	} else {
		f->name = strdup(f->text);
		f->file = strdup("");
	}
	return f->name && f->file ? 0 : -1;
}

/* The index of frame text[0..len) in d, added when new; -1 when out of memory. */
static long frame_index(struct profdata *d, struct stackagg *seen, const char *text, size_t len,
			enum pframe_kind kind)
{
	struct stackagg_entry *e = stackagg_get(seen, text, len);
	struct pframe *f;

	if (!e)
		return -1;
	if (e->self)
		return (long)e->self - 1;
	if (d->nframes == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 256;
		struct pframe *v = realloc(d->frames, cap * sizeof(*v));
		if (!v)
			return -1;
		d->frames = v;
		d->cap = cap;
	}
	f = &d->frames[d->nframes];
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->text = malloc(3 * len + 1); /* targets' names may be any bytes: XML and JSON want UTF-8 */
	if (!f->text)
		return -1;
	utf8_repair(text, len, f->text, 3 * len + 1);
	if (kind == PFRAME_CODE ? split_frame(f) : !(f->name = strdup(f->text)) || !(f->file = strdup("")))
		return -1;
	e->self = (long long)++d->nframes;
	return (long)d->nframes - 1;
}

/*
 * The marker of an incomplete stack (pyframes_marker(), first after the thread):
 * "[truncated]", "[error]" or "[unknown: why]". An unresolved code object's
 * "[unknown]" and a native frame's "[unknown] [module]" are frames.
 */
static bool is_marker(const char *p, size_t len)
{
	return (len == 11 && !strncmp(p, "[truncated]", len)) || (len == 7 && !strncmp(p, "[error]", len)) ||
	       (len > 10 && !strncmp(p, "[unknown: ", 10) && p[len - 1] == ']');
}

static size_t count_frames(const char *key)
{
	size_t n = 1;

	for (; *key; key++)
		n += *key == ';';
	return n;
}

int profdata_build(struct profdata *d, const struct stackagg *agg, const struct profile_meta *m)
{
	struct stackagg seen;
	size_t pooled = 0, room = 0;
	int r = -1;

	memset(d, 0, sizeof(*d));
	d->meta = m;
	stackagg_init(&seen);
	for (size_t i = 0; i < agg->n; i++)
		room += count_frames(agg->v[i].key);
	d->pool = malloc((room ? room : 1) * sizeof(*d->pool));
	d->stacks = calloc(agg->n ? agg->n : 1, sizeof(*d->stacks));
	if (!d->pool || !d->stacks)
		goto out;
	for (size_t i = 0; i < agg->n; i++) {
		const struct stackagg_entry *e = &agg->v[i];
		struct pstack *s = &d->stacks[d->nstacks++];
		const char *p = e->key;

		s->frames = d->pool + pooled;
		s->count = e->self;
		s->weight = m->period_ns ? e->self * (long long)m->period_ns : e->total;
		d->count += s->count;
		d->weight += s->weight;
		while (*p) {
			const char *end = strchr(p, ';');
			size_t len = end ? (size_t)(end - p) : strlen(p);
			enum pframe_kind kind = PFRAME_CODE;
			long idx;

			if (m->per_thread && s->depth == 0)
				kind = PFRAME_THREAD;
			else if (s->depth == (m->per_thread ? 1 : 0) && is_marker(p, len))
				kind = PFRAME_MARKER;
			idx = frame_index(d, &seen, p, len, kind);
			if (idx < 0)
				goto out;
			d->pool[pooled++] = (unsigned)idx;
			s->depth++;
			p += len;
			while (*p == ';' || *p == ' ')
				p++; /* "thread; frame": the root's separator has a blank */
		}
	}
	r = 0;
out:
	stackagg_free(&seen);
	if (r)
		log_error("out of memory for the profile");
	return r;
}

void profdata_free(struct profdata *d)
{
	for (size_t i = 0; i < d->nframes; i++) {
		free(d->frames[i].text);
		free(d->frames[i].name);
		free(d->frames[i].file);
	}
	free(d->frames);
	free(d->stacks);
	free(d->pool);
	memset(d, 0, sizeof(*d));
}

long long profdata_value(const struct profdata *d, const struct pstack *s)
{
	return d->meta->by_weight ? s->weight : s->count;
}
