/*
 * Aggregated profile rows for the database sinks. A stack-sampling record (pystack's
 * py_stack samples) is not written as a row of its own: per window of --profile-window
 * seconds (aligned to the epoch, so hosts agree on the windows) and per (pid, tid,
 * thread_name, task, stack) one row counts its samples, and the stack itself goes once
 * into the dictionary table ebpf_stacks under its stack_id (a stable hash of its text,
 * the same on every host and in every run). A stack's dictionary row is emitted no
 * later than the first profile row that names it; it is emitted again after the UTC
 * day changes, so a day's dictionary rows outlive --retain-days as long as the day's
 * profile rows do.
 *
 * Records that weigh a stack by a time (pyoffcpu's off_cpu: its Python stack by the
 * time off the CPU; pygil's gil_wait: the holder's stack by the wait; pyloop's
 * loop_stall: its stack by the stall) stay event rows and are also counted that way,
 * with weight_us. An event's Python stack columns are stored as stack_ids.
 */
#ifndef PYEBPF_PROFROWS_H
#define PYEBPF_PROFROWS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "schema.h"

/* The dictionary of stacks: table ebpf_stacks. */
extern const struct schema profrows_stacks_schema;

/* The aggregated schema of a stack-sampling schema (py_stack: py_stack_profile), or NULL. */
const struct schema *profrows_profile_of(const struct schema *sc);
/* Whether sc is one of the aggregated schemas or the dictionary. */
bool profrows_is_profile(const struct schema *sc);
/*
 * Whether f of sc is a Python stack column of an event (py_stack, *_py_stack): in a
 * database table it is its stack_id (column NAME_id) and the stack a dictionary row.
 */
bool profrows_is_stack_field(const struct schema *sc, const struct field *f);
/* Whether sc's records are samples (no events: stored as profile rows only, unless raw). */
bool profrows_is_sample(const struct schema *sc);
/* Whether records of sc go through profrows_add (aggregated, or with stack columns). */
bool profrows_wanted(const struct schema *sc);

/* The stack_id of a folded stack text: FNV-1a 64 of its bytes, top bit cleared (fits an Int64). */
int64_t profrows_stack_id(const char *stack);

struct profrows;

/* window_s: the window's length in seconds. NULL when out of memory. */
struct profrows *profrows_new(double window_s);
/*
 * One record: counted when profrows_profile_of(sc) knows it, and its stacks (its own,
 * those of its stack columns) noted for the dictionary. obj stays the caller's.
 */
void profrows_add(struct profrows *p, const struct schema *sc, json_t *obj);

typedef void (*profrows_out)(void *ctx, const struct schema *sc, json_t *obj);
/* Hands out (then releases) the dictionary rows not handed out yet. */
void profrows_emit_stacks(struct profrows *p, profrows_out out, void *ctx);
/*
 * Hands out (then releases) the new dictionary rows, then the rows of every window
 * that ended at least lag_us before now_us (all: every window). Dictionary rows come
 * first, so a row never names a stack_id whose dictionary row was not handed out.
 */
void profrows_emit(struct profrows *p, int64_t now_us, int64_t lag_us, bool all, profrows_out out, void *ctx);
/* Records added, rows handed out, distinct stacks handed out. */
void profrows_counts(const struct profrows *p, unsigned long *samples, unsigned long *rows, unsigned long *stacks);
void profrows_free(struct profrows *p);

#endif
