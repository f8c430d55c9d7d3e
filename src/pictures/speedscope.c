/*
 * speedscope's file format (https://www.speedscope.app/file-format-schema.json): the
 * frames once, shared; one "sampled" profile per thread (per_thread: the thread frame
 * names the profile and is not a frame), each stack a sample weighted in nanoseconds.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "profdata.h"

/* The frames but the threads' (they name profiles); index[i]: frame i's place in them. */
static json_t *frames_json(const struct profdata *d, json_int_t *index)
{
	json_t *a = json_array();

	for (size_t i = 0; i < d->nframes; i++) {
		const struct pframe *f = &d->frames[i];
		json_t *o;

		if (f->kind == PFRAME_THREAD)
			continue;
		index[i] = (json_int_t)json_array_size(a);
		o = json_object();

		json_object_set_new(o, "name", json_string(f->name));
		if (f->file[0])
			json_object_set_new(o, "file", json_string(f->file));
		if (f->line)
			json_object_set_new(o, "line", json_integer(f->line));
		json_array_append_new(a, o);
	}
	return a;
}

/* The profile of the stacks under thread frame root (all stacks when root is -1). */
static json_t *profile_json(const struct profdata *d, const json_int_t *index, long root)
{
	json_t *p = json_object(), *samples = json_array(), *weights = json_array();
	int skip = root >= 0;
	long long sum = 0;

	for (size_t i = 0; i < d->nstacks; i++) {
		const struct pstack *s = &d->stacks[i];
		json_t *stack;

		if (skip && (s->depth == 0 || s->frames[0] != (unsigned)root))
			continue;
		stack = json_array();
		for (int k = skip; k < s->depth; k++)
			json_array_append_new(stack, json_integer(index[s->frames[k]]));
		json_array_append_new(samples, stack);
		json_array_append_new(weights, json_integer(s->weight));
		sum += s->weight;
	}
	json_object_set_new(p, "type", json_string("sampled"));
	json_object_set_new(p, "name", json_string(skip ? d->frames[root].name : "all threads"));
	json_object_set_new(p, "unit", json_string("nanoseconds"));
	json_object_set_new(p, "startValue", json_integer(0));
	json_object_set_new(p, "endValue", json_integer(sum));
	json_object_set_new(p, "samples", samples);
	json_object_set_new(p, "weights", weights);
	return p;
}

int speedscope_write(FILE *f, const struct profdata *d)
{
	json_t *root = json_object(), *shared = json_object(), *profiles = json_array();
	const struct profile_meta *m = d->meta;
	json_int_t *index = calloc(d->nframes ? d->nframes : 1, sizeof(*index));
	int r;

	if (!index)
		return -1;

	json_object_set_new(root, "$schema", json_string("https://www.speedscope.app/file-format-schema.json"));
	json_object_set_new(shared, "frames", frames_json(d, index));
	json_object_set_new(root, "shared", shared);
	if (m->per_thread) {
		for (size_t i = 0; i < d->nframes; i++)
			if (d->frames[i].kind == PFRAME_THREAD)
				json_array_append_new(profiles, profile_json(d, index, (long)i));
	} else {
		json_array_append_new(profiles, profile_json(d, index, -1));
	}
	if (json_array_size(profiles) == 0)
		json_array_append_new(profiles, profile_json(d, index, -1));
	json_object_set_new(root, "profiles", profiles);
	json_object_set_new(root, "name", json_string(m->title ? m->title : "pyebpf"));
	json_object_set_new(root, "activeProfileIndex", json_integer(0));
	json_object_set_new(root, "exporter", json_string("pyebpf " PYEBPF_VERSION));
	r = json_dumpf(root, f, JSON_COMPACT);
	fputc('\n', f);
	json_decref(root);
	free(index);
	return r || ferror(f) ? -1 : 0;
}
