/*
 * The compile cache against a real folder and real maps (root): what is put comes
 * back with new maps; another key, a file someone else could have written, a symlink,
 * a cut file or a file under another key's name is not used; a folder others can
 * write to is not used at all; at most BPFCACHE_ENTRIES files stay, the least
 * recently used going first.
 */
#define _GNU_SOURCE
#include <bcc/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <linux/bpf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bpfcache.h"

static char dir[] = "/tmp/test_bpfcache.XXXXXX";

/* A program of one table and one function that loads its fd. */
static bool make(struct bpfobj *o, struct bpf_insn *insns)
{
	static struct bpfobj_table t;
	static struct bpfobj_func f;
	int fd = bcc_create_map(BPF_MAP_TYPE_ARRAY, "counts", 4, 8, 4, 0);

	if (fd < 0)
		return false;
	t = (struct bpfobj_table){ (char *)"counts", fd, BPF_MAP_TYPE_ARRAY, 4, 8, 4, 0 };
	insns[0] = (struct bpf_insn){ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 1, .src_reg = BPF_PSEUDO_MAP_FD, .imm = fd };
	insns[1] = (struct bpf_insn){ 0 };
	insns[2] = (struct bpf_insn){ .code = BPF_JMP | BPF_EXIT };
	f = (struct bpfobj_func){ (char *)"on_event", insns, 3 * sizeof(*insns) };
	*o = (struct bpfobj){ .tables = &t, .ntables = 1, .funcs = &f, .nfuncs = 1, .license = "GPL" };
	return true;
}

static int files(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The one file of the folder's that is not name (the last one put, when there are two). */
static void only_file(char *path, size_t size)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	assert_non_null(d);
	path[0] = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			snprintf(path, size, "%s/%s", dir, e->d_name);
	closedir(d);
	assert_true(path[0]);
}

static bool gets(const char *key)
{
	struct bpfobj o;

	if (bpfcache_get(key, strlen(key), &o))
		return false;
	bpfobj_free(&o);
	return true;
}

static void empty_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while ((e = readdir(d)))
		if (e->d_name[0] != '.' || strncmp(e->d_name, ".tmp.", 5) == 0)
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

static void test_put_get(void **state)
{
	struct bpf_insn insns[3];
	struct bpfobj o, got;
	const struct bpf_insn *g;
	struct bpf_map_info a = { 0 }, b = { 0 };
	uint32_t len = sizeof(a);

	(void)state;
	if (!make(&o, insns)) {
		print_message("skipped: creating a BPF map failed (%s): not root?\n", strerror(errno));
		skip();
	}
	assert_string_equal(bpfcache_dir(), dir);
	bpfcache_put("key one", 7, &o);
	assert_int_equal(files(), 1);
	assert_int_equal(bpfcache_get("key one", 7, &got), 0);
	assert_int_equal(got.ntables, 1);
	assert_string_equal(got.tables[0].name, "counts");
	assert_int_equal(got.tables[0].max_entries, 4);
	assert_int_equal(bpf_obj_get_info(o.tables[0].fd, &a, &len), 0);
	assert_int_equal(bpf_obj_get_info(got.tables[0].fd, &b, &len), 0);
	assert_int_not_equal(a.id, b.id);
	g = got.funcs[0].insns;
	assert_int_equal(g[0].imm, got.tables[0].fd);
	assert_int_equal(got.funcs[0].size, sizeof(insns));
	bpfobj_free(&got);
	/* a key that differs in one byte, or is longer */
	assert_false(gets("key onE"));
	assert_false(gets("key one "));
	close(o.tables[0].fd);
	empty_dir();
}

