/*
 * Differential profiles: what changed between a baseline (before) and a profile
 * (after). Both are stacks as a struct stackagg (self = samples). They are compared
 * by function: each frame "func (file:line)" becomes "func (file)", so a profile drawn
 * per line (stored stacks) and one drawn per function (a live run's -f) compare; each
 * side is normalised to its own total. The SVG picture is the flame graph's
 * (flamesvg_write_diff, profwrite.h), the text one line per function here.
 */
#ifndef PYEBPF_PROFDIFF_H
#define PYEBPF_PROFDIFF_H

#include <stdio.h>

#include "stackagg.h"

/*
 * The folded text at path ("stack count" lines, as -f and -o FILE.txt write them)
 * added to out by function; 0, or -1 after saying why (unreadable, not folded text,
 * no samples).
 */
int profdiff_read_folded(const char *path, struct stackagg *out);
/*
 * The profile file at path added to out by function, whichever pystack wrote: a pprof
 * profile (gzip: -o FILE.pb.gz), a speedscope file (a JSON object: -o
 * FILE.speedscope.json) or else folded text (profdiff_read_folded), the same
 * samples from each (profload.h); 0, or -1 after saying why.
 */
int profdiff_read(const char *path, struct stackagg *out);
/* Frame frame[0..len) by function ("func (file)") into buf (NUL-terminated, cut to fit); its length. */
size_t profdiff_function(const char *frame, size_t len, char *buf, size_t size);
/* n samples of stack (len bytes) added to out by function. */
void profdiff_add(struct stackagg *out, const char *stack, size_t len, long long n);
/* in's stacks added to out by function. */
void profdiff_add_all(struct stackagg *out, const struct stackagg *in);
/*
 * The text diff: a heading, then per function the share of the samples it was on the
 * stack of, before and after, and the difference in points, largest change first.
 * 0, or -1 when writing failed.
 */
int profdiff_write_text(FILE *f, const struct stackagg *before, const struct stackagg *after);

#endif
