/* The folded text of a stack read back from a profile file (profload.h). */
#include "profload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int room(struct profload_stack *s, size_t more)
{
	size_t cap = s->cap ? s->cap : 256;
	char *t;

	if (s->len + more < s->cap)
		return 0;
	while (cap <= s->len + more)
		cap *= 2;
	t = realloc(s->text, cap);
	if (!t)
		return -1;
	s->text = t;
	s->cap = cap;
	return 0;
}

int profload_push(struct profload_stack *s, const char *name, const char *file, long long line)
{
	size_t n = strlen(name), nf = strlen(file);
	int k;

	/* ";" name " (" file ":" line ")" */
	if (room(s, 1 + n + 2 + nf + 1 + 21 + 1 + 1))
		return -1;
	if (s->len)
		s->text[s->len++] = ';';
	memcpy(s->text + s->len, name, n);
	s->len += n;
	if (nf) {
		memcpy(s->text + s->len, " (", 2);
		memcpy(s->text + s->len + 2, file, nf);
		s->len += 2 + nf;
		k = snprintf(s->text + s->len, s->cap - s->len, ":%lld)", line);
		s->len += (size_t)k;
	}
	s->text[s->len] = 0;
	return 0;
}

void profload_free(struct profload_stack *s)
{
	free(s->text);
	s->text = NULL;
	s->len = s->cap = 0;
}
