/*
 * Unit tests for the CPython introspection modules: line tables (pylines), offset
 * tables and _Py_DebugOffsets parsing (pyoffsets), ELF symbols and load bias
 * (elfsyms), and pyproc on real processes (this test itself, and a Python child when
 * /usr/bin/python3 exists).
 *
 * pyproc_vectors.h holds ground truth taken from real interpreters: for one function,
 * its line table bytes and, for every instruction, the line CPython itself reports
 * (dis.findlinestarts for 3.8/3.9, code.co_lines() for 3.10+), from pyenv 3.8.18 ...
 * 3.13.0 and Debian sid 3.14.10/3.15.2; and the _Py_DebugOffsets bytes built into
 * Debian sid's python3.13/3.14/3.15. The expected offsets below were read from the
 * DWARF of the release builds and from the release headers, not from the code under
 * test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <linux/types.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elfsyms.h"
#include "pyframes.h"
#include "pylines.h"
#include "pyoffsets.h"
#include "pyproc.h"
#include "pyproc_impl.h"
#include "pywalk.h"
#include "pyproc_vectors.h"

#define N_PAIRS(a) (sizeof(a) / sizeof(a[0]))

static void check_lines(int minor, const uint8_t *tab, size_t len, int first, const int (*pairs)[2],
			size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int got = pylines_line(minor, tab, len, first, (uint32_t)pairs[i][0]);
		if (got != pairs[i][1])
			fail_msg("3.%d: instr %d: line %d, CPython says %d", minor, pairs[i][0], got,
				 pairs[i][1]);
	}
}

#define CHECK(minor, v) check_lines(minor, v##_tab, sizeof(v##_tab), v##_first, v##_pairs, N_PAIRS(v##_pairs))

static void test_line_tables(void **state)
{
	(void)state;
	CHECK(8, v38);
	CHECK(9, v39);
	CHECK(10, v310);
	CHECK(11, v311);
	CHECK(12, v312);
	CHECK(13, v313);
	CHECK(14, v314);
	CHECK(15, v315);
	/* a frame before its first instruction: index -1, CPython says co_firstlineno */
	assert_int_equal(pylines_line(8, v38_tab, sizeof(v38_tab), v38_first, (uint32_t)-1), v38_first);
	assert_int_equal(pylines_line(10, v310_tab, sizeof(v310_tab), v310_first, (uint32_t)-1), v310_first);
	assert_int_equal(pylines_line(11, v311_tab, sizeof(v311_tab), v311_first, (uint32_t)-1), v311_first);
	assert_int_equal(pylines_line(12, v312_tab, sizeof(v312_tab), v312_first, (uint32_t)-1), v312_first);
}

static void test_line_tables_survive_garbage(void **state)
{
	uint8_t junk[64];

	(void)state;
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 11);
	/* no crash, no read past the end; any answer is acceptable */
	for (int minor = 8; minor <= 15; minor++)
		for (uint32_t instr = 0; instr < 200; instr += 7)
			(void)pylines_line(minor, junk, sizeof(junk), 1, instr);
	assert_int_equal(pylines_locations(junk, 0, 5, 0), 0);
}

static void test_offset_tables(void **state)
{
	(void)state;
	assert_null(pyoffsets_table(7));
	assert_null(pyoffsets_table(13));
	for (int minor = 8; minor <= 12; minor++) {
		const struct pyoffsets *o = pyoffsets_table(minor);
		assert_non_null(o);
		assert_int_equal(o->minor, minor);
		assert_int_equal(o->ts_next, 8);
	}
	/* spot checks against offsets read from the releases' DWARF */
	assert_int_equal(pyoffsets_table(8)->rt_tstate_current, 1368);
	assert_int_equal(pyoffsets_table(10)->frame_instr, 96);
	assert_int_equal(pyoffsets_table(11)->interp_threads_head, 16);
	assert_int_equal(pyoffsets_table(12)->interp_threads_head, 72);
	assert_int_equal(pyoffsets_table(12)->co_code_adaptive, 192);
	assert_int_equal(pyoffsets_table(12)->unicode_ascii_data, 40);
}

