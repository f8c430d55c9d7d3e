/*
 * Pictures of aggregated stacks: a tracker that folds stacks into a struct stackagg
 * (src/base/stackagg.h: key "root;...;leaf", self = times seen, total = their weight
 * in nanoseconds when it is not a fixed period: a pause, time off the CPU, a GIL
 * wait) writes them with -o FILE as an interactive SVG flame graph, a speedscope
 * file, a pprof profile or folded text. The format comes from the file's name or
 * --format. A tracker plugs in with profile_option() in its option
 * handler, profile_check() in its check and profile_write() at the end.
 *
 * Frames are "func (file:line)" or "func" (src/python/pyframes.h); with per_thread
 * the first frame of every stack is the thread's name; next, "[truncated]", "[error]"
 * or "[unknown: why]" is the marker of an incomplete stack (pyframes_marker()).
 */
#ifndef PYEBPF_PROFILE_H
#define PYEBPF_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "profdata.h" /* struct profile_meta */
#include "stackagg.h"

enum profile_format { PROFILE_NONE, PROFILE_FOLDED, PROFILE_SVG, PROFILE_SPEEDSCOPE, PROFILE_PPROF };

/* The -o FILE and --format settings of a tracker. */
struct profile_out {
	const char *path;
	enum profile_format format;
	bool diff; /* against a baseline (set before profile_check): only svg or folded (the text diff) */
};

/*
 * The summary field of a tracker whose stack tables are limited to STACKAGG_MAX_STACKS
 * distinct stacks (stackagg.h): what went to "[other]" instead.
 */
#define FIELD_STACKS_OTHER                                                                         \
	{ .name = "stacks_other", .type = FIELD_INT,                                               \
	  .meaning = "stacks counted as \"[other]\": the run had already kept 20000 distinct ones" }

/* The option table entries, in this order after the tracker's own. */
#define PROFILE_OPT_ENTRIES(out_id, format_id)                                                   \
	{ out_id, 'o', "output", "FILE",                                                           \
	  "write the stacks to FILE: .svg, .speedscope.json, .pb.gz (pprof) or folded text" },      \
	{ format_id, 0, "format", "FMT", "the format of -o: svg, speedscope, pprof or folded (default: from the name)" }

/* Handles -o (is_format false) and --format; 0, or -1 after a usage error. */
int profile_option(struct profile_out *o, bool is_format, const char *arg);
/* After the options: the format from the name when --format did not say; 0 or -1 (said why). */
int profile_check(struct profile_out *o);

/* Writes agg to o->path (nothing without -o); 0, or -1 after saying why on stderr. */
int profile_write(const struct profile_out *o, const struct stackagg *agg, const struct profile_meta *m);
/*
 * agg against the baseline base (stacks by function, profdiff.h) to o->path: the
 * differential flame graph (svg) or the text diff (folded); 0, or -1 after saying why.
 */
int profile_write_diff(const struct profile_out *o, const struct stackagg *agg, const struct stackagg *base,
		       const struct profile_meta *m);

#endif
