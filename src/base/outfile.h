/*
 * Output files written whole or not at all: the content goes to a new temporary file
 * in the same directory, renamed over the path only when everything was written, so a
 * run that fails (a target that is not CPython, a full disk) leaves a file of that
 * name exactly as it was. Every -o of the tools goes through here.
 */
#ifndef PYEBPF_OUTFILE_H
#define PYEBPF_OUTFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

struct outfile {
	const char *path;
	char tmp[PATH_MAX]; /* the temporary file's name, for a writer that opens it itself */
	FILE *f;
};

/*
 * Whether path could be written, changing nothing: a file there must be writable, and
 * its directory must take a new file (tried with a temporary one, removed at once).
 * 0, or -1 with errno.
 */
int outfile_check(const char *path);
/* Opens o->f on a new temporary file next to path (mode 0666 less the umask). 0, or -1 with errno. */
int outfile_open(struct outfile *o, const char *path);
/*
 * ok: closes o->f and renames the temporary file over path (0, or -1 with errno when
 * that failed); !ok: closes and removes it (returns -1). Either way o->f is NULL after.
 */
int outfile_close(struct outfile *o, bool ok);

#endif
