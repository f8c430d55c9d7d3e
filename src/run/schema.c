#include "schema.h"

#include <string.h>

const char *field_type_name(enum field_type t)
{
	static const char *const names[] = { "string", "int", "real", "bool", "time", "array", "object" };

	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

const char *schema_misfit(const struct schema *s, json_t *obj)
{
	const struct field *f = s->fields;
	const char *key;
	json_t *v;

	/* one forward pass: keys come in the schema's order, so this costs one scan per record */
	json_object_foreach(obj, key, v)
	{
		(void)v;
		while (f->name && strcmp(f->name, key))
			f++;
		if (!f->name)
			return key;
		f++;
	}
	return NULL;
}

bool schema_wide;

int schema_columns(const struct schema *s, const struct field **cols, int max)
{
	int n = 0;

	for (int pos = 1; n < max; pos++) {
		const struct field *found = NULL;
		for (const struct field *f = s->fields; f->name && !found; f++)
			if (f->col == pos || f->col == FIELD_WIDE(pos))
				found = f;
		if (!found)
			break;
		if (found->col > 0 || schema_wide)
			cols[n++] = found;
	}
	return n;
}

void schema_print_header(FILE *f)
{
	fprintf(f, "METRIC\tKIND\tFIELD\tTYPE\tUNIT\tMEANING\n");
}

void schema_print(FILE *f, const struct schema *const *schemas)
{
	static const char *const kinds[] = { "event", "row", "summary" };

	for (; *schemas; schemas++)
		for (const struct field *fl = (*schemas)->fields; fl->name; fl++)
			fprintf(f, "%s\t%s\t%s\t%s\t%s\t%s\n", (*schemas)->metric, kinds[(*schemas)->kind],
				fl->name, field_type_name(fl->type), fl->unit ? fl->unit : "-", fl->meaning);
}