static void test_debug_offsets(void **state)
{
	struct pyoffsets o;
	unsigned char bad[sizeof(dbg314)];

	(void)state;
	assert_int_equal(pyoffsets_debug_size(12), 0);
	assert_int_equal(pyoffsets_debug_version(dbg313, sizeof(dbg313)), 0x030d12f0);

	assert_int_equal(pyoffsets_from_debug(13, dbg313, sizeof(dbg313), &o), 0);
	assert_int_equal(o.rt_interp_head, 632);
	assert_int_equal(o.interp_threads_head, 7344);
	assert_int_equal(o.interp_modules, 7656);
	assert_int_equal(o.interp_gc_collecting, 7600);
	assert_int_equal(o.ts_current_frame, 72);
	assert_int_equal(o.ts_thread_id, 152);
	assert_int_equal(o.ts_native_thread_id, 160);
	assert_int_equal(o.frame_owner, 70);
	assert_int_equal(o.co_code_adaptive, 200);
	assert_int_equal(o.code_tag_mask, 0);

	assert_int_equal(pyoffsets_from_debug(14, dbg314, sizeof(dbg314), &o), 0);
	assert_int_equal(o.rt_interp_head, 808);
	assert_int_equal(o.interp_modules, 7688);
	assert_int_equal(o.frame_owner, 74);
	assert_int_equal(o.co_code_adaptive, 208);
	assert_int_equal(o.code_tag_mask, 3);
	assert_int_equal(o.rt_autotss_key, 2336);

	assert_int_equal(pyoffsets_from_debug(15, dbg315, sizeof(dbg315), &o), 0);
	assert_int_equal(o.rt_interp_head, 936);
	assert_int_equal(o.interp_threads_head, 7336);
	assert_int_equal(o.ts_thread_id, 176);
	assert_int_equal(o.ts_native_thread_id, 184);
	assert_int_equal(o.ht_cached_keys, 888);
	assert_int_equal(o.unicode_compact_data, 56);
	assert_int_equal(o.rt_autotss_key, PYOFF_NONE);

	/* the wrong minor, a short buffer, a bad cookie */
	assert_int_equal(pyoffsets_from_debug(14, dbg313, sizeof(dbg313), &o), -1);
	assert_int_equal(pyoffsets_from_debug(15, dbg315, 100, &o), -1);
	memcpy(bad, dbg314, sizeof(bad));
	bad[0] = 'y';
	assert_int_equal(pyoffsets_from_debug(14, bad, sizeof(bad), &o), -1);
}

/* Our own main: its ELF address plus the bias computed from /proc/self/maps. */
static void test_elf_bias_of_self(void **state)
{
	char line[4096], exe[4096];
	struct elfsyms *e;
	const struct elf_symbol *s;
	uint64_t bias = 0;
	ssize_t n;
	FILE *f;
	int found = 0;

	(void)state;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = 0;
	e = elfsyms_open("/proc/self/exe");
	assert_non_null(e);
	s = elfsyms_find(e, "test_elf_bias_of_self");
	assert_non_null(s);
	assert_true(s->func);
	f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char path[4096] = "";
		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %4095s", &start, &end, &off, path) == 4 &&
		    !strcmp(path, exe) && !elfsyms_bias(e, start, off, &bias))
			found = 1;
	}
	fclose(f);
	assert_true(found);
	assert_int_equal(s->value + bias, (uint64_t)(uintptr_t)&test_elf_bias_of_self);
	assert_null(elfsyms_find(e, "no_such_symbol_here"));
	elfsyms_close(e);
	assert_null(elfsyms_open("/proc/self/status"));
}

static void test_not_python(void **state)
{
	struct pyproc_error err;
	char want[64];

	(void)state;
	assert_null(pyproc_open(getpid(), &err));
	assert_int_equal(err.code, PYPROC_ENOTPYTHON);
	snprintf(want, sizeof(want), "no CPython found in pid %d", getpid());
	assert_non_null(strstr(err.msg, want));
	assert_null(pyproc_open(0x3fffffff, &err));
	assert_int_equal(err.code, PYPROC_ENOPROC);
}

