/* pyproc, part: asyncio tasks (pytasks.h). */
#include "pytasks.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elfsyms.h"
#include "jsonfmt.h"
#include "log.h"
#include "pyproc_impl.h"

enum {
	MAX_TASKS = 65536,     /* list steps and set slots read at most */
	MAX_AWAITERS = 8,      /* done callbacks looked at for a TaskGroup's parent task */
	MAX_THREAD_FRAMES = 512,
	RUNNING_FRAMES_BUDGET = 1 << 18, /* frames the running tasks of one snapshot may read */
	REREAD_NS = 100000000, /* pytasks_of_frame: tasks reread at most every 100 ms */
	TP_BASE = 256,         /* PyTypeObject.tp_base, every 3.x on LP64 */
};

/* Where things are, per version (3.11-3.13: DWARF of the release builds; 3.14+: debug tables). */
struct layout {
	uint32_t task_name, task_coro, task_fut_waiter, task_callback0, task_callbacks;
	uint32_t task_awaited_by, task_awaited_by_is_set, task_node;   /* 3.14+ */
	uint32_t ts_tasks_head, interp_tasks_head, ts_running_task;   /* 3.14+ */
	uint32_t gen_qualname, gen_frame_state, gen_iframe;
	uint32_t frame_stacktop, frame_localsplus;                    /* 3.11-3.13 */
	uint32_t frame_stackpointer;                                  /* 3.14+ */
};

struct pytasks {
	int state;         /* 0 usable, 1 not yet, -1 never */
	char why[200];
	uint64_t probed_ns;
	struct layout l;
	uint64_t task_type, coro_type, gen_type, code_type, long_type, method_type, list_type;
	uint64_t all_tasks, scheduled, eager; /* 3.11-3.13: the sets' objects (WeakSet, set) */
	uint64_t current_tasks;               /* 3.11-3.13: the dict of each running loop's task */
	struct pytasks_snapshot light;        /* for pytasks_of_frame */
	uint64_t light_ns;
	unsigned long long torn;
};

static struct pytasks *state_of(struct pyproc *py)
{
	if (!py->tasks && (py->tasks = calloc(1, sizeof(*py->tasks))))
		py->tasks->state = 1;
	return py->tasks;
}

void pytasks_free(struct pytasks *t)
{
	if (!t)
		return;
	pytasks_snapshot_free(&t->light);
	free(t);
}

void pytasks_snapshot_free(struct pytasks_snapshot *s)
{
	free(s->v);
	free(s->index);
	memset(s, 0, sizeof(*s));
}

/* The value of name in module's dict (sys.modules[module].__dict__[name]), or 0. */
static uint64_t module_attr(const struct pyproc *p, const char *module, const char *name)
{
	const struct pyoffsets *o = &p->off;
	uint64_t interp = pyproc_u64_or0(p, p->runtime + o->rt_interp_head), modules, mod, mdict;
	struct dict_view d;

	modules = interp ? pyproc_u64_or0(p, interp + o->interp_modules) : 0;
	if (!modules)
		return 0;
	pyproc_dict_of(p, modules, &d);
	mod = pyproc_dict_get(p, &d, module);
	mdict = mod ? pyproc_u64_or0(p, mod + 16) : 0; /* PyModuleObject.md_dict */
	if (!mdict)
		return 0;
	pyproc_dict_of(p, mdict, &d);
	return pyproc_dict_get(p, &d, name);
}

