/*
 * pprof's profile (profile.proto next to this file): encoded by protobuf-c, gzipped
 * by zlib. Two sample types: what was counted (samples, collections) and its weight
 * in nanoseconds (cpu, pause). Python frames are locations, one per frame and line,
 * each in a function (name and file); the thread (per_thread) and the marker of an
 * incomplete stack are labels of the sample, not frames, so that pprof's functions
 * are the tools' functions.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "profdata.h"
#include "profwrite.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;
typedef Perftools__Profiles__Mapping Mapping;

struct strings {
	struct stackagg seen; /* self: index + 1 */
	char **v;
	size_t n, cap;
};

static int64_t string_id(struct strings *s, const char *str)
{
	struct stackagg_entry *e = stackagg_get(&s->seen, str, strlen(str));

	if (!e)
		return -1;
	if (!e->self) {
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 256;
			char **v = realloc(s->v, cap * sizeof(*v));
			if (!v)
				return -1;
			s->v = v;
			s->cap = cap;
		}
		s->v[s->n] = e->key;
		e->self = (long long)++s->n;
	}
	return e->self - 1;
}

/* Everything the Profile message points to, freed at once. */
struct pprof {
	const struct profdata *d;
	struct strings str;
	ValueType types[2], period_type;
	Mapping mapping; /* one for all: it says the functions are known (pprof then symbolizes nothing) */
	Mapping *mapping_ptr;
	ValueType *type_ptrs[2];
	Function *funcs;      /* one per distinct name and file */
	Function **func_ptrs;
	size_t nfuncs;
	struct stackagg func_seen;
	Location *locs;       /* one per code frame; id 0 for the others */
	Location **loc_ptrs;
	Line *lines;
	Line **line_ptrs;
	uint64_t *loc_of;     /* frame index -> location id */
	size_t nlocs;
	Sample *samples;
	Sample **sample_ptrs;
	uint64_t *ids;        /* the samples' location ids */
	int64_t *values;
	Label *labels;
	Label **label_ptrs;
};

static int value_type(struct pprof *p, ValueType *t, const char *type, const char *unit)
{
	perftools__profiles__value_type__init(t);
	t->type = string_id(&p->str, type);
	t->unit = string_id(&p->str, unit);
	return t->type < 0 || t->unit < 0 ? -1 : 0;
}

static int64_t function_id(struct pprof *p, const struct pframe *f)
{
	char key[2048];
	int n = snprintf(key, sizeof(key), "%s\t%s", f->name, f->file);
	struct stackagg_entry *e = stackagg_get(&p->func_seen, key, n < (int)sizeof(key) ? (size_t)n : sizeof(key) - 1);
	Function *fn;

	if (!e)
		return -1;
	if (e->self)
		return e->self;
	fn = &p->funcs[p->nfuncs];
	perftools__profiles__function__init(fn);
	fn->id = p->nfuncs + 1;
	fn->name = fn->system_name = string_id(&p->str, f->name);
	fn->filename = string_id(&p->str, f->file);
	if (fn->name < 0 || fn->filename < 0)
		return -1;
	p->func_ptrs[p->nfuncs] = fn;
	e->self = (long long)++p->nfuncs;
	return e->self;
}

static int locations(struct pprof *p)
{
	const struct profdata *d = p->d;
	size_t n = d->nframes ? d->nframes : 1;

	p->funcs = calloc(n, sizeof(*p->funcs));
	p->func_ptrs = calloc(n, sizeof(*p->func_ptrs));
	p->locs = calloc(n, sizeof(*p->locs));
	p->loc_ptrs = calloc(n, sizeof(*p->loc_ptrs));
	p->lines = calloc(n, sizeof(*p->lines));
	p->line_ptrs = calloc(n, sizeof(*p->line_ptrs));
	p->loc_of = calloc(n, sizeof(*p->loc_of));
	if (!p->funcs || !p->func_ptrs || !p->locs || !p->loc_ptrs || !p->lines || !p->line_ptrs || !p->loc_of)
		return -1;
	for (size_t i = 0; i < d->nframes; i++) {
		const struct pframe *f = &d->frames[i];
		Location *l = &p->locs[p->nlocs];
		Line *line = &p->lines[p->nlocs];
		int64_t fid;

		if (f->kind != PFRAME_CODE)
			continue;
		fid = function_id(p, f);
		if (fid < 0)
			return -1;
		perftools__profiles__location__init(l);
		perftools__profiles__line__init(line);
		line->function_id = (uint64_t)fid;
		line->line = f->line;
		p->line_ptrs[p->nlocs] = line;
		l->id = p->nlocs + 1;
		l->mapping_id = 1;
		l->n_line = 1;
		l->line = &p->line_ptrs[p->nlocs];
		p->loc_ptrs[p->nlocs] = l;
		p->loc_of[i] = l->id;
		p->nlocs++;
	}
	return 0;
}

