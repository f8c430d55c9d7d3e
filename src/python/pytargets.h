/*
 * The processes a Python tracker follows: the -p pids, with --children their
 * descendants (those running and those started later), every CPython of the host,
 * or processes opened on their first event. Each has its CPython handle (NULL when
 * it is not CPython: kept, so that it is not tried again), shared with every other
 * tracker that follows it (pyproc_open);
 * once a stack walker is set, its layout is in the walker's py_config map.
 *
 * Pointers to targets are valid until the next call that adds or drops targets
 * (add, adopt, get, thread_name, refresh, scan).
 */
#ifndef PYEBPF_PYTARGETS_H
#define PYEBPF_PYTARGETS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>
#include <linux/types.h>

#include "bpfprog.h"
#include "cflags.h"
#include "opts.h"
#include "pyebpf.h"
#include "pyframes.h"
#include "pyproc.h"
#include "pytasks.h"

struct pytarget {
	pid_t pid;
	struct pyproc *py;           /* NULL: not CPython, or unreadable */
	bool watched;                /* its exit is said, and the last watched one's ends the run */
	bool exited;
	bool root;                   /* a -p pid: kept after it exits (other targets that go, go) */
	bool ready;                  /* the tracker's own mark (e.g. put into its BPF maps) */
	bool asyncio_walked;         /* the walker reads its running asyncio task (pytargets_task_name) */
};

struct pytargets {
	/* Settings, before the first target. */
	int max;                /* targets kept at most */
	bool children;          /* --children: the targets' descendants are followed (pytargets_start) */
	bool all;               /* pytargets_refresh adds every new process of the host (unwatched) */
	bool lazy;              /* pytargets_get opens a process it has not seen */
	bool announce;          /* says "pid N: CPython 3.X.Y (source) in PATH" for each CPython added */
	/* State. */
	struct pytarget *v;
	int n, cap, last;
	int watched;            /* targets ever watched */
	int alive;              /* ... that have not exited */
	unsigned long long added; /* targets ever added (the summaries' "processes") */
	unsigned long long added_python; /* ... of them CPython */
	unsigned long long skipped; /* -p pids skipped: gone, or not a CPython this can read (the summaries' skipped_targets) */
	unsigned long long exits;   /* watched targets that exited during the run (exited_targets) */
	bool said_caps;         /* a process was unreadable for want of a capability: warned */
	struct bpfprog *walker; /* set: each CPython target's layout goes to its py_config */
	int pid_map;            /* >= 0: a BPF hash u32 pid -> u8 holding every target (pytargets_set_pid_map) */
	int forget_map;         /* >= 0: a BPF hash keyed by u32 pid whose entry goes when its target goes */
	uint64_t next_exits_ns, next_children_ns;
};

/* An empty set of at most max targets. */
void pytargets_init(struct pytargets *ts, int max);
/*
 * An empty lazy set that only names the threads of the processes seen in events (the
 * network trackers'): at most PYTARGETS_NAMED_MAX processes, the gone ones let go first.
 */
#define PYTARGETS_NAMED_MAX 4096
void pytargets_init_named(struct pytargets *ts);
void pytargets_free(struct pytargets *ts);

/* What a tracker needs of a -p pid. */
enum pytargets_need {
	PYTARGETS_CPYTHON, /* a CPython this can read: another process is skipped */
	PYTARGETS_ANY,     /* any process: one that is not CPython is traced without Python stacks */
};
/*
 * The -p pids, each a watched root. A pid with no process is skipped, and so is one
 * that is not a CPython this can read when need is PYTARGETS_CPYTHON, unless children
 * is set: then it stays as the root whose children are followed. Each skip is one
 * warning naming the pid and why (pytargets_say_skipped) and counts in skipped; with
 * PYTARGETS_ANY, a process that is not CPython is said once with without_python
 * ("its stalls have no Python stacks"; NULL: not said). Returns how many pids are
 * targets now: 0 means nothing is left to trace (the caller says so and fails).
 */
int pytargets_add_pids(struct pytargets *ts, const pid_t *pids, int npids, enum pytargets_need need,
		       const char *without_python);
/*
 * A -p pid a tracker cannot trace: "WHY: skipped" on stderr, said once per pid in the
 * process however many trackers skip it (pymonitor's trackers share -p).
 */
void pytargets_say_skipped(pid_t pid, const char *why);
/*
 * Any process (kept when it is not CPython; -v says why), or NULL when the set is
 * full. watched: only when it is CPython.
 */
