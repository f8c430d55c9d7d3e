/*
 * src/bpf/usdt.c: USDT argument specs -> BPF argument readers. The probes are notes in this
 * test binary itself (written with the same assembler directives as <sys/sdt.h>, which
 * is not installed here), read back through libbcc like any target's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stapsdt_probe.h"
#include "usdt.h"

/* semaphores live in .probes, as <sys/sdt.h> puts them */
unsigned short pyebpf_test_gated_semaphore __attribute__((section(".probes"), used));

/* Never called: only its notes matter. */
void usdt_fixture(void);
void usdt_fixture(void)
{
	TEST_PROBE("pyebpf_test", "forms", "-4@%eax 8@16(%rsp) -2@$5 -8@%r12 4@-228(%rbp)", "0");
	TEST_PROBE("pyebpf_test", "indexed", "8@8(%rdi,%rsi,4)", "0");
	TEST_PROBE("pyebpf_test", "gated", "-4@%edi", "pyebpf_test_gated_semaphore");
	TEST_PROBE("pyebpf_test", "gated", "-4@%esi", "pyebpf_test_gated_semaphore");
	TEST_PROBE("pyebpf_test", "symbol", "8@pyebpf_test_gated_semaphore(%rip)", "0");
	TEST_PROBE("pyebpf_test", "many", "-4@%edi -4@%esi -4@%edx -4@%ecx -4@%r8d -4@%r9d -4@%eax", "0");
}

#define SELF "/proc/self/exe"

static char *text_of(struct usdt *u)
{
	char *t = usdt_text(u, "/* tool */");
	assert_non_null(t);
	return t;
}

static void finds_probes(void **state)
{
	(void)state;
	assert_true(usdt_binary_has_probe(SELF, "pyebpf_test", "forms"));
	assert_true(usdt_binary_has_probe(SELF, "pyebpf_test", "gated"));
	assert_false(usdt_binary_has_probe(SELF, "pyebpf_test", "absent"));
	assert_false(usdt_binary_has_probe(SELF, "python", "forms"));
	assert_false(usdt_binary_has_probe("/nonexistent/binary", "pyebpf_test", "forms"));
}

static void reads_each_argument_form(void **state)
{
	struct usdt *u = usdt_new();
	char *t;

	(void)state;
	assert_int_equal(usdt_add(u, SELF, 42, "pyebpf_test", "forms", "handler"), 0);
	assert_int_equal(usdt_locations(u), 1);
	t = text_of(u);
	assert_non_null(strstr(t, "int usdt_handler_0_0(struct pt_regs *ctx)"));
	/* -4@%eax: signed 32 bits of rax (pt_regs word 10) */
	assert_non_null(strstr(t, "args[0] = (s64)(s32)regs[10];"));
	/* 8@16(%rsp): a u64 read from user memory at rsp (word 19) + 16 */
	assert_non_null(strstr(t, "u64 v = 0;\n\t\tu64 a = regs[19] + (s64)16;"));
	assert_non_null(strstr(t, "args[1] = (s64)v;"));
	/* -2@$5: a constant */
	assert_non_null(strstr(t, "args[2] = (s64)(s16)5ll;"));
	/* -8@%r12 (word 3) */
	assert_non_null(strstr(t, "args[3] = (s64)(s64)regs[3];"));
	/* 4@-228(%rbp): CPython 3.14's gc__start form, rbp is word 4 */
	assert_non_null(strstr(t, "u32 v = 0;\n\t\tu64 a = regs[4] + (s64)-228;"));
	assert_non_null(strstr(t, "return handler(ctx, args);"));
	assert_int_equal(strncmp(t, "/* tool */", 10), 0);
	free(t);
	usdt_free(u);
}

static void reads_indexed_memory(void **state)
{
	struct usdt *u = usdt_new();
	char *t;

	(void)state;
	assert_int_equal(usdt_add(u, SELF, -1, "pyebpf_test", "indexed", "h"), 0);
	t = text_of(u);
	/* 8@8(%rdi,%rsi,4): rdi (word 14) + 8 + rsi (word 13) * 4 */
	assert_non_null(strstr(t, "u64 a = regs[14] + (s64)8 + regs[13] * 4;"));
	free(t);
	usdt_free(u);
}

