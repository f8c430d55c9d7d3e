/*
 * What the BPF stack walker's frames (bpf_text/pywalk.h) mean to a reader: resolved
 * into names, files and lines, formatted "func (file:line)", and folded. Shared by
 * the Python trackers.
 */
#ifndef PYEBPF_PYFRAMES_H
#define PYEBPF_PYFRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyproc.h"
#include "pywalk.h"

/*
 * How many frames a walker's record holds: depth, or 0 when depth is over
 * PYWALK_DEPTH_LIMIT or the record (size bytes, its frames from byte head on) is short.
 */
int pyframes_depth(unsigned depth, int size, size_t head);

/*
 * Resolves depth frames (innermost first) into locs (a frame that cannot be read gets
 * func "[unknown]", as does every frame when py is NULL). Returns how many could not.
 */
int pyframes_resolve(struct pyproc *py, const struct pywalk_frame *frames, int depth,
		     struct pycode_loc *locs);

/* One frame as "func (file:line)", or "func" when its file is unknown; returns its length. */
int pyframes_format(const struct pycode_loc *loc, char *buf, size_t len);

/*
 * Folding by function: each frame's line becomes its def line (co_firstlineno), so a
 * function is one frame of a folded stack or picture whatever line it was on.
 */
void pyframes_by_function(struct pycode_loc *locs, int depth);

/*
 * What stands before the frames of a stack the walker could not read whole, or NULL
 * for a complete one: "[truncated]", else "[error]", or with detail the reason
 * ("[unknown: frame unreadable]").
 */
const char *pyframes_marker(unsigned status, bool detail);

/* A growing string. */
struct pyframes_buf {
	char *p;
	size_t len, cap;
};
void pyframes_buf_free(struct pyframes_buf *b);

/*
 * A name made fit for a part of a folded line (what flamegraph.pl reads: parts between
 * ';', the count after the last ' '), in place, up to n bytes or its NUL: as the
 * stack's root (a thread's name) ';' and ' ' become '_'; as a frame ';' becomes ','.
 */
enum pyframes_fold { PYFRAMES_FOLD_ROOT, PYFRAMES_FOLD_FRAME };
void pyframes_fold_escape(char *s, size_t n, enum pyframes_fold as);

/*
 * A tracker's walked stacks made text: its buffer, the frames' locations, and how many
 * frames could not be resolved (its summary's unresolved_frames).
 */
struct pyframes_text {
	struct pyframes_buf buf;
	unsigned long long unresolved;
	struct pycode_loc locs[PYWALK_DEPTH_LIMIT];
};
void pyframes_text_free(struct pyframes_text *t);

/*
 * depth frames of py (NULL: not CPython, every frame "[unknown]") resolved into t->locs
 * and folded without a root (pyframes_folded): t's buffer, valid until the next call.
 */
const char *pyframes_text(struct pyframes_text *t, struct pyproc *py, const struct pywalk_frame *frames,
			  int depth, unsigned status);

/*
 * A stack as one line of folded text: root (when not NULL, escaped as the root), the
 * marker, then the frames root first, ';' between them (each escaped as a frame).
 * Returns b->p ("" when empty).
 */
const char *pyframes_folded(struct pyframes_buf *b, const char *root, const struct pycode_loc *locs,
			    int depth, unsigned status);

#endif
