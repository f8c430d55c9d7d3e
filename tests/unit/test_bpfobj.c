/*
 * bpfobj_send/bpfobj_recv over a socket pair: the tables arrive with fds of this
 * process that are the same open files (ordinary files stand in for maps: SCM_RIGHTS
 * does not care), the instructions' map references are changed to them and nothing
 * else is, and a short, foreign or inconsistent message is refused with no fd left open.
 * bpfobj_save/bpfobj_from_image with real maps (root): new maps as described, the
 * references changed to them; a cut, foreign or inconsistent image is refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bcc/libbpf.h>
#include <cmocka.h>
#include <stdio.h>

#include "bpfobj.h"

static bool same_file(int a, int b)
{
	struct stat x, y;

	return !fstat(a, &x) && !fstat(b, &y) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* Open fds of this process (to see that nothing leaks). */
static int open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static struct bpf_insn ld_map(int fd, int src)
{
	return (struct bpf_insn){ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 1, .src_reg = src, .imm = fd };
}

/* Two tables on files, one function: a map fd load, a map value load, a plain 64-bit constant. */
static void make(struct bpfobj *o, struct bpf_insn *insns, size_t *n)
{
	static struct bpfobj_table t[2];
	static struct bpfobj_func f;
	static char names[2][16] = { "events", "counts" };

	t[0] = (struct bpfobj_table){ names[0], open("/dev/null", O_RDONLY | O_CLOEXEC), 4, 4, 4, 2, 0 };
	t[1] = (struct bpfobj_table){ names[1], open("/proc/self/exe", O_RDONLY | O_CLOEXEC), 6, 4, 8, 16, 0 };
	assert_true(t[0].fd >= 0 && t[1].fd >= 0);
	*n = 0;
	insns[(*n)++] = ld_map(t[1].fd, BPF_PSEUDO_MAP_FD);
	insns[(*n)++] = (struct bpf_insn){ 0 };
	insns[(*n)++] = (struct bpf_insn){ .code = BPF_ALU64 | BPF_MOV | BPF_K, .imm = t[0].fd };
	insns[(*n)++] = ld_map(t[0].fd, BPF_PSEUDO_MAP_VALUE);
	insns[(*n)++] = (struct bpf_insn){ .imm = 16 };
	insns[(*n)++] = ld_map(t[1].fd, 0); /* a constant that happens to equal an fd */
	insns[(*n)++] = (struct bpf_insn){ 0 };
	f = (struct bpfobj_func){ (char *)"on_event", insns, *n * sizeof(*insns) };
	*o = (struct bpfobj){ .tables = t, .ntables = 2, .funcs = &f, .nfuncs = 1, .license = "GPL", .kern_version = 7 };
}

static void unmake(struct bpfobj *o)
{
	close(o->tables[0].fd);
	close(o->tables[1].fd);
}

static void test_round_trip(void **state)
{
	struct bpf_insn insns[8];
	struct bpfobj o, got;
	size_t n;
	int sv[2], before = open_fds();
	const struct bpf_insn *g;

	(void)state;
	make(&o, insns, &n);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(bpfobj_send(sv[1], &o), 0);
	assert_int_equal(bpfobj_recv(sv[0], &got), 0);
	assert_int_equal(got.ntables, 2);
	assert_int_equal(got.nfuncs, 1);
	assert_string_equal(got.license, "GPL");
	assert_int_equal(got.kern_version, 7);
	for (int i = 0; i < 2; i++) {
		assert_string_equal(got.tables[i].name, o.tables[i].name);
		assert_int_not_equal(got.tables[i].fd, o.tables[i].fd);
		assert_true(same_file(got.tables[i].fd, o.tables[i].fd));
		assert_int_equal(got.tables[i].type, o.tables[i].type);
		assert_int_equal(got.tables[i].leaf_size, o.tables[i].leaf_size);
	}
	assert_ptr_equal(bpfobj_table(&got, "counts"), &got.tables[1]);
	assert_null(bpfobj_table(&got, "nothing"));
	assert_non_null(bpfobj_func(&got, "on_event"));
	assert_int_equal(got.funcs[0].size, n * sizeof(insns[0]));
	g = got.funcs[0].insns;
	assert_int_equal(g[0].imm, got.tables[1].fd);  /* map fd: changed */
	assert_int_equal(g[2].imm, o.tables[0].fd);    /* not a load: kept */
	assert_int_equal(g[3].imm, got.tables[0].fd);  /* map value: changed */
	assert_int_equal(g[4].imm, 16);                /* its offset, kept */
	assert_int_equal(g[5].imm, o.tables[1].fd);    /* a constant: kept */
	bpfobj_free(&got);
	unmake(&o);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(open_fds(), before);
}

