/*
 * The CPython structure readers (src/python: pyobjects.c, pythreads.c, pycode.c,
 * pylines.c, pytasks.c, pyframes.c) fed a target's memory made of the input: what a
 * hostile or half-torn process can show them. pyproc's memory reader and symbol
 * lookup are replaced (struct pyproc's read_mem and symbol hooks).
 *
 * Input: a struct pymem_header, then memory regions, each { u64 addr, u32 len,
 * len bytes }. A read wholly inside a region gets its bytes; any other read fails
 * (EFAULT), or with PYMEM_WRAP in the flags gets the input's bytes from addr modulo
 * its size, so that every pointer leads somewhere.
 *
 * Seeds come from live interpreters: built with -DPYMEM_RECORD (no libFuzzer), this
 * file is a program that runs the same reads on a real process and writes every
 * region it read as an input:
 *   clang -DPYMEM_RECORD -Isrc/... tests/fuzz/fuzz_pymem.c build/libpyebpf.a ... -o rec
 *   rec PID OUT   (see tests/fuzz/README)
 */
#include "fuzz.h"

#include <errno.h>

#include "pyframes.h"
#include "pyoffsets.h"
#include "pyproc_impl.h"
#include "pytasks.h"

#define PYMEM_WRAP 1

/* the symbols pyproc_symbol answers, in pymem_header.types */
static const char *const type_names[] = { "PyCode_Type", "PyCoro_Type", "PyGen_Type",
					  "PyLong_Type", "PyMethod_Type", "PyList_Type" };
#define NTYPES (sizeof(type_names) / sizeof(type_names[0]))
#define NCODES 3

struct pymem_header {
	uint8_t minor;  /* 3.(8 + minor % 8) */
	uint8_t flags;  /* PYMEM_WRAP */
	uint8_t pad[6];
	uint64_t runtime; /* _PyRuntime */
	struct {
		uint64_t code;
		uint32_t instr, check;
	} codes[NCODES];  /* code objects to resolve, as a walker's frames */
	uint64_t types[NTYPES];
	uint64_t gen_frame; /* for pytasks_of_frame */
};

struct region {
	uint64_t addr;
	uint32_t len;
	const uint8_t *bytes;
};

#define MAX_REGIONS 8192

static struct {
	const uint8_t *data;
	size_t size;
	struct pymem_header h;
	struct region r[MAX_REGIONS];
	int n;
} in;

