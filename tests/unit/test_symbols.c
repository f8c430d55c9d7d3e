/*
 * symbols: this process's own addresses (a function of the test, one of libc, the
 * end of the text mapping, nothing), kernel addresses from /proc/kallsyms, a dlopen
 * and an exec seen after a second, the bound on processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jsonfmt.h"
#include "symbols.h"

#define ADDR(f) ((uint64_t)(uintptr_t)(f))

/* A function of the test binary itself, with a symbol of its own. */
__attribute__((noinline)) int symbols_test_marker(int x);
__attribute__((noinline)) int symbols_test_marker(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void own_function_is_named_with_module(void **state)
{
	struct symbols *s = symbols_open(0);
	char buf[256];

	(void)state;
	assert_non_null(s);
	assert_int_equal(symbols_resolve(s, getpid(), ADDR(symbols_test_marker), buf, sizeof(buf)), 1);
	assert_string_equal(buf, "symbols_test_marker+0x0 (test_symbols)");
	/* a return address points into the function */
	assert_int_equal(symbols_resolve(s, getpid(), ADDR(symbols_test_marker) + 1, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "symbols_test_marker+0x1 (test_symbols)");
	/* truncated, still terminated */
	assert_int_equal(symbols_resolve(s, getpid(), ADDR(symbols_test_marker), buf, 8), 1);
	assert_string_equal(buf, "symbols");
	assert_int_equal(symbols_resolve(s, getpid(), ADDR(symbols_test_marker), buf, 0), -1);
	assert_int_equal(symbols_nprocs(s), 1);
	symbols_close(s);
}

/* As a frame of a folded stack: no offset (it would split a flame graph), the module in []. */
static void frame_names_drop_the_offset(void **state)
{
	struct symbols *s = symbols_open(0);
	char buf[256];

	(void)state;
	symbols_frame_name(s, getpid(), ADDR(symbols_test_marker) + 1, buf, sizeof(buf));
	assert_string_equal(buf, "symbols_test_marker [test_symbols]");
	symbols_frame_name(s, getpid(), 0x10, buf, sizeof(buf)); /* in no module */
	assert_string_equal(buf, "0x10");
	symbols_close(s);
}

static void libc_function_is_named(void **state)
{
	struct symbols *s = symbols_open(0);
	char buf[256];

	(void)state;
	assert_int_equal(symbols_resolve(s, getpid(), ADDR(getpid), buf, sizeof(buf)), 1);
	if (!strstr(buf, "getpid") || !strstr(buf, " (libc.so.6)"))
		fail_msg("getpid resolved as \"%s\"", buf);
	symbols_close(s);
}

/* The last byte of this binary's executable mapping: page padding after the code. */
static uint64_t own_text_end(void)
{
	char line[512], self[256];
	uint64_t start, end, found = 0;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	FILE *f = fopen("/proc/self/maps", "r");

	assert_true(n > 0);
	self[n] = 0;
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char perm[8], path[256] = "";

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %*s %*s %*s %255s", &start, &end, perm,
			   path) >= 3 &&
		    perm[2] == 'x' && !strcmp(path, self))
			found = end - 1;
	}
	fclose(f);
	assert_true(found != 0);
	return found;
}

static void unknown_addresses_say_what_they_know(void **state)
{
	struct symbols *s = symbols_open(0);
	char buf[256];

	(void)state;
	/* below mmap_min_addr: never mapped */
	assert_int_equal(symbols_resolve(s, getpid(), 0x1000, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0x1000");
	/* in the module, in no function */
	assert_int_equal(symbols_resolve(s, getpid(), own_text_end(), buf, sizeof(buf)), 0);
	assert_string_equal(buf, "[unknown] (test_symbols)");
	/* a process that does not exist (above any pid_max) */
	assert_int_equal(symbols_resolve(s, 5000000, ADDR(getpid), buf, sizeof(buf)), 0);
	assert_true(!strncmp(buf, "0x", 2));
	symbols_close(s);
}

/* A function symbol of kallsyms whose address no other kept symbol shares. */
static int kallsyms_pick(char *name, size_t len, uint64_t *addr)
{
	static const char *const wanted[] = { "vfs_read", "do_nanosleep", "schedule", "ksys_write" };
	uint64_t cand[4] = { 0 };
	unsigned count[4] = { 0 };
	char line[512], type, sym[256];
	uint64_t a;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return -1;
	for (int pass = 0; pass < 2; pass++) {
		rewind(f);
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "%" SCNx64 " %c %255s", &a, &type, sym) != 3 || !a)
				continue;
			for (int i = 0; i < 4; i++) {
				if (!pass && (type == 'T' || type == 't') && !strcmp(sym, wanted[i]))
					cand[i] = a;
				/* libbcc leaves out data symbols */
				if (pass && a == cand[i] && !strchr("bBdDrR", type))
					count[i]++;
			}
		}
	}
	fclose(f);
	for (int i = 0; i < 4; i++)
		if (cand[i] && count[i] == 1) {
			snprintf(name, len, "%s", wanted[i]);
			*addr = cand[i];
			return 0;
		}
	return cand[0] || cand[1] || cand[2] || cand[3] ? -2 : -1;
}

