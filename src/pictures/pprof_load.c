/*
 * A pprof profile as pprof.c writes it, read back (profload.h): gunzipped by zlib,
 * unpacked by protobuf-c's generated code (profile.proto next to this file), each
 * sample's locations (leaf first, each one line: a function's name and file, a line)
 * turned back into the folded stack it was written from; the "status" label (the
 * marker of an incomplete stack) is its first frame again, the "thread" label is left
 * out. Its first sample type must be pystack's count ("samples"): the samples are that
 * value. Ids must be 1..n in order, as pprof.c numbers them.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "log.h"
#include "profile.pb-c.h"
#include "profload.h"

typedef Perftools__Profiles__Profile Profile;

#define KIND "not a pprof profile pystack wrote (-o FILE.pb.gz)"

/* data gunzipped into *out (free it); its length, or -1 after saying why. */
static long long gunzip(const uint8_t *data, size_t size, const char *name, uint8_t **out)
{
	z_stream z = { 0 };
	size_t cap = 0, len = 0, used = 0;
	uint8_t *buf = NULL;
	int r;

	*out = NULL;
	if (size < 2 || data[0] != 0x1f || data[1] != 0x8b) {
		log_error("%s: not gzip-compressed: %s", name, KIND);
		return -1;
	}
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		log_error("%s: out of memory", name);
		return -1;
	}
	for (;;) {
		size_t in = size - used, room;
		uint8_t *b;

		if (len == cap) {
			if (cap == PROFLOAD_MAX_BYTES) {
				log_error("%s: more than %lu MiB gunzipped: %s", name, PROFLOAD_MAX_BYTES >> 20, KIND);
				goto fail;
			}
			cap = cap ? 2 * cap : 4 * size + 4096;
			cap = cap > PROFLOAD_MAX_BYTES ? PROFLOAD_MAX_BYTES : cap;
			if (!(b = realloc(buf, cap))) {
				log_error("%s: out of memory", name);
				goto fail;
			}
			buf = b;
		}
		room = cap - len;
		/* zlib counts in uInt: at most 1 GiB in and out a call */
		z.next_in = (Bytef *)(data + used);
		z.avail_in = (uInt)(in > (1u << 30) ? 1u << 30 : in);
		z.next_out = buf + len;
		z.avail_out = (uInt)(room > (1u << 30) ? 1u << 30 : room);
		in = z.avail_in;
		room = z.avail_out;
		r = inflate(&z, Z_NO_FLUSH);
		used += in - z.avail_in;
		len += room - z.avail_out;
		if (r == Z_STREAM_END)
			break;
		if ((r != Z_OK && r != Z_BUF_ERROR) || (used == size && z.avail_out)) {
			log_error("%s: a broken or cut gzip stream (%s): %s", name, z.msg ? z.msg : "cut short", KIND);
			goto fail;
		}
	}
	inflateEnd(&z);
	*out = buf;
	return (long long)len;
fail:
	inflateEnd(&z);
	free(buf);
	return -1;
}

static const char *string_at(const Profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : NULL;
}

/* What pprof.c writes holds together: ids 1..n, every index in range; NULL, or why not. */
static const char *check(const Profile *p)
{
	const char *type;

	if (!p->n_string_table || p->string_table[0][0])
		return "no string table";
	if (!p->n_sample_type || !(type = string_at(p, p->sample_type[0]->type)))
		return "no sample type";
	if (strcmp(type, "samples"))
		return "its samples are not pystack's (sample type \"samples\")";
	for (size_t i = 0; i < p->n_function; i++)
		if (p->function[i]->id != i + 1 || !string_at(p, p->function[i]->name) ||
		    !string_at(p, p->function[i]->filename))
			return "a function's id or strings out of order";
	for (size_t i = 0; i < p->n_location; i++) {
		const Perftools__Profiles__Location *l = p->location[i];
		if (l->id != i + 1 || !l->n_line)
			return "a location's id out of order, or no line";
		for (size_t k = 0; k < l->n_line; k++)
			if (!l->line[k]->function_id || l->line[k]->function_id > p->n_function)
				return "a line of an unknown function";
	}
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		if (s->n_value != p->n_sample_type || s->value[0] < 0)
			return "a sample's values do not match its types";
		for (size_t k = 0; k < s->n_location_id; k++)
			if (!s->location_id[k] || s->location_id[k] > p->n_location)
				return "a sample at an unknown location";
		for (size_t k = 0; k < s->n_label; k++)
			if (!string_at(p, s->label[k]->key) || !string_at(p, s->label[k]->str))
				return "a label's strings out of range";
	}
	return NULL;
}

/* Sample s as folded text into st (emptied first); 0, or -1 when out of memory. */
static int fold(const Profile *p, const Perftools__Profiles__Sample *s, struct profload_stack *st)
{
	st->len = 0;
	for (size_t k = 0; k < s->n_label; k++)
		if (!strcmp(string_at(p, s->label[k]->key), "status") &&
		    profload_push(st, string_at(p, s->label[k]->str), "", 0))
			return -1;
	for (size_t k = s->n_location_id; k-- > 0;) { /* root first */
		const Perftools__Profiles__Location *l = p->location[s->location_id[k] - 1];
		for (size_t j = l->n_line; j-- > 0;) { /* line[0] is the innermost */
			const Perftools__Profiles__Function *fn = p->function[l->line[j]->function_id - 1];
			if (profload_push(st, string_at(p, fn->name), string_at(p, fn->filename), l->line[j]->line))
				return -1;
		}
	}
	return 0;
}

int pprof_load(const uint8_t *data, size_t size, const char *name, profload_fn fn, void *ctx)
{
	uint8_t *raw;
	long long len = gunzip(data, size, name, &raw);
	struct profload_stack st = { 0 };
	const char *why;
	Profile *p;
	int r = -1;

	if (len < 0)
		return -1;
	p = perftools__profiles__profile__unpack(NULL, (size_t)len, raw);
	free(raw);
	if (!p) {
		log_error("%s: gzip, but not pprof's protobuf: %s", name, KIND);
		return -1;
	}
	if ((why = check(p))) {
		log_error("%s: %s: %s", name, why, KIND);
		goto out;
	}
	for (size_t i = 0; i < p->n_sample; i++) {
		if (fold(p, p->sample[i], &st)) {
			log_error("%s: out of memory", name);
			goto out;
		}
		if (st.len) /* a stack of a thread label only has no folded text */
			fn(ctx, st.text, st.len, p->sample[i]->value[0]);
	}
	r = 0;
out:
	profload_free(&st);
	perftools__profiles__profile__free_unpacked(p, NULL);
	return r;
}
