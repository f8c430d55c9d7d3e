#define _GNU_SOURCE
#include "pyproc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/types.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "elfsyms.h"
#include "procinfo.h"
#include "pylines.h"
#include "pywalk.h"
#include "utf8.h"

#define CODE_CACHE_SIZE 4096 /* power of two */
#define NAME_CACHE_MAX 1024
#define MAX_INTERPS 16
#define MAX_THREADS 4096

struct code_entry {
	uint64_t code; /* 0: empty slot */
	int firstlineno;
	char func[256];
	char file[512];
	uint8_t *table;
	size_t table_len;
};

struct name_entry {
	pid_t tid;
	bool python;
	char name[PYTHREAD_NAME_MAX];
};

struct pyproc {
	pid_t pid, ns_pid;
	int mem_fd;
	bool use_mem_fd;
	struct pyversion version;
	struct pymodule module;
	char path[4096], host_path[4200];
	struct elfsyms *elf;
	uint64_t runtime;
	struct pyoffsets off;
	struct code_entry *codes;
	struct name_entry *names;
	int nnames;
	uint64_t names_read_ns;
};

static void set_error(struct pyproc_error *err, enum pyproc_errcode code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_error(struct pyproc_error *err, enum pyproc_errcode code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ memory */

int pyproc_read(const struct pyproc *p, uint64_t addr, void *buf, size_t len)
{
	ssize_t n;

	if (!addr) {
		errno = EFAULT;
		return -1;
	}
	if (!p->use_mem_fd) {
		struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
		n = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
		if (n == (ssize_t)len)
			return 0;
		if (n >= 0 || (errno != EPERM && errno != ENOSYS))
			return errno = n >= 0 ? EFAULT : errno, -1;
	}
	if (p->mem_fd < 0)
		return errno = EPERM, -1;
	n = pread(p->mem_fd, buf, len, (off_t)addr);
	return n == (ssize_t)len ? 0 : (errno = n >= 0 ? EFAULT : errno, -1);
}

static int rd_u64(const struct pyproc *p, uint64_t addr, uint64_t *v)
{
	return pyproc_read(p, addr, v, sizeof(*v));
}

static uint64_t u64_or0(const struct pyproc *p, uint64_t addr)
{
	uint64_t v = 0;

	return rd_u64(p, addr, &v) ? 0 : v;
}

/* Appends code point cp as UTF-8; returns bytes written (0 when it does not fit). */
static size_t put_utf8(char *out, size_t room, uint32_t cp)
{
	char b[4];
	size_t n;

	if (cp >= 0xd800 && cp <= 0xdfff)
		cp = 0xfffd; /* lone surrogates (surrogateescape) are not valid UTF-8 */
	if (cp < 0x80) {
		b[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | (cp >> 6));
		b[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | (cp >> 12));
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else if (cp < 0x110000) {
		b[0] = (char)(0xf0 | (cp >> 18));
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	} else {
		return put_utf8(out, room, 0xfffd);
	}
	if (n >= room)
		return 0;
	memcpy(out, b, n);
	return n;
}

int pyproc_read_str(const struct pyproc *p, uint64_t obj, char *buf, size_t len)
{
	const struct pyoffsets *o = &p->off;
	unsigned char raw[1024];
	int64_t length;
	uint32_t state, kind;
	size_t w = 0, nbytes;

	if (!len)
		return -1;
	buf[0] = 0;
	if (pyproc_read(p, obj + 16, &length, sizeof(length)) ||
	    pyproc_read(p, obj + o->unicode_state, &state, sizeof(state)))
		return -1;
	kind = (state >> 2) & 7;
	if (length < 0 || !(state & 0x20) || (kind != 1 && kind != 2 && kind != 4))
		return -1; /* not a compact str: code and thread names always are */
	if ((uint64_t)length > sizeof(raw) / kind)
		length = (int64_t)(sizeof(raw) / kind);
	nbytes = (size_t)length * kind;
	if (state & 0x40) { /* compact ASCII */
		if (pyproc_read(p, obj + o->unicode_ascii_data, raw, nbytes))
			return -1;
		utf8_repair((const char *)raw, nbytes, buf, len);
		return 0;
	}
	if (pyproc_read(p, obj + o->unicode_compact_data, raw, nbytes))
		return -1;
	for (size_t i = 0; i < (size_t)length; i++) {
		uint32_t cp;
		size_t n;

		if (kind == 1) {
			cp = raw[i];
		} else if (kind == 2) {
			uint16_t c;
			memcpy(&c, raw + 2 * i, 2);
			cp = c;
		} else {
			memcpy(&cp, raw + 4 * i, 4);
		}
		n = put_utf8(buf + w, len - w, cp);
		if (!n)
			break;
		w += n;
	}
	buf[w] = 0;
	return 0;
}

/* A PyLong (small ints such as thread idents and native ids). */
static int read_long(const struct pyproc *p, uint64_t obj, int64_t *out)
{
	uint64_t head, ndigits;
	uint32_t digits[3] = { 0 };
	int neg;
	uint64_t v = 0;

	if (rd_u64(p, obj + 16, &head))
		return -1;
	if (p->off.minor >= 12) {
		ndigits = head >> 3; /* lv_tag: digit count << 3 | sign */
		neg = (head & 3) == 2;
	} else {
		int64_t size = (int64_t)head;
		neg = size < 0;
		ndigits = (uint64_t)(size < 0 ? -size : size);
	}
	if (ndigits > 3)
		return -1;
	if (ndigits && pyproc_read(p, obj + 24, digits, ndigits * 4))
		return -1;
	for (uint64_t i = 0; i < ndigits; i++)
		v |= (uint64_t)(digits[i] & 0x3fffffff) << (30 * i);
	*out = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

/* ------------------------------------------------------------------ dicts (threading._active) */

struct dict_view {
	uint64_t keys;   /* PyDictKeysObject */
	uint64_t values; /* split/inline values array, or 0 */
};

typedef int (*dict_visit)(const struct pyproc *p, uint64_t key, uint64_t value, void *ctx);

/* Calls visit for each item; stops when visit returns non-zero (and returns that). */
static int dict_foreach(const struct pyproc *p, const struct dict_view *d, dict_visit visit, void *ctx)
{
	uint64_t entries, esz, koff, voff;
	int64_t nent;

	if (!d->keys)
		return 0;
	if (p->off.minor <= 10) {
		int64_t size;
		uint64_t w;
		if (pyproc_read(p, d->keys + 8, &size, 8) || pyproc_read(p, d->keys + 32, &nent, 8) ||
		    size <= 0 || size > (1 << 24))
			return 0;
		w = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffll ? 4 : 8;
		entries = d->keys + 40 + (uint64_t)size * w;
		esz = 24, koff = 8, voff = 16;
	} else {
		uint8_t hdr[3];
		if (pyproc_read(p, d->keys + 8, hdr, 3) || pyproc_read(p, d->keys + 24, &nent, 8) ||
		    hdr[1] > 40)
			return 0;
		entries = d->keys + 32 + (1ull << hdr[1]);
		if (hdr[2] == 0)
			esz = 24, koff = 8, voff = 16; /* DICT_KEYS_GENERAL */
		else
			esz = 16, koff = 0, voff = 8;  /* unicode keys */
	}
	if (nent < 0 || nent > 65536)
		return 0;
	for (int64_t i = 0; i < nent; i++) {
		uint64_t ent[3] = { 0 }, key, value;
		int r;
		if (pyproc_read(p, entries + (uint64_t)i * esz, ent, esz))
			return 0;
		key = ent[koff / 8];
		value = ent[voff / 8];
		if (!key)
			continue;
		if (d->values)
			value = u64_or0(p, d->values + 8 * (uint64_t)i);
		if (value && (r = visit(p, key, value, ctx)))
			return r;
	}
	return 0;
}

static void dict_of(const struct pyproc *p, uint64_t dict, struct dict_view *d)
{
	uint64_t mv;

	d->keys = u64_or0(p, dict + 32);
	d->values = 0;
	mv = u64_or0(p, dict + 40);
	if (mv)
		d->values = mv + (p->off.minor >= 13 ? 8 : 0); /* 3.13+ PyDictValues header */
}

struct lookup {
	const char *name;
	uint64_t value;
};

static int match_key(const struct pyproc *p, uint64_t key, uint64_t value, void *ctx)
{
	struct lookup *l = ctx;
	char buf[64];

	if (pyproc_read_str(p, key, buf, sizeof(buf)) || strcmp(buf, l->name))
		return 0;
	l->value = value;
	return 1;
}

static uint64_t dict_get(const struct pyproc *p, const struct dict_view *d, const char *name)
{
	struct lookup l = { name, 0 };

	dict_foreach(p, d, match_key, &l);
	return l.value;
}

/*
 * The attributes of an instance: a dict at tp_dictoffset (3.8-3.10), a managed dict or
 * values before the object (3.11, 3.12), or values inline after tp_basicsize (3.13+).
 */
static int instance_attrs(const struct pyproc *p, uint64_t obj, struct dict_view *d)
{
	const struct pyoffsets *o = &p->off;
	uint64_t tp = u64_or0(p, obj + 8), flags;
	int64_t basic, dictoff;

	if (!tp || rd_u64(p, tp + o->type_flags, &flags))
		return -1;
	memset(d, 0, sizeof(*d));
	if (o->minor >= 13 && (flags & (1u << 2))) { /* Py_TPFLAGS_INLINE_VALUES */
		uint8_t valid = 0;
		if (pyproc_read(p, tp + o->type_basicsize, &basic, 8))
			return -1;
		pyproc_read(p, obj + (uint64_t)basic + 3, &valid, 1);
		if (valid) {
			d->keys = u64_or0(p, tp + o->ht_cached_keys);
			d->values = obj + (uint64_t)basic + 8;
			return 0;
		}
		dict_of(p, u64_or0(p, obj - 24), d);
		return 0;
	}
	if (o->minor >= 11 && (flags & (1u << 4))) { /* Py_TPFLAGS_MANAGED_DICT */
		if (o->minor == 11) {
			uint64_t vals = u64_or0(p, obj - 32);
			if (vals) {
				d->keys = u64_or0(p, tp + o->ht_cached_keys);
				d->values = vals;
				return 0;
			}
			dict_of(p, u64_or0(p, obj - 24), d);
			return 0;
		}
		uint64_t dv = u64_or0(p, obj - 24); /* 3.12 PyDictOrValues, tagged */
		if (dv & 1) {
			d->keys = u64_or0(p, tp + o->ht_cached_keys);
			d->values = dv + 1;
		} else {
			dict_of(p, dv, d);
		}
		return 0;
	}
	if (pyproc_read(p, tp + o->type_dictoffset, &dictoff, 8) || dictoff <= 0)
		return -1;
	dict_of(p, u64_or0(p, obj + (uint64_t)dictoff), d);
	return 0;
}

/* ------------------------------------------------------------------ thread names */

struct task_ids {
	pid_t tid, ns_tid;
};

static int list_tasks(pid_t pid, struct task_ids *out, int max)
{
	char path[64];
	struct dirent *de;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((de = readdir(dir)) && n < max) {
		struct nsids ids;
		pid_t tid = (pid_t)atoi(de->d_name);
		if (tid <= 0)
			continue;
		out[n].tid = tid;
		out[n].ns_tid = procinfo_nsids(pid, tid, &ids) ? tid : ids.tid;
		n++;
	}
	closedir(dir);
	return n;
}

struct pyname {
	int64_t ident;  /* Thread.ident == tstate->thread_id */
	int64_t ns_tid; /* Thread._native_id: tid in the target's namespace */
	char name[PYTHREAD_NAME_MAX];
};

struct name_walk {
	struct pyname *out;
	int n, max;
};

static int visit_thread(const struct pyproc *p, uint64_t key, uint64_t thread, void *ctx)
{
	struct name_walk *w = ctx;
	struct pyname *pn;
	struct dict_view attrs;
	uint64_t name, nid;

	if (w->n >= w->max)
		return 1;
	pn = &w->out[w->n];
	memset(pn, 0, sizeof(*pn));
	if (read_long(p, key, &pn->ident) || instance_attrs(p, thread, &attrs))
		return 0;
	name = dict_get(p, &attrs, "_name");
	nid = dict_get(p, &attrs, "_native_id");
	if (!name || pyproc_read_str(p, name, pn->name, sizeof(pn->name)))
		return 0;
	if (!nid || read_long(p, nid, &pn->ns_tid))
		pn->ns_tid = 0;
	w->n++;
	return 0;
}

/* threading._active of the main interpreter: {ident: Thread}. Returns how many, or -1. */
static int read_python_names(struct pyproc *p, struct pyname *out, int max)
{
	const struct pyoffsets *o = &p->off;
	struct dict_view d;
	struct name_walk w = { out, 0, max };
	uint64_t interp, modules, threading, active, mdict;

	interp = u64_or0(p, p->runtime + o->rt_interp_head);
	/* the head is the newest interpreter; threading of the main one is what users name */
	for (int i = 0; interp && i < MAX_INTERPS; i++) {
		uint64_t next = u64_or0(p, interp + o->interp_next);
		if (!next)
			break;
		interp = next;
	}
	if (!interp)
		return -1;
	modules = u64_or0(p, interp + o->interp_modules);
	if (!modules)
		return -1;
	dict_of(p, modules, &d);
	threading = dict_get(p, &d, "threading");
	if (!threading)
		return 0; /* threading never imported: no names to find */
	mdict = u64_or0(p, threading + 16); /* PyModuleObject.md_dict */
	if (!mdict)
		return -1;
	dict_of(p, mdict, &d);
	active = dict_get(p, &d, "_active");
	if (!active)
		return -1;
	dict_of(p, active, &d);
	dict_foreach(p, &d, visit_thread, &w);
	return w.n;
}

/* Rereads names of all threads: threading names, else comm. */
static void refresh_names(struct pyproc *p)
{
	struct task_ids *tasks = calloc(MAX_THREADS, sizeof(*tasks));
	struct pyname *pn = calloc(NAME_CACHE_MAX, sizeof(*pn));
	int nt, np;

	p->names_read_ns = now_ns();
	if (!tasks || !pn)
		goto out;
	nt = list_tasks(p->pid, tasks, MAX_THREADS);
	np = read_python_names(p, pn, NAME_CACHE_MAX);
	p->nnames = 0;
	for (int i = 0; i < nt && p->nnames < NAME_CACHE_MAX; i++) {
		struct name_entry *e = &p->names[p->nnames++];
		e->tid = tasks[i].tid;
		e->python = false;
		e->name[0] = 0;
		for (int j = 0; j < np; j++) {
			if (pn[j].ns_tid && pn[j].ns_tid == tasks[i].ns_tid) {
				snprintf(e->name, sizeof(e->name), "%s", pn[j].name);
				e->python = true;
				break;
			}
		}
		if (!e->python) {
			char comm[64];
			if (!procinfo_comm(p->pid, tasks[i].tid, comm, sizeof(comm)))
				utf8_repair(comm, strlen(comm), e->name, sizeof(e->name));
		}
	}
out:
	free(tasks);
	free(pn);
}

int pyproc_thread_name(struct pyproc *p, pid_t tid, char *buf, size_t len)
{
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < p->nnames; i++) {
			if (p->names[i].tid != tid)
				continue;
			/*
			 * A comm fallback may be a thread that was not yet in threading._active
			 * when the names were read (it registers in _bootstrap_inner): look again,
			 * at most once a second.
			 */
			if (!pass && !p->names[i].python && now_ns() - p->names_read_ns >= 1000000000ull)
				break;
			snprintf(buf, len, "%s", p->names[i].name);
			return p->names[i].python ? 1 : 0;
		}
		/* an unknown tid: a new thread; reread, but not more often than every 100 ms */
		if (pass || now_ns() - p->names_read_ns < 100000000ull)
			break;
		refresh_names(p);
	}
	if (len)
		buf[0] = 0;
	{
		char comm[64];
		if (!procinfo_comm(p->pid, tid, comm, sizeof(comm))) {
			utf8_repair(comm, strlen(comm), buf, len);
			return 0;
		}
	}
	return -1;
}

int pyproc_threads(struct pyproc *p, struct pythread *out, int max)
{
	const struct pyoffsets *o = &p->off;
	struct task_ids *tasks = calloc(MAX_THREADS, sizeof(*tasks));
	struct pyname *pn = calloc(NAME_CACHE_MAX, sizeof(*pn));
	uint64_t interp;
	int n = 0, nt, np;

	if (!tasks || !pn) {
		free(tasks);
		free(pn);
		return -1;
	}
	nt = list_tasks(p->pid, tasks, MAX_THREADS);
	np = read_python_names(p, pn, NAME_CACHE_MAX);
	interp = u64_or0(p, p->runtime + o->rt_interp_head);
	if (!interp)
		n = -1;
	for (int i = 0; interp && i < MAX_INTERPS && n >= 0; i++) {
		uint64_t ts = u64_or0(p, interp + o->interp_threads_head);
		for (int j = 0; ts && j < MAX_THREADS && n < max; j++) {
			struct pythread *t = &out[n++];
			uint64_t native = 0;
			memset(t, 0, sizeof(*t));
			t->tstate = ts;
			t->thread_id = u64_or0(p, ts + o->ts_thread_id);
			if (o->ts_native_thread_id != PYOFF_NONE)
				native = u64_or0(p, ts + o->ts_native_thread_id);
			for (int k = 0; k < np; k++) {
				if ((uint64_t)pn[k].ident == t->thread_id) {
					snprintf(t->name, sizeof(t->name), "%s", pn[k].name);
					t->python_name = true;
					if (!native)
						native = (uint64_t)pn[k].ns_tid;
				}
			}
			t->ns_tid = (pid_t)native;
			for (int k = 0; native && k < nt; k++)
				if ((uint64_t)tasks[k].ns_tid == native)
					t->tid = tasks[k].tid;
			if (!t->python_name && t->tid) {
				char comm[64];
				if (!procinfo_comm(p->pid, t->tid, comm, sizeof(comm)))
					utf8_repair(comm, strlen(comm), t->name, sizeof(t->name));
			}
			ts = u64_or0(p, ts + o->ts_next);
		}
		interp = u64_or0(p, interp + o->interp_next);
	}
	free(tasks);
	free(pn);
	return n;
}

/* ------------------------------------------------------------------ code objects */

static void unknown_loc(struct pycode_loc *loc)
{
	snprintf(loc->func, sizeof(loc->func), "[unknown]");
	loc->file[0] = 0;
	loc->line = 0;
	loc->firstlineno = 0;
}

static int load_code(struct pyproc *p, uint64_t code, struct code_entry *e)
{
	const struct pyoffsets *o = &p->off;
	uint64_t name, file, table;
	int32_t first;
	int64_t tlen;

	if (pyproc_read(p, code + o->co_firstlineno, &first, 4))
		return -1;
	name = u64_or0(p, code + (o->co_qualname != PYOFF_NONE ? o->co_qualname : o->co_name));
	file = u64_or0(p, code + o->co_filename);
	table = u64_or0(p, code + o->co_linetable);
	if (!name || !file || pyproc_read_str(p, name, e->func, sizeof(e->func)) ||
	    pyproc_read_str(p, file, e->file, sizeof(e->file)))
		return -1;
	free(e->table);
	e->table = NULL;
	e->table_len = 0;
	/* PyBytes: ob_size at 16, data at 32 */
	if (table && !pyproc_read(p, table + 16, &tlen, 8) && tlen > 0 && tlen < (1 << 20)) {
		e->table = malloc((size_t)tlen);
		if (e->table && !pyproc_read(p, table + 32, e->table, (size_t)tlen))
			e->table_len = (size_t)tlen;
	}
	e->firstlineno = first;
	e->code = code;
	return 0;
}

int pyproc_code_location(struct pyproc *p, uint64_t code, uint32_t instr, uint32_t check,
			 struct pycode_loc *loc)
{
	struct code_entry *e = &p->codes[(code >> 4) & (CODE_CACHE_SIZE - 1)];

	if (!code) {
		unknown_loc(loc);
		return -1;
	}
	/* a cached object whose firstlineno changed was freed and the memory reused */
	if (e->code != code || (check && (uint32_t)e->firstlineno != check)) {
		e->code = 0;
		if (load_code(p, code, e)) {
			e->code = 0;
			unknown_loc(loc);
			return -1;
		}
	}
	snprintf(loc->func, sizeof(loc->func), "%s", e->func);
	snprintf(loc->file, sizeof(loc->file), "%s", e->file);
	loc->firstlineno = e->firstlineno;
	loc->line = e->table ? pylines_line(p->off.minor, e->table, e->table_len, e->firstlineno, instr)
			     : 0;
	return 0;
}

/* ------------------------------------------------------------------ opening */

struct map_entry {
	uint64_t start, end, offset, inode;
	char path[4096];
};

/* "python" in the base name: executables and libpython (also python3.11d, etc.). */
static bool python_named(const char *path)
{
	const char *base = strrchr(path, '/');

	return strstr(base ? base + 1 : path, "python") != NULL;
}

/* 3.<minor> from a file name like python3.11, libpython3.8.so.1.0, python2.7. */
static bool version_from_name(const char *path, int *major, int *minor)
{
	const char *base = strrchr(path, '/'), *s;

	base = base ? base + 1 : path;
	s = strstr(base, "python");
	if (!s)
		return false;
	s += 6;
	if (!isdigit((unsigned char)s[0]) || s[1] != '.' || !isdigit((unsigned char)s[2]))
		return false;
	*major = s[0] - '0';
	*minor = atoi(s + 2);
	return true;
}

static int read_maps(pid_t pid, struct map_entry **out)
{
	char path[64], line[4096 + 256];
	struct map_entry *v = NULL;
	int n = 0, cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char perms[8], dev[16], file[4096];
		unsigned long inode;
		bool seen = false;

		file[0] = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %15s %lu %4095[^\n]", &start, &end, perms, &off, dev,
			   &inode, file) < 7 || file[0] != '/')
			continue;
		/* one entry per file: the first mapping is enough for the bias */
		for (int i = 0; i < n && !seen; i++)
			seen = !strcmp(v[i].path, file);
		if (seen)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			struct map_entry *nv = realloc(v, (size_t)cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		v[n].start = start;
		v[n].end = end;
		v[n].offset = off;
		v[n].inode = inode;
		snprintf(v[n].path, sizeof(v[n].path), "%s", file);
		n++;
	}
	fclose(f);
	*out = v;
	return n;
}

