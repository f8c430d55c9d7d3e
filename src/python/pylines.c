#include "pylines.h"

#include <limits.h>

int pylines_lnotab(const uint8_t *tab, size_t len, int firstlineno, int byte_off)
{
	int line = firstlineno, addr = 0;

	for (size_t i = 0; i + 1 < len; i += 2) {
		addr += tab[i];
		if (addr > byte_off)
			break;
		line += (int8_t)tab[i + 1];
	}
	return line;
}

int pylines_linetable310(const uint8_t *tab, size_t len, int firstlineno, int byte_off)
{
	int line = firstlineno, end = 0;

	for (size_t i = 0; i + 1 < len; i += 2) {
		int start = end, cur;
		end += tab[i];
		if (tab[i + 1] == 128) {
			cur = 0; /* no line for these instructions */
		} else {
			line += (int8_t)tab[i + 1];
			cur = line;
		}
		if (byte_off >= start && byte_off < end)
			return cur;
	}
	return 0;
}

struct reader {
	const uint8_t *p, *end;
	int bad;
};

static unsigned next_byte(struct reader *r)
{
	if (r->p >= r->end) {
		r->bad = 1;
		return 0;
	}
	return *r->p++;
}

static unsigned varint(struct reader *r)
{
	unsigned b = next_byte(r), v = b & 63, shift = 0;

	while ((b & 64) && !r->bad && shift < 28) {
		b = next_byte(r);
		shift += 6;
		v |= (b & 63) << shift;
	}
	return v;
}

static int svarint(struct reader *r)
{
	unsigned v = varint(r);

	return (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
}

/* line + delta, wrapping (a hostile table's deltas overflow an int: no UB) */
static int add_lines(int line, int delta)
{
	return (int)((unsigned)line + (unsigned)delta);
}

int pylines_locations(const uint8_t *tab, size_t len, int firstlineno, int unit)
{
	struct reader r = { tab, tab + len, 0 };
	int line = firstlineno, addr = 0;

	while (r.p < r.end) {
		unsigned b = next_byte(&r), code = (b >> 3) & 15;
		int length = (int)(b & 7) + 1, cur;

		if (!(b & 0x80))
			return 0; /* not at an entry start: a corrupt or stale table */
		if (code == 15) {
			cur = 0;
		} else if (code == 14) {
			line = add_lines(line, svarint(&r));
			varint(&r);
			varint(&r);
			varint(&r);
			cur = line;
		} else if (code == 13) {
			line = add_lines(line, svarint(&r));
			cur = line;
		} else if (code >= 10) {
			line += (int)code - 10;
			next_byte(&r);
			next_byte(&r);
			cur = line;
		} else {
			next_byte(&r);
			cur = line;
		}
		if (r.bad)
			return 0;
		if (unit >= addr && unit < addr + length)
			return cur;
		addr += length;
	}
	return 0;
}

int pylines_line(int minor, const uint8_t *tab, size_t len, int firstlineno, uint32_t instr)
{
	/*
	 * A frame that has not run an instruction yet: f_lasti -1 (3.8-3.10), or 3.11 and
	 * 3.12's prev_instr one code unit before the first (index -1). CPython's
	 * PyCode_Addr2Line answers co_firstlineno for a negative address.
	 */
	if ((int)instr < 0)
		return firstlineno;
	if (minor <= 9)
		return pylines_lnotab(tab, len, firstlineno, (int)instr);
	if (minor == 10) /* a byte offset: an instr past INT_MAX / 2 (a hostile f_lasti) has no line */
		return instr > INT_MAX / 2 ? 0 : pylines_linetable310(tab, len, firstlineno, (int)instr * 2);
	return pylines_locations(tab, len, firstlineno, (int)instr);
}
