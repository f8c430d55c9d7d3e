/*
 * bccguard and symbols on hostile files mapped into this very process: copies of a
 * real shared library (libbz2) patched the ways libbcc 0.26 trips over (a symbol table
 * of entry size 0, a build id of 4000 bytes, a debug link to a FIFO or to "0"), a FIFO
 * where a mapped file was, a FIFO as the perf map, a mapping whose path is longer than
 * libbcc's maps buffer. Without the checks each of these crashes or hangs this test
 * (alarm: a hang fails it); with them the process's native frames stay addresses or
 * are named without debug files, with one warning.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bccguard.h"
#include "symbols.h"

#define BASE_LIB "/usr/lib/x86_64-linux-gnu/libbz2.so.1.0"
#define ADDR(f) ((uint64_t)(uintptr_t)(f))

__attribute__((noinline)) int bccguard_test_marker(int x);
__attribute__((noinline)) int bccguard_test_marker(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 5 + 1;
}

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/bccguard-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	alarm(60); /* a hang in libbcc fails the test instead of stalling make */
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) ? -1 : 0;
}

/* A copy of BASE_LIB at dir/name; its bytes in *buf (free it), or NULL when there is none. */
static char *copy_lib(const char *name, unsigned char **buf, size_t *len)
{
	static char path[PATH_MAX];
	struct stat st;
	int fd = open(BASE_LIB, O_RDONLY);
	FILE *f;

	if (fd < 0 || fstat(fd, &st))
		return NULL;
	*len = (size_t)st.st_size;
	*buf = malloc(*len);
	assert_int_equal(read(fd, *buf, *len), (ssize_t)*len);
	close(fd);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	return path;
}

static void write_file(const char *path, const unsigned char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* The header of section name in an ELF64 image. */
static Elf64_Shdr *section(unsigned char *buf, const char *name)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	Elf64_Shdr *sh = (Elf64_Shdr *)(buf + eh->e_shoff);
	const char *names = (const char *)buf + sh[eh->e_shstrndx].sh_offset;

	for (int i = 0; i < eh->e_shnum; i++)
		if (!strcmp(names + sh[i].sh_name, name))
			return &sh[i];
	fail_msg("%s has no section %s", BASE_LIB, name);
	return NULL;
}

/* path mapped executable into this process (as dlopen would map its text). */
static void *map_exec(const char *path, size_t len)
{
	int fd = open(path, O_RDONLY);
	void *m;

	assert_true(fd >= 0);
	m = mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	close(fd);
	assert_true(m != MAP_FAILED);
	return m;
}

/*
 * With path mapped: what bccguard says of this process, and that symbols names this
 * test's own function as expected (named: 1, or 0 when the process is refused) and
 * resolves an address inside the mapping without crashing.
 */
static enum bccguard_verdict check_mapped(void *m, int named, struct bccguard_finding *f)
{
	struct symbols *s = symbols_open(0);
	enum bccguard_verdict v = bccguard_process(NULL, getpid(), f);
	char buf[256];

	assert_non_null(s);
	assert_int_equal(symbols_resolve(s, getpid(), ADDR(bccguard_test_marker), buf, sizeof(buf)), named);
	if (named)
		assert_string_equal(buf, "bccguard_test_marker+0x0 (test_bccguard)");
	/* libbcc reads the mapped module's symbol table (and debug files) only here */
	symbols_resolve(s, getpid(), ADDR(m) + 0x2000, buf, sizeof(buf));
	symbols_close(s);
	return v;
}

static void a_clean_process_is_safe(void **state)
{
	struct bccguard_finding f;

	(void)state;
	assert_int_equal(bccguard_process(NULL, getpid(), &f), BCCGUARD_SAFE);
	assert_int_equal(f.verdict, BCCGUARD_SAFE);
	assert_true(bccguard_file(NULL, BASE_LIB, NULL));
	/* a process that is gone: nothing to read */
	assert_int_equal(bccguard_process(NULL, 5000000, NULL), BCCGUARD_SAFE);
}

static void symtab_of_entry_size_0_refuses_the_process(void **state)
{
	struct bccguard_finding f;
	unsigned char *buf;
	size_t len;
	char *path = copy_lib("libentsize0.so", &buf, &len);
	void *m;

	(void)state;
	if (!path)
		skip();
	section(buf, ".dynsym")->sh_entsize = 0;
	write_file(path, buf, len);
	m = map_exec(path, len);
	assert_int_equal(check_mapped(m, 0, &f), BCCGUARD_UNSAFE);
	assert_string_equal(f.path + strlen(f.path) - strlen(path), path);
	assert_non_null(strstr(f.why, "entry size 0"));
	assert_false(bccguard_file(NULL, path, NULL));
	munmap(m, len);
	free(buf);
}