/*
 * The message o makes, moved to dst with its fds but cut to its first keep bytes
 * (keep < 0: that many bytes less than all): what a sender that dies while writing
 * leaves.
 */
static void send_cut(const struct bpfobj *o, int dst, ssize_t keep)
{
	char msg[4096], control[CMSG_SPACE(8 * sizeof(int))];
	struct iovec iov = { msg, sizeof(msg) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof(control) };
	struct cmsghdr *c;
	int sv[2], nfds;
	ssize_t len, r;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(bpfobj_send(sv[1], o), 0);
	close(sv[1]);
	len = recvmsg(sv[0], &m, MSG_CMSG_CLOEXEC);
	assert_true(len > 0);
	while ((r = read(sv[0], msg + len, sizeof(msg) - (size_t)len)) > 0)
		len += r;
	close(sv[0]);
	keep = keep < 0 ? len + keep : keep;
	assert_true(keep > 0 && keep < len);
	c = CMSG_FIRSTHDR(&m);
	assert_non_null(c);
	nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
	m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
	iov.iov_len = (size_t)keep;
	assert_int_equal(sendmsg(dst, &m, 0), keep);
	for (int i = 0; i < nfds; i++) {
		int fd;
		memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		close(fd); /* in flight now: the receiver gets its own */
	}
}

static void test_refused(void **state)
{
	struct bpf_insn insns[8];
	struct bpfobj o, got;
	size_t n;
	int before;

	(void)state;
	make(&o, insns, &n);
	before = open_fds();
	for (int kind = 0; kind < 4; kind++) {
		int sv[2];
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		if (kind == 0) {
			send_cut(&o, sv[1], 120); /* in the tables */
		} else if (kind == 1) {
			send_cut(&o, sv[1], -4); /* in the function's instructions */
		} else if (kind == 2) {
			const char junk[200] = "HTTP/1.1 200 OK\r\n"; /* not a message of ours */
			assert_int_equal(write(sv[1], junk, sizeof(junk)), (ssize_t)sizeof(junk));
		} else {
			insns[0].imm = 1000; /* an instruction names an fd no table has */
			assert_int_equal(bpfobj_send(sv[1], &o), 0);
		}
		close(sv[1]);
		assert_int_equal(bpfobj_recv(sv[0], &got), -1);
		assert_int_equal(got.ntables + got.nfuncs, 0);
		close(sv[0]);
		assert_int_equal(open_fds(), before);
	}
	unmake(&o);
}

/* make()'s object with real maps in place of the files (BPF_MAP_TYPE_HASH, _ARRAY): false without the privilege. */
static bool make_maps(struct bpfobj *o, struct bpf_insn *insns, size_t *n)
{
	int hash = bcc_create_map(BPF_MAP_TYPE_HASH, "counts", 4, 8, 16, BPF_F_NO_PREALLOC);
	int array = bcc_create_map(BPF_MAP_TYPE_ARRAY, "events", 4, 4, 2, 0);
	int old[2];

	if (hash < 0 || array < 0) {
		if (hash >= 0)
			close(hash);
		if (array >= 0)
			close(array);
		return false;
	}
	make(o, insns, n);
	old[0] = o->tables[0].fd, old[1] = o->tables[1].fd;
	for (size_t k = 0; k < *n; k++)
		if (insns[k].code == (BPF_LD | BPF_DW | BPF_IMM) && insns[k].src_reg)
			insns[k].imm = insns[k].imm == old[0] ? array : hash;
	close(old[0]);
	close(old[1]);
	o->tables[0] = (struct bpfobj_table){ o->tables[0].name, array, BPF_MAP_TYPE_ARRAY, 4, 4, 2, 0 };
	o->tables[1] = (struct bpfobj_table){ o->tables[1].name, hash, BPF_MAP_TYPE_HASH, 4, 8, 16, BPF_F_NO_PREALLOC };
	return true;
}

