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
/* The name of value, or NULL. */
const char *tpformat_symbol_name(const struct tpformat_symbols *s, long long value);
void tpformat_symbols_free(struct tpformat_symbols *s);

#endif
