#define _GNU_SOURCE
#include "cflags.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void cflags_add(struct cflags *cf, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (!s)
		return;
	if (cf->n == cf->cap) {
		int cap = cf->cap ? 2 * cf->cap : 16;
		char **v = realloc(cf->v, (size_t)cap * sizeof(*v));
		if (!v) {
			free(s);
			return;
		}
		cf->v = v, cf->cap = cap;
	}
	cf->v[cf->n++] = s;
}

void cflags_free(struct cflags *cf)
{
	for (int i = 0; i < cf->n; i++)
		free(cf->v[i]);
	free(cf->v);
	*cf = (struct cflags){ 0 };
}
