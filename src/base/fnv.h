/* FNV-1a, 64 bits: the one string hash of the project (table slots, stack ids, file names). */
#ifndef PYEBPF_FNV_H
#define PYEBPF_FNV_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t fnv1a64(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h;
}

#endif