/* A real interpreter: version, threads with their threading names, a code location. */
static void test_live_python(void **state)
{
	const char *py = "/usr/bin/python3";
	int fds[2];
	char ready[16] = "", name[PYTHREAD_NAME_MAX];
	struct pyproc_error err;
	struct pythread threads[16];
	struct pyproc *p, *again;
	pid_t child;
	int n, named = 0, by_tid = 0;

	(void)state;
	if (access(py, X_OK)) {
		skip();
		return;
	}
	assert_int_equal(pipe(fds), 0);
	child = fork();
	if (!child) {
		dup2(fds[1], 1);
		execl(py, py, "-c",
		      "import threading, time\n"
		      "ev = threading.Event()\n"
		      "t = threading.Thread(target=ev.wait, name='wörker-ünit'); t.start()\n"
		      "print('ready', flush=True)\n"
		      "time.sleep(60)\n",
		      (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	assert_true(read(fds[0], ready, sizeof(ready) - 1) > 0);
	p = pyproc_open(child, &err);
	if (!p)
		fail_msg("pyproc_open: %s", err.msg);
	assert_int_equal(pyproc_version(p)->major, 3);
	assert_in_range(pyproc_version(p)->minor, PYPROC_MIN_MINOR, PYPROC_MAX_MINOR);
	assert_true(pyproc_runtime(p) != 0);
	assert_true(pyproc_symbol(p, "_PyRuntime") == pyproc_runtime(p));
	n = pyproc_threads(p, threads, 16);
	assert_int_equal(n, 2);
	for (int i = 0; i < n; i++) {
		if (!strcmp(threads[i].name, "wörker-ünit") && threads[i].python_name)
			named++;
		if (threads[i].tid == child && !strcmp(threads[i].name, "MainThread"))
			named++;
		if (threads[i].tid > 0) {
			pyproc_thread_name(p, threads[i].tid, "comm", 4, name, sizeof(name));
			by_tid += !strcmp(name, threads[i].name);
		}
	}
	assert_int_equal(named, 2);
	assert_int_equal(by_tid, 2);
	/* a second open shares the handle; it stays usable until the last close */
	again = pyproc_open(child, &err);
	assert_ptr_equal(again, p);
	pyproc_close(again);
	assert_int_equal(pyproc_threads(p, threads, 16), 2);
	pyproc_close(p);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	close(fds[0]);
}

/*
 * pyproc_read through the page cache (pytasks_read's reads), on this process: the
 * bytes of reads across page boundaries, a snapshot until turned on again (while
 * pyproc_read_fresh sees the change), and a page that is not mapped still an error.
 */
static void test_page_cache(void **state)
{
	struct pyproc p = { .pid = getpid(), .mem_fd = -1 };
	size_t page = PAGE_CACHE_SIZE;
	uint8_t *m = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t got[3 * PAGE_CACHE_SIZE];
	uint64_t base = (uint64_t)(uintptr_t)m, v = 0;

	(void)state;
	assert_ptr_not_equal(m, MAP_FAILED);
	for (size_t i = 0; i < 4 * page; i++)
		m[i] = (uint8_t)(i * 7 + i / 251);
	assert_int_equal(munmap(m + 3 * page, page), 0);
	assert_int_equal(pyproc_cache_on(&p, true), 0);
	for (size_t off = 0; off + 600 <= 3 * page; off += 397) {
		assert_int_equal(pyproc_read(&p, base + off, got, 600), 0);
		assert_memory_equal(got, m + off, 600);
	}
	assert_int_equal(pyproc_read(&p, base + page - 3, got, page), 0); /* two pages */
	assert_memory_equal(got, m + page - 3, page);
	m[page + 5] ^= 0xff;
	assert_int_equal(pyproc_read(&p, base + page, got, 8), 0);
	assert_int_not_equal(got[5], m[page + 5]); /* the page as it was read */
	assert_int_equal(pyproc_read_fresh(&p, base + page, got, 8), 0);
	assert_int_equal(got[5], m[page + 5]);
	assert_int_equal(pyproc_cache_on(&p, true), 0); /* emptied */
	assert_int_equal(pyproc_read(&p, base + page, got, 8), 0);
	assert_int_equal(got[5], m[page + 5]);
	/* into the unmapped page, and in it: errors, as without the cache */
	assert_int_equal(pyproc_read(&p, base + 3 * page - 4, &v, 8), -1);
	assert_int_equal(pyproc_read(&p, base + 3 * page + 8, &v, 8), -1);
	assert_int_equal(pyproc_read(&p, 0, &v, 8), -1);
	pyproc_cache_on(&p, false);
	m[page + 5] ^= 0xff;
	assert_int_equal(pyproc_read(&p, base + page, got, 8), 0);
	assert_int_equal(got[5], m[page + 5]);
	pyproc_cache_free(&p);
	munmap(m, 3 * page);
}

/*
 * pyproc_read_pieces on this process: 600 pieces (more than one system call takes),
 * among them one in an unmapped page, one across into it, and two fields of a NULL
 * pointer: each of those an error, every other piece its bytes. Then through a memory
 * image (the fuzzer's read_mem), one by one, with that page mapped: only the NULL
 * fields fail.
 */
static int image_read(const struct pyproc *p, uint64_t addr, void *buf, size_t len)
{
	(void)p;
	if (addr < 4096)
		return errno = EFAULT, -1;
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

static void read_pieces_of(struct pyproc *p, const uint8_t *m, size_t page, int want_bad)
{
	uint64_t base = (uint64_t)(uintptr_t)m, got[600];
	struct pyproc_piece v[600];
	int bad = 0;

	for (int i = 0; i < 600; i++) {
		uint64_t at = base + (uint64_t)i * 3;
		if (i == 17)
			at = base + 2 * page + 64; /* unmapped (the first time) */
		else if (i == 300)
			at = base + 2 * page - 4; /* half in it */
		else if (i == 301 || i == 599)
			at = 0x28; /* a field of NULL */
		v[i] = (struct pyproc_piece){ at, &got[i], 8, -1 };
	}
	assert_int_equal(pyproc_read_pieces(p, v, 600), 600 - want_bad);
	for (int i = 0; i < 600; i++) {
		if (v[i].err) {
			assert_true(i == 17 || i == 300 || i == 301 || i == 599);
			assert_int_equal(v[i].err, EFAULT);
			bad++;
		} else if (i != 17 && i != 300) {
			assert_memory_equal(&got[i], m + (size_t)i * 3, 8);
		}
	}
	assert_int_equal(bad, want_bad);
}

static void test_read_pieces(void **state)
{
	struct pyproc p = { .pid = getpid(), .mem_fd = -1 };
	size_t page = 4096;
	uint8_t *m = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)state;
	assert_ptr_not_equal(m, MAP_FAILED);
	for (size_t i = 0; i < 3 * page; i++)
		m[i] = (uint8_t)(i * 13 + i / 253);
	assert_int_equal(munmap(m + 2 * page, page), 0);
	read_pieces_of(&p, m, page, 4);
	assert_ptr_equal(mmap(m + 2 * page, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
			 m + 2 * page);
	p.read_mem = image_read;
	read_pieces_of(&p, m, page, 2);
	munmap(m, 3 * page);
}

/*
 * pyproc_overlay: reads inside the bytes come from them (the process's memory there
 * differs), reads crossing an end of them fail, reads elsewhere see the process, and
 * clearing it brings the process's memory back; through the page cache too.
 */
static void test_overlay(void **state)
{
	struct pyproc p = { .pid = getpid(), .mem_fd = -1 };
	static char live[64] = "live memory, as the process has it now..........................";
	const char then[16] = "bytes of before";
	uint64_t at = (uint64_t)(uintptr_t)live + 8;
	char buf[16];

	(void)state;
	for (int cached = 0; cached < 2; cached++) {
		if (cached)
			assert_int_equal(pyproc_cache_on(&p, true), 0);
		pyproc_overlay(&p, at, then, sizeof(then));
		assert_int_equal(pyproc_read(&p, at + 2, buf, 8), 0);
		assert_memory_equal(buf, then + 2, 8);
		assert_int_equal(pyproc_read(&p, at + 8, buf, 9), -1);  /* past its end */
		assert_int_equal(pyproc_read(&p, at - 1, buf, 4), -1);  /* before its start */
		assert_int_equal(pyproc_read(&p, at + 16, buf, 8), 0);  /* after it: the process */
		assert_memory_equal(buf, live + 24, 8);
		pyproc_overlay(&p, 0, NULL, 0);
		assert_int_equal(pyproc_read(&p, at + 2, buf, 8), 0);
		assert_memory_equal(buf, live + 10, 8);
	}
	pyproc_cache_on(&p, false);
	pyproc_cache_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_tables),
		cmocka_unit_test(test_line_tables_survive_garbage),
		cmocka_unit_test(test_offset_tables),
		cmocka_unit_test(test_debug_offsets),
		cmocka_unit_test(test_elf_bias_of_self),
		cmocka_unit_test(test_not_python),
		cmocka_unit_test(test_live_python),
		cmocka_unit_test(test_read_pieces),
		cmocka_unit_test(test_page_cache),
		cmocka_unit_test(test_overlay),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
