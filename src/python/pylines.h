/*
 * CPython line tables: instruction offset -> source line, for the three encodings
 * (pyebpf(7), CPYTHON INTERNALS). Pure functions on the table's bytes, so that they can be
 * tested without a process.
 */
#ifndef PYEBPF_PYLINES_H
#define PYEBPF_PYLINES_H

#include <stddef.h>
#include <stdint.h>

/* 3.8/3.9 co_lnotab; byte_off: f_lasti (a byte offset). */
int pylines_lnotab(const uint8_t *tab, size_t len, int firstlineno, int byte_off);
/* 3.10 co_linetable (PEP 626); byte_off = f_lasti * 2. 0 when the offset has no line. */
int pylines_linetable310(const uint8_t *tab, size_t len, int firstlineno, int byte_off);
/* 3.11+ location table; unit: code-unit index. 0 when the offset has no line. */
int pylines_locations(const uint8_t *tab, size_t len, int firstlineno, int unit);

/* The right decoder for 3.<minor>, with instr as the BPF walker records it. */
int pylines_line(int minor, const uint8_t *tab, size_t len, int firstlineno, uint32_t instr);

#endif