static void a_long_build_id_names_without_debug_files(void **state)
{
	struct bccguard_finding f;
	unsigned char *buf;
	size_t len;
	char *path = copy_lib("libbuildid.so", &buf, &len);
	Elf64_Shdr *sh;
	void *m;

	(void)state;
	if (!path)
		skip();
	/* the note grows over what follows it: 4000 bytes of "build id" (libbcc: a stack smash) */
	sh = section(buf, ".note.gnu.build-id");
	((Elf64_Nhdr *)(buf + sh->sh_offset))->n_descsz = 4000;
	sh->sh_size = 16 + 4000;
	write_file(path, buf, len);
	m = map_exec(path, len);
	assert_int_equal(check_mapped(m, 1, &f), BCCGUARD_NO_DEBUG);
	assert_non_null(strstr(f.why, "a build id of 4000 bytes"));
	assert_false(bccguard_file(NULL, path, NULL));
	munmap(m, len);
	free(buf);
}

/* The debug link's name (patched in place), and what lies beside the file under it. */
static void debuglink_to(const char *lib, const char *link, bool fifo)
{
	struct bccguard_finding f;
	char beside[PATH_MAX];
	unsigned char *buf;
	size_t len;
	char *path = copy_lib(lib, &buf, &len);
	Elf64_Shdr *sh;
	void *m;

	if (!path)
		skip();
	sh = section(buf, ".gnu_debuglink");
	assert_true(strlen(link) + 5 < sh->sh_size);
	memcpy(buf + sh->sh_offset, link, strlen(link) + 1);
	write_file(path, buf, len);
	snprintf(beside, sizeof(beside), "%s/%s", dir, link);
	if (fifo)
		assert_int_equal(mkfifo(beside, 0600), 0);
	m = map_exec(path, len);
	assert_int_equal(check_mapped(m, 1, &f), BCCGUARD_NO_DEBUG);
	assert_false(bccguard_file(NULL, path, NULL));
	if (fifo)
		assert_non_null(strstr(f.why, "not a regular file"));
	else
		assert_non_null(strstr(f.why, "no plain file name"));
	munmap(m, len);
	free(buf);
}

static void a_debuglink_to_a_fifo_names_without_debug_files(void **state)
{
	(void)state;
	debuglink_to("libfifolink.so", "libfifolink.debug", true);
}

static void a_debuglink_to_an_fd_names_without_debug_files(void **state)
{
	(void)state;
	debuglink_to("libfdlink.so", "0", false);
}

/* The mapped file unlinked and a FIFO put where libbcc will look: "PATH (deleted)". */
static void a_fifo_at_a_mapped_path_refuses_the_process(void **state)
{
	struct bccguard_finding f;
	char deleted[PATH_MAX + 16];
	unsigned char *buf;
	size_t len;
	char *path = copy_lib("libgone.so", &buf, &len);
	void *m;

	(void)state;
	if (!path)
		skip();
	write_file(path, buf, len);
	m = map_exec(path, len);
	assert_int_equal(unlink(path), 0);
	snprintf(deleted, sizeof(deleted), "%s (deleted)", path);
	assert_int_equal(mkfifo(deleted, 0600), 0);
	assert_int_equal(check_mapped(m, 0, &f), BCCGUARD_UNSAFE);
	assert_non_null(strstr(f.path, " (deleted)"));
	assert_non_null(strstr(f.why, "not a regular file"));
	munmap(m, len);
	unlink(deleted);
	free(buf);
}

static void a_fifo_as_perf_map_refuses_the_process(void **state)
{
	struct bccguard_finding f;
	char perf[64];
	struct stat st;

	(void)state;
	snprintf(perf, sizeof(perf), "/tmp/perf-%d.map", (int)getpid());
	if (!lstat(perf, &st))
		skip(); /* not ours to replace */
	assert_int_equal(mkfifo(perf, 0600), 0);
	assert_int_equal(check_mapped(NULL, 0, &f), BCCGUARD_UNSAFE);
	assert_non_null(strstr(f.path, perf));
	unlink(perf);
	/* gone again: the process is named again (a fresh symbols: no backoff) */
	assert_int_equal(check_mapped(NULL, 1, &f), BCCGUARD_SAFE);
}

/*
 * A process with a /tmp of its own (a mount namespace, a tmpfs there): the host's
 * /tmp/perf-PID.map is not its file, and libbcc is not given it (bccmodules.h), so a
 * FIFO there does not refuse it; one in its own /tmp does.
 */