static void kernel_addresses_are_named_from_kallsyms(void **state)
{
	struct symbols *s;
	char name[64], buf[256];
	uint64_t addr = 0;
	int r;

	(void)state;
	r = kallsyms_pick(name, sizeof(name), &addr);
	if (r == -1) {
		print_message("skipped: /proc/kallsyms addresses read as 0 (not root, or kptr_restrict)\n");
		skip();
		return;
	}
	if (r == -2)
		fail_msg("every candidate symbol shares its address with another");
	s = symbols_open(0);
	assert_int_equal(symbols_resolve(s, SYMBOLS_KERNEL_PID, addr, buf, sizeof(buf)), 1);
	assert_string_equal(buf, name);
	assert_int_equal(symbols_resolve(s, SYMBOLS_KERNEL_PID, addr + 1, buf, sizeof(buf)), 1);
	assert_string_equal(buf, name);
	/* a kernel address in a user stack's place: the kernel's anyway */
	assert_int_equal(symbols_resolve(s, getpid(), addr, buf, sizeof(buf)), 1);
	assert_string_equal(buf, name);
	assert_int_equal(symbols_nprocs(s), 0);
	/* below every kernel symbol */
	assert_int_equal(symbols_resolve(s, SYMBOLS_KERNEL_PID, SYMBOLS_KERNEL_START, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0x8000000000000000");
	symbols_close(s);
}

/* A library this process has not mapped yet, and a function of it. */
static void *dlopen_new(const char **fn)
{
	static const char *const libs[][2] = {
		{ "libcrypt.so.1", "crypt" },
		{ "libbz2.so.1.0", "BZ2_bzCompress" },
		{ "libgdbm.so.6", "gdbm_open" },
	};

	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		void *h = dlopen(libs[i][0], RTLD_NOW | RTLD_NOLOAD);

		if (h) {
			dlclose(h);
			continue;
		}
		h = dlopen(libs[i][0], RTLD_NOW | RTLD_LOCAL);
		if (h) {
			*fn = libs[i][1];
			return h;
		}
	}
	return NULL;
}

static void a_dlopen_is_seen_after_a_second(void **state)
{
	struct symbols *s = symbols_open(0);
	const char *fn;
	char buf[256], raw[32];
	uint64_t t0, addr;
	void *h;

	(void)state;
	t0 = time_mono_ns();
	assert_int_equal(symbols_resolve(s, getpid(), ADDR(getpid), buf, sizeof(buf)), 1);
	h = dlopen_new(&fn);
	if (!h) {
		print_message("skipped: no library left to dlopen\n");
		symbols_close(s);
		skip();
		return;
	}
	addr = ADDR(dlsym(h, fn));
	assert_true(addr != 0);
	/* within a second of reading the maps: no second read */
	assert_int_equal(symbols_resolve(s, getpid(), addr, buf, sizeof(buf)), 0);
	snprintf(raw, sizeof(raw), "0x%" PRIx64, addr);
	if (time_mono_ns() - t0 < 900000000ULL)
		assert_string_equal(buf, raw);
	sleep_ms(1100);
	assert_int_equal(symbols_resolve(s, getpid(), addr, buf, sizeof(buf)), 1);
	if (!strstr(buf, fn) || !strstr(buf, " (lib"))
		fail_msg("%s resolved as \"%s\"", fn, buf);
	symbols_close(s);
	dlclose(h);
}

/* Refreshes that name nothing (a heap address) come less often: 1 s, then 2 s. */
static void misses_in_no_module_back_off(void **state)
{
	struct symbols *s = symbols_open(0);
	char *heap = malloc(64);
	const char *fn;
	char buf[256];
	uint64_t addr;
	void *h;

	(void)state;
	assert_int_equal(symbols_resolve(s, getpid(), ADDR(heap), buf, sizeof(buf)), 0);
	sleep_ms(1100);
	/* refreshed, and still no module there */
	assert_int_equal(symbols_resolve(s, getpid(), ADDR(heap), buf, sizeof(buf)), 0);
	h = dlopen_new(&fn);
	if (!h) {
		print_message("skipped: no library left to dlopen\n");
		symbols_close(s);
		free(heap);
		skip();
		return;
	}
	addr = ADDR(dlsym(h, fn));
	sleep_ms(1100);
	assert_int_equal(symbols_resolve(s, getpid(), addr, buf, sizeof(buf)), 0);
	sleep_ms(1100);
	assert_int_equal(symbols_resolve(s, getpid(), addr, buf, sizeof(buf)), 1);
	if (!strstr(buf, fn))
		fail_msg("%s resolved as \"%s\"", fn, buf);
	symbols_close(s);
	dlclose(h);
	free(heap);
}

static void an_exec_is_seen_after_a_second(void **state)
{
	struct symbols *s = symbols_open(0);
	char buf[256], exe[256];
	int go[2];
	pid_t child;
	ssize_t n = 0;

	(void)state;
	if (access("/bin/sleep", X_OK)) {
		symbols_close(s);
		skip();
		return;
	}
	assert_int_equal(pipe(go), 0);
	child = fork();
	if (!child) {
		char c;

		close(go[1]);
		if (read(go[0], &c, 1) == 1)
			execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	close(go[0]);
	/* the forked child has this binary's maps */
	assert_int_equal(symbols_resolve(s, child, ADDR(symbols_test_marker), buf, sizeof(buf)), 1);
	assert_string_equal(buf, "symbols_test_marker+0x0 (test_symbols)");
	assert_int_equal(write(go[1], "x", 1), 1);
	for (int i = 0; i < 500; i++) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/exe", (int)child);
		n = readlink(path, exe, sizeof(exe) - 1);
		if (n > 6 && !memcmp(exe + n - 6, "/sleep", 6))
			break;
		sleep_ms(10);
	}
	assert_true(n > 6 && !memcmp(exe + n - 6, "/sleep", 6));
	sleep_ms(1100);
	/* the old address now belongs to sleep's maps, not to this binary */
	symbols_resolve(s, child, ADDR(symbols_test_marker), buf, sizeof(buf));
	if (strstr(buf, "symbols_test_marker"))
		fail_msg("after the exec still \"%s\"", buf);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	close(go[1]);
	symbols_close(s);
}

static void processes_are_bounded_and_forgotten(void **state)
{
	struct symbols *s = symbols_open(0);
	char buf[256];

	(void)state;
	assert_int_equal(symbols_resolve(s, getpid(), ADDR(getpid), buf, sizeof(buf)), 1);
	/* pids above any pid_max: empty symcaches, but symcaches */
	for (int i = 0; i < 100; i++)
		symbols_resolve(s, 5000000 + i, 0x1000, buf, sizeof(buf));
	assert_int_equal(symbols_nprocs(s), SYMBOLS_MAX_PROCS);
	symbols_forget(s, 5000000 + 99);
	assert_int_equal(symbols_nprocs(s), SYMBOLS_MAX_PROCS - 1);
	symbols_forget(s, 5000000 + 99);
	symbols_forget(s, 5000000); /* evicted long ago */
	assert_int_equal(symbols_nprocs(s), SYMBOLS_MAX_PROCS - 1);
	/* this process was evicted: made again */
	assert_int_equal(symbols_resolve(s, getpid(), ADDR(symbols_test_marker), buf, sizeof(buf)), 1);
	assert_string_equal(buf, "symbols_test_marker+0x0 (test_symbols)");
	assert_int_equal(symbols_nprocs(s), SYMBOLS_MAX_PROCS);
	symbols_forget(s, getpid());
	assert_int_equal(symbols_nprocs(s), SYMBOLS_MAX_PROCS - 1);
	symbols_close(s);
	symbols_close(NULL);
	/* a bound of the caller's */
	s = symbols_open(3);
	for (int i = 0; i < 5; i++)
		symbols_resolve(s, 5000000 + i, 0x1000, buf, sizeof(buf));
	assert_int_equal(symbols_nprocs(s), 3);
	symbols_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(own_function_is_named_with_module),
		cmocka_unit_test(frame_names_drop_the_offset),
		cmocka_unit_test(libc_function_is_named),
		cmocka_unit_test(unknown_addresses_say_what_they_know),
		cmocka_unit_test(kernel_addresses_are_named_from_kallsyms),
		cmocka_unit_test(a_dlopen_is_seen_after_a_second),
		cmocka_unit_test(misses_in_no_module_back_off),
		cmocka_unit_test(an_exec_is_seen_after_a_second),
		cmocka_unit_test(processes_are_bounded_and_forgotten),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
