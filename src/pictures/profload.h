/*
 * Profile files this project wrote, read back (pystack --baseline): a pprof profile
 * (pprof_load.c, -o FILE.pb.gz) or a speedscope file (speedscope_load.c, -o
 * FILE.speedscope.json), each as the (folded stack, samples) pairs that the same
 * run's folded text (-f, -o FILE.txt) has: frames "func (file:line)" root first, the
 * marker of an incomplete stack first; thread names (labels, profile names) are left
 * out. Each loader checks what it reads; anything else is refused with one message
 * that begins with name (e.g. "--baseline FILE").
 */
#ifndef PYEBPF_PROFLOAD_H
#define PYEBPF_PROFLOAD_H

#include <stddef.h>
#include <stdint.h>

/* One stack: its folded text stack[0..len) (not NUL-terminated) and its samples. */
typedef void (*profload_fn)(void *ctx, const char *stack, size_t len, long long samples);

/* Files larger than this (a pprof profile: once gunzipped) are refused. */
#define PROFLOAD_MAX_BYTES (1024ul << 20)

/* The gzipped pprof profile data[0..size): each sample to fn; 0, or -1 after saying why. */
int pprof_load(const uint8_t *data, size_t size, const char *name, profload_fn fn, void *ctx);
/* The speedscope file data[0..size): each sample of each profile to fn; 0, or -1 after saying why. */
int speedscope_load(const uint8_t *data, size_t size, const char *name, profload_fn fn, void *ctx);

/* A folded stack being built, a frame at a time (profload.c). */
struct profload_stack {
	char *text;
	size_t len, cap;
};

/*
 * Frame name (file:line) appended: the text profdata_build() split into these parts
 * ("name (file:line)" when file is not empty, else name); 0, or -1 when out of memory.
 */
int profload_push(struct profload_stack *s, const char *name, const char *file, long long line);
void profload_free(struct profload_stack *s);

#endif
