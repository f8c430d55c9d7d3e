/*
 * What the libFuzzer harnesses of tests/fuzz/ share. Each fuzz_NAME.c defines
 * LLVMFuzzerTestOneInput for one parser of outside input; `make fuzz` runs it from its
 * seed corpus tests/fuzz/corpus/NAME/ (Makefile, fuzz target).
 */
#ifndef PYEBPF_FUZZ_H
#define PYEBPF_FUZZ_H

#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* data as a file (a memfd, rewritten for each input): its path, or NULL. */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];

	if (fd < 0) {
		fd = memfd_create("fuzz", MFD_CLOEXEC);
		if (fd < 0)
			return NULL;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		return NULL;
	return path;
}

/* data as a NUL-terminated string in a buffer of exactly size + 1 bytes (free it). */
static inline char *fuzz_string(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (s) {
		memcpy(s, data, size);
		s[size] = 0;
	}
	return s;
}

#endif
