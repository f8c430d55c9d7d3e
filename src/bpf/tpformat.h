/*
 * What a tracepoint's format file says: which fields this kernel's tracepoint has,
 * and the names __print_symbolic() gives a field's values (the kernel's own table,
 * so names follow the running kernel, not a copy that drifts).
 */
#ifndef PYEBPF_TPFORMAT_H
#define PYEBPF_TPFORMAT_H

#include <stdbool.h>

struct tpformat_symbol {
	long long value;
	char *name;
};

struct tpformat_symbols {
	struct tpformat_symbol *v;
	int n;
};

/* Whether tracepoint CATEGORY:NAME has a field called field (false when unreadable). */
bool tpformat_has_field(const char *category, const char *name, const char *field);
/*
 * The { value, "NAME" } pairs of __print_symbolic(REC->field, ...) in the print fmt.
 * Returns how many (0 when there is none); free with tpformat_symbols_free().
 */
int tpformat_symbols(const char *category, const char *name, const char *field,
		     struct tpformat_symbols *out);
/* The same two answers from a format file's text already in memory (tests use these). */
bool tpformat_text_has_field(const char *text, const char *field);
int tpformat_text_symbols(const char *text, const char *field, struct tpformat_symbols *out);
/*
 * The args struct libbcc 0.26 declares for a tracepoint's programs, built from the
 * format file the way libbcc builds it: "struct tracepoint__CATEGORY__NAME {", a u64
 * for the common fields, a char per byte of padding, "int data_loc_F" for a
 * __data_loc field, char and short types widened to the field's size. An array size
 * that is a name (e.g. TASK_COMM_LEN) is looked up with dim (libbcc asks BTF's enums;
 * dim returns 0 and sets *value when found), else kept. Returns malloc'd text (the
 * tpformat_struct: NULL when the tracepoint has no readable format file).
 */
typedef int (*tpformat_dim_fn)(void *ctx, const char *name, long long *value);
char *tpformat_struct(const char *category, const char *name, tpformat_dim_fn dim, void *ctx);
char *tpformat_text_struct(const char *text, const char *category, const char *name,
			   tpformat_dim_fn dim, void *ctx);
/* The name of value, or NULL. */
const char *tpformat_symbol_name(const struct tpformat_symbols *s, long long value);
void tpformat_symbols_free(struct tpformat_symbols *s);

#endif
