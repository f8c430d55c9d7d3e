/*
 * The summary record a tracker ends its run with (SCHEMA_SUMMARY): begun with its
 * metric and its program's counters, then the tracker's own keys in any order, then
 * summary_end() adds what summaries share, each only where the schema has it (the
 * output's losses, the processes followed, the tool's own CPU time), puts the keys
 * in the schema's order and hands the record to the sink.
 */
#ifndef PYEBPF_SUMMARY_H
#define PYEBPF_SUMMARY_H

#include <jansson.h>

#include "pyebpf_bpf.h"
#include "schema.h"
#include "tracker.h"

/* The shared summary fields summary_end() sets. */
#define FIELD_PROCESSES                                                                      \
	{ .name = "processes", .type = FIELD_INT,                                            \
	  .meaning = "target processes seen (with --children, children too)" }
#define FIELD_TOOL_CPU_MS                                                                    \
	{ .name = "tool_cpu_ms", .type = FIELD_REAL, .unit = "ms",                           \
	  .meaning = "CPU time of the tool itself while tracing (user + system, BPF programs not included)" }

/* metric, then each counter of counters (NULL: none) read from t's program. */
json_t *summary_begin(const struct tracker *t, const struct schema *sc, const struct counter_name *counters);

/*
 * Adds lost and missed (t's program), processes and tool_cpu_ms (since t started) where
 * sc has them, orders the keys as sc's fields, and writes sum to t's sink (which takes it).
 */
void summary_end(struct tracker *t, const struct schema *sc, json_t *sum, unsigned long long processes);

#endif