struct pytarget *pytargets_add(struct pytargets *ts, pid_t pid, bool watched);
/*
 * A CPython the caller opened (e.g. a hook planner's): the set owns py from now on;
 * watched: a -p pid (a root). NULL when the set is full or has pyproc_pid(py)
 * already; the caller still owns py then.
 */
struct pytarget *pytargets_adopt(struct pytargets *ts, struct pyproc *py, bool watched);
struct pytarget *pytargets_find(struct pytargets *ts, pid_t pid);
/* find; else, lazy, the process opened now (after letting the gone unwatched ones go). */
struct pytarget *pytargets_get(struct pytargets *ts, pid_t pid);

/*
 * Into buf: the name of thread tid of process pid (pytargets_get, then
 * pyproc_thread_name), else comm (commlen bytes at most). Returns the target, or NULL.
 */
struct pytarget *pytargets_thread_name(struct pytargets *ts, pid_t pid, pid_t tid, const char *comm,
				       size_t commlen, char *buf, size_t len);

/*
 * A record's "thread_name" (the common field, record.h): thread h->tid's name as
 * pytargets_thread_name gives it; null when the record has no thread (h->pid 0).
 */
void pytargets_set_thread_name(struct pytargets *ts, json_t *o, const struct task_head *h);

/* A process and its parent. */
struct pychild {
	pid_t pid, ppid;
};
/* The descendants of roots running now (not roots themselves), at most max; how many. */
int pytargets_descendants(const pid_t *roots, int nroots, struct pychild *out, int max);
/* --children: adds every descendant of the targets not in the set yet (watched when CPython). */
void pytargets_add_children(struct pytargets *ts);
/*
 * Every process of the host not in the set yet (but this one), unwatched; the gone
 * unwatched ones are let go first. How many CPython processes the set has then.
 */
int pytargets_add_all(struct pytargets *ts);

/*
 * The stack walker (bpf_text/python.bpf.h) of prog gets the layout of every CPython
 * target, now and when added. 0, or -1 when one could not be configured (said on
 * stderr; that target's samples never come).
 */
int pytargets_set_walker(struct pytargets *ts, struct bpfprog *prog);

/*
 * A tracker's start, its program compiled: walker (NULL: no stacks are walked) gets
 * every CPython target's layout (pytargets_set_walker), with ts->children the targets'
 * descendants are added now and later, and pytargets_refresh looks first a second from
 * now. 0, or -1 as pytargets_set_walker.
 */
int pytargets_start(struct pytargets *ts, struct bpfprog *walker);

/*
 * The -D options of a Python tracker's program: pyebpf.bpf.h's (FILTER_PIDS only with
 * pid_filter: otherwise its targets are the keys of its own map), and with walk the
 * offset python.bpf.h's stack walker finds threads by. -1 after an error.
 */
int pytargets_cflags(struct cflags *cf, const struct common_opts *c, bool pid_filter, bool walk);

/*
 * Every target, now and when added, into pid_map (a BPF hash u32 -> u8 of prog, e.g.
 * "target_pids"), and out of it when it goes. 0, or -1 when the map is missing.
 */
int pytargets_set_pid_map(struct pytargets *ts, struct bpfprog *prog, const char *pid_map);

/*
 * After every poll: with children, adds the new descendants, with all every new
 * process (every second); says which watched targets exited (every 200 ms, counted
 * in exits). A target that exited and is no -p pid (a child) then leaves the set and
 * the BPF maps (py_config, pid_map, forget_map), so that a run that follows workers
 * for weeks stays within its bounds. True once every watched target has exited
 * (never when none was watched).
 */
bool pytargets_refresh(struct pytargets *ts, uint64_t now_ns);

/*
 * The asyncio task of a walked stack of target t (NULL: none) into out, as
 * pytasks_name_of_walk. The walker learns where t's running task is once t imported
 * asyncio: the first records of a stack in a task tell this, records after them carry
 * the task read at the walk.
 */
int pytargets_task_name(struct pytargets *ts, struct pytarget *t, const struct pywalk_asyncio *a,
			const struct pywalk_frame *frames, uint32_t depth, struct pytask_name *out);

/* A walk's status (enum pywalk_status) as records name it: "complete", "truncated", "error: ...". */
const char *pywalk_status_name(unsigned status);

#endif
