/*
 * The stacks of a struct stackagg taken apart for the writers: each distinct frame
 * once (name, file, line, kind), each stack as frame indices root first, with its
 * count and weight.
 */
#ifndef PYEBPF_PROFDATA_H
#define PYEBPF_PROFDATA_H

#include <stddef.h>
#include <stdio.h>

#include "profile.h"

enum pframe_kind { PFRAME_CODE, PFRAME_THREAD, PFRAME_MARKER };

struct pframe {
	char *text;   /* as folded: "func (file:line)" */
	char *name;   /* func */
	char *file;   /* "" when unknown */
	int line;     /* 0 when unknown */
	enum pframe_kind kind;
};

struct pstack {
	const unsigned *frames; /* root first */
	int depth;
	long long count;
	long long weight;       /* nanoseconds */
};

struct profdata {
	struct pframe *frames;
	size_t nframes, cap;
	struct pstack *stacks;
	size_t nstacks;
	unsigned *pool;         /* the stacks' frame indices */
	long long count, weight; /* over all stacks */
	const struct profile_meta *meta;
};

int profdata_build(struct profdata *d, const struct stackagg *agg, const struct profile_meta *m);
void profdata_free(struct profdata *d);
/* What the pictures' widths measure: the weight or the count. */
long long profdata_value(const struct profdata *d, const struct pstack *s);

/* The writers; 0, or -1 when writing failed (errno). */
int flamesvg_write(FILE *f, const struct profdata *d);
int speedscope_write(FILE *f, const struct profdata *d);
/* pprof writes the file itself (gzip). */
int pprof_write(const char *path, const struct profdata *d);

#endif
