/*
 * kallsyms: a written file (out of order, several symbols at one address, hidden
 * addresses, modules, data, a broken line), a missing one, and this kernel's /proc/kallsyms
 * against libbcc's own kernel symcache, address by address.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <bcc/bcc_syms.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kallsyms.h"

static char *write_file(const char *text)
{
	static char path[] = "/tmp/pyebpf-kallsyms-XXXXXX";
	int fd;

	strcpy(path, "/tmp/pyebpf-kallsyms-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void a_written_file_is_sorted_and_named(void **state)
{
	char *path = write_file("ffffffff81002000 T second\n"
				"ffffffff81000000 T _stext\n"
				"ffffffff81000000 T _text\n"
				"ffffffffc0201000 t mod_func\t[some_module]\n"
				"not a line\n"
				"ffffffff81001000 t first\n"
				"ffffffff81003000 W\n"
				"ffffffff81001800 D data_between\n");
	struct kallsyms *k = kallsyms_load(path);
	uint64_t at = 0;

	(void)state;
	unlink(path);
	assert_non_null(k);
	assert_int_equal(kallsyms_count(k), 4); /* _text shares _stext's address */
	assert_null(kallsyms_name(k, 0xffffffff80ffffffull, &at));
	assert_string_equal(kallsyms_name(k, 0xffffffff81000000ull, &at), "_stext");
	assert_true(at == 0xffffffff81000000ull);
	assert_string_equal(kallsyms_name(k, 0xffffffff81000fffull, NULL), "_stext");
	assert_string_equal(kallsyms_name(k, 0xffffffff81001000ull, NULL), "first");
	assert_string_equal(kallsyms_name(k, 0xffffffff81001900ull, NULL), "first"); /* not data */
	assert_string_equal(kallsyms_name(k, 0xffffffff81002abcull, &at), "second");
	assert_true(at == 0xffffffff81002000ull);
	assert_string_equal(kallsyms_name(k, 0xffffffffc0201010ull, NULL), "mod_func");
	assert_string_equal(kallsyms_name(k, UINT64_MAX, NULL), "mod_func");
	kallsyms_free(k);
}

static void hidden_addresses_give_an_empty_table(void **state)
{
	char *path = write_file("0000000000000000 T _stext\n0000000000000000 t first\n");
	struct kallsyms *k = kallsyms_load(path);

	(void)state;
	unlink(path);
	assert_non_null(k);
	assert_int_equal(kallsyms_count(k), 0);
	assert_null(kallsyms_name(k, 0xffffffff81000000ull, NULL));
	kallsyms_free(k);
}

static void a_missing_file_says_why(void **state)
{
	(void)state;
	errno = 0;
	assert_null(kallsyms_load("/nonexistent/kallsyms"));
	assert_int_equal(errno, ENOENT);
}

/*
 * Every 50th symbol of this kernel, and an address inside it, named as libbcc names
 * it: the same symbol address, and the same name unless several symbols share that
 * address (libbcc keeps any of them).
 */
static void this_kernel_is_named_as_libbcc_names_it(void **state)
{
	struct kallsyms *k = kallsyms_load(NULL);
	FILE *f = fopen("/proc/kallsyms", "re");
	unsigned long long addr;
	unsigned compared = 0, ties = 0, lines = 0;
	char line[512];
	void *bcc;

	(void)state;
	assert_non_null(k);
	assert_non_null(f);
	if (!kallsyms_count(k) || geteuid() != 0) {
		print_message("skipped: /proc/kallsyms addresses read as 0, or not root (libbcc reads "
			      "kernel symbols as euid 0 only)\n");
		fclose(f);
		kallsyms_free(k);
		skip();
		return;
	}
	bcc = bcc_symcache_new(-1, NULL);
	assert_non_null(bcc);
	while (fgets(line, sizeof(line), f))
		if (++lines % 50 == 0 && sscanf(line, "%llx", &addr) == 1 && addr)
			for (uint64_t a = addr; a <= addr + 1; a++) {
				struct bcc_symbol sym;
				uint64_t at = 0;
				const char *mine = kallsyms_name(k, a, &at);

				assert_int_equal(bcc_symcache_resolve_no_demangle(bcc, a, &sym), 0);
				assert_non_null(mine);
				if (at != a - sym.offset)
					fail_msg("%llx: %s at %llx, libbcc's %s at %llx", (unsigned long long)a,
						 mine, (unsigned long long)at, sym.name,
						 (unsigned long long)(a - sym.offset));
				if (strcmp(mine, sym.name))
					ties++;
				compared++;
			}
	fclose(f);
	print_message("compared %u addresses, %u at a shared address with another name\n", compared,
		      ties);
	assert_true(compared > 1000);
	assert_true(ties * 20 < compared);
	bcc_free_symcache(bcc, -1);
	kallsyms_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_written_file_is_sorted_and_named),
		cmocka_unit_test(hidden_addresses_give_an_empty_table),
		cmocka_unit_test(a_missing_file_says_why),
		cmocka_unit_test(this_kernel_is_named_as_libbcc_names_it),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
