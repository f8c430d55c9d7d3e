#include "kbtf.h"

#include <bpf/btf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct kbtf {
	struct btf *btf;
};

struct kbtf *kbtf_open(void)
{
	struct kbtf *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->btf = btf__load_vmlinux_btf();
	if (!b->btf) {
		log_error("cannot read kernel BTF from /sys/kernel/btf/vmlinux (%s); this kernel "
			  "needs CONFIG_DEBUG_INFO_BTF=y",
			  strerror(errno));
		free(b);
		return NULL;
	}
	return b;
}

void kbtf_close(struct kbtf *b)
{
	if (!b)
		return;
	btf__free(b->btf);
	free(b);
}

/* Strips typedefs and qualifiers. */
static const struct btf_type *resolve(const struct btf *btf, __u32 *id)
{
	const struct btf_type *t = btf__type_by_id(btf, *id);

	while (t && (btf_is_typedef(t) || btf_is_volatile(t) || btf_is_const(t) ||
		     btf_is_restrict(t))) {
		*id = t->type;
		t = btf__type_by_id(btf, *id);
	}
	return t;
}

/*
 * Finds member name in the struct/union type_id, descending into anonymous members.
 * On success sets *bit_offset (from the start of type_id) and *member_type.
 */
static int find_member(const struct btf *btf, __u32 type_id, const char *name,
		       unsigned *bit_offset, __u32 *member_type, bool *bitfield)
{
	const struct btf_type *t = resolve(btf, &type_id);
	const struct btf_member *m;
	int n;

	if (!t || !(btf_is_struct(t) || btf_is_union(t)))
		return -1;
	m = btf_members(t);
	n = btf_vlen(t);
	for (int i = 0; i < n; i++, m++) {
		const char *mname = btf__name_by_offset(btf, m->name_off);
		unsigned off = btf_member_bit_offset(t, (__u32)i);

		if (mname && !strcmp(mname, name)) {
			*bit_offset = off;
			*member_type = m->type;
			*bitfield = btf_member_bitfield_size(t, (__u32)i) != 0;
			return 0;
		}
		if ((!mname || !*mname) &&
		    find_member(btf, m->type, name, bit_offset, member_type, bitfield) == 0) {
			*bit_offset += off;
			return 0;
		}
	}
	return -1;
}

int kbtf_member(struct kbtf *b, const char *struct_name, const char *path,
		struct kbtf_member *out)
{
	char buf[256], *tok, *save = NULL;
	unsigned total = 0;
	bool bitfield = false;
	__s32 sid = btf__find_by_name_kind(b->btf, struct_name, BTF_KIND_STRUCT);
	__u32 id;
	__s64 size;

	if (sid < 0) {
		log_error("kernel BTF has no struct %s", struct_name);
		return -1;
	}
	id = (__u32)sid;
	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok; tok = strtok_r(NULL, ".", &save)) {
		unsigned off;
		__u32 next;

		if (find_member(b->btf, id, tok, &off, &next, &bitfield)) {
			log_error("kernel BTF: struct %s has no member %s (looking for %s)",
				  struct_name, path, tok);
			return -1;
		}
		total += off;
		id = next;
	}
	if (bitfield || total % 8) {
		log_error("kernel BTF: %s.%s is a bit-field; it cannot be read by offset",
			  struct_name, path);
		return -1;
	}
	size = btf__resolve_size(b->btf, id);
	out->offset = total / 8;
	out->size = size > 0 ? (unsigned)size : 0;
	return 0;
}

int kbtf_offset_cflag(struct kbtf *b, struct cflags *cf, const char *macro,
		      const char *struct_name, const char *path)
{
	struct kbtf_member m;

	if (kbtf_member(b, struct_name, path, &m))
		return -1;
	cflags_add(cf, "-D%s=%u", macro, m.offset);
	cflags_add(cf, "-D%s_SIZE=%u", macro, m.size);
	return 0;
}

int kbtf_offset_cflags(struct kbtf *b, struct cflags *cf, const struct kbtf_offset *offs)
{
	for (; offs->macro; offs++)
		if (kbtf_offset_cflag(b, cf, offs->macro, offs->struct_name, offs->path))
			return -1;
	return 0;
}

int kbtf_struct_size(struct kbtf *b, const char *name, unsigned *size)
{
	__s32 id = btf__find_by_name_kind(b->btf, name, BTF_KIND_STRUCT);
	__s64 n = id < 0 ? -1 : btf__resolve_size(b->btf, (__u32)id);

	if (n <= 0) {
		log_error("kernel BTF has no struct %s", name);
		return -1;
	}
	*size = (unsigned)n;
	return 0;
}

int kbtf_enum_value(struct kbtf *b, const char *name, long long *value)
{
	__u32 n = btf__type_cnt(b->btf);

	for (__u32 id = 1; id < n; id++) {
		const struct btf_type *t = btf__type_by_id(b->btf, id);
		int vlen = btf_vlen(t);

		if (btf_is_enum(t)) {
			const struct btf_enum *e = btf_enum(t);
			for (int i = 0; i < vlen; i++, e++)
				if (!strcmp(btf__name_by_offset(b->btf, e->name_off), name)) {
					*value = e->val;
					return 0;
				}
		} else if (btf_is_enum64(t)) {
			const struct btf_enum64 *e = btf_enum64(t);
			for (int i = 0; i < vlen; i++, e++)
				if (!strcmp(btf__name_by_offset(b->btf, e->name_off), name)) {
					*value = (long long)btf_enum64_value(e);
					return 0;
				}
		}
	}
	return -1;
}
