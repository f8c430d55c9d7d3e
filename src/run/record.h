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
#define FIELD_PID(col) { .name = "pid", .type = FIELD_INT, COLUMN(col, "PID", 7), .meaning = "host process id" }
#define FIELD_TID(col) { .name = "tid", .type = FIELD_INT, COLUMN(col, "TID", 7), .meaning = "host thread id" }
#define FIELD_CONTAINER_PID                                                                   \
	{ .name = "container_pid", .type = FIELD_INT,                                         \
	  .meaning = "process id in its own PID namespace (equal to pid outside containers)" }
#define FIELD_CONTAINER_TID                                                                   \
	{ .name = "container_tid", .type = FIELD_INT,                                         \
	  .meaning = "thread id in its own PID namespace (equal to tid outside containers)" }
#define FIELD_COMM(col)                                                                       \
	{ .name = "comm", .type = FIELD_STR, COLUMN_LEFT(col, "COMM", 15),                    \
	  .meaning = "the thread's comm at the time" }
#define FIELD_THREAD_NAME(col)                                                                \
	{ .name = "thread_name", .type = FIELD_STR, COLUMN_LEFT(col, "THREAD", 16),           \
	  .meaning = "the Python thread's name (MainThread for the main thread), else its comm" }
/* The asyncio task of a record's Python stack (pytasks_name_of_frame). */
#define FIELD_TASK                                                                            \
	{ .name = "task", .type = FIELD_STR,                                                  \
	  .meaning = "the asyncio task running on the thread (its name), empty when none" }
#define FIELD_TASK_CORO                                                                       \
	{ .name = "task_coro", .type = FIELD_STR,                                             \
	  .meaning = "that task's coroutine (qualified name), empty when none" }
#define FIELD_TIME(col)                                                                       \
	{ .name = "time", .type = FIELD_TIME, COLUMN_LEFT(col, "TIME", 27),                   \
	  .meaning = "wall-clock time, UTC, ISO 8601 with microseconds" }

/*
 * A connection's "family" and endpoints (record_set_family, record_set_endpoints):
 * src and dst name the sides ("the local side"); col (> 0) is SRC's column, SPORT,
 * DST and DPORT follow.
 */
#define FIELD_FAMILY { .name = "family", .type = FIELD_STR, .meaning = "ipv4 or ipv6" }
#define FIELD_ENDPOINTS(col, src, dst)                                                             \
	{ .name = "src_ip", .type = FIELD_STR, COLUMN(col, "SRC", 15), .meaning = src "'s address" },       \
	{ .name = "src_port", .type = FIELD_INT, COLUMN((col) + 1, "SPORT", 5), .meaning = src "'s port" }, \
	{ .name = "dst_ip", .type = FIELD_STR, COLUMN((col) + 2, "DST", 15), .meaning = dst "'s address" }, \
	{ .name = "dst_port", .type = FIELD_INT, COLUMN((col) + 3, "DPORT", 5), .meaning = dst "'s port" }

/* The same, with the source port a -w column only (tables that must fit 120 columns). */
#define FIELD_ENDPOINTS_NARROW(col, src, dst)                                                      \
	{ .name = "src_ip", .type = FIELD_STR, COLUMN(col, "SRC", 15), .meaning = src "'s address" },       \
	{ .name = "src_port", .type = FIELD_INT, COLUMN(FIELD_WIDE((col) + 1), "SPORT", 5),                 \
	  .meaning = src "'s port" },                                                                       \
	{ .name = "dst_ip", .type = FIELD_STR, COLUMN((col) + 2, "DST", 15), .meaning = dst "'s address" }, \
	{ .name = "dst_port", .type = FIELD_INT, COLUMN((col) + 3, "DPORT", 5), .meaning = dst "'s port" }

/* What did not reach the output: records lost in full buffers, runs skipped by the kernel. */
#define FIELD_LOST { .name = "lost", .type = FIELD_INT, .meaning = "records lost because an output buffer was full" }
#define FIELD_MISSED                                      \
	{ .name = "missed", .type = FIELD_INT,            \
	  .meaning = "program runs the kernel skipped (recursion: another BPF program ran)" }

/* The -p pids a tracker could not trace, and its targets that exited during the run. */
#define FIELD_TARGETS                                                                                 \
	{ .name = "skipped_targets", .type = FIELD_INT,                                               \
	  .meaning = "-p pids skipped at start (gone, or not a process this tracker can trace), each said on stderr" }, \
	{ .name = "exited_targets", .type = FIELD_INT,                                                \
	  .meaning = "traced processes (-p pids, with --children their children too) that exited during the run" }

/* "skipped_targets" and "exited_targets" (FIELD_TARGETS). */
void record_set_targets(json_t *o, unsigned long long skipped, unsigned long long exited);

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
#define PYEBPF_COUNTER_FIELD(id, name_, meaning_) { .name = name_, .type = FIELD_INT, .meaning = meaning_ },

#endif