static void one_entry_function_per_location(void **state)
{
	struct usdt *u = usdt_new();
	char *t;

	(void)state;
	/* two locations with different argument registers: no dispatch on the ip needed */
	assert_int_equal(usdt_add(u, SELF, -1, "pyebpf_test", "gated", "g"), 0);
	assert_int_equal(usdt_locations(u), 2);
	assert_int_equal(usdt_add(u, SELF, -1, "pyebpf_test", "forms", "f"), 0);
	assert_int_equal(usdt_locations(u), 3);
	t = text_of(u);
	assert_non_null(strstr(t, "int usdt_g_0_0(struct pt_regs *ctx)"));
	assert_non_null(strstr(t, "int usdt_g_0_1(struct pt_regs *ctx)"));
	assert_non_null(strstr(t, "int usdt_f_1_0(struct pt_regs *ctx)"));
	assert_non_null(strstr(t, "args[0] = (s64)(s32)regs[14];")); /* %edi */
	assert_non_null(strstr(t, "args[0] = (s64)(s32)regs[13];")); /* %esi */
	free(t);
	usdt_free(u);
}

static void absent_and_unreadable(void **state)
{
	struct usdt *u = usdt_new();

	(void)state;
	assert_int_equal(usdt_add(u, SELF, -1, "pyebpf_test", "absent", "h"), 1);
	/* symbol(%rip) needs the load address, unknown system-wide: refused, said why */
	assert_int_equal(usdt_add(u, SELF, -1, "pyebpf_test", "symbol", "h"), -1);
	assert_int_equal(usdt_add(u, "/nonexistent/binary", -1, "pyebpf_test", "forms", "h"), -1);
	assert_int_equal(usdt_locations(u), 0);
	/* nothing of the refused probe is left in the text */
	{
		char *t = text_of(u);
		assert_null(strstr(t, "usdt_h_"));
		free(t);
	}
	usdt_free(u);
}

static void locations_carry_their_semaphore(void **state)
{
	struct usdt *u = usdt_new();
	struct usdt_location loc;

	(void)state;
	assert_int_equal(usdt_add(u, SELF, 42, "pyebpf_test", "forms", "f"), 0);
	assert_int_equal(usdt_add(u, SELF, -1, "pyebpf_test", "gated", "g"), 0);
	assert_int_equal(usdt_location(u, 0, &loc), 0);
	assert_string_equal(loc.probe, "pyebpf_test:forms");
	assert_string_equal(loc.fn, "usdt_f_0_0");
	assert_int_equal(loc.pid, 42);
	assert_int_equal(loc.ref_ctr, 0);
	assert_true(loc.offset != 0);
	/* the kernel raises the semaphore at this file offset while the uprobe exists */
	assert_int_equal(usdt_location(u, 1, &loc), 0);
	assert_string_equal(loc.probe, "pyebpf_test:gated");
	assert_int_equal(loc.pid, -1);
	assert_true(loc.ref_ctr != 0);
	assert_int_equal(usdt_location(u, 2, &loc), 0);
	assert_string_equal(loc.fn, "usdt_g_1_1");
	assert_int_equal(usdt_location(u, 3, &loc), -1);
	usdt_free(u);
}

static void too_many_arguments(void **state)
{
	struct usdt *u = usdt_new();

	(void)state;
	assert_int_equal(usdt_add(u, SELF, -1, "pyebpf_test", "many", "h"), -1);
	assert_int_equal(usdt_locations(u), 0);
	usdt_free(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(finds_probes),
		cmocka_unit_test(reads_each_argument_form),
		cmocka_unit_test(reads_indexed_memory),
		cmocka_unit_test(one_entry_function_per_location),
		cmocka_unit_test(absent_and_unreadable),
		cmocka_unit_test(locations_carry_their_semaphore),
		cmocka_unit_test(too_many_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
