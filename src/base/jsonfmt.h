/*
 * Values as records carry them: strings from target bytes repaired to UTF-8, reals
 * with three decimals, addresses in hex, and times as UTC wall-clock text.
 */
#ifndef PYEBPF_JSONFMT_H
#define PYEBPF_JSONFMT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* String setters that repair target bytes to valid UTF-8 first. */
void json_set_str(json_t *obj, const char *key, const char *s);
void json_set_strn(json_t *obj, const char *key, const char *s, size_t len);
void json_set_int(json_t *obj, const char *key, json_int_t v);
/* Milliseconds/microseconds as a real with fixed precision (3 decimals). */
void json_set_real(json_t *obj, const char *key, double v);

/* Wall-clock ISO-8601 UTC with microseconds, from a bpf_ktime_get_ns() value. */
void time_format_mono_ns(uint64_t mono_ns, char *buf, size_t len);
/* CLOCK_MONOTONIC now, in ns (the clock bpf_ktime_get_ns() reads). */
uint64_t time_mono_ns(void);
/* The CPU time this process has used so far (user + system), in us; 0 when unknown. */
uint64_t time_self_cpu_us(void);

#endif