static int by_addr(const void *a, const void *b)
{
	const struct region *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Regions are sorted by address: the nearest ones at or below addr are looked at. */
__attribute__((no_sanitize("coverage"))) static int image_read(const struct pyproc *p, uint64_t addr,
								void *buf, size_t len)
{
	int lo = 0, hi = in.n;

	(void)p;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (in.r[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (int i = lo - 1; i >= 0 && i >= lo - 64; i--) {
		const struct region *r = &in.r[i];
		if (addr - r->addr <= r->len && len <= r->len - (addr - r->addr)) {
			memcpy(buf, r->bytes + (addr - r->addr), len);
			return 0;
		}
	}
	if ((in.h.flags & PYMEM_WRAP) && in.size) {
		size_t at = (size_t)(addr % in.size), done = 0;
		while (done < len) {
			size_t n = in.size - at < len - done ? in.size - at : len - done;
			memcpy((char *)buf + done, in.data + at, n);
			done += n;
			at = 0;
		}
		return 0;
	}
	errno = EFAULT;
	return -1;
}

static uint64_t image_symbol(const struct pyproc *p, const char *name)
{
	(void)p;
	for (size_t i = 0; i < NTYPES; i++)
		if (!strcmp(name, type_names[i]))
			return in.h.types[i];
	return 0;
}

static void image_close(struct pyproc *p)
{
	if (p && p->codes)
		for (int i = 0; i < CODE_CACHE_SIZE; i++) {
			free(p->codes[i].table);
			p->codes[i].table = NULL;
			p->codes[i].code = 0;
		}
	if (p)
		p->codes = NULL;
	pyproc_close(p);
}

/* A handle as pyproc_open makes one, but reading through the hooks. NULL when no offsets. */
static struct pyproc *image_open(int (*read)(const struct pyproc *, uint64_t, void *, size_t))
{
	/* the code cache (3 MB) is the handles' one, emptied by image_close: a calloc each was most of a run */
	static struct code_entry *codes;
	struct pyproc *p = calloc(1, sizeof(*p));
	int minor = 8 + in.h.minor % 8;

	if (!codes)
		codes = calloc(CODE_CACHE_SIZE, sizeof(*codes));
	if (!p || !codes)
		goto fail;
	p->codes = codes;
	p->refs = 1;
	p->pid = p->ns_pid = getpid();
	p->mem_fd = -1;
	p->read_mem = read;
	p->symbol = image_symbol;
	p->runtime = in.h.runtime;
	p->version = (struct pyversion){ 3, minor, 0, 0x030000f0u | (uint32_t)minor << 16, false, "fuzz" };
	p->module.path = p->module.host_path = "fuzz";
	if (minor <= 12) {
		p->off = *pyoffsets_table(minor);
	} else {
		/* as pyproc.c's load_offsets: the target's own _Py_DebugOffsets */
		unsigned char raw[1024];
		size_t len = pyoffsets_debug_size(minor);
		if (len > sizeof(raw) || pyproc_read(p, p->runtime, raw, len) ||
		    pyoffsets_from_debug(minor, raw, len, &p->off))
			goto fail;
	}
	return p;
fail:
	image_close(p);
	return NULL;
}

static void exercise(struct pyproc *p)
{
	static struct pythread threads[64];
	struct pywalk_frame frames[NCODES];
	struct pycode_loc locs[NCODES];
	struct pyframes_buf fb = { 0 };
	char name[PYTHREAD_NAME_MAX], task[128] = "", coro[256] = "", why[256] = "";
	int n = pyproc_threads(p, threads, 64);

	for (int i = 0; i < n; i++)
		pyproc_thread_of_tstate(p, threads[i].tstate);
	pyproc_thread_name(p, p->pid, "fuzz", 4, name, sizeof(name));
	pyproc_gil(p);
	for (int i = 0; i < NCODES; i++)
		frames[i] = (struct pywalk_frame){ in.h.codes[i].code, in.h.codes[i].instr,
						   in.h.codes[i].check };
	pyframes_resolve(p, frames, NCODES, locs);
	pyframes_folded(&fb, name, locs, NCODES, 0);
	pyframes_buf_free(&fb);
	if (!pytasks_probe(p, why, sizeof(why))) {
		struct pytasks_snapshot s = { 0 };
		int nt = pytasks_read(p, &s, true);
		if (getenv("PYMEM_DEBUG"))
			for (int i = 0; i < nt; i++)
				fprintf(stderr, "task %s coro %s depth %d parent %d\n", s.v[i].name,
					s.v[i].coro_name, s.v[i].depth, s.v[i].parent);
		pytasks_read(p, &s, false);
		pytasks_snapshot_free(&s);
		pytasks_of_frame(p, in.h.gen_frame, task, sizeof(task), coro, sizeof(coro));
		if (in.n) {
			/* a walker's task: the name object's bytes are the first region's */
			struct pywalk_asyncio a = { .gen_frame = in.h.gen_frame, .task = in.h.runtime,
						    .name = in.r[0].addr, .gen_index = in.h.codes[0].check % 4,
						    .looked = 1 };
			struct pytask_name tn;
			a.name_len = (__u16)(in.r[0].len < PYWALK_NAME_RAW ? in.r[0].len : PYWALK_NAME_RAW);
			memcpy(a.name_raw, in.r[0].bytes, a.name_len);
			pytasks_name_of_walk(p, &a, frames, NCODES, &tn);
		}
	}
	/* what a seed reaches: PYMEM_DEBUG=1 build-fuzz/fuzz/fuzz_pymem SEED */
	if (getenv("PYMEM_DEBUG")) {
		for (int i = 0; i < n; i++)
			fprintf(stderr, "thread %s tid %d\n", threads[i].name, threads[i].tid);
		for (int i = 0; i < NCODES; i++)
			fprintf(stderr, "frame %s (%s:%d)\n", locs[i].func, locs[i].file, locs[i].line);
		fprintf(stderr, "tasks: %s; task of frame: %s %s\n", why, task, coro);
	}
}

static void take_input(const uint8_t *data, size_t size)
{
	size_t at = sizeof(in.h);

	in.data = data;
	in.size = size;
	in.n = 0;
	memset(&in.h, 0, sizeof(in.h));
	memcpy(&in.h, data, size < sizeof(in.h) ? size : sizeof(in.h));
	while (size >= at && size - at >= 12 && in.n < MAX_REGIONS) {
		struct region *r = &in.r[in.n++];
		memcpy(&r->addr, data + at, 8);
		memcpy(&r->len, data + at + 8, 4);
		at += 12;
		if (r->len > size - at)
			r->len = (uint32_t)(size - at);
		r->bytes = data + at;
		at += r->len;
	}
	qsort(in.r, (size_t)in.n, sizeof(in.r[0]), by_addr);
}

#ifndef PYMEM_RECORD

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pyproc *p;

	take_input(data, size);
	p = image_open(image_read);
	if (p) {
		exercise(p);
		image_close(p);
	}
	return 0;
}

#else /* a program: the seed of a live process */

#include "procinfo.h"

static struct pyproc *live;
static FILE *out;
static struct {
	uint64_t addr;
	size_t len;
} seen[65536];
static int nseen;

/* Reads live's memory, and writes what it read as a region (once per address and size). */
static int record_read(const struct pyproc *p, uint64_t addr, void *buf, size_t len)
{
	uint32_t l = (uint32_t)len;

	(void)p;
	if (pyproc_read(live, addr, buf, len))
		return -1;
	for (int i = 0; i < nseen; i++)
		if (seen[i].addr == addr && seen[i].len == len)
			return 0;
	if (nseen < 65536)
		seen[nseen++] = (typeof(seen[0])){ addr, len };
	fwrite(&addr, 8, 1, out);
	fwrite(&l, 4, 1, out);
	fwrite(buf, 1, len, out);
	return 0;
}

/* The code object of frame f, and the frame before it. */
static uint64_t frame_code(const struct pyoffsets *o, uint64_t f, uint64_t *back)
{
	uint64_t code = 0;

	pyproc_read(live, f + o->frame_code, &code, 8);
	*back = 0;
	pyproc_read(live, f + o->frame_back, back, 8);
	return code & ~(uint64_t)o->code_tag_mask;
}

int main(int argc, char **argv)
{
	struct pyproc_error err;
	const struct pyoffsets *o;
	struct pythread t[64];
	uint64_t f = 0, cf = 0;
	int n;

	if (argc != 3) {
		fprintf(stderr, "usage: %s PID OUT\n", argv[0]);
		return 2;
	}
	live = pyproc_open(atoi(argv[1]), &err);
	if (!live) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	o = pyproc_offsets(live);
	in.h.minor = (uint8_t)(o->minor - 8);
	in.h.runtime = pyproc_runtime(live);
	for (size_t i = 0; i < NTYPES; i++)
		in.h.types[i] = pyproc_symbol(live, type_names[i]);
	/* the codes: the innermost frames of the oldest thread (the main one) */
	n = pyproc_threads(live, t, 64);
	if (n > 0) {
		uint64_t ts = t[n - 1].tstate;
		if (o->minor <= 10)
			pyproc_read(live, ts + o->ts_frame, &f, 8);
		else if (o->minor <= 12)
			pyproc_read(live, ts + o->ts_cframe, &cf, 8),
			pyproc_read(live, cf + o->cframe_current_frame, &f, 8);
		else
			pyproc_read(live, ts + o->ts_current_frame, &f, 8);
	}
	for (int i = 0; i < NCODES && f; i++) {
		uint64_t back;
		if (i == 1)
			in.h.gen_frame = f;
		in.h.codes[i].code = frame_code(o, f, &back);
		f = back;
	}
	out = fopen(argv[2], "w");
	if (!out)
		return 1;
	fwrite(&in.h, sizeof(in.h), 1, out);
	{
		struct pyproc *p = image_open(record_read);
		if (p) {
			exercise(p);
			image_close(p);
		}
	}
	fclose(out);
	pyproc_close(live);
	return 0;
}

#endif
