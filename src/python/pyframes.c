#include "pyframes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pyframes_depth(unsigned depth, int size, size_t head)
{
	if (depth > PYWALK_DEPTH_LIMIT || size < 0 ||
	    (size_t)size < head + (size_t)depth * sizeof(struct pywalk_frame))
		return 0;
	return (int)depth;
}

int pyframes_resolve(struct pyproc *py, const struct pywalk_frame *frames, int depth,
		     struct pycode_loc *locs)
{
	int unresolved = 0;

	for (int i = 0; i < depth; i++) {
		if (py && !pyproc_code_location(py, frames[i].code, frames[i].instr, frames[i].firstlineno,
						&locs[i]))
			continue;
		if (!py) {
			snprintf(locs[i].func, sizeof(locs[i].func), "[unknown]");
			locs[i].file[0] = 0;
			locs[i].line = locs[i].firstlineno = 0;
		}
		unresolved++;
	}
	return unresolved;
}

int pyframes_format(const struct pycode_loc *loc, char *buf, size_t len)
{
	if (loc->file[0])
		return snprintf(buf, len, "%s (%s:%d)", loc->func, loc->file, loc->line);
	return snprintf(buf, len, "%s", loc->func);
}

void pyframes_by_function(struct pycode_loc *locs, int depth)
{
	for (int i = 0; i < depth; i++)
		if (locs[i].firstlineno > 0)
			locs[i].line = locs[i].firstlineno;
}

const char *pyframes_marker(unsigned status, bool detail)
{
	static const char *const why[] = {
		[PYWALK_NO_THREAD] = "[unknown: no Python thread state]",
		[PYWALK_ERR_CONFIG] = "[unknown: process not configured yet]",
		[PYWALK_ERR_THREADS] = "[unknown: thread list unreadable]",
		[PYWALK_ERR_FRAME] = "[unknown: frame unreadable]",
		[PYWALK_ERR_CODE] = "[unknown: code object unreadable]",
	};

	if (status == PYWALK_COMPLETE)
		return NULL;
	if (status == PYWALK_TRUNCATED)
		return "[truncated]";
	if (!detail)
		return "[error]";
	return status < sizeof(why) / sizeof(why[0]) && why[status] ? why[status] : "[unknown: walk failed]";
}

void pyframes_buf_free(struct pyframes_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Room for n more bytes and a NUL; false when out of memory. */
static bool reserve(struct pyframes_buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 1024;
	char *p;

	if (b->len + n + 1 <= b->cap)
		return true;
	while (cap < b->len + n + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return false;
	b->p = p;
	b->cap = cap;
	return true;
}

void pyframes_fold_escape(char *s, size_t n, enum pyframes_fold as)
{
	for (size_t i = 0; i < n && s[i]; i++)
		if (s[i] == ';' || (as == PYFRAMES_FOLD_ROOT && s[i] == ' '))
			s[i] = as == PYFRAMES_FOLD_ROOT ? '_' : ',';
}

/* Appends s (n bytes) after a ';' unless it is the first part, escaped as a part of kind as. */
static void add_part(struct pyframes_buf *b, bool *first, const char *s, size_t n, enum pyframes_fold as)
{
	if (!reserve(b, n + 1))
		return;
	if (!*first)
		b->p[b->len++] = ';';
	*first = false;
	memcpy(b->p + b->len, s, n);
	pyframes_fold_escape(b->p + b->len, n, as);
	b->len += n;
	b->p[b->len] = 0;
}

const char *pyframes_folded(struct pyframes_buf *b, const char *root, const struct pycode_loc *locs,
			    int depth, unsigned status)
{
	const char *marker = pyframes_marker(status, false);
	bool first = true;
	char frame[900];

	b->len = 0;
	if (!reserve(b, 0))
		return "";
	b->p[0] = 0;
	if (root)
		add_part(b, &first, root, strlen(root), PYFRAMES_FOLD_ROOT);
	if (marker) /* "[truncated]", "[error]": nothing to escape */
		add_part(b, &first, marker, strlen(marker), PYFRAMES_FOLD_FRAME);
	for (int i = depth - 1; i >= 0; i--) {
		int n = pyframes_format(&locs[i], frame, sizeof(frame));
		add_part(b, &first, frame, n < (int)sizeof(frame) ? (size_t)n : sizeof(frame) - 1, PYFRAMES_FOLD_FRAME);
	}
	return b->p;
}

void pyframes_text_free(struct pyframes_text *t)
{
	pyframes_buf_free(&t->buf);
}

const char *pyframes_text(struct pyframes_text *t, struct pyproc *py, const struct pywalk_frame *frames,
			  int depth, unsigned status)
{
	t->unresolved += (unsigned long long)pyframes_resolve(py, frames, depth, t->locs);
	return pyframes_folded(&t->buf, NULL, t->locs, depth, status);
}
