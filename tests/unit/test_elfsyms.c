/*
 * src/python/elfsyms.c: the default version of a symbol exported twice. glibc has
 * pthread_cond_timedwait@GLIBC_2.2.5 (compatibility) and @@GLIBC_2.3.2 (default); the
 * dynamic linker's own choice (dlvsym) is the independent answer.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "elfsyms.h"
#include "symbols.h"

/* The file offset of libc's version ver of name, from where the loader put it. */
static uint64_t loaded_offset(const char *name, const char *ver, char *path, size_t len)
{
	void *addr = dlvsym(RTLD_DEFAULT, name, ver);
	uint64_t off = 0;
	Dl_info info;

	assert_non_null(addr);
	assert_true(dladdr(addr, &info) != 0);
	snprintf(path, len, "%s", info.dli_fname);
	assert_int_equal(symbols_file_offset(path, NULL, (uint64_t)((uintptr_t)addr - (uintptr_t)info.dli_fbase), &off), 0);
	return off;
}

static void finds_the_default_version(void **state)
{
	char libc[4096], again[4096];
	uint64_t want = loaded_offset("pthread_cond_timedwait", "GLIBC_2.3.2", libc, sizeof(libc));
	uint64_t old = loaded_offset("pthread_cond_timedwait", "GLIBC_2.2.5", again, sizeof(again));
	uint64_t got = 0;

	(void)state;
	assert_true(want != old); /* else this test shows nothing */
	assert_int_equal(elfsyms_default_func_offset(libc, "pthread_cond_timedwait", &got), 0);
	assert_int_equal(got, want);
	/* a symbol with one version only, and one that is not there */
	assert_int_equal(elfsyms_default_func_offset(libc, "pthread_mutex_trylock", &got), 0);
	assert_int_equal(elfsyms_default_func_offset(libc, "pyebpf_no_such_function", &got), -1);
	assert_int_equal(elfsyms_default_func_offset("/nonexistent", "pthread_cond_timedwait", &got), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(finds_the_default_version),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
