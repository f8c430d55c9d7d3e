/* The picture writers, one file each, which profile_write() picks by format. */
#ifndef PYEBPF_PROFWRITE_H
#define PYEBPF_PROFWRITE_H

#include <stdio.h>

#include "profdata.h"

/* 0, or -1 when writing failed (errno). */
int flamesvg_write(FILE *f, const struct profdata *d);
/* The differential flame graph of after against before (flamesvg.c). */
int flamesvg_write_diff(FILE *f, const struct profdata *after, const struct profdata *before);
int speedscope_write(FILE *f, const struct profdata *d);
/* pprof writes the file itself (gzip). */
int pprof_write(const char *path, const struct profdata *d);

#endif
