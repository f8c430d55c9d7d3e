#define _GNU_SOURCE
#include "profdiff.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "profload.h"

/* The length of frame p[0..len) without its line: "func (file:12)" → "func (file". */
static size_t without_line(const char *p, size_t len)
{
	size_t i = len;

	if (len < 4 || p[len - 1] != ')')
		return len;
	for (i = len - 1; i > 0 && p[i - 1] >= '0' && p[i - 1] <= '9'; i--)
		;
	if (i == len - 1 || i < 2 || p[i - 1] != ':')
		return len;
	/* the colon must be inside the last " (" */
	for (size_t k = i - 1; k > 1; k--)
		if (p[k - 1] == '(' && p[k - 2] == ' ')
			return i - 1;
	return len;
}

size_t profdiff_function(const char *frame, size_t len, char *buf, size_t size)
{
	size_t keep = without_line(frame, len);
	size_t n = keep < len ? keep + 1 : len;

	if (!size)
		return 0;
	if (n >= size)
		n = size - 1;
	memcpy(buf, frame, n < keep ? n : keep);
	if (keep < len && n > keep)
		buf[keep] = ')';
	buf[n] = 0;
	return n;
}

void profdiff_add(struct stackagg *out, const char *stack, size_t len, long long n)
{
	char *key = malloc(len + 1);
	size_t k = 0;
	struct stackagg_entry *e;

	if (!key)
		return;
	for (size_t i = 0; i <= len;) {
		size_t end = i;
		while (end < len && stack[end] != ';')
			end++;
		k += profdiff_function(stack + i, end - i, key + k, end - i + 1);
		if (end < len)
			key[k++] = ';';
		i = end + 1;
	}
	if ((e = stackagg_get(out, key, k)))
		e->self += n;
	free(key);
}

void profdiff_add_all(struct stackagg *out, const struct stackagg *in)
{
	for (size_t i = 0; i < in->n; i++)
		profdiff_add(out, in->v[i].key, strlen(in->v[i].key), in->v[i].self);
}

int profdiff_read_folded(const char *path, struct stackagg *out)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long long total = 0;
	unsigned long lineno = 0;
	int r = 0;

	if (!f) {
		log_error("--baseline %s: %s", path, strerror(errno));
		return -1;
	}
	while (r == 0 && (len = getline(&line, &cap, f)) > 0) {
		char *blank, *end;
		long long n;

		lineno++;
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		blank = strrchr(line, ' ');
		n = blank ? strtoll(blank + 1, &end, 10) : -1;
		if (!blank || blank == line || !blank[1] || *end || n < 0 || memchr(line, 0, (size_t)len)) {
			log_error("--baseline %s: line %lu is not \"stack count\": not folded stacks (-f, -o FILE.txt), "
				  "nor a .pb.gz or .speedscope.json file", path, lineno);
			r = -1;
			break;
		}
		if (n > LLONG_MAX - total) { /* the sums below would overflow */
			log_error("--baseline %s: line %lu: more samples than can be counted", path, lineno);
			r = -1;
			break;
		}
		profdiff_add(out, line, (size_t)(blank - line), n);
		total += n;
	}
	if (r == 0 && ferror(f)) {
		log_error("--baseline %s: %s", path, strerror(errno));
		r = -1;
	}
	if (r == 0 && total == 0) {
		log_error("--baseline %s: no samples in it", path);
		r = -1;
	}
	free(line);
	fclose(f);
	return r;
}

struct loaded {
	struct stackagg *out;
	long long total;
	bool overflow; /* more samples than a long long counts: the rest left out */
};

static void add_loaded(void *ctx, const char *stack, size_t len, long long samples)
{
	struct loaded *l = ctx;

	if (l->overflow || samples > LLONG_MAX - l->total) {
		l->overflow = true;
		return;
	}
	profdiff_add(l->out, stack, len, samples);
	l->total += samples;
}

/* The whole file at path into *data (free it); its size, or -1 (errno). */
static long long read_all(const char *path, uint8_t **data)
{
	FILE *f = fopen(path, "rb");
	size_t len = 0, cap = 65536;
	uint8_t *buf = NULL;

	*data = NULL;
	if (!f)
		return -1;
	for (;;) {
		uint8_t *b;
		if (cap > PROFLOAD_MAX_BYTES || !(b = realloc(buf, cap))) {
			errno = cap > PROFLOAD_MAX_BYTES ? EFBIG : ENOMEM;
			break;
		}
		buf = b;
		len += fread(buf + len, 1, cap - len, f);
		if (len < cap) {
			if (ferror(f))
				break;
			fclose(f);
			*data = buf;
			return (long long)len;
		}
		cap *= 2;
	}
	fclose(f);
	free(buf);
	return -1;
}

