/*
 * CPython struct offsets as data: per-version tables for 3.8-3.12 (read from the
 * DWARF of release builds), and for 3.13+ the _Py_DebugOffsets table the target
 * carries at the start of _PyRuntime, completed with the few constants it lacks
 * (pyebpf(7), CPYTHON INTERNALS). x86_64, GIL builds.
 */
#ifndef PYEBPF_PYOFFSETS_H
#define PYEBPF_PYOFFSETS_H

#include <stddef.h>
#include <stdint.h>

/* A field this version does not have. */
#define PYOFF_NONE UINT32_MAX

struct pyoffsets {
	int minor; /* 3.<minor> */

	/* _PyRuntimeState */
	uint32_t rt_interp_head;
	uint32_t rt_tstate_current; /* GIL holder, 3.8-3.11 */
	uint32_t rt_gil;            /* embedded gil state, 3.8-3.11 */
	uint32_t rt_autotss_key;    /* Py_tss_t autoTSSkey, 3.8-3.14 */
	uint32_t rt_gc_collecting;  /* 3.8 only (gc state in the runtime) */

	/* PyInterpreterState */
	uint32_t interp_next;
	uint32_t interp_threads_head;
	uint32_t interp_modules;    /* interp->modules / imports.modules */
	uint32_t interp_gil_ptr;    /* ceval.gil pointer, 3.12+ */
	uint32_t interp_gc_collecting; /* 3.9+ */

	/* PyThreadState */
	uint32_t ts_next;
	uint32_t ts_frame;          /* PyFrameObject *frame, 3.8-3.10 */
	uint32_t ts_cframe;         /* _PyCFrame *cframe, 3.11-3.12 */
	uint32_t cframe_current_frame;
	uint32_t ts_current_frame;  /* 3.13+ */
	uint32_t ts_thread_id;
	uint32_t ts_native_thread_id; /* 3.11+ */

	/* frames: PyFrameObject (3.8-3.10) or _PyInterpreterFrame (3.11+) */
	uint32_t frame_back;        /* f_back / previous */
	uint32_t frame_code;        /* f_code / f_executable */
	uint32_t frame_instr;       /* f_lasti (int) / prev_instr / instr_ptr */
	uint32_t frame_owner;       /* 3.11+ */
	uint32_t owner_shim_min;    /* owner >= this is not a Python frame (3.12+), else PYOFF_NONE */
	uint32_t code_tag_mask;     /* low bits to clear from f_executable (3.14+: 3) */

	/* PyCodeObject */
	uint32_t co_firstlineno;
	uint32_t co_filename;
	uint32_t co_name;
	uint32_t co_qualname;       /* 3.11+ */
	uint32_t co_linetable;      /* co_lnotab (3.8-3.9) / co_linetable */
	uint32_t co_code_adaptive;  /* 3.11+ */

	/* str objects */
	uint32_t unicode_state;
	uint32_t unicode_ascii_data;   /* sizeof(PyASCIIObject) */
	uint32_t unicode_compact_data; /* sizeof(PyCompactUnicodeObject) */

	/* types, dicts, ints: what reading threading._active needs */
	uint32_t type_flags;
	uint32_t type_basicsize;
	uint32_t type_dictoffset;
	uint32_t ht_cached_keys;
};

/* The table for 3.<minor> (8..12); NULL for other versions. */
const struct pyoffsets *pyoffsets_table(int minor);

/* Size of _Py_DebugOffsets to read for 3.<minor> (13..15), 0 if not supported. */
size_t pyoffsets_debug_size(int minor);

/*
 * Fills out from the raw _Py_DebugOffsets bytes (len bytes read at &_PyRuntime) of a
 * 3.<minor> target. Returns 0, or -1 when the cookie is wrong, the minor is not
 * 13..15, or the embedded version disagrees with minor.
 */
int pyoffsets_from_debug(int minor, const unsigned char *raw, size_t len, struct pyoffsets *out);

/* PY_VERSION_HEX stored in raw _Py_DebugOffsets (cookie checked); 0 if none. */
uint64_t pyoffsets_debug_version(const unsigned char *raw, size_t len);

#endif