/*
 * A path to the mapped file that opens from here. maps paths are relative to the
 * reader's root when the file is reachable from it (chroot), else to the target's
 * (mount namespaces): try /proc/PID/root/PATH, then PATH, checking the inode, then
 * the mapping itself (/proc/PID/map_files, which needs no path at all).
 */
static void module_host_path(const struct pyproc *p, const struct map_entry *m, char *buf, size_t len)
{
	struct stat st;

	snprintf(buf, len, "/proc/%d/root%s", p->pid, m->path);
	if (!stat(buf, &st) && st.st_ino == m->inode)
		return;
	snprintf(buf, len, "%s", m->path);
	if (!stat(buf, &st) && st.st_ino == m->inode)
		return;
	snprintf(buf, len, "/proc/%d/map_files/%llx-%llx", p->pid, (unsigned long long)m->start,
		 (unsigned long long)m->end);
}

/* Opens the module of a maps entry; keeps it if it defines _PyRuntime. */
static bool try_module(struct pyproc *p, const struct map_entry *m)
{
	const struct elf_symbol *rt;
	struct elfsyms *e;
	uint64_t bias;

	module_host_path(p, m, p->host_path, sizeof(p->host_path));
	e = elfsyms_open(p->host_path);
	if (!e)
		return false;
	rt = elfsyms_find(e, "_PyRuntime");
	if (!rt || elfsyms_bias(e, m->start, m->offset, &bias)) {
		elfsyms_close(e);
		return false;
	}
	p->elf = e;
	snprintf(p->path, sizeof(p->path), "%s", m->path);
	p->module.path = p->path;
	p->module.host_path = p->host_path;
	p->module.bias = bias;
	p->module.has_symtab = elfsyms_has_symtab(e);
	p->module.has_usdt = elfsyms_has_usdt(e);
	p->module.is_shared_lib = !elfsyms_is_exec(e) && strstr(m->path, ".so") != NULL;
	p->runtime = rt->value + bias;
	return true;
}

