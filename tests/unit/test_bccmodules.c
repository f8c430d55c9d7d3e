/*
 * bccmodules: libbcc's own module walk against the tool's, for this process (with an
 * executable memfd mapping) and for a child in a mount namespace of its own; and a
 * symcache made through it still names a function of libc and a perf map's entry.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <bcc/bcc_proc.h>
#include <bcc/bcc_syms.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bccmodules.h"

#define MAX_MODULES 512

struct walk {
	int n;
	char name[MAX_MODULES][128];
	int enter_ns[MAX_MODULES];
};

static int record(mod_info *mod, int enter_ns, void *payload)
{
	struct walk *w = payload;

	assert_true(w->n < MAX_MODULES);
	snprintf(w->name[w->n], sizeof(w->name[0]), "%s", mod->name);
	w->enter_ns[w->n++] = enter_ns;
	return 0;
}

/* pid's modules as libbcc's own walk gives them, and as the tool's does. */
static void walk_both(pid_t pid, struct walk *libbccs, struct walk *ours)
{
	int (*own)(int, bcc_procutils_modulecb, void *) =
		(int (*)(int, bcc_procutils_modulecb, void *))dlsym(RTLD_NEXT, "bcc_procutils_each_module");

	assert_non_null(own);
	assert_ptr_not_equal(own, bcc_procutils_each_module); /* the tool's is the one called */
	libbccs->n = ours->n = 0;
	assert_int_equal(own(pid, record, libbccs), 0);
	assert_int_equal(bcc_procutils_each_module(pid, record, ours), 0);
}

static int without_enter_ns(const struct walk *w)
{
	int n = 0;

	for (int i = 0; i < w->n; i++)
		n += !w->enter_ns[i];
	return n;
}

/* An executable memfd mapping, which libbcc names by /proc/PID/fd/N, without enter_ns. */
static void *map_memfd(void)
{
	int fd = memfd_create("pyebpf-test", MFD_CLOEXEC);
	void *p;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	assert_true(p != MAP_FAILED);
	return p;
}

static void in_our_root_every_module_comes_with_enter_ns(void **state)
{
	static struct walk libbccs, ours;
	void *code = map_memfd();

	(void)state;
	walk_both(getpid(), &libbccs, &ours);
	/* the memfd and the host's perf map: the ModulePaths whose fd libbcc leaves unset */
	assert_int_equal(without_enter_ns(&libbccs), 2);
	assert_int_equal(ours.n, libbccs.n);
	for (int i = 0; i < ours.n; i++) {
		assert_string_equal(ours.name[i], libbccs.name[i]);
		assert_int_equal(ours.enter_ns[i], 1);
	}
	munmap(code, 4096);
}

/* A child in a mount namespace of its own: its modules without enter_ns are left out. */
static void in_another_mount_namespace_they_are_left_out(void **state)
{
	static struct walk libbccs, ours;
	int ready[2];
	char c;
	pid_t child;

	(void)state;
	assert_int_equal(pipe(ready), 0);
	if (!(child = fork())) {
		void *code = map_memfd();

		(void)code;
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* also when an assertion ends the test early */
		c = unshare(CLONE_NEWNS) == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	assert_int_equal(read(ready[0], &c, 1), 1);
	if (c != 'y') {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		fprintf(stderr, "skipped: no mount namespace of its own (unshare needs CAP_SYS_ADMIN)\n");
		skip();
	}
	walk_both(child, &libbccs, &ours);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	assert_int_equal(without_enter_ns(&libbccs), 2);
	assert_int_equal(ours.n, libbccs.n - 2);
	for (int i = 0, j = 0; i < libbccs.n; i++) {
		if (!libbccs.enter_ns[i])
			continue;
		assert_string_equal(ours.name[j], libbccs.name[i]);
		assert_int_equal(ours.enter_ns[j++], 1);
	}
	close(ready[0]);
	close(ready[1]);
}

static void libc_and_a_perf_map_are_named(void **state)
{
	char path[64], mapped[64];
	struct bcc_symbol sym;
	uint64_t fake = 0x7e57000000ULL; /* an address nothing maps */
	void *cache;
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "%llx 100 py::pyebpf_test_function:test.py\n", (unsigned long long)fake);
	fclose(f);
	cache = bccmodules_symcache_new(getpid(), NULL);
	unlink(path);
	assert_non_null(cache);

	assert_int_equal(bcc_symcache_resolve(cache, (uint64_t)(uintptr_t)&fcntl, &sym), 0);
	assert_non_null(strstr(sym.name, "fcntl"));
	snprintf(mapped, sizeof(mapped), "%s", sym.module);
	assert_non_null(strstr(mapped, "libc"));

	assert_int_equal(bcc_symcache_resolve(cache, fake + 0x10, &sym), 0);
	assert_string_equal(sym.name, "py::pyebpf_test_function:test.py");
	bcc_free_symcache(cache, getpid());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(in_our_root_every_module_comes_with_enter_ns),
		cmocka_unit_test(in_another_mount_namespace_they_are_left_out),
		cmocka_unit_test(libc_and_a_perf_map_are_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
