#include "pyoffsets.h"

#include <string.h>

#define N PYOFF_NONE

/*
 * 3.8-3.12 from the DWARF of pyenv 3.8.18 ... 3.12.1; the later patch releases of
 * each minor keep these fields where they are (pyebpf(7), CPYTHON INTERNALS).
 * Type fields: tp_flags 168, tp_basicsize 32, tp_dictoffset 288 in every version.
 */
static const struct pyoffsets tables[] = {
	{
		.minor = 8,
		.rt_interp_head = 32, .rt_tstate_current = 1368, .rt_gil = 1152,
		.rt_autotss_key = 1392, .rt_gc_collecting = 544,
		.interp_next = 0, .interp_threads_head = 8, .interp_modules = 56,
		.interp_gil_ptr = N, .interp_gc_collecting = N,
		.ts_next = 8, .ts_frame = 24, .ts_cframe = N, .cframe_current_frame = N,
		.ts_current_frame = N, .ts_thread_id = 176, .ts_native_thread_id = N,
		.frame_back = 24, .frame_code = 32, .frame_instr = 104, .frame_owner = N,
		.owner_shim_min = N, .code_tag_mask = 0,
		.co_firstlineno = 40, .co_filename = 104, .co_name = 112, .co_qualname = N,
		.co_linetable = 120, .co_code_adaptive = N,
		.unicode_state = 32, .unicode_ascii_data = 48, .unicode_compact_data = 72,
		.type_flags = 168, .type_basicsize = 32, .type_dictoffset = 288, .ht_cached_keys = 872,
	},
	{
		.minor = 9,
		.rt_interp_head = 32, .rt_tstate_current = 568, .rt_gil = 352,
		.rt_autotss_key = 584, .rt_gc_collecting = N,
		.interp_next = 0, .interp_threads_head = 8, .interp_modules = 856,
		.interp_gil_ptr = N, .interp_gc_collecting = 816,
		.ts_next = 8, .ts_frame = 24, .ts_cframe = N, .cframe_current_frame = N,
		.ts_current_frame = N, .ts_thread_id = 176, .ts_native_thread_id = N,
		.frame_back = 24, .frame_code = 32, .frame_instr = 104, .frame_owner = N,
		.owner_shim_min = N, .code_tag_mask = 0,
		.co_firstlineno = 40, .co_filename = 104, .co_name = 112, .co_qualname = N,
		.co_linetable = 120, .co_code_adaptive = N,
		.unicode_state = 32, .unicode_ascii_data = 48, .unicode_compact_data = 72,
		.type_flags = 168, .type_basicsize = 32, .type_dictoffset = 288, .ht_cached_keys = 864,
	},
	{
		.minor = 10,
		.rt_interp_head = 32, .rt_tstate_current = 568, .rt_gil = 352,
		.rt_autotss_key = 584, .rt_gc_collecting = N,
		.interp_next = 0, .interp_threads_head = 8, .interp_modules = 856,
		.interp_gil_ptr = N, .interp_gc_collecting = 816,
		.ts_next = 8, .ts_frame = 24, .ts_cframe = N, .cframe_current_frame = N,
		.ts_current_frame = N, .ts_thread_id = 176, .ts_native_thread_id = N,
		.frame_back = 24, .frame_code = 32, .frame_instr = 96, .frame_owner = N,
		.owner_shim_min = N, .code_tag_mask = 0,
		.co_firstlineno = 40, .co_filename = 104, .co_name = 112, .co_qualname = N,
		.co_linetable = 120, .co_code_adaptive = N,
		.unicode_state = 32, .unicode_ascii_data = 48, .unicode_compact_data = 72,
		.type_flags = 168, .type_basicsize = 32, .type_dictoffset = 288, .ht_cached_keys = 872,
	},
	{
		.minor = 11,
		.rt_interp_head = 40, .rt_tstate_current = 576, .rt_gil = 360,
		.rt_autotss_key = 592, .rt_gc_collecting = N,
		.interp_next = 0, .interp_threads_head = 16, .interp_modules = 888,
		.interp_gil_ptr = N, .interp_gc_collecting = 848,
		.ts_next = 8, .ts_frame = N, .ts_cframe = 56, .cframe_current_frame = 8,
		.ts_current_frame = N, .ts_thread_id = 152, .ts_native_thread_id = 160,
		.frame_back = 48, .frame_code = 32, .frame_instr = 56, .frame_owner = 69,
		.owner_shim_min = N, .code_tag_mask = 0,
		.co_firstlineno = 72, .co_filename = 112, .co_name = 120, .co_qualname = 128,
		.co_linetable = 136, .co_code_adaptive = 184,
		.unicode_state = 32, .unicode_ascii_data = 48, .unicode_compact_data = 72,
		.type_flags = 168, .type_basicsize = 32, .type_dictoffset = 288, .ht_cached_keys = 872,
	},
	{
		.minor = 12,
		.rt_interp_head = 40, .rt_tstate_current = N, .rt_gil = N,
		.rt_autotss_key = 1544, .rt_gc_collecting = N,
		.interp_next = 0, .interp_threads_head = 72, .interp_modules = 944,
		.interp_gil_ptr = 384, .interp_gc_collecting = 312,
		.ts_next = 8, .ts_frame = N, .ts_cframe = 56, .cframe_current_frame = 0,
		.ts_current_frame = N, .ts_thread_id = 136, .ts_native_thread_id = 144,
		/* shim frames (FRAME_OWNED_BY_CSTACK == 3) have a real code object */
		.frame_back = 8, .frame_code = 0, .frame_instr = 56, .frame_owner = 70,
		.owner_shim_min = 3, .code_tag_mask = 0,
		.co_firstlineno = 68, .co_filename = 112, .co_name = 120, .co_qualname = 128,
		.co_linetable = 136, .co_code_adaptive = 192,
		.unicode_state = 32, .unicode_ascii_data = 40, .unicode_compact_data = 56,
		.type_flags = 168, .type_basicsize = 32, .type_dictoffset = 288, .ht_cached_keys = 880,
	},
};

