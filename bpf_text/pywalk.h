/*
 * What the BPF Python stack walker (python.bpf.h) shares with userspace (src/python/pyproc.h):
 * the per-process walk configuration userspace writes into a map, and the frames and
 * status the walker records. __u32/__u64 only: the same text compiles in both.
 */
#ifndef PYEBPF_PYWALK_H
#define PYEBPF_PYWALK_H

#ifndef __bpf__
#include <linux/types.h> /* __u32/__u64 in C; BCC's BPF text has them already */
#endif

/* Hard upper bound of --max-depth (the walker's loop bound comes from -DPY_MAX_DEPTH). */
#define PYWALK_DEPTH_LIMIT 256
#define PYWALK_NONE 0xffffffffU

enum pywalk_kind {
	PYWALK_FRAMEOBJECT = 1, /* 3.8-3.10: PyFrameObject chain from tstate->frame */
	PYWALK_IFRAME = 2,      /* 3.11+: _PyInterpreterFrame chain */
};

/* One target process (map value keyed by host tgid). Offsets are bytes; PYWALK_NONE: absent. */
struct pywalk_config {
	__u64 runtime;          /* &_PyRuntime */
	__u64 pycode_type;      /* &PyCode_Type: frames whose code has another type are skipped (0: no check) */
	__u32 kind;             /* enum pywalk_kind */
	__u32 minor;            /* 3.<minor> */
	__u32 rt_interp_head;
	__u32 interp_next;
	__u32 interp_threads_head;
	__u32 ts_next;
	__u32 ts_thread_id;     /* pthread_self() == fsbase: how the walker finds the current thread */
	__u32 ts_frame;         /* tstate -> first frame (frame or current_frame), or via cframe */
	__u32 ts_cframe;        /* PYWALK_NONE unless 3.11/3.12 */
	__u32 cframe_current;
	__u32 frame_back;
	__u32 frame_code;
	__u32 frame_instr;
	__u32 frame_owner;      /* PYWALK_NONE before 3.11 */
	__u32 owner_shim_min;   /* owner >= this: interpreter shim, skipped */
	__u32 code_tag_mask;    /* f_executable tag bits (3.14+) */
	__u32 co_firstlineno;
	__u32 co_code_adaptive; /* instr_ptr -> code unit index (3.11+) */
	/*
	 * The running asyncio task (3.11+), once the target imported asyncio (userspace,
	 * src/python/pytasks.c, writes the config again then); task_coro PYWALK_NONE: none.
	 */
	__u64 current_tasks;    /* 3.11-3.13: the _current_tasks dict (loop -> task), 0: none */
	__u32 ts_running_task;  /* 3.14+: tstate -> its running task; PYWALK_NONE before */
	__u32 task_coro;        /* TaskObj.task_coro */
	__u32 task_name;        /* TaskObj.task_name */
	__u32 gen_iframe;       /* PyGenObject/PyCoroObject -> its frame (the frame lives inside) */
};

/* One Python frame. instr: f_lasti as stored (3.8-3.10), or the code-unit index (3.11+). */
struct pywalk_frame {
	__u64 code;
	__u32 instr;
	__u32 firstlineno; /* staleness check for userspace's code cache */
};

/*
 * The asyncio task of a walked stack, read when the walk was (the task may end before
 * userspace reads the record). name_raw is the first bytes of the task's name object
 * (a str, or the number of a Task-N that 3.12+ formats only when asked), which
 * userspace decodes knowing the version's layout; name_len 0: not read. A task the
 * walker looked for and did not find is none of the running loops' current tasks.
 */
#define PYWALK_NAME_RAW 96
struct pywalk_asyncio {
	__u64 gen_frame; /* outermost coroutine/generator frame (its asyncio task), 0: none */
	__u64 task;      /* the task running that coroutine, 0: none found */
	__u64 name;      /* the task's name object */
	__u32 gen_index; /* frames[] index of gen_frame: the coroutine's code */
	__u16 name_len;
	__u16 looked;    /* the walker knew where to look for the task (else task is 0) */
	__u8 name_raw[PYWALK_NAME_RAW];
};

/*
 * A walked stack as a record carries it (pyoffcpu's, pyloop's), last in the record so
 * that only the frames taken go out; 127 frames, as the kernel's stack maps keep at most.
 */
#define PYWALK_RECORD_DEPTH 127
struct pywalk_stack {
	__u32 status; /* enum pywalk_status; PYWALK_ERR_CONFIG when not walked */
	__u32 depth;  /* frames[] entries, innermost first */
	struct pywalk_asyncio asyncio;
	struct pywalk_frame frames[PYWALK_RECORD_DEPTH];
};

enum pywalk_status {
	PYWALK_COMPLETE = 0,  /* the whole chain was read */
	PYWALK_TRUNCATED = 1, /* more frames than --max-depth: the innermost ones are kept */
	PYWALK_NO_THREAD = 2, /* this thread has no Python thread state (not Python, or not yet) */
	PYWALK_ERR_CONFIG = 3,   /* no configuration for the process */
	PYWALK_ERR_THREADS = 4,  /* the interpreter/thread list could not be read */
	PYWALK_ERR_FRAME = 5,    /* a frame could not be read: the frames before it are kept */
	PYWALK_ERR_CODE = 6,     /* a frame's code object could not be read */
};

#endif
