/* Strings from targets may be any bytes; jansson accepts only valid UTF-8. */
#ifndef PYEBPF_UTF8_H
#define PYEBPF_UTF8_H

#include <stddef.h>

/*
 * Copies at most len bytes of in (stopping at a NUL) to out as valid UTF-8, each
 * invalid byte replaced by U+FFFD. out is always NUL-terminated; a character that
 * does not fit whole is dropped. Returns the length written.
 */
size_t utf8_repair(const char *in, size_t len, char *out, size_t outsz);

#endif
