/*
 * The fields every record shares, with one meaning in every tool: pid/tid are host
 * ids, container_pid/container_tid the ids in the target's own PID namespace (equal
 * to the host ids when it has none), comm, thread_name where the target is Python,
 * time, env. And a program's counters as summary fields.
 */
#ifndef PYEBPF_RECORD_H
#define PYEBPF_RECORD_H

#include <jansson.h>
#include <linux/types.h>
#include <stdbool.h>

#include "pyebpf.h"
#include "schema.h"

/* Common fields; col: position among the columns (0: JSON only). */
#define FIELD_PID(col) { "pid", FIELD_INT, NULL, "host process id", col, "PID", 7, NULL }
#define FIELD_TID(col) { "tid", FIELD_INT, NULL, "host thread id", col, "TID", 7, NULL }
#define FIELD_CONTAINER_PID                                                                   \
	{ "container_pid", FIELD_INT, NULL,                                                   \
	  "process id in its own PID namespace (equal to pid outside containers)", 0, NULL, 0, NULL }
#define FIELD_CONTAINER_TID                                                                   \
	{ "container_tid", FIELD_INT, NULL,                                                   \
	  "thread id in its own PID namespace (equal to tid outside containers)", 0, NULL, 0, NULL }
#define FIELD_COMM(col) { "comm", FIELD_STR, NULL, "the thread's comm at the time", col, "COMM", -15, NULL }
#define FIELD_THREAD_NAME(col) \
	{ "thread_name", FIELD_STR, NULL, "the Python thread's name (MainThread for the main thread), else its comm", col, "THREAD", -16, NULL }
#define FIELD_TIME(col) { "time", FIELD_TIME, NULL, "wall-clock time, UTC, ISO 8601 with microseconds", col, "TIME", -27, NULL }

/*
 * A connection's "family" and endpoints (record_set_family, record_set_endpoints):
 * src and dst name the sides ("the local side"); col (> 0) is SRC's column, SPORT,
 * DST and DPORT follow.
 */
#define FIELD_FAMILY { "family", FIELD_STR, NULL, "ipv4 or ipv6", 0, NULL, 0, NULL }
#define FIELD_ENDPOINTS(col, src, dst)                                                 \
	{ "src_ip", FIELD_STR, NULL, src "'s address", col, "SRC", 15, NULL },          \
	{ "src_port", FIELD_INT, NULL, src "'s port", (col) + 1, "SPORT", 5, NULL },    \
	{ "dst_ip", FIELD_STR, NULL, dst "'s address", (col) + 2, "DST", 15, NULL },    \
	{ "dst_port", FIELD_INT, NULL, dst "'s port", (col) + 3, "DPORT", 5, NULL }

/* The same, with the source port a -w column only (tables that must fit 120 columns). */
#define FIELD_ENDPOINTS_NARROW(col, src, dst)                                          \
	{ "src_ip", FIELD_STR, NULL, src "'s address", col, "SRC", 15, NULL },          \
	{ "src_port", FIELD_INT, NULL, src "'s port", FIELD_WIDE((col) + 1), "SPORT", 5, NULL }, \
	{ "dst_ip", FIELD_STR, NULL, dst "'s address", (col) + 2, "DST", 15, NULL },    \
	{ "dst_port", FIELD_INT, NULL, dst "'s port", (col) + 3, "DPORT", 5, NULL }

/* What did not reach the output: records lost in full buffers, runs skipped by the kernel. */
#define FIELD_LOST { "lost", FIELD_INT, NULL, "records lost because an output buffer was full", 0, NULL, 0, NULL }
#define FIELD_MISSED \
	{ "missed", FIELD_INT, NULL, "program runs the kernel skipped (recursion: another BPF program ran)", 0, NULL, 0, NULL }

/* pid, tid, container_pid, container_tid, comm from h; all null when h->pid is 0 (unknown). */
void record_set_task(json_t *o, const struct task_head *h);
/* The same without comm, for records that name their threads otherwise. */
void record_set_ids(json_t *o, const struct task_head *h);
/* "time" from a bpf_ktime_get_ns() value. */
void record_set_time(json_t *o, __u64 ts_ns);

/* key: v, or null when not known (key: an ASCII literal, as every field name is). */
void record_set_int_or_null(json_t *o, const char *key, json_int_t v, bool known);

/* "family" of a connection: ipv4 (AF_INET) or ipv6. */
void record_set_family(json_t *o, int family);
/*
 * "src_ip", "src_port", "dst_ip", "dst_port": addresses of family (4 or 16 bytes,
 * network order) as inet_format() prints them, ports in host order.
 */
void record_set_endpoints(json_t *o, int family, const __u8 *src, unsigned sport, const __u8 *dst,
			  unsigned dport);

/*
 * A program's counters (pyebpf.h) as summary fields, from its X-macro list; the
 * values come from pyebpf_bpf_set_counters() (pyebpf_bpf.h).
 */
#define PYEBPF_COUNTER_FIELD(id, name, meaning) { name, FIELD_INT, NULL, meaning, 0, NULL, 0, NULL },

#endif
