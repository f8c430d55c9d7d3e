/* A compiled BPF program out of its libbcc module, and across processes (bpfobj.h). */
#define _GNU_SOURCE
#include "bpfobj.h"

#include <bcc/bcc_common.h>
#include <bcc/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>


enum {
	MAX_TABLES = 200,         /* fds in one SCM_RIGHTS message: the kernel takes 253 */
	MAX_BODY = 64 << 20,      /* a message's body at most (a program is some 100 KiB) */
	WIRE_MAGIC = 0x6a626f70,  /* "pobj" */
	IMAGE_MAGIC = 0x676d6970, /* "pimg" */
};

/* The message: head (with the fds), then each table and each function. */
struct wire_head {
	uint32_t magic, body, ntables, nfuncs, kern_version;
	char license[64];
};
struct wire_table {
	int32_t fd, type; /* fd: the sender's number (an image's: the table's), as the instructions hold it */
	uint32_t key_size, leaf_size, max_entries, flags, name_len;
};
struct wire_func {
	uint32_t name_len, size;
};

/*
 * The map references of f (BPF_LD_IMM64 whose source is a map fd or a map value)
 * from the numbers from[i] (the module's fds, the sender's, an image's table numbers)
 * to to[i], for the n tables: 0, or -1 for a number no table had.
 */
static int renumber(struct bpfobj_func *f, const int32_t *from, const int32_t *to, int n)
{
	struct bpf_insn *insn = f->insns;
	size_t count = f->size / sizeof(*insn);

	for (size_t k = 0; k + 1 < count; k++) {
		int i;
		if (insn[k].code != (BPF_LD | BPF_DW | BPF_IMM))
			continue;
		if (insn[k].src_reg == BPF_PSEUDO_MAP_FD || insn[k].src_reg == BPF_PSEUDO_MAP_VALUE) {
			for (i = 0; i < n && from[i] != insn[k].imm; i++)
				;
			if (i == n)
				return -1;
			insn[k].imm = to[i];
		}
		k++; /* the instruction's second half */
	}
	return 0;
}

/* The references of f from the numbers theirs[i] to o's tables' own fds. */
static int relocate(struct bpfobj_func *f, const int32_t *theirs, const struct bpfobj *o)
{
	int32_t ours[MAX_TABLES];

	for (int i = 0; i < o->ntables; i++)
		ours[i] = o->tables[i].fd;
	return renumber(f, theirs, ours, o->ntables);
}

int bpfobj_from_module(void *mod, struct bpfobj *o)
{
	size_t nt = bpf_num_tables(mod), nf = bpf_num_functions(mod);
	int32_t theirs[MAX_TABLES];
	struct bpf_map_info info;
	uint32_t info_len;

	memset(o, 0, sizeof(*o));
	if (nt > MAX_TABLES)
		return -1;
	o->tables = calloc(nt ? nt : 1, sizeof(*o->tables));
	o->funcs = calloc(nf ? nf : 1, sizeof(*o->funcs));
	if (!o->tables || !o->funcs)
		goto fail;
	for (size_t i = 0; i < nt; i++) {
		struct bpfobj_table *t = &o->tables[o->ntables];
		int fd = bpf_table_fd_id(mod, i);

		if (fd < 0)
			continue; /* a table libbcc made no map for: nothing can use it */
		t->name = strdup(bpf_table_name(mod, i));
		t->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (!t->name || t->fd < 0) {
			free(t->name);
			goto fail;
		}
		t->type = bpf_table_type_id(mod, i);
		t->key_size = (uint32_t)bpf_table_key_size_id(mod, i);
		t->leaf_size = (uint32_t)bpf_table_leaf_size_id(mod, i);
		/* what a map made again from an image needs besides (the kernel's own word) */
		memset(&info, 0, sizeof(info));
		info_len = sizeof(info);
		if (bpf_obj_get_info(t->fd, &info, &info_len) == 0) {
			t->max_entries = info.max_entries;
			t->flags = info.map_flags;
		}
		theirs[o->ntables++] = fd;
	}
	for (size_t i = 0; i < nf; i++) {
		struct bpfobj_func *f = &o->funcs[o->nfuncs];
		const void *start = bpf_function_start_id(mod, i);

		f->size = bpf_function_size_id(mod, i);
		f->name = strdup(bpf_function_name(mod, i));
		f->insns = start ? malloc(f->size ? f->size : 1) : NULL;
		if (!f->name || !f->insns) {
			free(f->name);
			free(f->insns);
			goto fail;
		}
		memcpy(f->insns, start, f->size);
		o->nfuncs++;
		/* the module's fds close with it: the instructions name the duplicates */
		if (relocate(f, theirs, o))
			goto fail;
	}
	snprintf(o->license, sizeof(o->license), "%s", bpf_module_license(mod) ? bpf_module_license(mod) : "GPL");
	o->kern_version = bpf_module_kern_version(mod);
	return 0;
fail:
	bpfobj_free(o);
	return -1;
}