static void comm_of(pid_t pid, char *buf, size_t len)
{
	char raw[64];

	if (procinfo_comm(pid, pid, raw, sizeof(raw)))
		snprintf(raw, sizeof(raw), "?");
	utf8_repair(raw, strlen(raw), buf, len);
}

static int detect_version(struct pyproc *p, struct pyproc_error *err)
{
	const struct elf_symbol *pv = elfsyms_find(p->elf, "Py_Version");
	struct pyversion *v = &p->version;
	unsigned char cookie[24];

	v->micro = -1;
	if (pv) {
		uint64_t hex;
		if (rd_u64(p, pv->value + p->module.bias, &hex)) {
			set_error(err, PYPROC_EREAD, "cannot read Py_Version in pid %d: %s", p->pid,
				  strerror(errno));
			return -1;
		}
		v->hex = (uint32_t)hex;
		v->source = "Py_Version";
	} else if (!pyproc_read(p, p->runtime, cookie, sizeof(cookie)) &&
		   pyoffsets_debug_version(cookie, sizeof(cookie))) {
		v->hex = (uint32_t)pyoffsets_debug_version(cookie, sizeof(cookie));
		v->source = "_Py_DebugOffsets";
	} else if (version_from_name(p->path, &v->major, &v->minor)) {
		v->source = "file name";
		return 0;
	} else {
		set_error(err, PYPROC_ENOTPYTHON,
			  "cannot tell the CPython version of pid %d (module %s)", p->pid, p->path);
		return -1;
	}
	v->major = (int)(v->hex >> 24);
	v->minor = (int)((v->hex >> 16) & 0xff);
	v->micro = (int)((v->hex >> 8) & 0xff);
	return 0;
}

