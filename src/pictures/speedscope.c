/*
 * speedscope's file format (https://www.speedscope.app/file-format-schema.json): the
 * frames once, shared; one "sampled" profile per thread (per_thread: the thread frame
 * names the profile and is not a frame), each stack a sample weighted in nanoseconds.
 * A sampled profile (period_ns) also has a member "pyebpf", not speedscope's: what
 * was counted and the period, so that the counts can be read back from the weights
 * (speedscope_load.c). speedscope ignores members it does not know.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "profdata.h"
#include "profwrite.h"

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

static void put_string(FILE *f, const char *str)
{
	json_t *j = json_string(str);

	json_dumpf(j, f, JSON_ENCODE_ANY);
	json_decref(j);
}

/*
 * The profile of the stacks under thread frame root (all stacks when root is -1),
 * written as it goes: 10,000 stacks as jansson objects took most of a second.
 */
static void put_profile(FILE *f, const struct profdata *d, const json_int_t *index, long root)
{
	int skip = root >= 0;
	long long sum = 0;
	bool first = true;

	fputs("{\"type\":\"sampled\",\"name\":", f);
	put_string(f, skip ? d->frames[root].name : "all threads");
	fputs(",\"unit\":\"nanoseconds\",\"startValue\":0,\"samples\":[", f);
	for (size_t i = 0; i < d->nstacks; i++) {
		const struct pstack *s = &d->stacks[i];

		if (skip && (s->depth == 0 || s->frames[0] != (unsigned)root))
			continue;
		fputs(first ? "[" : ",[", f);
		first = false;
		for (int k = skip; k < s->depth; k++)
			fprintf(f, k > skip ? ",%" JSON_INTEGER_FORMAT : "%" JSON_INTEGER_FORMAT, index[s->frames[k]]);
		fputc(']', f);
		sum += s->weight;
	}
	fputs("],\"weights\":[", f);
	first = true;
	for (size_t i = 0; i < d->nstacks; i++) {
		const struct pstack *s = &d->stacks[i];

		if (skip && (s->depth == 0 || s->frames[0] != (unsigned)root))
			continue;
		fprintf(f, first ? "%lld" : ",%lld", s->weight);
		first = false;
	}
	fprintf(f, "],\"endValue\":%lld}", sum);
}

int speedscope_write(FILE *f, const struct profdata *d)
{
	const struct profile_meta *m = d->meta;
	json_int_t *index = calloc(d->nframes ? d->nframes : 1, sizeof(*index));
	json_t *frames;
	bool any = false;

	if (!index)
		return -1;
	frames = frames_json(d, index);
	fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"shared\":{\"frames\":", f);
	json_dumpf(frames, f, JSON_COMPACT);
	json_decref(frames);
	fputs("},\"profiles\":[", f);
	for (size_t i = 0; m->per_thread && i < d->nframes; i++)
		if (d->frames[i].kind == PFRAME_THREAD) {
			if (any)
				fputc(',', f);
			put_profile(f, d, index, (long)i);
			any = true;
		}
	if (!any)
		put_profile(f, d, index, -1);
	fputs("],\"name\":", f);
	put_string(f, m->title ? m->title : "pyebpf");
	fputs(",\"activeProfileIndex\":0,\"exporter\":\"pyebpf " PYEBPF_VERSION "\"", f);
	/* sampled (pystack): the weights are count x period; speedscope_load.c reads the counts back */
	if (m->period_ns) {
		fputs(",\"pyebpf\":{\"count\":", f);
		put_string(f, m->count_name);
		fprintf(f, ",\"period_ns\":%llu}", (unsigned long long)m->period_ns);
	}
	fputs("}\n", f);
	free(index);
	return ferror(f) ? -1 : 0;
}
