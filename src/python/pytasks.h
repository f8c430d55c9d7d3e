/*
 * The asyncio tasks of a running CPython process (3.11+), read from its memory in user
 * space like the rest of pyproc: every task's name, its coroutine, whether it runs or
 * waits, its await chain (the coroutine it awaits, and so on down to the innermost
 * frame) and the task that awaits it (gather, TaskGroup, await task).
 *
 * Where the tasks are: 3.14+ keeps native tasks in linked lists (one per thread, one
 * per interpreter) described by the _Py_AsyncioModuleDebugOffsets table in the
 * .AsyncioDebug section of the _asyncio module (built in, or _asyncio*.so); 3.11-3.13
 * in asyncio.tasks' _all_tasks (3.11) or _scheduled_tasks and _eager_tasks (3.12,
 * 3.13) sets, read through sys.modules, with the TaskObj layout per version
 * (pyebpf(7), CPYTHON INTERNALS). uvloop runs asyncio's own Task type, so its tasks
 * are in the same sets.
 *
 * The target keeps running while it is read: a list or set that changes under the
 * reader, or a task whose coroutine moved on while its chain was read, is a torn read.
 * It is detected (pointers, types and states re-read and compared), counted, and the
 * task (or the whole snapshot, for a list) left out: never reported with a wrong stack.
 */
#ifndef PYEBPF_PYTASKS_H
#define PYEBPF_PYTASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyproc.h"
#include "pywalk.h"

#define PYTASK_NAME_MAX 128
#define PYTASK_MAX_FRAMES 64 /* frames of one task's own chain, innermost first */

struct pytask {
	uint64_t addr, coro;
	int parent;               /* index of the task that awaits it, -1 when none */
	char name[PYTASK_NAME_MAX];
	char coro_name[256];      /* the task coroutine's qualified name */
	bool running;             /* its coroutine is executing (else it waits) */
	int depth;                /* frames[]: its own chain, innermost first */
	struct pywalk_frame frames[PYTASK_MAX_FRAMES];
};

struct pytasks_snapshot {
	struct pytask *v;
	int n, cap;
	unsigned torn;            /* torn reads met by the last pytasks_read */
	/* coroutine address -> task index (pytasks_read fills it) */
	int *index;
	size_t index_cap;
};

/*
 * Whether py's tasks can be read: 0; 1 when not yet (asyncio not imported: try later);
 * -1 when never (why: a sentence such as "asyncio tasks are not supported on CPython
 * 3.10 (3.11 and later only)").
 */
int pytasks_probe(struct pyproc *py, char *why, size_t len);

/*
 * Every task of py into s (its previous content replaced). frames: read each task's
 * await chain (or running stack) and the task awaiting it; without, names and
 * coroutines only. Returns the number of tasks, or -1 when they cannot be read
 * (pytasks_probe did not return 0). s->torn counts the torn reads met.
 */
int pytasks_read(struct pyproc *py, struct pytasks_snapshot *s, bool frames);
void pytasks_snapshot_free(struct pytasks_snapshot *s);

/* The task whose coroutine is coro in s, or NULL. */
const struct pytask *pytasks_find(const struct pytasks_snapshot *s, uint64_t coro);

/*
 * The task running the coroutine whose frame is at gen_frame (the BPF walker's
 * outermost generator-owned frame): its name and the coroutine's qualified name into
 * task and coro. The tasks are reread (at most every 100 ms) when the coroutine is not
 * one known, or when the task known for it no longer runs it (its address reused).
 * Returns 0, or -1 when the frame is no task's or py is NULL (both set to "").
 */
int pytasks_of_frame(struct pyproc *py, uint64_t gen_frame, char *task, size_t tlen, char *coro,
		     size_t clen);

/*
 * The poll_ms of trackers whose records name the task of their stack. Most records
 * are named from what the walk read at the event; those named in user space (before
 * the walker knows a target's tasks, or a name longer than the walk's bytes) only while
 * their task lives: a task that ends within this many ms of the event may leave such a
 * record unnamed, never misnamed.
 */
#define PYTASKS_POLL_MS 10

/* The asyncio task of an event's Python stack: "" in both when none. */
struct pytask_name {
	char name[PYTASK_NAME_MAX];
	char coro[256];
};

/*
 * The task of a walked stack (frames[0..depth), a its asyncio part) into out, for
 * trackers whose records carry the task of their stack (py may be NULL: not a CPython,
 * no task): the task the walker found running, named from the bytes it read then
 * (the task may have ended since); when the name did not fit, that task while it
 * lives; when the walker did not look (not configured for tasks yet), through
 * pytasks_of_frame. 0, or -1 when the stack is in no task ("" in both).
 */
int pytasks_name_of_walk(struct pyproc *py, const struct pywalk_asyncio *a, const struct pywalk_frame *frames,
			 uint32_t depth, struct pytask_name *out);

/*
 * The walker's asyncio fields of cfg (bpf_text/pywalk.h): where py's running task is,
 * once pytasks_probe found its tasks readable; none before.
 */
void pytasks_walk_config(const struct pyproc *py, struct pywalk_config *cfg);

/*
 * --per-task's root frame of a folded stack: "task:NAME" (buf), or "[no-task]" when
 * name is "".
 */
const char *pytasks_root(const char *name, char *buf, size_t len);

/* Torn reads met by pytasks_of_frame's rereads of py (a counter that only grows). */
unsigned long long pytasks_torn(struct pyproc *py);

/* Frees what pyproc keeps for pytasks (pyproc_close calls it). */
struct pytasks;
void pytasks_free(struct pytasks *t);

#endif