const struct pyoffsets *pyoffsets_table(int minor)
{
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		if (tables[i].minor == minor)
			return &tables[i];
	return NULL;
}

/*
 * Byte offsets, inside _Py_DebugOffsets, of the fields used here, per minor (the
 * struct is only stable within a minor version). From the 3.13.18/3.14.10/3.15.2
 * headers, checked against the tables built into Debian's binaries
 * (tests/unit/pyproc_vectors.h). 0 marks a field this minor lacks.
 */
struct debug_layout {
	int minor;
	size_t size;
	size_t interpreters_head;
	size_t interp_next, interp_threads_head, interp_gc, interp_modules, interp_ceval_gil;
	size_t ts_next, ts_current_frame, ts_thread_id, ts_native_thread_id;
	size_t fr_previous, fr_executable, fr_instr_ptr, fr_owner;
	size_t co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_code_adaptive;
	size_t tp_flags, tp_basicsize, tp_dictoffset, ht_cached_keys;
	size_t uni_state, uni_ascii_size, uni_compact_size;
	size_t gc_collecting;
};

static const struct debug_layout layouts[] = {
	{ .minor = 13, .size = 584, .interpreters_head = 40,
	  .interp_next = 64, .interp_threads_head = 72, .interp_gc = 80, .interp_modules = 88,
	  .interp_ceval_gil = 112,
	  .ts_next = 168, .ts_current_frame = 184, .ts_thread_id = 192, .ts_native_thread_id = 200,
	  .fr_previous = 232, .fr_executable = 240, .fr_instr_ptr = 248, .fr_owner = 264,
	  .co_filename = 280, .co_name = 288, .co_qualname = 296, .co_linetable = 304,
	  .co_firstlineno = 312, .co_code_adaptive = 344,
	  .tp_flags = 392, .uni_state = 544, .uni_ascii_size = 560, .gc_collecting = 576 },
	{ .minor = 14, .size = 760, .interpreters_head = 40,
	  .interp_next = 64, .interp_threads_head = 72, .interp_gc = 88, .interp_modules = 96,
	  .interp_ceval_gil = 120,
	  .ts_next = 192, .ts_current_frame = 208, .ts_thread_id = 216, .ts_native_thread_id = 224,
	  .fr_previous = 256, .fr_executable = 264, .fr_instr_ptr = 272, .fr_owner = 288,
	  .co_filename = 320, .co_name = 328, .co_qualname = 336, .co_linetable = 344,
	  .co_firstlineno = 352, .co_code_adaptive = 384,
	  .tp_flags = 440, .uni_state = 624, .uni_ascii_size = 640, .gc_collecting = 656 },
	{ .minor = 15, .size = 888, .interpreters_head = 40,
	  .interp_next = 64, .interp_threads_head = 72, .interp_gc = 88, .interp_modules = 96,
	  .interp_ceval_gil = 120,
	  .ts_next = 192, .ts_current_frame = 208, .ts_thread_id = 240, .ts_native_thread_id = 248,
	  .fr_previous = 320, .fr_executable = 328, .fr_instr_ptr = 336, .fr_owner = 352,
	  .co_filename = 384, .co_name = 392, .co_qualname = 400, .co_linetable = 408,
	  .co_firstlineno = 416, .co_code_adaptive = 448,
	  .tp_flags = 504, .tp_basicsize = 512, .tp_dictoffset = 520, .ht_cached_keys = 536,
	  .uni_state = 720, .uni_ascii_size = 736, .uni_compact_size = 744, .gc_collecting = 760 },
};

