/* pyproc, part: reading target memory and the objects the other parts need. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pyproc_impl.h"
#include "utf8.h"


void pyproc_overlay(struct pyproc *p, uint64_t addr, const void *bytes, size_t len)
{
	p->overlay.addr = addr;
	p->overlay.bytes = bytes;
	p->overlay.len = bytes ? len : 0;
}

/* A read answered by the overlay: 1 (buf filled), -1 (it crosses an end of it), 0 (outside). */
static int overlay_read(const struct pyproc *p, uint64_t addr, void *buf, size_t len)
{
	uint64_t lo = p->overlay.addr, hi = lo + p->overlay.len;

	if (!p->overlay.len || addr >= hi || addr + len <= lo)
		return 0;
	if (addr < lo || addr + len > hi)
		return errno = EFAULT, -1;
	memcpy(buf, (const uint8_t *)p->overlay.bytes + (addr - lo), len);
	return 1;
}

int pyproc_read_fresh(const struct pyproc *p, uint64_t addr, void *buf, size_t len)
{
	ssize_t n;
	int o;

	if ((o = overlay_read(p, addr, buf, len)))
		return o > 0 ? 0 : -1;
	if (addr < 4096) { /* NULL, or a field of a NULL pointer: no object lives in page 0 */
		errno = EFAULT;
		return -1;
	}
	if (p->read_mem)
		return p->read_mem(p, addr, buf, len);
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

#define BATCH_MAX 256 /* pieces per system call (the kernel takes up to IOV_MAX) */

/* One process_vm_readv(2) of up to BATCH_MAX pieces from v; how many it read, or -1 (errno). */
static int read_batch(const struct pyproc *p, struct pyproc_piece *v, int n)
{
	struct iovec local[BATCH_MAX], remote[BATCH_MAX];
	ssize_t got;
	int k = 0;

	if (n < 1)
		return 0;
	if (n > BATCH_MAX)
		n = BATCH_MAX;
	for (int i = 0; i < n; i++) {
		local[i] = (struct iovec){ v[i].buf, v[i].len };
		remote[i] = (struct iovec){ (void *)(uintptr_t)v[i].addr, v[i].len };
	}
	if ((got = process_vm_readv(p->pid, local, (unsigned long)n, remote, (unsigned long)n, 0)) < 0)
		return -1;
	/* the kernel stops before the first piece it cannot read whole */
	for (; k < n && (size_t)got >= v[k].len; k++) {
		got -= (ssize_t)v[k].len;
		v[k].err = 0;
	}
	return k;
}

int pyproc_read_pieces(const struct pyproc *p, struct pyproc_piece *v, int n)
{
	int i = 0, ok = 0, k;

	while (i < n) {
		if (v[i].addr < 4096 || p->read_mem || p->use_mem_fd) {
			k = 0; /* page 0, a memory image, or no process_vm_readv: one by one */
		} else if ((k = read_batch(p, v + i, n - i)) < 0) {
			k = 0; /* a bad first piece, or refused (then /proc/PID/mem): alone below */
		}
		ok += k;
		i += k;
		if (i < n) { /* the piece the batch stopped at, alone */
			v[i].err = pyproc_read_fresh(p, v[i].addr, v[i].buf, v[i].len) ? errno : 0;
			ok += !v[i].err;
			i++;
		}
	}
	return ok;
}

int pyproc_cache_on(struct pyproc *p, bool on)
{
	if (on && !p->pages) {
		p->pages = calloc(1, sizeof(*p->pages));
		if (p->pages && !(p->pages->data = malloc(PAGE_CACHE_SLOTS * sizeof(*p->pages->data)))) {
			free(p->pages);
			p->pages = NULL;
		}
		if (!p->pages)
			return -1;
	}
	if (p->pages) {
		p->pages->on = on;
		if (on)
			memset(p->pages->page, 0, sizeof(p->pages->page));
	}
	return 0;
}

void pyproc_cache_free(struct pyproc *p)
{
	if (p->pages)
		free(p->pages->data);
	free(p->pages);
	p->pages = NULL;
}

/* From the page cache when it is on: one read per page instead of one per field. */
int pyproc_read(const struct pyproc *p, uint64_t addr, void *buf, size_t len)
{
	struct page_cache *c = p->pages;
	uint8_t *out = buf;
	uint64_t at = addr;
	size_t left = len;

	if (!c || !c->on || !addr || len > PAGE_CACHE_SIZE || p->overlay.len)
		return pyproc_read_fresh(p, addr, buf, len);
	while (left) {
		uint64_t page = at & ~(uint64_t)(PAGE_CACHE_SIZE - 1), off = at - page;
		size_t slot = (size_t)(page / PAGE_CACHE_SIZE) & (PAGE_CACHE_SLOTS - 1);
		size_t n = PAGE_CACHE_SIZE - off < left ? PAGE_CACHE_SIZE - off : left;

		if (c->page[slot] != page + 1) {
			c->page[slot] = 0;
			if (pyproc_read_fresh(p, page, c->data[slot], PAGE_CACHE_SIZE))
				return pyproc_read_fresh(p, addr, buf, len); /* a page not all mapped */
			c->page[slot] = page + 1;
		}
		memcpy(out, c->data[slot] + off, n);
		out += n;
		at += n;
		left -= n;
	}
	return 0;
}

int pyproc_rd_u64(const struct pyproc *p, uint64_t addr, uint64_t *v)
{
	return pyproc_read(p, addr, v, sizeof(*v));
}

uint64_t pyproc_u64_or0(const struct pyproc *p, uint64_t addr)
{
	uint64_t v = 0;

	return pyproc_rd_u64(p, addr, &v) ? 0 : v;
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
	/* each character takes a byte of buf at least: more are not read (dict keys: 64) */
	if ((uint64_t)length > len - 1)
		length = (int64_t)(len - 1);
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

int pyproc_read_long(const struct pyproc *p, uint64_t obj, int64_t *out)
{
	uint64_t head, ndigits;
	uint32_t digits[3] = { 0 };
	int neg;
	uint64_t v = 0;

	if (pyproc_rd_u64(p, obj + 16, &head))
		return -1;
	if (p->off.minor >= 12) {
		ndigits = head >> 3; /* lv_tag: digit count << 3 | sign */
		neg = (head & 3) == 2;
	} else {
		int64_t size = (int64_t)head;
		neg = size < 0;
		/* unsigned: a hostile INT64_MIN has no signed negation (tests/fuzz/corpus/pymem/long-*) */
		ndigits = size < 0 ? 0 - (uint64_t)size : (uint64_t)size;
	}
	if (ndigits > 3)
		return -1;
	if (ndigits && pyproc_read(p, obj + 24, digits, ndigits * 4))
		return -1;
	for (uint64_t i = 0; i < ndigits; i++)
		v |= (uint64_t)(digits[i] & 0x3fffffff) << (30 * i);
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}


struct dict_layout {
	uint64_t entries;
	unsigned esz, koff, voff;
	int64_t nent;
};

static int layout_of(const struct pyproc *p, uint64_t keys, struct dict_layout *l)
{
	if (!keys)
		return -1;
	if (p->off.minor <= 10) {
		int64_t size;
		uint64_t w;
		if (pyproc_read(p, keys + 8, &size, 8) || pyproc_read(p, keys + 32, &l->nent, 8) ||
		    size <= 0 || size > (1 << 24))
			return -1;
		w = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffll ? 4 : 8;
		l->entries = keys + 40 + (uint64_t)size * w;
		l->esz = 24, l->koff = 8, l->voff = 16;
	} else {
		uint8_t hdr[3];
		if (pyproc_read(p, keys + 8, hdr, 3) || pyproc_read(p, keys + 24, &l->nent, 8) ||
		    hdr[1] > 40)
			return -1;
		l->entries = keys + 32 + (1ull << hdr[1]);
		if (hdr[2] == 0)
			l->esz = 24, l->koff = 8, l->voff = 16; /* DICT_KEYS_GENERAL */
		else
			l->esz = 16, l->koff = 0, l->voff = 8;  /* unicode keys */
	}
	return l->nent < 0 || l->nent > 65536 ? -1 : 0;
}

typedef int (*entry_visit)(const struct pyproc *p, const struct dict_layout *l, int64_t i, uint64_t key,
			   uint64_t value, void *ctx);

/* Entries are read a chunk at a time: a system call for each was most of a lookup's cost. */
#define DICT_CHUNK 32

static int walk_entries(const struct pyproc *p, const struct dict_view *d, entry_visit visit, void *ctx)
{
	struct dict_layout l;
	uint64_t ent[DICT_CHUNK * 3], vals[DICT_CHUNK];

	if (layout_of(p, d->keys, &l))
		return 0;
	for (int64_t base = 0; base < l.nent; base += DICT_CHUNK) {
		int64_t n = l.nent - base < DICT_CHUNK ? l.nent - base : DICT_CHUNK;
		if (pyproc_read(p, l.entries + (uint64_t)base * l.esz, ent, (size_t)n * l.esz) ||
		    (d->values && pyproc_read(p, d->values + 8 * (uint64_t)base, vals, (size_t)n * 8)))
			return 0;
		for (int64_t i = 0; i < n; i++) {
			const uint64_t *e = ent + (size_t)i * l.esz / 8;
			uint64_t key = e[l.koff / 8], value = d->values ? vals[i] : e[l.voff / 8];
			int r;
			if (key && value && (r = visit(p, &l, base + i, key, value, ctx)))
				return r;
		}
	}
	return 0;
}

struct foreach_ctx {
	dict_visit visit;
	void *ctx;
};

static int visit_item(const struct pyproc *p, const struct dict_layout *l, int64_t i, uint64_t key,
		      uint64_t value, void *ctx)
{
	const struct foreach_ctx *f = ctx;

	(void)l;
	(void)i;
	return f->visit(p, key, value, f->ctx);
}

int pyproc_dict_foreach(const struct pyproc *p, const struct dict_view *d, dict_visit visit, void *ctx)
{
	struct foreach_ctx f = { visit, ctx };

	return walk_entries(p, d, visit_item, &f);
}

void pyproc_dict_of(const struct pyproc *p, uint64_t dict, struct dict_view *d)
{
	uint64_t mv;

	d->keys = d->values = 0;
	if (!dict)
		return; /* no dict yet (a C Future's, until an attribute is set): empty */
	d->keys = pyproc_u64_or0(p, dict + 32);
	mv = pyproc_u64_or0(p, dict + 40);
	if (mv)
		d->values = mv + (p->off.minor >= 13 ? 8 : 0); /* 3.13+ PyDictValues header */
}

struct lookup {
	const char *name;
	uint64_t value;
	struct dict_slot *slot;
};

static int match_key(const struct pyproc *p, const struct dict_layout *l, int64_t i, uint64_t key,
		     uint64_t value, void *ctx)
{
	struct lookup *k = ctx;
	char buf[64];

	if (pyproc_read_str(p, key, buf, sizeof(buf)) || strcmp(buf, k->name))
		return 0;
	k->value = value;
	if (k->slot)
		*k->slot = (struct dict_slot){ .keys = 0, .entry = l->entries + (uint64_t)i * l->esz + l->koff,
					       .key = key, .index = i };
	return 1;
}

uint64_t pyproc_dict_get_slot(const struct pyproc *p, const struct dict_view *d, const char *name,
			      struct dict_slot *slot)
{
	struct lookup k = { name, 0, slot };
	uint64_t kv[2]; /* the entry's key, then its value */

	if (slot && slot->keys && slot->keys == d->keys && !pyproc_read(p, slot->entry, kv, sizeof(kv)) &&
	    kv[0] == slot->key)
		return d->values ? pyproc_u64_or0(p, d->values + 8 * (uint64_t)slot->index) : kv[1];
	walk_entries(p, d, match_key, &k);
	if (slot && k.value)
		slot->keys = d->keys;
	return k.value;
}

uint64_t pyproc_dict_get(const struct pyproc *p, const struct dict_view *d, const char *name)
{
	return pyproc_dict_get_slot(p, d, name, NULL);
}

/*
 * The attributes of an instance: a dict at tp_dictoffset (3.8-3.10), a managed dict or
 * values before the object (3.11, 3.12), or values inline after tp_basicsize (3.13+).
 */
int pyproc_instance_attrs(const struct pyproc *p, uint64_t obj, struct dict_view *d)
{
	const struct pyoffsets *o = &p->off;
	uint64_t tp = pyproc_u64_or0(p, obj + 8), flags;
	int64_t basic, dictoff;

	if (!tp || pyproc_rd_u64(p, tp + o->type_flags, &flags))
		return -1;
	memset(d, 0, sizeof(*d));
	if (o->minor >= 13 && (flags & (1u << 2))) { /* Py_TPFLAGS_INLINE_VALUES */
		uint8_t valid = 0;
		if (pyproc_read(p, tp + o->type_basicsize, &basic, 8))
			return -1;
		pyproc_read(p, obj + (uint64_t)basic + 3, &valid, 1);
		if (valid) {
			d->keys = pyproc_u64_or0(p, tp + o->ht_cached_keys);
			d->values = obj + (uint64_t)basic + 8;
			return 0;
		}
		pyproc_dict_of(p, pyproc_u64_or0(p, obj - 24), d);
		return 0;
	}
	if (o->minor >= 11 && (flags & (1u << 4))) { /* Py_TPFLAGS_MANAGED_DICT */
		if (o->minor == 11) {
			uint64_t vals = pyproc_u64_or0(p, obj - 32);
			if (vals) {
				d->keys = pyproc_u64_or0(p, tp + o->ht_cached_keys);
				d->values = vals;
				return 0;
			}
			pyproc_dict_of(p, pyproc_u64_or0(p, obj - 24), d);
			return 0;
		}
		uint64_t dv = pyproc_u64_or0(p, obj - 24); /* 3.12 PyDictOrValues, tagged */
		if (dv & 1) {
			d->keys = pyproc_u64_or0(p, tp + o->ht_cached_keys);
			d->values = dv + 1;
		} else {
			pyproc_dict_of(p, dv, d);
		}
		return 0;
	}
	if (pyproc_read(p, tp + o->type_dictoffset, &dictoff, 8) || dictoff <= 0)
		return -1;
	pyproc_dict_of(p, pyproc_u64_or0(p, obj + (uint64_t)dictoff), d);
	return 0;
}

