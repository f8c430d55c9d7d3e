#include "tpformat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracefs.h"

/* The whole format file (a few KiB) as one string, or NULL. */
static char *format_read(const char *category, const char *name)
{
	static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	char path[256], *buf = NULL;
	size_t len = 0, cap = 0, got;
	FILE *f = NULL;

	if (tracefs_ensure())
		return NULL;
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]) && !f; i++) {
		snprintf(path, sizeof(path), "%s/events/%s/%s/format", roots[i], category, name);
		f = fopen(path, "r");
	}
	if (!f)
		return NULL;
	do {
		if (len + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap = cap ? cap * 2 : 8192);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		got = fread(buf + len, 1, cap - len - 1, f);
		len += got;
	} while (got > 0);
	fclose(f);
	if (buf)
		buf[len] = '\0';
	return buf;
}

bool tpformat_has_field(const char *category, const char *name, const char *field)
{
	char *text = format_read(category, name);
	bool found = text && tpformat_text_has_field(text, field);

	free(text);
	return found;
}

int tpformat_symbols(const char *category, const char *name, const char *field,
		     struct tpformat_symbols *out)
{
	char *text = format_read(category, name);
	int n;

	memset(out, 0, sizeof(*out));
	n = text ? tpformat_text_symbols(text, field, out) : 0;
	free(text);
	return n;
}

bool tpformat_text_has_field(const char *format_text, const char *field)
{
	char *text = strdup(format_text), *line, *save = NULL;
	bool found = false;

	if (!text)
		return false;
	/* "\tfield:TYPE NAME[N];\toffset:..." : NAME ends at '[' or ';' */
	for (line = strtok_r(text, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
		char *decl = strstr(line, "field:"), *end, *start;
		if (!decl || !(end = strchr(decl, ';')))
			continue;
		*end = '\0';
		if ((start = strchr(decl, '[')))
			*start = '\0';
		start = strrchr(decl, ' ');
		found = start && !strcmp(start + 1, field);
	}
	free(text);
	return found;
}

int tpformat_text_symbols(const char *text, const char *field, struct tpformat_symbols *out)
{
	char needle[96];
	const char *p;

	memset(out, 0, sizeof(*out));
	snprintf(needle, sizeof(needle), "__print_symbolic(REC->%s,", field);
	p = strstr(text, needle);
	if (p)
		p += strlen(needle);
	/* pairs "{ 12, "NAME" }" until the closing parenthesis */
	while (p && (p = strpbrk(p, "{)")) && *p == '{') {
		char *q;
		const char *name_start, *name_end;
		long long v = strtoll(p + 1, &q, 0);
		struct tpformat_symbol *nv;

		name_start = strchr(q, '"');
		name_end = name_start ? strchr(name_start + 1, '"') : NULL;
		if (q == p + 1 || !name_end)
			break; /* a symbolic constant, not a number: stop rather than guess */
		nv = realloc(out->v, (size_t)(out->n + 1) * sizeof(*nv));
		if (!nv)
			break;
		out->v = nv;
		out->v[out->n].value = v;
		out->v[out->n].name = strndup(name_start + 1, (size_t)(name_end - name_start - 1));
		if (!out->v[out->n].name)
			break;
		out->n++;
		p = strchr(name_end, '}');
	}
	return out->n;
}

const char *tpformat_symbol_name(const struct tpformat_symbols *s, long long value)
{
	for (int i = 0; i < s->n; i++)
		if (s->v[i].value == value)
			return s->v[i].name;
	return NULL;
}

void tpformat_symbols_free(struct tpformat_symbols *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->v[i].name);
	free(s->v);
	memset(s, 0, sizeof(*s));
}
