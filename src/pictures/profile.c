#include "profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "opts.h"
#include "outfile.h"
#include "profdata.h"
#include "profdiff.h"
#include "profwrite.h"

static const struct {
	const char *name, *suffix;
	enum profile_format format;
} formats[] = {
	{ "svg", ".svg", PROFILE_SVG },
	{ "speedscope", ".speedscope.json", PROFILE_SPEEDSCOPE },
	{ "pprof", ".pb.gz", PROFILE_PPROF },
	{ "folded", ".txt", PROFILE_FOLDED },
	{ "folded", ".folded", PROFILE_FOLDED },
};

enum { NFORMATS = sizeof(formats) / sizeof(formats[0]) };

int profile_option(struct profile_out *o, bool is_format, const char *arg)
{
	if (!is_format) {
		o->path = arg;
		return 0;
	}
	for (size_t i = 0; i < NFORMATS; i++)
		if (!strcmp(arg, formats[i].name)) {
			o->format = formats[i].format;
			return 0;
		}
	return opts_usage_error("--format: svg, speedscope, pprof or folded, not '%s'", arg);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

/* Before the run, not after it: a FILE that cannot be written (nothing is created). */
static int check_writable(const char *path)
{
	if (outfile_check(path))
		return opts_usage_error("-o %s: %s", path, strerror(errno));
	return 0;
}

int profile_check(struct profile_out *o)
{
	if (o->format != PROFILE_NONE && !o->path)
		return opts_usage_error("--format needs -o FILE");
	if (!o->path)
		return 0;
	for (size_t i = 0; o->format == PROFILE_NONE && i < NFORMATS; i++)
		if (ends_with(o->path, formats[i].suffix))
			o->format = formats[i].format;
	if (o->format == PROFILE_NONE)
		return opts_usage_error("-o %s: say --format (the name ends in none of .svg, "
					".speedscope.json, .pb.gz, .txt)", o->path);
	if (o->diff && o->format != PROFILE_SVG && o->format != PROFILE_FOLDED)
		return opts_usage_error("-o %s: a difference is drawn as .svg or written as text (.txt)", o->path);
	return check_writable(o->path);
}

/* folded_us: the lines the tool's -f prints, which leaves out stacks of less than 1 us. */
static int write_folded(FILE *f, const struct stackagg *agg, const struct profile_meta *m)
{
	for (size_t i = 0; i < agg->n; i++) {
		long long v = m->folded_us ? agg->v[i].total / 1000 : agg->v[i].self;
		if (v || !m->folded_us)
			fprintf(f, "%s %lld\n", agg->v[i].key, v);
	}
	return ferror(f) ? -1 : 0;
}

/* The difference of agg against base (both by function, profdiff.h): the text or the SVG picture. */
static int write_diff(FILE *f, enum profile_format format, const struct stackagg *agg, const struct stackagg *base,
		      const struct profile_meta *m)
{
	struct profdata after, before;
	int r;

	if (format == PROFILE_FOLDED)
		return profdiff_write_text(f, base, agg);
	if (profdata_build(&after, agg, m)) {
		errno = ENOMEM;
		return -1;
	}
	if (profdata_build(&before, base, m)) {
		profdata_free(&after);
		errno = ENOMEM;
		return -1;
	}
	r = flamesvg_write_diff(f, &after, &before);
	profdata_free(&after);
	profdata_free(&before);
	return r;
}

/* base: NULL, or the baseline (by function) that agg is drawn against. */
static int write_profile(const struct profile_out *o, const struct stackagg *agg, const struct stackagg *base,
			 const struct profile_meta *m)
{
	struct outfile out;
	struct profdata d;
	int r, e;

	if (!o->path)
		return 0;
	/* whole or not at all: a profile of that name from an earlier run stays until this one is written */
	if (outfile_open(&out, o->path)) {
		log_error("-o %s: %s", o->path, strerror(errno));
		return -1;
	}
	if (base) {
		r = write_diff(out.f, o->format, agg, base, m);
	} else if (o->format == PROFILE_FOLDED) {
		r = write_folded(out.f, agg, m);
	} else if (profdata_build(&d, agg, m)) {
		r = -1;
		errno = ENOMEM;
	} else {
		if (o->format == PROFILE_SVG)
			r = flamesvg_write(out.f, &d);
		else if (o->format == PROFILE_SPEEDSCOPE)
			r = speedscope_write(out.f, &d);
		else
			r = pprof_write(out.tmp, &d); /* it opens the file itself (gzip) */
		profdata_free(&d);
	}
	e = errno;
	if (outfile_close(&out, r == 0) && !r) {
		r = -1;
		e = errno;
	}
	if (r)
		log_error("-o %s: not written: %s", o->path, strerror(e));
	return r;
}

int profile_write(const struct profile_out *o, const struct stackagg *agg, const struct profile_meta *m)
{
	return write_profile(o, agg, NULL, m);
}

int profile_write_diff(const struct profile_out *o, const struct stackagg *agg, const struct stackagg *base,
		       const struct profile_meta *m)
{
	struct stackagg after;
	int r;

	stackagg_init(&after);
	profdiff_add_all(&after, agg);
	r = write_profile(o, &after, base, m);
	stackagg_free(&after);
	return r;
}
