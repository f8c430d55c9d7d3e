/*
 * The stacks of a struct stackagg taken apart for the writers: each distinct frame
 * once (name, file, line, kind), each stack as frame indices root first, with its
 * count and weight (profdata.c). The writers (profwrite.h) read it; profile.c, the
 * front, builds it: neither needs the other.
 */
#ifndef PYEBPF_PROFDATA_H
#define PYEBPF_PROFDATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stackagg.h"

/* What was counted, for the legends, tooltips and sample types. */
struct profile_meta {
	const char *title;       /* the picture's heading, e.g. "pystack: CPU in Python" */
	const char *count_name;  /* what self counts: "samples", "collections" */
	const char *weight_name; /* what the weight measures, in nanoseconds: "cpu", "pause" */
	uint64_t period_ns;      /* > 0: weight = self * period_ns (sampling); 0: weight = total */
	bool by_weight;          /* widths by the weight, not by the count (pygc: pause time) */
	bool per_thread;         /* the first frame of each stack is a thread name */
	bool folded_us;          /* folded text: the weight in microseconds (as the tool's -f), not the count */
};

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

#endif