static void a_fifo_as_the_hosts_perf_map_of_a_contained_process_is_not_read(void **state)
{
	struct bccguard_finding f;
	int ready[2], go[2];
	char perf[64], c = 0;
	struct stat st;
	pid_t child;

	(void)state;
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	if (!(child = fork())) {
		char own[64];

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* also when an assertion ends the test early */
		c = unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
				    mount("tmpfs", "/tmp", "tmpfs", 0, NULL) == 0
			    ? 'y'
			    : 'n';
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(1);
		snprintf(own, sizeof(own), "/tmp/perf-%d.map", (int)getpid());
		c = mkfifo(own, 0600) == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	assert_int_equal(read(ready[0], &c, 1), 1);
	snprintf(perf, sizeof(perf), "/tmp/perf-%d.map", (int)child);
	if (c != 'y' || !lstat(perf, &st)) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		fprintf(stderr, "skipped: %s\n", c != 'y' ? "no mount namespace and tmpfs (needs CAP_SYS_ADMIN)"
							     : "the host's perf map of the child exists, not ours to replace");
		skip();
	}
	assert_int_equal(mkfifo(perf, 0600), 0);
	assert_int_equal(bccguard_process(NULL, child, &f), BCCGUARD_SAFE);
	unlink(perf);
	assert_int_equal(write(go[1], "x", 1), 1);
	assert_int_equal(read(ready[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	assert_int_equal(bccguard_process(NULL, child, &f), BCCGUARD_UNSAFE);
	assert_non_null(strstr(f.path, "/root/tmp/perf-"));
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
}

/* A mapping whose path is longer than PATH_MAX: libbcc reads its maps line into PATH_MAX + 1. */
static void a_maps_line_longer_than_libbcc_reads_refuses_the_process(void **state)
{
	struct bccguard_finding f;
	char comp[201];
	unsigned char *buf;
	size_t len;
	char *path = copy_lib("liblongpath.so", &buf, &len);
	int dfd, fd;
	void *m;

	(void)state;
	if (!path)
		skip();
	memset(comp, 'd', 200);
	comp[200] = 0;
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < 60; i++) { /* 12000 characters: libbcc smashes its stack */
		int next;
		assert_int_equal(mkdirat(dfd, comp, 0700), 0);
		next = openat(dfd, comp, O_RDONLY | O_DIRECTORY);
		close(dfd);
		dfd = next;
		assert_true(dfd >= 0);
	}
	fd = openat(dfd, "lib.so", O_RDWR | O_CREAT, 0644);
	close(dfd);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	m = mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	close(fd);
	assert_true(m != MAP_FAILED);
	assert_int_equal(check_mapped(m, 0, &f), BCCGUARD_UNSAFE);
	assert_non_null(strstr(f.why, "characters long"));
	munmap(m, len);
	free(buf);
}

/* A file changed in place is looked at again (its facts are kept per identity). */
static void a_file_changed_in_place_is_read_again(void **state)
{
	struct bccguard *g = bccguard_new();
	unsigned char *buf;
	size_t len;
	char *path = copy_lib("libchanged.so", &buf, &len);

	(void)state;
	if (!path)
		skip();
	write_file(path, buf, len);
	assert_true(bccguard_file(g, path, NULL));
	assert_true(bccguard_file(g, path, NULL)); /* from the cache */
	section(buf, ".dynsym")->sh_entsize = 0;
	write_file(path, buf, len);
	assert_false(bccguard_file(g, path, NULL));
	bccguard_free(g);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_clean_process_is_safe),
		cmocka_unit_test(symtab_of_entry_size_0_refuses_the_process),
		cmocka_unit_test(a_long_build_id_names_without_debug_files),
		cmocka_unit_test(a_debuglink_to_a_fifo_names_without_debug_files),
		cmocka_unit_test(a_debuglink_to_an_fd_names_without_debug_files),
		cmocka_unit_test(a_fifo_at_a_mapped_path_refuses_the_process),
		cmocka_unit_test(a_fifo_as_perf_map_refuses_the_process),
		cmocka_unit_test(a_fifo_as_the_hosts_perf_map_of_a_contained_process_is_not_read),
		cmocka_unit_test(a_maps_line_longer_than_libbcc_reads_refuses_the_process),
		cmocka_unit_test(a_file_changed_in_place_is_read_again),
	};

	if (access(BASE_LIB, R_OK)) {
		printf("skipped: %s is not installed (libbz2-1.0)\n", BASE_LIB);
		return 0;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