/* o's image, in a malloc'd buffer of *len bytes. */
static char *image_of(const struct bpfobj *o, size_t *len)
{
	FILE *f = tmpfile();
	char *buf;

	assert_non_null(f);
	assert_int_equal(bpfobj_save(fileno(f), o), 0);
	*len = (size_t)lseek(fileno(f), 0, SEEK_END);
	buf = malloc(*len);
	assert_non_null(buf);
	assert_int_equal(pread(fileno(f), buf, *len, 0), (ssize_t)*len);
	fclose(f);
	return buf;
}

static void test_image(void **state)
{
	struct bpf_insn insns[8];
	struct bpfobj o, got;
	size_t n, len;
	char *img;
	int before = open_fds();
	const struct bpf_insn *g;

	(void)state;
	if (!make_maps(&o, insns, &n)) {
		print_message("skipped: creating a BPF map failed (%s): not root?\n", strerror(errno));
		skip();
	}
	img = image_of(&o, &len);
	assert_int_equal(bpfobj_from_image(img, len, &got), 0);
	assert_int_equal(got.ntables, 2);
	assert_int_equal(got.nfuncs, 1);
	assert_string_equal(got.license, "GPL");
	assert_int_equal(got.kern_version, 7);
	for (int i = 0; i < 2; i++) {
		struct bpf_map_info info = { 0 }, old = { 0 };
		uint32_t info_len = sizeof(info);
		assert_string_equal(got.tables[i].name, o.tables[i].name);
		assert_int_equal(bpf_obj_get_info(got.tables[i].fd, &info, &info_len), 0);
		assert_int_equal(bpf_obj_get_info(o.tables[i].fd, &old, &info_len), 0);
		assert_int_not_equal(info.id, old.id); /* a new map */
		assert_int_equal(info.type, o.tables[i].type);
		assert_int_equal(info.key_size, o.tables[i].key_size);
		assert_int_equal(info.value_size, o.tables[i].leaf_size);
		assert_int_equal(info.max_entries, o.tables[i].max_entries);
		assert_int_equal(info.map_flags, o.tables[i].flags);
	}
	g = got.funcs[0].insns;
	assert_int_equal(got.funcs[0].size, n * sizeof(insns[0]));
	assert_int_equal(g[0].imm, got.tables[1].fd);  /* map fd: changed */
	assert_int_equal(g[2].imm, insns[2].imm);      /* not a load: kept */
	assert_int_equal(g[3].imm, got.tables[0].fd);  /* map value: changed */
	assert_int_equal(g[4].imm, 16);                /* its offset, kept */
	assert_int_equal(g[5].imm, insns[5].imm);      /* a constant: kept */
	assert_int_equal(memcmp(&g[6], &insns[6], sizeof(g[6])), 0);
	bpfobj_free(&got);

	/* cut anywhere, or another kind of file */
	for (size_t cut = 1; cut < len; cut += 7) {
		assert_int_equal(bpfobj_from_image(img, cut, &got), -1);
		assert_int_equal(got.ntables + got.nfuncs, 0);
	}
	assert_int_equal(bpfobj_from_image("GIF89a and some more bytes than a head has....................."
					   "...............................................................",
					   128, &got), -1);
	free(img);
	/* an instruction naming an fd no table has: refused when saved */
	insns[0].imm = o.tables[1].fd + 1000;
	{
		FILE *f = tmpfile();
		assert_non_null(f);
		assert_int_equal(bpfobj_save(fileno(f), &o), -1);
		fclose(f);
	}
	close(o.tables[0].fd);
	close(o.tables[1].fd);
	assert_int_equal(open_fds(), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_image),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