static void test_unusable_files(void **state)
{
	struct bpf_insn insns[3];
	struct bpfobj o;
	char path[4096], other[4096];
	struct stat st;

	(void)state;
	if (!make(&o, insns))
		skip();
	bpfcache_put("a key", 5, &o);
	only_file(path, sizeof(path));
	assert_true(gets("a key"));
	/* writable by the group: could be anyone's program */
	assert_int_equal(chmod(path, 0620), 0);
	assert_false(gets("a key"));
	assert_int_equal(chmod(path, 0600), 0);
	assert_true(gets("a key"));
	/* a symlink where the file should be */
	snprintf(other, sizeof(other), "%s.real", path);
	assert_int_equal(rename(path, other), 0);
	assert_int_equal(symlink(other, path), 0);
	assert_false(gets("a key"));
	assert_int_equal(unlink(path), 0);
	/* cut short */
	assert_int_equal(stat(other, &st), 0);
	assert_int_equal(truncate(other, st.st_size - 3), 0);
	assert_int_equal(rename(other, path), 0);
	assert_false(gets("a key"));
	unlink(path);
	/* another key's file under this key's name (a hash collision) */
	bpfcache_put("a key", 5, &o);
	only_file(path, sizeof(path));
	unlink(path);
	bpfcache_put("b key", 5, &o);
	only_file(other, sizeof(other));
	assert_int_equal(rename(other, path), 0);
	assert_false(gets("a key"));
	assert_int_equal(rename(path, other), 0);
	assert_true(gets("b key"));
	close(o.tables[0].fd);
	empty_dir();
}

static void test_eviction(void **state)
{
	struct bpf_insn insns[3];
	struct bpfobj o;
	char key[32];

	(void)state;
	if (!make(&o, insns))
		skip();
	for (int i = 0; i < BPFCACHE_ENTRIES + 10; i++) {
		snprintf(key, sizeof(key), "key %d", i);
		bpfcache_put(key, strlen(key), &o);
		if (i >= 5)
			assert_true(gets("key 0")); /* used after every put: the last to go */
	}
	assert_int_equal(files(), BPFCACHE_ENTRIES);
	assert_true(gets("key 0"));
	assert_false(gets("key 1"));
	assert_true(gets("key 73"));
	close(o.tables[0].fd);
	empty_dir();
}

/* A folder others can write to is no cache, nor is an empty PYEBPF_CACHE_DIR: in children (a process looks once). */
static void test_unsafe_folder(void **state)
{
	char open_dir[] = "/tmp/test_bpfcache_open.XXXXXX";
	int status;
	pid_t pid;

	(void)state;
	assert_non_null(mkdtemp(open_dir));
	assert_int_equal(chmod(open_dir, 0777), 0);
	pid = fork();
	if (pid == 0) {
		setenv("PYEBPF_CACHE_DIR", open_dir, 1);
		_exit(bpfcache_dir() == NULL ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	pid = fork();
	if (pid == 0) {
		setenv("PYEBPF_CACHE_DIR", "", 1);
		_exit(bpfcache_dir() == NULL ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	rmdir(open_dir);
}

static void test_key(void **state)
{
	struct kheaders kh = { .builtin = true };
	struct cflags cf = { 0 };
	size_t la, lb, lc;
	char *a, *b, *c;

	(void)state;
	cflags_add(&cf, "-DX=1");
	a = bpfcache_key("int x;", &cf, &kh, &la);
	b = bpfcache_key("int y;", &cf, &kh, &lb);
	cflags_add(&cf, "-DY=2");
	c = bpfcache_key("int x;", &cf, &kh, &lc);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_true(la != lb || memcmp(a, b, la));
	assert_true(la != lc || memcmp(a, c, la));
	assert_non_null(strstr(a, "/proc/self/exe"));
	assert_non_null(strstr(a, "libbcc"));
	free(a);
	free(b);
	free(c);
	cflags_free(&cf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key),
		cmocka_unit_test(test_unsafe_folder), /* before this process looks at its folder */
		cmocka_unit_test(test_put_get),
		cmocka_unit_test(test_unusable_files),
		cmocka_unit_test(test_eviction),
	};
	int r;

	if (!mkdtemp(dir))
		return 1;
	setenv("PYEBPF_CACHE_DIR", dir, 1);
	r = cmocka_run_group_tests(tests, NULL, NULL);
	empty_dir();
	rmdir(dir);
	return r;
}
