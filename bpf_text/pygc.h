/* pygc: the event record, shared by the BPF text and src/trackers/pygc.c. */
#ifndef PYEBPF_PYGC_H
#define PYEBPF_PYGC_H

#include "pyebpf.h"
#include "pywalk.h"

/* Which hook measured a collection. */
enum pygc_source {
	PYGC_SRC_USDT = 1,     /* python:gc__start / gc__done */
	PYGC_SRC_UPROBE = 2,   /* entry and return of the collector function */
	PYGC_SRC_CALLBACK = 3, /* inside the collector: between its "start" and "stop" callback calls */
};

/* The program's counters (pyebpf.h): what did not go as planned. */
#define PYGC_COUNTERS(X)                                                                          \
	X(PYGC_CNT_MAP_FULL, "map_full",                                                          \
	  "collections not followed because the tracking map was full")                           \
	X(PYGC_CNT_NO_START, "started_before_tracing",                                            \
	  "collections already running when tracing began (not reported)")                      \
	X(PYGC_CNT_NOTHING_DUE, "nothing_due",                                                    \
	  "automatic collector calls that found no generation due and returned (not reported)")
enum pygc_counter { PYGC_COUNTERS(PYEBPF_COUNTER_ID) PYGC_CNT_MAX };

struct pygc_event {
	struct task_head task; /* the collecting thread; ts_ns: when the record was made */
	__u64 start_ns;        /* bpf_ktime_get_ns() when the collection started */
	__u64 end_ns;          /* ... and ended */
	__s64 collected;       /* unreachable objects found (collected + uncollectable); -1 unknown */
	__s32 generation;
	__u32 source;          /* enum pygc_source */
};

/* --stack: the event and the Python stack of the collecting thread (python.bpf.h) */
struct pygc_stack_event {
	struct pygc_event ev;
	__u32 status; /* enum pywalk_status */
	__u32 depth;  /* frames[] entries, innermost first; only these are sent */
	struct pywalk_asyncio asyncio; /* the asyncio task of the stack */
	struct pywalk_frame frames[PYWALK_DEPTH_LIMIT];
};

#endif