/* The runtime address and size of section name in the mapped file whose base name starts with prefix. */
static int mapped_section(const struct pyproc *p, const char *prefix, const char *section,
			  uint64_t *addr, uint64_t *size)
{
	char path[64], line[4600], host[4700];
	uint64_t vaddr, bias;
	FILE *f;
	int r = -1;

	snprintf(path, sizeof(path), "/proc/%d/maps", p->pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (r && fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		int pos = 0;
		const char *file, *base;
		struct elfsyms *e;

		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s%n", &start, &end, &off, &pos) < 3 || !pos)
			continue;
		file = line + pos;
		while (*file == ' ')
			file++;
		line[strcspn(line, "\n")] = 0;
		base = strrchr(file, '/');
		if (*file != '/' || !base || strncmp(base + 1, prefix, strlen(prefix)))
			continue;
		snprintf(host, sizeof(host), "/proc/%d/root%s", p->pid, file);
		if (elfsyms_section(host, section, &vaddr, size))
			break;
		e = elfsyms_open(host);
		if (e && !elfsyms_bias(e, start, off, &bias)) {
			*addr = vaddr + bias;
			r = 0;
		}
		elfsyms_close(e);
		break;
	}
	fclose(f);
	return r;
}

/* 3.14+: _Py_AsyncioModuleDebugOffsets (task 7, interpreter 2, thread 4 words) and the gen/frame fields. */
static int layout_from_debug(struct pyproc *p, struct pytasks *t)
{
	uint64_t at = 0, size = 0, a[13];
	unsigned char raw[1024];
	size_t dsize = pyoffsets_debug_size(p->off.minor);
	/* _Py_DebugOffsets: interpreter_frame and gen_object sub-tables, by minor (pyebpf(7)) */
	uint32_t iframe = p->off.minor == 14 ? 248 : 312, gen = p->off.minor == 14 ? 664 : 792;

	/* _asyncio*.so (3.14), else built into the interpreter's module (3.15) */
	if (mapped_section(p, "_asyncio.", ".AsyncioDebug", &at, &size)) {
		if (elfsyms_section(pyproc_module(p)->host_path, ".AsyncioDebug", &at, &size))
			return 1; /* not loaded yet */
		at += pyproc_module(p)->bias;
	}
	if (size < sizeof(a) || pyproc_read(p, at, a, sizeof(a)))
		return 1;
	if (!dsize || dsize > sizeof(raw) || pyproc_read(p, p->runtime, raw, dsize))
		return -1;
	t->l.task_name = (uint32_t)a[1];
	t->l.task_awaited_by = (uint32_t)a[2];
	t->l.task_awaited_by_is_set = (uint32_t)a[4];
	t->l.task_coro = (uint32_t)a[5];
	t->l.task_node = (uint32_t)a[6];
	t->l.interp_tasks_head = (uint32_t)a[8];
	t->l.ts_running_task = (uint32_t)a[11];
	t->l.ts_tasks_head = (uint32_t)a[12];
	memcpy(a, raw + iframe, 7 * 8); /* size, previous, executable, instr_ptr, localsplus, owner, stackpointer */
	t->l.frame_stackpointer = (uint32_t)a[6];
	memcpy(a, raw + gen, 4 * 8);    /* size, gi_name, gi_iframe, gi_frame_state */
	t->l.gen_qualname = (uint32_t)a[1] + 8; /* gi_qualname follows gi_name */
	t->l.gen_iframe = (uint32_t)a[2];
	t->l.gen_frame_state = (uint32_t)a[3];
	if (!t->l.task_name || !t->l.task_coro || !t->l.gen_iframe || a[0] < 64 || t->l.frame_stackpointer > 256)
		return -1;
	return 0;
}

/* 3.11-3.13: the layouts of the release builds (ptype /o TaskObj, PyGenObject, _PyInterpreterFrame). */
static void layout_fixed(int minor, struct layout *l)
{
	memset(l, 0, sizeof(*l));
	l->task_callback0 = 24;
	l->task_callbacks = 40;
	l->frame_stacktop = 64;
	l->frame_localsplus = 72;
	if (minor == 13) {
		l->task_fut_waiter = 112, l->task_coro = 120, l->task_name = 128;
	} else {
		l->task_fut_waiter = 128, l->task_coro = 136, l->task_name = 144;
	}
	if (minor == 11)
		l->gen_qualname = 40, l->gen_frame_state = 75, l->gen_iframe = 80;
	else
		l->gen_qualname = 32, l->gen_frame_state = 67, l->gen_iframe = 72;
}

int pytasks_probe(struct pyproc *p, char *why, size_t len)
{
	struct pytasks *t = state_of(p);
	uint64_t now = time_mono_ns();
	int minor = p->off.minor;

	if (!t)
		return -1;
	if (t->state == 0 || t->state == -1 || (t->probed_ns && now - t->probed_ns < 500000000ull))
		goto out;
	t->probed_ns = now;
	if (minor < 11) {
		t->state = -1;
		snprintf(t->why, sizeof(t->why),
			 "asyncio tasks are not supported on CPython 3.%d (3.11 and later only)", minor);
		goto out;
	}
	t->state = 1;
	snprintf(t->why, sizeof(t->why), "asyncio is not imported");
	t->coro_type = pyproc_symbol(p, "PyCoro_Type");
	t->gen_type = pyproc_symbol(p, "PyGen_Type");
	t->code_type = pyproc_symbol(p, "PyCode_Type");
	t->long_type = pyproc_symbol(p, "PyLong_Type");
	t->method_type = pyproc_symbol(p, "PyMethod_Type");
	t->list_type = pyproc_symbol(p, "PyList_Type");
	t->task_type = module_attr(p, "_asyncio", "Task");
	if (!t->task_type)
		goto out;
	if (minor >= 14) {
		int r = layout_from_debug(p, t);
		if (r) {
			t->state = r;
			snprintf(t->why, sizeof(t->why), r > 0 ? "asyncio is not imported"
				 : "the _asyncio module's debug offsets are unreadable");
			goto out;
		}
	} else {
		layout_fixed(minor, &t->l);
		if (minor == 11) {
			t->all_tasks = module_attr(p, "asyncio.tasks", "_all_tasks");
		} else {
			t->scheduled = module_attr(p, "asyncio.tasks", "_scheduled_tasks");
			t->eager = module_attr(p, "asyncio.tasks", "_eager_tasks");
		}
		if (!t->all_tasks && !t->scheduled)
			goto out;
		t->current_tasks = module_attr(p, "asyncio.tasks", "_current_tasks");
	}
	if (!t->coro_type || !t->code_type) {
		t->state = -1;
		snprintf(t->why, sizeof(t->why), "PyCoro_Type or PyCode_Type not found in %s",
			 pyproc_module(p)->path);
		goto out;
	}
	t->state = 0;
	t->why[0] = 0;
out:
	if (why && len)
		snprintf(why, len, "%s", t ? t->why : "out of memory");
	return t ? t->state : -1;
}

/* obj is an instance of type or of a direct subclass of it. */
static bool is_a(const struct pyproc *p, uint64_t obj, uint64_t type)
{
	uint64_t tp = obj ? pyproc_u64_or0(p, obj + 8) : 0;

	return tp && type && (tp == type || pyproc_u64_or0(p, tp + TP_BASE) == type);
}

/* A growing list of task addresses. */
struct addrs {
	uint64_t *v;
	int n, cap;
};

static int push(struct addrs *a, uint64_t v)
{
	if (a->n == a->cap) {
		int cap = a->cap ? 2 * a->cap : 256;
		uint64_t *nv = realloc(a->v, (size_t)cap * sizeof(*nv));
		if (!nv)
			return -1;
		a->v = nv;
		a->cap = cap;
	}
	a->v[a->n++] = v;
	return 0;
}

/*
 * The keys of a set object (weak: each key a weakref, its referent taken). The table
 * is read in one piece, then the set's table pointer and mask again: another table or
 * size means it changed under the reader (torn: 1).
 */
static int set_keys(const struct pyproc *p, uint64_t set, bool weak, struct addrs *out)
{
	uint64_t hdr[4], again[4], *tab; /* fill, used, mask, table (offset 16) */
	size_t slots;

	if (!set || pyproc_read(p, set + 16, hdr, sizeof(hdr)))
		return 1;
	slots = hdr[2] + 1;
	if (!hdr[3] || slots > MAX_TASKS || slots & (slots - 1))
		return 1;
	tab = malloc(slots * 16);
	if (!tab)
		return -1;
	if (pyproc_read(p, hdr[3], tab, slots * 16) || pyproc_read_fresh(p, set + 16, again, sizeof(again)) ||
	    again[2] != hdr[2] || again[3] != hdr[3]) {
		free(tab);
		return 1;
	}
	for (size_t i = 0; i < slots; i++) {
		uint64_t key = tab[2 * i], obj = key;
		if (!key)
			continue;
		if (weak)
			obj = pyproc_u64_or0(p, key + 16); /* PyWeakReference.wr_object (None when dead) */
		if (obj && push(out, obj)) {
			free(tab);
			return -1;
		}
	}
	free(tab);
	return 0;
}

/* The tasks of a 3.14+ linked list (head: the llist_node in a thread or interpreter state). */
static int list_tasks(const struct pyproc *p, const struct pytasks *t, uint64_t head, struct addrs *out)
{
	uint64_t node = pyproc_u64_or0(p, head), prev = head;

	if (!node)
		return 0; /* a thread that never ran asyncio: its list is not initialised */
	for (int i = 0; node != head; i++) {
		uint64_t back = 0;
		if (!node || i >= MAX_TASKS || pyproc_rd_u64(p, node + 8, &back) || back != prev)
			return 1; /* the list changed while it was walked */
		if (push(out, node - t->l.task_node))
			return -1;
		prev = node;
		node = pyproc_u64_or0(p, node);
	}
	return 0;
}

static int collect(struct pyproc *p, const struct pytasks *t, struct addrs *out)
{
	const struct pyoffsets *o = &p->off;
	int r = 0;

	if (p->off.minor < 14) {
		struct dict_view d;
		uint64_t data;
		if (t->all_tasks || t->scheduled) {
			if (pyproc_instance_attrs(p, t->all_tasks ? t->all_tasks : t->scheduled, &d))
				return 1;
			data = pyproc_dict_get(p, &d, "data"); /* WeakSet.data: a set of weakrefs */
			r = set_keys(p, data, true, out);
		}
		if (!r && t->eager)
			r = set_keys(p, t->eager, false, out);
		return r;
	}
	uint64_t interp = pyproc_u64_or0(p, p->runtime + o->rt_interp_head);
	for (int i = 0; interp && i < MAX_INTERPS && !r; i++) {
		uint64_t ts = pyproc_u64_or0(p, interp + o->interp_threads_head);
		for (int j = 0; ts && j < MAX_THREADS && !r; j++) {
			r = list_tasks(p, t, ts + t->l.ts_tasks_head, out);
			ts = pyproc_u64_or0(p, ts + o->ts_next);
		}
		if (!r)
			r = list_tasks(p, t, interp + t->l.interp_tasks_head, out);
		interp = pyproc_u64_or0(p, interp + o->interp_next);
	}
	return r;
}

/*
 * A task's name object: "Task-N" for a name still kept as a number (3.12+ names tasks
 * lazily), else the str. 0, or -1 ("" in buf) when it cannot be read.
 */
static int name_object(const struct pyproc *p, const struct pytasks *t, uint64_t name, char *buf, size_t len)
{
	int64_t n;

	buf[0] = 0;
	if (name && is_a(p, name, t->long_type)) {
		if (pyproc_read_long(p, name, &n))
			return -1;
		snprintf(buf, len, "Task-%lld", (long long)n);
		return 0;
	}
	return name ? pyproc_read_str(p, name, buf, len) : -1;
}

static void task_name(const struct pyproc *p, const struct pytasks *t, uint64_t task, char *buf, size_t len)
{
	name_object(p, t, pyproc_u64_or0(p, task + t->l.task_name), buf, len);
}

/* One interpreter frame at f as the walker records it: 0, or -1 when it is not a Python frame. */
static int frame_at(const struct pyproc *p, const struct pytasks *t, uint64_t f, struct pywalk_frame *out,
		    uint64_t *prev, uint8_t *owner)
{
	const struct pyoffsets *o = &p->off;
	uint64_t code = 0, ip = 0, type = 0;
	uint32_t first = 0;

	*owner = 0;
	if (prev && pyproc_rd_u64(p, f + o->frame_back, prev))
		return -2;
	if (pyproc_read(p, f + o->frame_owner, owner, 1) || pyproc_rd_u64(p, f + o->frame_code, &code) ||
	    pyproc_rd_u64(p, f + o->frame_instr, &ip))
		return -2;
	code &= ~(uint64_t)o->code_tag_mask;
	if ((o->owner_shim_min != PYOFF_NONE && *owner >= o->owner_shim_min) || !code ||
	    pyproc_rd_u64(p, code + 8, &type) || type != t->code_type ||
	    pyproc_read(p, code + o->co_firstlineno, &first, 4))
		return -1;
	out->code = code;
	out->instr = ip > code + o->co_code_adaptive ? (uint32_t)((ip - code - o->co_code_adaptive) / 2) : 0;
	out->firstlineno = first;
	return 0;
}

/*
 * gi_frame_state: 3.11-3.14 count suspended states below EXECUTING (0) and finished
 * ones above; 3.15 renumbered them from 0 (CREATED 0, SUSPENDED 1, SUSPENDED_YIELD_FROM
 * 2, its free-threaded LOCKED variant 3, EXECUTING 4, CLEARED 5).
 */
static bool state_finished(int minor, int8_t s)
{
	return minor >= 15 ? s >= 5 : s > 0;
}

static bool state_running(int minor, int8_t s)
{
	return s == (minor >= 15 ? 4 : 0);
}

/* Suspended in an await (yield from): the awaited object is on top of its value stack. */
static bool state_in_await(int minor, int8_t s)
{
	if (minor >= 15)
		return s == 2;
	return minor >= 13 ? s == -1 : s < 0; /* 3.11, 3.12 have no SUSPENDED_YIELD_FROM */
}

/* What a suspended coroutine awaits (the top of its frame's value stack), or 0. */
static uint64_t awaited(const struct pyproc *p, const struct pytasks *t, uint64_t gen)
{
	uint64_t f = gen + t->l.gen_iframe, sp, top = 0;
	int32_t stacktop;

	if (p->off.minor >= 14) {
		/* 3.14: the awaitable is the top; 3.15 keeps one more item above it */
		uint64_t below = p->off.minor >= 15 ? 16 : 8;
		sp = pyproc_u64_or0(p, f + t->l.frame_stackpointer);
		return sp > below ? pyproc_u64_or0(p, sp - below) & ~(uint64_t)3 : 0; /* a tagged _PyStackRef */
	}
	if (pyproc_read(p, f + t->l.frame_stacktop, &stacktop, 4) || stacktop <= 0 || stacktop > 1 << 20)
		return 0;
	pyproc_rd_u64(p, f + t->l.frame_localsplus + 8 * (uint64_t)(stacktop - 1), &top);
	return top;
}

/*
 * The running task's frames: the thread stack from its innermost frame to the task's
 * coroutine frame. *budget: frames a snapshot may still read this way (a hostile
 * target's lists, every task "running", made one read take minutes: tests/fuzz/corpus/
 * pymem/slow-running-*); lists that loop end where they meet the element of step
 * 2^k - 1 again (Brent), as in the BPF walker.
 */
static int running_frames(struct pyproc *p, const struct pytasks *t, uint64_t gen, struct pytask *out,
			  long *budget)
{
	const struct pyoffsets *o = &p->off;
	uint64_t target = gen + t->l.gen_iframe;
	uint64_t interp = pyproc_u64_or0(p, p->runtime + o->rt_interp_head);

	for (int i = 0; interp && i < MAX_INTERPS; i++) {
		uint64_t ts = pyproc_u64_or0(p, interp + o->interp_threads_head), ts_mark = 0;
		for (int j = 0; ts && j < MAX_THREADS && ts != ts_mark; j++) {
			uint64_t f = 0, f_mark = 0;
			if (!(j & (j + 1)))
				ts_mark = ts;
			if (o->ts_cframe != PYOFF_NONE) {
				uint64_t cf = pyproc_u64_or0(p, ts + o->ts_cframe);
				f = cf ? pyproc_u64_or0(p, cf + o->cframe_current_frame) : 0;
			} else {
				f = pyproc_u64_or0(p, ts + o->ts_current_frame);
			}
			out->depth = 0;
			for (int k = 0; f && k < MAX_THREAD_FRAMES; k++) {
				uint64_t prev = 0;
				uint8_t owner;
				struct pywalk_frame fr;
				int r;
				if (--*budget < 0)
					goto out;
				r = frame_at(p, t, f, &fr, &prev, &owner);
				if (r == -2)
					break;
				if (!r && out->depth < PYTASK_MAX_FRAMES)
					out->frames[out->depth++] = fr;
				if (f == target)
					return r ? -1 : 0;
				if (!(k & (k + 1)))
					f_mark = f;
				f = prev;
				if (f == f_mark)
					break;
			}
			ts = pyproc_u64_or0(p, ts + o->ts_next);
		}
		interp = pyproc_u64_or0(p, interp + o->interp_next);
	}
out:
	out->depth = 0;
	return -1;
}

/* A waiting task's await chain, innermost first: 0, or -1 (torn). */
static int chain_frames(const struct pyproc *p, const struct pytasks *t, uint64_t coro, struct pytask *out)
{
	uint64_t type = pyproc_u64_or0(p, coro + 8);
	struct pywalk_frame tmp[PYTASK_MAX_FRAMES];
	int n = 0;

	for (uint64_t gen = coro; gen && n < PYTASK_MAX_FRAMES;) {
		int8_t state = 0;
		uint8_t owner;
		uint64_t next;
		if (pyproc_read(p, gen + t->l.gen_frame_state, &state, 1) ||
		    frame_at(p, t, gen + t->l.gen_iframe, &tmp[n], NULL, &owner))
			return -1;
		n++;
		if (!state_in_await(p->off.minor, state))
			break;
		next = awaited(p, t, gen);
		if (!next || pyproc_u64_or0(p, next + 8) != type)
			break; /* a future's iterator, or nothing: the innermost coroutine */
		gen = next;
	}
	out->depth = n;
	for (int i = 0; i < n; i++)
		out->frames[i] = tmp[n - 1 - i];
	return 0;
}

static void index_put(struct pytasks_snapshot *s, uint64_t key, int i)
{
	size_t m = s->index_cap - 1, h = (size_t)(key >> 4) * 0x9e3779b97f4a7c15ull;

	for (size_t k = h & m;; k = (k + 1) & m)
		if (s->index[k] < 0 || s->v[s->index[k]].coro == key) {
			s->index[k] = i;
			return;
		}
}

const struct pytask *pytasks_find(const struct pytasks_snapshot *s, uint64_t coro)
{
	size_t m, h;

	if (!s->index_cap || !coro)
		return NULL;
	m = s->index_cap - 1;
	h = (size_t)(coro >> 4) * 0x9e3779b97f4a7c15ull;
	for (size_t k = h & m;; k = (k + 1) & m) {
		if (s->index[k] < 0)
			return NULL;
		if (s->v[s->index[k]].coro == coro)
			return &s->v[s->index[k]];
	}
}

static int by_addr(const struct pytasks_snapshot *s, uint64_t addr)
{
	for (int i = 0; addr && i < s->n; i++)
		if (s->v[i].addr == addr)
			return i;
	return -1;
}

/* The parent task of a 3.11-3.13 TaskGroup child: a done callback bound to the group. */
static uint64_t group_parent(const struct pyproc *p, const struct pytasks *t, uint64_t task)
{
	uint64_t cbs[MAX_AWAITERS] = { 0 }, list, items = 0;
	int64_t n = 0;
	int k = 0;

	cbs[k++] = pyproc_u64_or0(p, task + t->l.task_callback0);
	list = pyproc_u64_or0(p, task + t->l.task_callbacks);
	if (list && is_a(p, list, t->list_type) && !pyproc_read(p, list + 16, &n, 8) &&
	    !pyproc_rd_u64(p, list + 24, &items))
		for (int64_t i = 0; i < n && k < MAX_AWAITERS; i++) {
			uint64_t tuple = pyproc_u64_or0(p, items + 8 * (uint64_t)i);
			cbs[k++] = tuple ? pyproc_u64_or0(p, tuple + 24) : 0; /* (callback, context) */
		}
	for (int i = 0; i < k; i++) {
		struct dict_view d;
		uint64_t self, parent;
		if (!cbs[i] || !is_a(p, cbs[i], t->method_type))
			continue;
		self = pyproc_u64_or0(p, cbs[i] + 24); /* PyMethodObject.im_self */
		if (!self || pyproc_instance_attrs(p, self, &d))
			continue;
		parent = pyproc_dict_get(p, &d, "_parent_task");
		if (parent && is_a(p, parent, t->task_type))
			return parent;
	}
	return 0;
}

/* Who awaits each task: 3.14+ says it (task_awaited_by); 3.11-3.13 from futures and callbacks. */
static void link_parents(const struct pyproc *p, const struct pytasks *t, struct pytasks_snapshot *s)
{
	for (int i = 0; i < s->n; i++)
		s->v[i].parent = -1;
	if (p->off.minor >= 14) {
		for (int i = 0; i < s->n; i++) {
			uint64_t ab = pyproc_u64_or0(p, s->v[i].addr + t->l.task_awaited_by) & ~(uint64_t)3;
			uint8_t is_set = 0;
			struct addrs a = { 0 };
			if (!ab)
				continue;
			pyproc_read(p, s->v[i].addr + t->l.task_awaited_by_is_set, &is_set, 1);
			if (!is_set) {
				s->v[i].parent = by_addr(s, ab);
				continue;
			}
			if (!set_keys(p, ab, false, &a))
				for (int k = 0; k < a.n && s->v[i].parent < 0; k++)
					s->v[i].parent = by_addr(s, a.v[k]);
			free(a.v);
		}
		return;
	}
	for (int i = 0; i < s->n; i++) {
		uint64_t w = pyproc_u64_or0(p, s->v[i].addr + t->l.task_fut_waiter), children, items = 0;
		struct dict_view d;
		int64_t n = 0;
		int c;
		if (!w)
			continue;
		if ((c = by_addr(s, w)) >= 0) { /* await task */
			s->v[c].parent = i;
			continue;
		}
		if (pyproc_instance_attrs(p, w, &d))
			continue;
		children = pyproc_dict_get(p, &d, "_children"); /* gather's _GatheringFuture */
		if (!children || !is_a(p, children, t->list_type) || pyproc_read(p, children + 16, &n, 8) ||
		    pyproc_rd_u64(p, children + 24, &items))
			continue;
		for (int64_t k = 0; k < n && k < MAX_TASKS; k++)
			if ((c = by_addr(s, pyproc_u64_or0(p, items + 8 * (uint64_t)k))) >= 0)
				s->v[c].parent = i;
	}
	for (int i = 0; i < s->n; i++)
		if (s->v[i].parent < 0)
			s->v[i].parent = by_addr(s, group_parent(p, t, s->v[i].addr));
}

static int reserve_tasks(struct pytasks_snapshot *s, int n)
{
	size_t cap = 64;

	if (n > s->cap) {
		struct pytask *v = realloc(s->v, (size_t)n * sizeof(*v));
		if (!v)
			return -1;
		s->v = v;
		s->cap = n;
	}
	while (cap < 2 * (size_t)n)
		cap *= 2;
	if (cap != s->index_cap) {
		int *ix = malloc(cap * sizeof(*ix));
		if (!ix)
			return -1;
		free(s->index);
		s->index = ix;
		s->index_cap = cap;
	}
	memset(s->index, 0xff, s->index_cap * sizeof(*s->index));
	return 0;
}

/* A running task's frames are read as they are, not from pages read earlier in the read. */
static void cache_pause(struct pyproc *p, bool pause)
{
	if (p->pages)
		p->pages->on = !pause;
}

static int read_tasks(struct pyproc *p, struct pytasks *t, struct pytasks_snapshot *s, bool frames);

/*
 * The reads go through pyproc's page cache: the objects of a task (the task, its
 * coroutine with its frame, code objects shared by many tasks) sit in a few pages, read
 * once each instead of a system call per field. What detects a change under the reader
 * (a set's header, a task's coroutine and state after its chain) is read afresh.
 */
int pytasks_read(struct pyproc *p, struct pytasks_snapshot *s, bool frames)
{
	struct pytasks *t = state_of(p);
	int r;

	s->n = 0;
	s->torn = 0;
	if (pytasks_probe(p, NULL, 0) != 0)
		return -1;
	pyproc_cache_on(p, true); /* without memory: field by field, as it is off */
	r = read_tasks(p, t, s, frames);
	pyproc_cache_on(p, false);
	return r;
}

/*
 * The last n tasks of s, read with their frames, each still the same coroutine in the
 * same state (else its frames may be another moment's), asked in one system call for
 * the group: those that changed are taken out of s and counted as torn. A group of
 * RECHECK_GROUP tasks keeps the time between a task's read and its recheck to that of
 * a few dozen task reads.
 */
#define RECHECK_GROUP 32
struct recheck_group {
	int n;
	int8_t state[RECHECK_GROUP];
};

static void recheck(const struct pyproc *p, const struct pytasks *t, struct pytasks_snapshot *s,
		    struct recheck_group *g)
{
	struct pyproc_piece v[2 * RECHECK_GROUP];
	uint64_t coro[RECHECK_GROUP];
	int8_t state[RECHECK_GROUP];
	int first = s->n - g->n, kept = first;

	for (int i = 0; i < g->n; i++) {
		const struct pytask *k = &s->v[first + i];
		v[2 * i] = (struct pyproc_piece){ k->addr + t->l.task_coro, &coro[i], 8, 0 };
		v[2 * i + 1] = (struct pyproc_piece){ k->coro + t->l.gen_frame_state, &state[i], 1, 0 };
	}
	pyproc_read_pieces(p, v, 2 * g->n);
	for (int i = 0; i < g->n; i++) {
		if (v[2 * i].err || v[2 * i + 1].err || coro[i] != s->v[first + i].coro || state[i] != g->state[i]) {
			s->torn++;
			continue;
		}
		if (kept != first + i)
			s->v[kept] = s->v[first + i];
		kept++;
	}
	s->n = kept;
	g->n = 0;
}

static int read_tasks(struct pyproc *p, struct pytasks *t, struct pytasks_snapshot *s, bool frames)
{
	struct recheck_group g = { 0 };
	struct addrs a = { 0 };
	long budget = RUNNING_FRAMES_BUDGET;
	int r;

	r = collect(p, t, &a);
	if (r || reserve_tasks(s, a.n ? a.n : 1)) {
		s->torn += r > 0;
		free(a.v);
		return r > 0 ? 0 : -1;
	}
	for (int i = 0; i < a.n; i++) {
		struct pytask *k = &s->v[s->n];
		uint64_t coro, gen_type;
		int8_t state = 0;
		if (!is_a(p, a.v[i], t->task_type)) {
			s->torn++; /* freed and reused while the list was read */
			continue;
		}
		memset(k, 0, offsetof(struct pytask, frames));
		k->addr = a.v[i];
		k->parent = -1;
		coro = pyproc_u64_or0(p, k->addr + t->l.task_coro);
		gen_type = coro ? pyproc_u64_or0(p, coro + 8) : 0;
		if (!gen_type || (gen_type != t->coro_type && gen_type != t->gen_type))
			continue; /* no coroutine (finished) or not CPython's own */
		if (pyproc_read(p, coro + t->l.gen_frame_state, &state, 1) || state_finished(p->off.minor, state))
			continue; /* finished */
		k->coro = coro;
		k->running = state_running(p->off.minor, state);
		task_name(p, t, k->addr, k->name, sizeof(k->name));
		pyproc_read_str(p, pyproc_u64_or0(p, coro + t->l.gen_qualname), k->coro_name, sizeof(k->coro_name));
		if (frames) {
			int fr;
			cache_pause(p, k->running);
			fr = k->running ? running_frames(p, t, coro, k, &budget) : chain_frames(p, t, coro, k);
			cache_pause(p, false);
			if (fr || !k->depth) {
				s->torn++;
				continue;
			}
			g.state[g.n] = state;
		}
		s->n++;
		if (frames && ++g.n == RECHECK_GROUP)
			recheck(p, t, s, &g);
	}
	recheck(p, t, s, &g);
	free(a.v);
	for (int i = 0; i < s->n; i++)
		index_put(s, s->v[i].coro, i);
	if (frames)
		link_parents(p, t, s);
	return s->n;
}

struct current_match {
	const struct pytasks *t;
	uint64_t gen, task;
};

static int current_is(const struct pyproc *p, uint64_t key, uint64_t task, void *ctx)
{
	struct current_match *m = ctx;

	(void)key;
	if (!task || pyproc_u64_or0(p, task + m->t->l.task_coro) != m->gen || !is_a(p, task, m->t->task_type))
		return 0;
	m->task = task;
	return 1;
}

/*
 * The task running coroutine gen now, from asyncio's current task of each running
 * loop (3.11-3.13: the _current_tasks dict, 3.14+: each thread state's running task):
 * a few reads however many tasks there are. 0 when gen is no loop's current task.
 */
static uint64_t current_task(const struct pyproc *p, const struct pytasks *t, uint64_t gen)
{
	const struct pyoffsets *o = &p->off;
	struct current_match m = { t, gen, 0 };

	if (o->minor < 14) {
		struct dict_view d;
		if (t->current_tasks) {
			pyproc_dict_of(p, t->current_tasks, &d);
			pyproc_dict_foreach(p, &d, current_is, &m);
		}
		return m.task;
	}
	uint64_t interp = pyproc_u64_or0(p, p->runtime + o->rt_interp_head);
	for (int i = 0; interp && i < MAX_INTERPS; i++) {
		uint64_t ts = pyproc_u64_or0(p, interp + o->interp_threads_head);
		for (int j = 0; ts && j < MAX_THREADS; j++) {
			if (current_is(p, 0, pyproc_u64_or0(p, ts + t->l.ts_running_task), &m))
				return m.task;
			ts = pyproc_u64_or0(p, ts + o->ts_next);
		}
		interp = pyproc_u64_or0(p, interp + o->interp_next);
	}
	return 0;
}

/* pytasks_of_frame; want: the task it must be (0: any). */
static int task_of_frame(struct pyproc *p, uint64_t gen_frame, uint64_t want, char *task, size_t tlen, char *coro,
			 size_t clen)
{
	struct pytasks *t = p ? state_of(p) : NULL;
	const struct pytask *k;
	uint64_t gen, now, cur;

	task[0] = coro[0] = 0;
	if (!t || !gen_frame || pytasks_probe(p, NULL, 0) != 0)
		return -1;
	gen = gen_frame - t->l.gen_iframe;
	if ((cur = current_task(p, t, gen)) && (!want || cur == want)) {
		task_name(p, t, cur, task, tlen);
		pyproc_read_str(p, pyproc_u64_or0(p, gen + t->l.gen_qualname), coro, clen);
		return 0;
	}
	/*
	 * No longer running (the event was read late): the task the last read found with
	 * gen, which may have ended since; the sample was taken while it ran.
	 */
	k = pytasks_find(&t->light, gen);
	now = time_mono_ns();
	if (!k && now - t->light_ns >= REREAD_NS) {
		t->light_ns = now;
		if (pytasks_read(p, &t->light, false) >= 0)
			t->torn += t->light.torn;
		k = pytasks_find(&t->light, gen);
	}
	if (!k || (want && k->addr != want))
		return -1;
	snprintf(task, tlen, "%s", k->name);
	snprintf(coro, clen, "%s", k->coro_name);
	return 0;
}

/*
 * The task the BPF walker found running, named from the bytes of its name object read
 * then (the object may be gone now: nothing else of it is read); its coroutine's
 * qualified name is its code's (the frame at gen_index), which outlives the coroutine.
 * 0, or -1 when the bytes do not hold the whole name.
 */
static int name_at_walk(struct pyproc *p, const struct pytasks *t, const struct pywalk_asyncio *a,
			const struct pywalk_frame *frames, uint32_t depth, struct pytask_name *out)
{
	struct pycode_loc loc;
	int r;

	if (!a->task || !a->name_len || a->name_len > sizeof(a->name_raw) || a->gen_index >= depth)
		return -1;
	pyproc_overlay(p, a->name, a->name_raw, a->name_len);
	r = name_object(p, t, a->name, out->name, sizeof(out->name));
	pyproc_overlay(p, 0, NULL, 0);
	if (r || pyproc_code_location(p, frames[a->gen_index].code, 0, frames[a->gen_index].firstlineno, &loc))
		return -1;
	snprintf(out->coro, sizeof(out->coro), "%s", loc.func);
	return 0;
}

int pytasks_of_frame(struct pyproc *p, uint64_t gen_frame, char *task, size_t tlen, char *coro, size_t clen)
{
	return task_of_frame(p, gen_frame, 0, task, tlen, coro, clen);
}

int pytasks_name_of_walk(struct pyproc *p, const struct pywalk_asyncio *a, const struct pywalk_frame *frames,
			 uint32_t depth, struct pytask_name *out)
{
	struct pytasks *t = p ? state_of(p) : NULL;

	out->name[0] = out->coro[0] = 0;
	if (!t || !a->gen_frame || pytasks_probe(p, NULL, 0) != 0)
		return -1;
	if (!name_at_walk(p, t, a, frames, depth, out))
		return 0;
	out->name[0] = out->coro[0] = 0;
	/*
	 * What the walker saw decides: no running task (the coroutine ran in none, whatever
	 * task may run another at its address now), or the task it found (its name did not
	 * fit: read now, while that task lives).
	 */
	if (a->looked && !a->task)
		return -1;
	return task_of_frame(p, a->gen_frame, a->task, out->name, sizeof(out->name), out->coro, sizeof(out->coro));
}

void pytasks_walk_config(const struct pyproc *p, struct pywalk_config *c)
{
	const struct pytasks *t = p->tasks;

	c->current_tasks = 0;
	c->ts_running_task = c->task_coro = c->task_name = c->gen_iframe = PYWALK_NONE;
	if (!t || t->state != 0)
		return;
	c->current_tasks = p->off.minor < 14 ? t->current_tasks : 0;
	c->ts_running_task = p->off.minor >= 14 ? t->l.ts_running_task : PYWALK_NONE;
	c->task_coro = t->l.task_coro;
	c->task_name = t->l.task_name;
	c->gen_iframe = t->l.gen_iframe;
}

const char *pytasks_root(const char *name, char *buf, size_t len)
{
	if (!name[0])
		return "[no-task]";
	snprintf(buf, len, "task:%s", name);
	return buf;
}

unsigned long long pytasks_torn(struct pyproc *p)
{
	return p->tasks ? p->tasks->torn : 0;
}