static int samples(struct pprof *p)
{
	const struct profdata *d = p->d;
	size_t n = d->nstacks ? d->nstacks : 1, nids = 0;
	int64_t thread_key = string_id(&p->str, "thread"), status_key = string_id(&p->str, "status");

	for (size_t i = 0; i < d->nstacks; i++)
		nids += (size_t)d->stacks[i].depth;
	p->samples = calloc(n, sizeof(*p->samples));
	p->sample_ptrs = calloc(n, sizeof(*p->sample_ptrs));
	p->ids = calloc(nids ? nids : 1, sizeof(*p->ids));
	p->values = calloc(2 * n, sizeof(*p->values));
	p->labels = calloc(2 * n, sizeof(*p->labels));
	p->label_ptrs = calloc(2 * n, sizeof(*p->label_ptrs));
	if (!p->samples || !p->sample_ptrs || !p->ids || !p->values || !p->labels || !p->label_ptrs ||
	    thread_key < 0 || status_key < 0)
		return -1;
	nids = 0;
	for (size_t i = 0; i < d->nstacks; i++) {
		const struct pstack *st = &d->stacks[i];
		Sample *s = &p->samples[i];

		perftools__profiles__sample__init(s);
		s->location_id = p->ids + nids;
		for (int k = st->depth - 1; k >= 0; k--) { /* leaf first */
			const struct pframe *f = &d->frames[st->frames[k]];
			if (f->kind == PFRAME_CODE) {
				s->location_id[s->n_location_id++] = p->loc_of[st->frames[k]];
				continue;
			}
			if (s->n_label == 2)
				continue; /* a thread and a marker at most */
			Label *l = &p->labels[2 * i + s->n_label];
			perftools__profiles__label__init(l);
			l->key = f->kind == PFRAME_THREAD ? thread_key : status_key;
			l->str = string_id(&p->str, f->name);
			if (l->str < 0)
				return -1;
			p->label_ptrs[2 * i + s->n_label++] = l;
		}
		nids += s->n_location_id;
		s->label = &p->label_ptrs[2 * i];
		s->value = &p->values[2 * i];
		s->value[0] = st->count;
		s->value[1] = st->weight;
		s->n_value = 2;
		p->sample_ptrs[i] = s;
	}
	return 0;
}

static void pprof_free(struct pprof *p)
{
	stackagg_free(&p->str.seen);
	stackagg_free(&p->func_seen);
	free(p->str.v);
	free(p->funcs), free(p->func_ptrs), free(p->locs), free(p->loc_ptrs);
	free(p->lines), free(p->line_ptrs), free(p->loc_of);
	free(p->samples), free(p->sample_ptrs), free(p->ids), free(p->values);
	free(p->labels), free(p->label_ptrs);
}

static int write_gzip(const char *path, const uint8_t *buf, size_t len)
{
	gzFile gz = gzopen(path, "wb");
	int r = 0;

	if (!gz)
		return -1;
	while (len && r == 0) {
		unsigned chunk = len > (1u << 30) ? 1u << 30 : (unsigned)len;
		int n = gzwrite(gz, buf, chunk);
		if (n <= 0)
			r = -1;
		buf += n > 0 ? n : 0;
		len -= n > 0 ? (size_t)n : 0;
	}
	if (gzclose(gz) != Z_OK)
		r = -1;
	if (r && !errno)
		errno = EIO;
	return r;
}

int pprof_write(const char *path, const struct profdata *d)
{
	const struct profile_meta *m = d->meta;
	Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	struct pprof p = { .d = d };
	uint8_t *buf = NULL;
	size_t len;
	int r = -1;

	stackagg_init(&p.str.seen);
	stackagg_init(&p.func_seen);
	if (string_id(&p.str, "") < 0 || value_type(&p, &p.types[0], m->count_name, "count") ||
	    value_type(&p, &p.types[1], m->weight_name, "nanoseconds") ||
	    value_type(&p, &p.period_type, m->weight_name, "nanoseconds") || locations(&p) || samples(&p))
		goto out;
	perftools__profiles__mapping__init(&p.mapping);
	p.mapping.id = 1;
	p.mapping.filename = string_id(&p.str, "python");
	p.mapping.has_functions = p.mapping.has_filenames = p.mapping.has_line_numbers = 1;
	p.mapping_ptr = &p.mapping;
	prof.n_mapping = 1;
	prof.mapping = &p.mapping_ptr;
	p.type_ptrs[0] = &p.types[0];
	p.type_ptrs[1] = &p.types[1];
	prof.n_sample_type = 2;
	prof.sample_type = p.type_ptrs;
	prof.n_sample = d->nstacks;
	prof.sample = p.sample_ptrs;
	prof.n_location = p.nlocs;
	prof.location = p.loc_ptrs;
	prof.n_function = p.nfuncs;
	prof.function = p.func_ptrs;
	prof.period_type = &p.period_type;
	prof.period = (int64_t)m->period_ns;
	prof.time_nanos = (int64_t)time(NULL) * 1000000000;
	prof.default_sample_type = m->by_weight ? p.types[1].type : p.types[0].type;
	prof.n_string_table = p.str.n;
	prof.string_table = p.str.v;
	len = perftools__profiles__profile__get_packed_size(&prof);
	buf = malloc(len ? len : 1);
	if (!buf)
		goto out;
	perftools__profiles__profile__pack(&prof, buf);
	r = write_gzip(path, buf, len);
out:
	if (r && !errno)
		errno = ENOMEM;
	free(buf);
	pprof_free(&p);
	return r;
}
