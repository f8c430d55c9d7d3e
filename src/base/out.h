/*
 * Results on stdout: BCC-style columns with one header line, or one JSON object
 * per line (-j). Tools build one jansson object per event and hand it here, so the
 * JSON keys and the columns can never disagree.
 */
#ifndef PYEBPF_OUT_H
#define PYEBPF_OUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct out_column {
	const char *key;    /* JSON key shown in this column */
	const char *header; /* column title */
	int width;          /* negative: left-aligned */
};

struct out;

/* env: tags every event ("env" key) when not NULL. cols end with a NULL key. */
struct out *out_open(bool json, const char *env, const struct out_column *cols);
/* Prints and releases obj (adds "env"). */
void out_event(struct out *o, json_t *obj);
/* A summary record: in JSON mode one more line on stdout; always "key=value" on stderr. */
void out_summary(struct out *o, const char *title, json_t *obj);
/* Flushes stdout; returns -1 (after saying why) if results could not be written. */
int out_close(struct out *o);

/* String setters that repair target bytes to valid UTF-8 first. */
void json_set_str(json_t *obj, const char *key, const char *s);
void json_set_strn(json_t *obj, const char *key, const char *s, size_t len);
void json_set_int(json_t *obj, const char *key, json_int_t v);
/* Milliseconds/microseconds as a real with fixed precision (3 decimals). */
void json_set_real(json_t *obj, const char *key, double v);
/* Addresses are hex strings. */
void json_set_hex(json_t *obj, const char *key, uint64_t v);

/* Wall-clock ISO-8601 UTC with microseconds, from a bpf_ktime_get_ns() value. */
void time_format_mono_ns(uint64_t mono_ns, char *buf, size_t len);
/* CLOCK_MONOTONIC now, in ns (the clock bpf_ktime_get_ns() reads). */
uint64_t time_mono_ns(void);

#endif
