/* pyproc, part: finding and opening the interpreter of a process; the walker configuration. */
#include "pyproc_impl.h"
#include "pytasks.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/types.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps.h"
#include "elfsyms.h"
#include "procinfo.h"
#include "pywalk.h"
#include "utf8.h"

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
 * A path to the mapped file that opens from here (the one order of tries, for the
 * interpreter and for pyproc_libc alike). maps paths are relative to the reader's
 * root when the file is reachable from it (chroot), else to the target's (mount
 * namespaces): try /proc/PID/root/PATH, then PATH, checking the inode, then the
 * mapping itself (/proc/PID/map_files, which needs no path at all).
 */
static void mapped_host_path(pid_t pid, const struct map_entry *m, char *buf, size_t len)
{
	struct stat st;

	snprintf(buf, len, "/proc/%d/root%s", pid, m->path);
	if (!stat(buf, &st) && st.st_ino == m->inode)
		return;
	snprintf(buf, len, "%s", m->path);
	if (!stat(buf, &st) && st.st_ino == m->inode)
		return;
	snprintf(buf, len, "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)m->start,
		 (unsigned long long)m->end);
}

/* Opens the module of a maps entry; keeps it if it defines _PyRuntime. */
static bool try_module(struct pyproc *p, const struct map_entry *m)
{
	const struct elf_symbol *rt;
	struct elfsyms *e;
	uint64_t bias;

	mapped_host_path(p->pid, m, p->host_path, sizeof(p->host_path));
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
		if (pyproc_rd_u64(p, pv->value + p->module.bias, &hex)) {
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
				  "pid %d runs a free-threaded CPython %s build, which is not supported "
				  "(this interpreter has no GIL)",
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

/*
 * The handles open now, by pid: what pyproc_open shares. Few (the targets of one
 * run), so a list.
 */
static struct {
	struct pyproc **v;
	int n, cap;
} open_handles;

static struct pyproc *shared_handle(pid_t pid, unsigned long long started)
{
	for (int i = 0; i < open_handles.n; i++)
		if (open_handles.v[i]->pid == pid && open_handles.v[i]->started == started)
			return open_handles.v[i];
	return NULL;
}

/* Lists p; false when out of memory (p is then not shared, which is only slower). */
static bool share(struct pyproc *p)
{
	if (open_handles.n == open_handles.cap) {
		int cap = open_handles.cap ? 2 * open_handles.cap : 16;
		struct pyproc **v = realloc(open_handles.v, (size_t)cap * sizeof(*v));
		if (!v)
			return false;
		open_handles.v = v;
		open_handles.cap = cap;
	}
	open_handles.v[open_handles.n++] = p;
	return true;
}

static void unshare(struct pyproc *p)
{
	for (int i = 0; i < open_handles.n; i++)
		if (open_handles.v[i] == p) {
			open_handles.v[i] = open_handles.v[--open_handles.n];
			break;
		}
	if (!open_handles.n) {
		free(open_handles.v);
		memset(&open_handles, 0, sizeof(open_handles));
	}
}

/*
 * Whether p's memory can be read at addr (its _PyRuntime). Before the version:
 * 3.8 to 3.10 have no Py_Version and would pass on their file name alone, to fail
 * at every walk. A read another uid's process refuses names the capability.
 */
static bool readable(struct pyproc *p, uint64_t addr, struct pyproc_error *err)
{
	char byte;

	if (pyproc_read(p, addr, &byte, 1) == 0)
		return true;
	if (!err || !caps_explain_ptrace(p->pid, "memory", errno, err->msg, sizeof(err->msg)))
		set_error(err, PYPROC_EREAD, "cannot read the memory of pid %d: %s", p->pid,
			  strerror(errno));
	else
		err->code = PYPROC_ECAPS;
	return false;
}

static struct pyproc *open_new(pid_t pid, unsigned long long started, struct pyproc_error *err)
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
	p->refs = 1;
	p->started = started;
	p->pid = pid;
	p->mem_fd = -1;
	p->codes = calloc(CODE_CACHE_SIZE, sizeof(*p->codes));
	if (!p->codes) {
		set_error(err, PYPROC_EREAD, "out of memory");
		goto fail;
	}
	n = read_maps(pid, &maps);
	if (n < 0) {
		if (!err || !caps_explain_ptrace(pid, "memory map", errno, err->msg, sizeof(err->msg)))
			set_error(err, PYPROC_ENOPROC, "cannot read /proc/%d/maps: %s", pid, strerror(errno));
		else
			err->code = PYPROC_ECAPS;
		goto fail;
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	p->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (procinfo_nsids(pid, pid, &ids)) {
		p->ns_pid = pid;
	} else {
		p->ns_pid = ids.pid;
		p->ns_nested = ids.nested;
	}

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
	if (!readable(p, p->runtime, err) || detect_version(p, err) || load_offsets(p, err))
		goto fail;
	free(maps);
	return p;
fail:
	/* a target that exits while it is read fails somewhere: say what happened */
	if (!procinfo_alive(pid))
		set_error(err, PYPROC_ENOPROC, "pid %d exited before it could be traced", pid);
	free(maps);
	pyproc_close(p);
	return NULL;
}

struct pyproc *pyproc_open(pid_t pid, struct pyproc_error *err)
{
	unsigned long long started = procinfo_start_time(pid);
	struct pyproc *p = started ? shared_handle(pid, started) : NULL;

	if (p) {
		if (err) {
			err->code = PYPROC_OK;
			err->msg[0] = 0;
		}
		p->refs++;
		return p;
	}
	p = open_new(pid, started, err);
	if (p && started)
		share(p);
	return p;
}

void pyproc_close(struct pyproc *p)
{
	if (!p || --p->refs > 0)
		return;
	unshare(p);
	if (p->codes)
		for (int i = 0; i < CODE_CACHE_SIZE; i++)
			free(p->codes[i].table);
	free(p->codes);
	free(p->names);
	pytasks_free(p->tasks);
	pyproc_cache_free(p);
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

int pyproc_libc(const struct pyproc *p, char *path, size_t pathlen, char *host_path, size_t hostlen)
{
	struct map_entry *maps = NULL;
	int n = read_maps(p->pid, &maps), r = -1;

	for (int i = 0; i < n && r; i++) {
		const char *base = strrchr(maps[i].path, '/') + 1;

		if (strncmp(base, "libc.so", 7) && strncmp(base, "libc-", 5))
			continue;
		snprintf(path, pathlen, "%s", maps[i].path);
		mapped_host_path(p->pid, &maps[i], host_path, hostlen);
		r = 0;
	}
	free(maps);
	return r;
}

uint64_t pyproc_gil(const struct pyproc *p)
{
	const struct pyoffsets *o = &p->off;
	uint64_t interp = 0, next = 0, gil = 0;

	if (o->rt_gil != PYOFF_NONE)
		return p->runtime + o->rt_gil; /* 3.8-3.11: in _PyRuntime */
	if (o->interp_gil_ptr == PYOFF_NONE || pyproc_rd_u64(p, p->runtime + o->rt_interp_head, &interp))
		return 0;
	/* newest interpreter first: the main one is the last */
	for (int i = 0; interp && i < 64; i++, interp = next)
		if (pyproc_rd_u64(p, interp + o->interp_next, &next) || !next)
			break;
	if (!interp || pyproc_rd_u64(p, interp + o->interp_gil_ptr, &gil))
		return 0;
	return gil;
}

uint64_t pyproc_symbol(const struct pyproc *p, const char *name)
{
	const struct elf_symbol *s;

	if (p->symbol)
		return p->symbol(p, name);
	s = elfsyms_find(p->elf, name);

	return s ? s->value + p->module.bias : 0;
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
	pytasks_walk_config(p, c);
}

void pyproc_describe(const struct pyproc *py, bool source, char *buf, size_t len)
{
	const struct pyversion *v = pyproc_version(py);
	char micro[16] = "", from[48] = "";

	if (v->micro >= 0)
		snprintf(micro, sizeof(micro), ".%d", v->micro);
	if (source)
		snprintf(from, sizeof(from), " (%s)", v->source);
	snprintf(buf, len, "CPython %d.%d%s%s in %s", v->major, v->minor, micro, from,
		 pyproc_module(py)->path);
}