int profdiff_read(const char *path, struct stackagg *out)
{
	struct loaded l = { out, 0, false };
	char name[4200];
	uint8_t *data;
	long long size = read_all(path, &data);
	size_t at = 0;
	int r;

	if (size < 0) {
		log_error("--baseline %s: %s", path, strerror(errno));
		return -1;
	}
	snprintf(name, sizeof(name), "--baseline %s", path);
	while (at < (size_t)size && strchr(" \t\r\n", data[at]) && data[at])
		at++;
	if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b)
		r = pprof_load(data, (size_t)size, name, add_loaded, &l);
	else if (at < (size_t)size && data[at] == '{')
		r = speedscope_load(data, (size_t)size, name, add_loaded, &l);
	else {
		free(data);
		return profdiff_read_folded(path, out);
	}
	free(data);
	if (r == 0 && l.overflow) {
		log_error("%s: more samples than can be counted", name);
		r = -1;
	} else if (r == 0 && l.total == 0) {
		log_error("%s: no samples in it", name);
		r = -1;
	}
	return r;
}

/* Per function, the samples it was on the stack of (once per stack); total: all samples. */
static long long by_function(const struct stackagg *in, struct stackagg *funcs)
{
	long long total = 0;

	for (size_t i = 0; i < in->n; i++) {
		const char *p = in->v[i].key;

		funcs->sample++;
		total += in->v[i].self;
		while (*p) {
			const char *end = strchr(p, ';');
			size_t len = end ? (size_t)(end - p) : strlen(p);
			struct stackagg_entry *e = stackagg_get(funcs, p, len);
			if (e && e->sample != funcs->sample) {
				e->sample = funcs->sample;
				e->total += in->v[i].self;
			}
			p += len + (end ? 1 : 0);
		}
	}
	return total;
}

struct drow {
	const char *name;
	double before, after; /* percent */
};

static int by_change(const void *a, const void *b)
{
	const struct drow *x = a, *y = b;
	double dx = x->after - x->before, dy = y->after - y->before;
	double ax = dx < 0 ? -dx : dx, ay = dy < 0 ? -dy : dy;

	if (ax != ay)
		return ax < ay ? 1 : -1;
	return strcmp(x->name, y->name);
}

int profdiff_write_text(FILE *f, const struct stackagg *before, const struct stackagg *after)
{
	struct stackagg fb, fa;
	long long tb, ta;
	struct drow *rows;
	size_t n = 0;
	int r = -1;

	stackagg_init(&fb);
	stackagg_init(&fa);
	tb = by_function(before, &fb);
	ta = by_function(after, &fa);
	rows = calloc(fa.n + fb.n + 1, sizeof(*rows));
	if (!rows)
		goto out;
	for (size_t i = 0; i < fa.n; i++) {
		struct stackagg_entry *e = stackagg_get(&fb, fa.v[i].key, strlen(fa.v[i].key));
		rows[n++] = (struct drow){ fa.v[i].key, e && tb ? 100.0 * (double)e->total / (double)tb : 0,
					   ta ? 100.0 * (double)fa.v[i].total / (double)ta : 0 };
	}
	/* functions only in the baseline: their entries in fa were just made, with total 0 */
	for (size_t i = 0; i < fb.n; i++) {
		struct stackagg_entry *e = stackagg_get(&fa, fb.v[i].key, strlen(fb.v[i].key));
		if (e && !e->total && fb.v[i].total)
			rows[n++] = (struct drow){ fb.v[i].key, tb ? 100.0 * (double)fb.v[i].total / (double)tb : 0, 0 };
	}
	qsort(rows, n, sizeof(*rows), by_change);
	fprintf(f, "# %lld samples before, %lld after; share of the samples with the function on the stack\n", tb,
		ta);
	fprintf(f, "%8s %8s %8s  %s\n", "BEFORE%", "AFTER%", "DELTA", "FUNCTION (FILE)");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%7.2f%% %7.2f%% %+8.2f  %s\n", rows[i].before, rows[i].after, rows[i].after - rows[i].before,
			rows[i].name);
	r = ferror(f) ? -1 : 0;
out:
	free(rows);
	stackagg_free(&fb);
	stackagg_free(&fa);
	return r;
}