static const struct debug_layout *layout_for(int minor)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].minor == minor)
			return &layouts[i];
	return NULL;
}

size_t pyoffsets_debug_size(int minor)
{
	const struct debug_layout *l = layout_for(minor);

	return l ? l->size : 0;
}

static uint64_t u64_at(const unsigned char *raw, size_t off)
{
	uint64_t v;

	memcpy(&v, raw + off, sizeof(v));
	return v;
}

uint64_t pyoffsets_debug_version(const unsigned char *raw, size_t len)
{
	if (len < 24 || memcmp(raw, "xdebugpy", 8))
		return 0;
	return u64_at(raw, 8);
}

/* An offset from the table must be a plausible struct offset to be trusted. */
static int take(const unsigned char *raw, size_t pos, uint32_t *out)
{
	uint64_t v = u64_at(raw, pos);

	if (v > (1u << 24))
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int pyoffsets_from_debug(int minor, const unsigned char *raw, size_t len, struct pyoffsets *o)
{
	const struct debug_layout *l = layout_for(minor);
	uint64_t version = pyoffsets_debug_version(raw, len);
	uint32_t gc = 0, collecting = 0;
	int bad = 0;

	if (!l || len < l->size || !version || (int)((version >> 16) & 0xff) != minor ||
	    (version >> 24) != 3)
		return -1;
	memset(o, 0, sizeof(*o));
	o->minor = minor;
	bad |= take(raw, l->interpreters_head, &o->rt_interp_head);
	bad |= take(raw, l->interp_next, &o->interp_next);
	bad |= take(raw, l->interp_threads_head, &o->interp_threads_head);
	bad |= take(raw, l->interp_modules, &o->interp_modules);
	bad |= take(raw, l->interp_ceval_gil, &o->interp_gil_ptr);
	bad |= take(raw, l->interp_gc, &gc);
	bad |= take(raw, l->gc_collecting, &collecting);
	o->interp_gc_collecting = gc + collecting;
	bad |= take(raw, l->ts_next, &o->ts_next);
	bad |= take(raw, l->ts_current_frame, &o->ts_current_frame);
	bad |= take(raw, l->ts_thread_id, &o->ts_thread_id);
	bad |= take(raw, l->ts_native_thread_id, &o->ts_native_thread_id);
	bad |= take(raw, l->fr_previous, &o->frame_back);
	bad |= take(raw, l->fr_executable, &o->frame_code);
	bad |= take(raw, l->fr_instr_ptr, &o->frame_instr);
	bad |= take(raw, l->fr_owner, &o->frame_owner);
	bad |= take(raw, l->co_filename, &o->co_filename);
	bad |= take(raw, l->co_name, &o->co_name);
	bad |= take(raw, l->co_qualname, &o->co_qualname);
	bad |= take(raw, l->co_linetable, &o->co_linetable);
	bad |= take(raw, l->co_firstlineno, &o->co_firstlineno);
	bad |= take(raw, l->co_code_adaptive, &o->co_code_adaptive);
	bad |= take(raw, l->tp_flags, &o->type_flags);
	bad |= take(raw, l->uni_state, &o->unicode_state);
	bad |= take(raw, l->uni_ascii_size, &o->unicode_ascii_data);
	if (bad)
		return -1;

	/* What _Py_DebugOffsets does not say (pyebpf(7), CPYTHON INTERNALS). */
	o->rt_tstate_current = PYOFF_NONE;
	o->rt_gil = PYOFF_NONE;
	o->rt_gc_collecting = PYOFF_NONE;
	o->rt_autotss_key = minor == 13 ? 2160 : minor == 14 ? 2336 : PYOFF_NONE;
	o->ts_frame = PYOFF_NONE;
	o->ts_cframe = PYOFF_NONE;
	o->cframe_current_frame = PYOFF_NONE;
	/* owner enum: 3.13 CSTACK=3; 3.14 INTERPRETER=3, CSTACK=4; 3.15 INTERPRETER=3 */
	o->owner_shim_min = 3;
	/* 3.14+: f_executable is a _PyStackRef with tag bits */
	o->code_tag_mask = minor >= 14 ? 3 : 0;
	o->unicode_compact_data = o->unicode_ascii_data + 16;
	o->type_basicsize = 32;
	o->type_dictoffset = 288;
	o->ht_cached_keys = 880;
	if (l->uni_compact_size && take(raw, l->uni_compact_size, &o->unicode_compact_data))
		return -1;
	if (l->tp_basicsize && take(raw, l->tp_basicsize, &o->type_basicsize))
		return -1;
	if (l->tp_dictoffset && take(raw, l->tp_dictoffset, &o->type_dictoffset))
		return -1;
	if (l->ht_cached_keys && take(raw, l->ht_cached_keys, &o->ht_cached_keys))
		return -1;
	return 0;
}