static int load_offsets(struct pyproc *p, struct pyproc_error *err)
{
	struct pyversion *v = &p->version;
	char vs[32];

	if (v->micro >= 0)
		snprintf(vs, sizeof(vs), "%d.%d.%d", v->major, v->minor, v->micro);
	else
		snprintf(vs, sizeof(vs), "%d.%d", v->major, v->minor);
	if (v->major != 3 || v->minor < PYPROC_MIN_MINOR || v->minor > PYPROC_MAX_MINOR) {
		set_error(err, PYPROC_EUNSUPPORTED,
			  "pid %d runs CPython %s, which is not supported (supported: " PYPROC_RANGE_STR
			  ")",
			  p->pid, vs);
		return -1;
	}
	if (v->minor <= 12) {
		p->off = *pyoffsets_table(v->minor);
		return 0;
	}
	{
		unsigned char raw[1024];
		size_t len = pyoffsets_debug_size(v->minor);
		uint64_t dv;

		if (pyproc_read(p, p->runtime, raw, len)) {
			set_error(err, PYPROC_EREAD, "cannot read _Py_DebugOffsets of pid %d: %s", p->pid,
				  strerror(errno));
			return -1;
		}
		dv = pyoffsets_debug_version(raw, len);
		if (dv && ((const uint64_t *)(const void *)raw)[2]) {
			v->free_threaded = true;
			set_error(err, PYPROC_EUNSUPPORTED,
				  "pid %d runs a free-threaded CPython %s build, which is not supported",
				  p->pid, vs);
			return -1;
		}
		if (pyoffsets_from_debug(v->minor, raw, len, &p->off)) {
			set_error(err, PYPROC_EUNSUPPORTED,
				  "pid %d: CPython %s has no usable _Py_DebugOffsets (version 0x%llx)",
				  p->pid, vs, (unsigned long long)dv);
			return -1;
		}
		if (!v->hex)
			v->hex = (uint32_t)dv;
	}
	return 0;
}

