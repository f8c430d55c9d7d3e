/*
 * Record schemas: one field table per metric. It is the single description of a
 * record: the column header and widths, the JSON keys and their order, --fields
 * (which the man pages' FIELDS sections are checked against), and the table
 * definitions of database sinks.
 */
#ifndef PYEBPF_SCHEMA_H
#define PYEBPF_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

enum field_type {
	FIELD_STR,    /* UTF-8 text (repaired from target bytes) */
	FIELD_INT,    /* signed 64-bit */
	FIELD_REAL,   /* a number with fractions */
	FIELD_BOOL,
	FIELD_TIME,   /* ISO 8601 UTC with microseconds, as a string */
	FIELD_ARRAY,  /* a JSON array (stacks, lists) */
	FIELD_OBJECT, /* a JSON object */
};

/*
 * One field of a record. A table writes each by its parts' names, a column with
 * COLUMN or COLUMN_LEFT:
 *
 *	{ .name = "handshake_us", .type = FIELD_INT, .unit = "us", COLUMN(9, "HS_US", 7),
 *	  .meaning = "SYN sent to ESTABLISHED; null when unknown" },
 *
 * A part left out is NULL or 0: no unit, JSON only (no column), the type's format.
 */
struct field {
	const char *name;    /* JSON key */
	enum field_type type;
	const char *unit;    /* "ms", "us", "bytes", ...; NULL when it has none */
	const char *meaning; /* one line */
	/*
	 * In the columns output: position from 1 (0: JSON only; FIELD_WIDE(n): only with
	 * -w), title, width (negative: left-aligned).
	 */
	int col;
	const char *header;
	int width;
	const char *fmt;     /* printf format of a column value (NULL: by type); "%" suffix allowed */
};
/*
 * The column part of a field: position pos among the columns (from 1; 0: none, JSON
 * only), titled title, the value right-aligned in chars characters (COLUMN_LEFT:
 * left-aligned, for text).
 */
#define COLUMN(pos, title, chars) .col = (pos), .header = (title), .width = (chars)
#define COLUMN_LEFT(pos, title, chars) .col = (pos), .header = (title), .width = -(chars)
/*
 * A column that only -w/--wide prints (the default table fits 120 characters): its
 * position, e.g. COLUMN(FIELD_WIDE(10), "SRTT_US", 8).
 */
#define FIELD_WIDE(col) (-(col))

enum schema_kind {
	SCHEMA_EVENT,   /* one record per thing that happened (man FIELDS documents these) */
	SCHEMA_ROW,     /* a row of a periodic or end-of-run table */
	SCHEMA_SUMMARY, /* the end-of-run counts */
};

struct schema {
	const char *metric;          /* the records' "metric" value */
	enum schema_kind kind;
	const struct field *fields;  /* in JSON key order, ending with a NULL name */
};

/* The common fields, one meaning in every tool (see pyebpf(7), RECORDS). */
#define FIELD_METRIC { .name = "metric", .type = FIELD_STR, .meaning = "what the record is" }
#define FIELD_ENV { .name = "env", .type = FIELD_STR, .meaning = "the -e tag, when given" }
/* A table's end. */
#define FIELD_END { .name = NULL }

/*
 * Checks that obj's keys are the schema's fields, in its order (some may be absent;
 * "env" may follow anywhere). Returns NULL, or the first key that does not fit.
 */
const char *schema_misfit(const struct schema *s, json_t *obj);
/* -w/--wide: the columns marked wide are printed too (set once, before any output). */
extern bool schema_wide;
/* Columns in order: fills cols (at most max) with the fields that are columns. */
int schema_columns(const struct schema *s, const struct field **cols, int max);
/* --fields: a header line, then one line per field: metric, kind, name, type, unit, meaning. */
void schema_print_header(FILE *f);
void schema_print(FILE *f, const struct schema *const *schemas);
const char *field_type_name(enum field_type t);

#endif