void bpfobj_free(struct bpfobj *o)
{
	for (int i = 0; i < o->ntables; i++) {
		close(o->tables[i].fd);
		free(o->tables[i].name);
	}
	for (int i = 0; i < o->nfuncs; i++) {
		free(o->funcs[i].name);
		free(o->funcs[i].insns);
	}
	free(o->tables);
	free(o->funcs);
	memset(o, 0, sizeof(*o));
}

const struct bpfobj_table *bpfobj_table(const struct bpfobj *o, const char *name)
{
	for (int i = 0; i < o->ntables; i++)
		if (!strcmp(o->tables[i].name, name))
			return &o->tables[i];
	return NULL;
}

const struct bpfobj_func *bpfobj_func(const struct bpfobj *o, const char *name)
{
	for (int i = 0; i < o->nfuncs; i++)
		if (!strcmp(o->funcs[i].name, name))
			return &o->funcs[i];
	return NULL;
}

/* A growing message body. */
struct buf {
	char *p;
	size_t len, cap;
	int err;
};

static void put(struct buf *b, const void *v, size_t n)
{
	if (b->err)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;
		while (cap < b->len + n)
			cap *= 2;
		if (cap > MAX_BODY || !(p = realloc(b->p, cap))) {
			b->err = 1;
			return;
		}
		b->p = p, b->cap = cap;
	}
	memcpy(b->p + b->len, v, n);
	b->len += n;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w, n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, char *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r, n -= (size_t)r;
	}
	return 0;
}

/* The next n bytes of body at *at, or NULL when the body ends before them. */
static const char *take(const char *body, size_t len, size_t *at, size_t n)
{
	const char *p = body + *at;

	if (n > len - *at)
		return NULL;
	*at += n;
	return p;
}

static char *take_name(const char *body, size_t len, size_t *at, uint32_t n)
{
	const char *p = n < 256 ? take(body, len, at, n) : NULL;

	return p ? strndup(p, n) : NULL;
}

/*
 * o's head and body: each table is written with the number refs[i] (its fd for a
 * message, its index for an image), and an image's instructions are changed from
 * the tables' fds to those numbers. 0, or -1.
 */
static int encode(const struct bpfobj *o, const int32_t *refs, uint32_t magic, struct wire_head *h, struct buf *b)
{
	int32_t fds[MAX_TABLES];

	if (o->ntables > MAX_TABLES)
		return -1;
	*h = (struct wire_head){ .magic = magic, .ntables = (uint32_t)o->ntables, .nfuncs = (uint32_t)o->nfuncs,
				 .kern_version = o->kern_version };
	memcpy(h->license, o->license, sizeof(h->license));
	for (int i = 0; i < o->ntables; i++) {
		const struct bpfobj_table *t = &o->tables[i];
		struct wire_table w = { refs[i], t->type, t->key_size, t->leaf_size, t->max_entries, t->flags,
					(uint32_t)strlen(t->name) };
		fds[i] = t->fd;
		put(b, &w, sizeof(w));
		put(b, t->name, w.name_len);
	}
	for (int i = 0; i < o->nfuncs; i++) {
		struct bpfobj_func f = o->funcs[i];
		struct wire_func w = { (uint32_t)strlen(f.name), (uint32_t)f.size };
		put(b, &w, sizeof(w));
		put(b, f.name, w.name_len);
		if (magic == IMAGE_MAGIC) { /* renumbered in a copy: the body's bytes are not aligned */
			void *insns = malloc(f.size ? f.size : 1);
			if (insns) {
				memcpy(insns, f.insns, f.size);
				f.insns = insns;
			}
			if (!insns || renumber(&f, fds, refs, o->ntables))
				b->err = 1;
			put(b, f.insns, f.size);
			free(insns);
		} else {
			put(b, f.insns, f.size);
		}
	}
	h->body = (uint32_t)b->len;
	return b->err ? -1 : 0;
}

/*
 * o from a head and body that encode made: the tables get the fds fds[i] (taken: set
 * to -1), or, with fds NULL, new maps made as described. 0, or -1 (o left empty).
 */