struct pyproc *pyproc_open(pid_t pid, struct pyproc_error *err)
{
	struct pyproc *p = calloc(1, sizeof(*p));
	struct map_entry *maps = NULL;
	char path[64], comm[64];
	struct nsids ids;
	int n;

	if (err) {
		err->code = PYPROC_OK;
		err->msg[0] = 0;
	}
	if (!p) {
		set_error(err, PYPROC_EREAD, "out of memory");
		return NULL;
	}
	p->pid = pid;
	p->mem_fd = -1;
	p->codes = calloc(CODE_CACHE_SIZE, sizeof(*p->codes));
	p->names = calloc(NAME_CACHE_MAX, sizeof(*p->names));
	if (!p->codes || !p->names) {
		set_error(err, PYPROC_EREAD, "out of memory");
		goto fail;
	}
	n = read_maps(pid, &maps);
	if (n < 0) {
		set_error(err, PYPROC_ENOPROC, "cannot read /proc/%d/maps: %s", pid, strerror(errno));
		goto fail;
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	p->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	p->ns_pid = procinfo_nsids(pid, pid, &ids) ? pid : ids.pid;

	/* modules named like python first (cheap), then every other mapped file */
	for (int pass = 0; pass < 2 && !p->elf; pass++)
		for (int i = 0; i < n && !p->elf; i++)
			if (python_named(maps[i].path) == (pass == 0))
				try_module(p, &maps[i]);
	if (!p->elf) {
		int major, minor;
		comm_of(pid, comm, sizeof(comm));
		for (int i = 0; i < n; i++) {
			if (python_named(maps[i].path) &&
			    version_from_name(maps[i].path, &major, &minor)) {
				set_error(err, PYPROC_EUNSUPPORTED,
					  "pid %d (comm \"%s\") runs CPython %d.%d, which is not supported "
					  "(supported: " PYPROC_RANGE_STR ")",
					  pid, comm, major, minor);
				goto fail;
			}
		}
		set_error(err, PYPROC_ENOTPYTHON, "no CPython found in pid %d (comm \"%s\")", pid, comm);
		goto fail;
	}
	if (detect_version(p, err) || load_offsets(p, err))
		goto fail;
	free(maps);
	return p;
fail:
	free(maps);
	pyproc_close(p);
	return NULL;
}

void pyproc_close(struct pyproc *p)
{
	if (!p)
		return;
	if (p->codes)
		for (int i = 0; i < CODE_CACHE_SIZE; i++)
			free(p->codes[i].table);
	free(p->codes);
	free(p->names);
	elfsyms_close(p->elf);
	if (p->mem_fd >= 0)
		close(p->mem_fd);
	free(p);
}

pid_t pyproc_pid(const struct pyproc *p)
{
	return p->pid;
}

pid_t pyproc_ns_pid(const struct pyproc *p)
{
	return p->ns_pid;
}

const struct pyversion *pyproc_version(const struct pyproc *p)
{
	return &p->version;
}

const struct pymodule *pyproc_module(const struct pyproc *p)
{
	return &p->module;
}

uint64_t pyproc_runtime(const struct pyproc *p)
{
	return p->runtime;
}

uint64_t pyproc_symbol(const struct pyproc *p, const char *name)
{
	const struct elf_symbol *s = elfsyms_find(p->elf, name);

	return s ? s->value + p->module.bias : 0;
}

int pyproc_symbol_file_offset(const struct pyproc *p, const char *name, uint64_t *off)
{
	const struct elf_symbol *s = elfsyms_find(p->elf, name);

	return s ? elfsyms_vaddr_to_offset(p->elf, s->value, off) : -1;
}

const struct pyoffsets *pyproc_offsets(const struct pyproc *p)
{
	return &p->off;
}

static __u32 w32(uint32_t v)
{
	return v == PYOFF_NONE ? PYWALK_NONE : v;
}

void pyproc_walk_config(const struct pyproc *p, struct pywalk_config *c)
{
	const struct pyoffsets *o = &p->off;

	memset(c, 0, sizeof(*c));
	c->runtime = p->runtime;
	c->pycode_type = pyproc_symbol(p, "PyCode_Type");
	c->kind = o->minor <= 10 ? PYWALK_FRAMEOBJECT : PYWALK_IFRAME;
	c->minor = (__u32)o->minor;
	c->rt_interp_head = o->rt_interp_head;
	c->interp_next = o->interp_next;
	c->interp_threads_head = o->interp_threads_head;
	c->ts_next = o->ts_next;
	c->ts_thread_id = o->ts_thread_id;
	if (o->minor <= 10)
		c->ts_frame = o->ts_frame;
	else if (o->minor <= 12)
		c->ts_frame = PYWALK_NONE;
	else
		c->ts_frame = o->ts_current_frame;
	c->ts_cframe = w32(o->ts_cframe);
	c->cframe_current = w32(o->cframe_current_frame);
	c->frame_back = o->frame_back;
	c->frame_code = o->frame_code;
	c->frame_instr = o->frame_instr;
	c->frame_owner = w32(o->frame_owner);
	c->owner_shim_min = w32(o->owner_shim_min);
	c->code_tag_mask = o->code_tag_mask;
	c->co_firstlineno = o->co_firstlineno;
	c->co_code_adaptive = w32(o->co_code_adaptive);
}
