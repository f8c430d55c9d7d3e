#include "tpformat.h"

#include <ctype.h>
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

char *tpformat_struct(const char *category, const char *name, tpformat_dim_fn dim, void *ctx)
{
	char *text = format_read(category, name), *s;

	if (!text)
		return NULL;
	s = tpformat_text_struct(text, category, name, dim, ctx);
	free(text);
	return s;
}

/* libbcc's type for a field of this size: char and short widen, so offsets stay right */
static const char *widened(const char *type, int size)
{
	static const char *const to_s16[] = { "char", "int8_t", NULL },
				 *const to_u16[] = { "unsigned char", "uint8_t", NULL },
				 *const to_s32[] = { "char", "short", "int8_t", "int16_t", NULL },
				 *const to_u32[] = { "unsigned char", "unsigned short", "uint8_t",
						     "uint16_t", NULL },
				 *const to_s64[] = { "char", "short", "int", "int8_t", "int16_t",
						     "int32_t", "pid_t", NULL },
				 *const to_u64[] = { "unsigned char", "unsigned short", "unsigned int",
						     "uint8_t", "uint16_t", "uint32_t", "unsigned",
						     "u32", "uid_t", "gid_t", NULL };
	static const struct {
		int size;
		const char *const *from;
		const char *to;
	} rules[] = { { 2, to_s16, "s16" }, { 2, to_u16, "u16" }, { 4, to_s32, "s32" },
		      { 4, to_u32, "u32" }, { 8, to_s64, "s64" }, { 8, to_u64, "u64" } };

	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		for (const char *const *f = rules[i].from; rules[i].size == size && *f; f++)
			if (!strcmp(type, *f))
				return rules[i].to;
	return type;
}

/* "\tfield:TYPE NAME;\toffset:N;\tsize:N;...": 0, or -1 for a line that is no field */
static int parse_field(char *line, char **type, char **name, int *offset, int *size)
{
	char *field = strstr(line, "field:"), *semi, *off, *sz, *sp;

	if (!field || !(semi = strchr(field, ';')) || !(off = strstr(semi, "offset:")) ||
	    !strchr(off, ';') || !(sz = strstr(strchr(off, ';'), "size:")) || !strchr(sz, ';'))
		return -1;
	*offset = atoi(off + 7);
	*size = atoi(sz + 5);
	*semi = '\0';
	field += 6;
	sp = strrchr(field, ' ');
	if (strrchr(field, '\t') > sp)
		sp = strrchr(field, '\t');
	if (!sp)
		return -1;
	*sp = '\0';
	*type = field;
	*name = sp + 1;
	return 0;
}

char *tpformat_text_struct(const char *format_text, const char *category, const char *name,
			   tpformat_dim_fn dim, void *ctx)
{
	char *text = strdup(format_text), *line, *save = NULL, *out = NULL;
	size_t outlen = 0;
	FILE *f = text ? open_memstream(&out, &outlen) : NULL;
	int last = 0, common = 8;

	if (!f) {
		free(text);
		return NULL;
	}
	fprintf(f, "struct tracepoint__%s__%s {\n\tu64 __do_not_use__;\n", category, name);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *type, *fname, *lb, *rb;
		int offset, size;

		if (parse_field(line, &type, &fname, &offset, &size))
			continue;
		/* a gap before the field: one char per byte, named as libbcc names them */
		for (; last < offset; last++)
			fprintf(f, "\tchar __pad_%d;\n", last);
		last = offset + size;
		if (strstr(type, "__data_loc")) {
			fprintf(f, "\tint data_loc_%s;\n", fname);
		} else if (!strncmp(fname, "common_", 7)) {
			for (; common < last; common++)
				fprintf(f, "\tchar __do_not_use__%d;\n", common);
		} else if ((lb = strchr(fname, '[')) && (rb = strchr(lb, ']'))) {
			long long v;

			*rb = '\0';
			if (lb[1] && !isdigit((unsigned char)lb[1]) && dim && !dim(ctx, lb + 1, &v)) {
				*lb = '\0';
				fprintf(f, "\t%s %s[%lld]%s;\n", type, fname, v, rb + 1);
			} else {
				fprintf(f, "\t%s %s]%s;\n", type, fname, rb + 1);
			}
		} else {
			fprintf(f, "\t%s %s;\n", widened(type, size), fname);
		}
	}
	fputs("};\n", f);
	free(text);
	if (fclose(f)) {
		free(out);
		return NULL;
	}
	return out;
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