static int decode(const struct wire_head *h, const char *body, int *fds, struct bpfobj *o)
{
	int32_t theirs[MAX_TABLES];
	size_t at = 0;

	memset(o, 0, sizeof(*o));
	if (h->ntables > MAX_TABLES || h->body > MAX_BODY || h->nfuncs > 4096)
		goto fail;
	o->tables = calloc(h->ntables ? h->ntables : 1, sizeof(*o->tables));
	o->funcs = calloc(h->nfuncs ? h->nfuncs : 1, sizeof(*o->funcs));
	if (!o->tables || !o->funcs)
		goto fail;
	memcpy(o->license, h->license, sizeof(o->license));
	o->license[sizeof(o->license) - 1] = 0;
	o->kern_version = h->kern_version;
	for (uint32_t i = 0; i < h->ntables; i++) {
		struct wire_table w;
		const char *p = take(body, h->body, &at, sizeof(w));
		struct bpfobj_table *t = &o->tables[i];
		if (!p)
			goto fail;
		memcpy(&w, p, sizeof(w));
		if (!(t->name = take_name(body, h->body, &at, w.name_len)))
			goto fail;
		if (fds) {
			t->fd = fds[i];
			fds[i] = -1;
		} else {
			t->fd = bcc_create_map((enum bpf_map_type)w.type, t->name, (int)w.key_size, (int)w.leaf_size,
					       (int)w.max_entries, (int)w.flags);
			if (t->fd < 0) {
				free(t->name);
				goto fail;
			}
		}
		o->ntables++;
		theirs[i] = w.fd;
		t->type = w.type;
		t->key_size = w.key_size;
		t->leaf_size = w.leaf_size;
		t->max_entries = w.max_entries;
		t->flags = w.flags;
	}
	for (uint32_t i = 0; i < h->nfuncs; i++) {
		struct wire_func w;
		const char *p = take(body, h->body, &at, sizeof(w)), *insns;
		struct bpfobj_func *f = &o->funcs[i];
		if (!p)
			goto fail;
		memcpy(&w, p, sizeof(w));
		if (!(f->name = take_name(body, h->body, &at, w.name_len)))
			goto fail;
		o->nfuncs++;
		if (!(insns = take(body, h->body, &at, w.size)) || !(f->insns = malloc(w.size ? w.size : 1)))
			goto fail;
		memcpy(f->insns, insns, w.size);
		f->size = w.size;
		if (relocate(f, theirs, o))
			goto fail;
	}
	if (at == h->body)
		return 0;
fail:
	bpfobj_free(o);
	if (!errno)
		errno = EINVAL;
	return -1;
}

int bpfobj_send(int sock, const struct bpfobj *o)
{
	char control[CMSG_SPACE(MAX_TABLES * sizeof(int))];
	struct wire_head h;
	struct iovec iov = { &h, sizeof(h) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	int32_t refs[MAX_TABLES];
	struct buf b = { 0 };
	int r;

	for (int i = 0; i < o->ntables && i < MAX_TABLES; i++)
		refs[i] = o->tables[i].fd;
	if (encode(o, refs, WIRE_MAGIC, &h, &b)) {
		free(b.p);
		return -1;
	}
	if (o->ntables) {
		struct cmsghdr *c;
		memset(control, 0, sizeof(control));
		m.msg_control = control;
		m.msg_controllen = CMSG_SPACE((size_t)o->ntables * sizeof(int));
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)o->ntables * sizeof(int));
		for (int i = 0; i < o->ntables; i++)
			memcpy(CMSG_DATA(c) + i * sizeof(int), &o->tables[i].fd, sizeof(int));
	}
	while ((r = (int)sendmsg(sock, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	r = r == (int)sizeof(h) ? write_all(sock, b.p, b.len) : -1;
	free(b.p);
	return r;
}

int bpfobj_recv(int sock, struct bpfobj *o)
{
	char control[CMSG_SPACE(MAX_TABLES * sizeof(int))];
	struct wire_head h;
	struct iovec iov = { &h, sizeof(h) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			    .msg_controllen = sizeof(control) };
	int fds[MAX_TABLES], nfds = 0, r = -1;
	char *body = NULL;
	ssize_t got;

	memset(o, 0, sizeof(*o));
	while ((got = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL)) < 0 && errno == EINTR)
		;
	for (struct cmsghdr *c = got > 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (size_t i = 0; CMSG_LEN((i + 1) * sizeof(int)) <= c->cmsg_len && nfds < MAX_TABLES; i++)
				memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	if (got == (ssize_t)sizeof(h) && !(m.msg_flags & MSG_CTRUNC) && h.magic == WIRE_MAGIC &&
	    h.ntables == (uint32_t)nfds && h.body <= MAX_BODY && (body = malloc(h.body ? h.body : 1)) &&
	    !read_all(sock, body, h.body))
		r = decode(&h, body, fds, o);
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(body);
	return r;
}

int bpfobj_save(int fd, const struct bpfobj *o)
{
	int32_t refs[MAX_TABLES];
	struct wire_head h;
	struct buf b = { 0 };
	int r;

	for (int i = 0; i < MAX_TABLES; i++)
		refs[i] = i;
	r = encode(o, refs, IMAGE_MAGIC, &h, &b) || write_all(fd, (const char *)&h, sizeof(h)) ||
	    write_all(fd, b.p, b.len) ? -1 : 0;
	free(b.p);
	return r;
}

int bpfobj_from_image(const void *buf, size_t len, struct bpfobj *o)
{
	struct wire_head h;

	memset(o, 0, sizeof(*o));
	if (len < sizeof(h)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != IMAGE_MAGIC || h.body != len - sizeof(h)) {
		errno = EINVAL;
		return -1;
	}
	errno = 0;
	return decode(&h, (const char *)buf + sizeof(h), NULL, o);
}
