/*
 * src/python/pyhooks.c: hook plans. The functions, clones and USDT probes are in this test
 * binary itself (clone names through asm labels, as GCC names its copies).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pyhooks.h"
#include "stapsdt_probe.h"

#define SELF "/proc/self/exe"

/* A function and the copies a compiler would make of it; and one that only shares a prefix. */
void hook_target(void) __asm__("pyebpf_hook_target");
void hook_target_constprop(void) __asm__("pyebpf_hook_target.constprop.0");
void hook_target_isra(void) __asm__("pyebpf_hook_target.isra.1");
void hook_targets(void) __asm__("pyebpf_hook_targets");
__attribute__((noinline, used)) void hook_target(void) { __asm__ volatile(""); }
__attribute__((noinline, used)) void hook_target_constprop(void) { __asm__ volatile("nop"); }
__attribute__((noinline, used)) void hook_target_isra(void) { __asm__ volatile("nop; nop"); }
__attribute__((noinline, used)) void hook_targets(void) { __asm__ volatile("nop; nop; nop"); }

/* Never called: only its notes matter. */
void pyhooks_fixture(void);
void pyhooks_fixture(void)
{
	TEST_PROBE("pyebpf_hooks", "begin", "-4@%edi", "0");
	TEST_PROBE("pyebpf_hooks", "end", "-8@%rax", "0");
	TEST_PROBE("pyebpf_hooks", "end", "-8@%rdx", "0");
}

static int count_kind(const struct pyhook_plan *plan, enum pyhook_kind kind)
{
	int n = 0;

	for (int i = 0; i < pyhooks_count(plan); i++)
		n += pyhooks_get(plan, i)->kind == kind;
	return n;
}

static void finds_a_function_and_its_clones(void **state)
{
	struct pyhook_clones c;
	int seen = 0;

	(void)state;
	assert_int_equal(pyhooks_clones(SELF, "pyebpf_hook_target", &c), 3);
	for (int i = 0; i < c.n; i++) {
		seen |= !strcmp(c.names[i], "pyebpf_hook_target") ? 1 : 0;
		seen |= !strcmp(c.names[i], "pyebpf_hook_target.constprop.0") ? 2 : 0;
		seen |= !strcmp(c.names[i], "pyebpf_hook_target.isra.1") ? 4 : 0;
	}
	assert_int_equal(seen, 7); /* and not pyebpf_hook_targets */
	assert_int_equal(pyhooks_clones(SELF, "pyebpf_no_such_function", &c), 0);
	assert_int_equal(pyhooks_clones("/nonexistent/binary", "pyebpf_hook_target", &c), 0);
}

static void hooks_entry_and_return_of_each_clone(void **state)
{
	struct pyhook_plan *plan = pyhooks_new();
	const struct pyhook *h;

	(void)state;
	assert_int_equal(pyhooks_add_function(plan, SELF, 42, "pyebpf_hook_target", "on_entry",
					      "on_return"), 3);
	assert_int_equal(pyhooks_count(plan), 6);
	assert_int_equal(count_kind(plan, PYHOOK_UPROBE), 3);
	assert_int_equal(count_kind(plan, PYHOOK_URETPROBE), 3);
	h = pyhooks_get(plan, 0);
	assert_string_equal(h->fn, "on_entry");
	assert_string_equal(h->binary, SELF);
	assert_int_equal(h->pid, 42);
	assert_int_equal(h->ref_ctr, 0);
	/* entry and return of one function: the same file offset */
	assert_true(h->offset != 0);
	assert_int_equal(pyhooks_get(plan, 1)->offset, h->offset);
	assert_string_equal(pyhooks_get(plan, 1)->what, h->what);
	assert_string_equal(pyhooks_get(plan, 1)->fn, "on_return");
	/* three functions, three places */
	assert_true(pyhooks_get(plan, 2)->offset != h->offset);
	assert_true(pyhooks_get(plan, 4)->offset != h->offset);
	assert_null(pyhooks_get(plan, 6));
	/* entry only; none found */
	assert_int_equal(pyhooks_add_function(plan, SELF, -1, "pyebpf_hook_targets", "e", NULL), 1);
	assert_int_equal(pyhooks_get(plan, 6)->pid, -1);
	assert_int_equal(pyhooks_add_function(plan, SELF, -1, "pyebpf_absent", "e", "r"), 0);
	assert_int_equal(pyhooks_count(plan), 7);
	pyhooks_free(plan);
}

static void uprobes_by_symbol_or_offset(void **state)
{
	struct pyhook_plan *plan = pyhooks_new();

	(void)state;
	assert_int_equal(pyhooks_add_uprobe(plan, SELF, 7, "pyebpf_hook_targets", "f", true), 0);
	assert_int_equal(pyhooks_add_uprobe(plan, SELF, 7, "pyebpf_absent", "f", false), 1);
	assert_int_equal(pyhooks_add_uprobe_at(plan, "/lib/libc.so.6", 7,
					       "pthread_cond_timedwait@@GLIBC_2.3.2", 0x886a0, "w", false), 0);
	assert_int_equal(pyhooks_count(plan), 2);
	assert_int_equal(pyhooks_get(plan, 0)->kind, PYHOOK_URETPROBE);
	assert_int_equal(pyhooks_get(plan, 1)->kind, PYHOOK_UPROBE);
	assert_int_equal(pyhooks_get(plan, 1)->offset, 0x886a0);
	assert_string_equal(pyhooks_get(plan, 1)->what, "pthread_cond_timedwait@@GLIBC_2.3.2");
	pyhooks_free(plan);
}

static void usdt_probes_all_or_none(void **state)
{
	static const struct pyhook_usdt both[] = { { "begin", "on_begin" }, { "end", "on_end" }, { NULL, NULL } };
	static const struct pyhook_usdt half[] = { { "begin", "on_begin" }, { "absent", "x" }, { NULL, NULL } };
	struct pyhook_plan *plan = pyhooks_new();
	char *text;

	(void)state;
	assert_int_equal(pyhooks_add_usdt(plan, SELF, -1, "pyebpf_hooks", half), 1);
	assert_int_equal(pyhooks_count(plan), 0);
	assert_int_equal(pyhooks_add_usdt(plan, SELF, 9, "pyebpf_hooks", both), 0);
	/* begin has one location, end two: one uprobe each */
	assert_int_equal(pyhooks_count(plan), 3);
	assert_int_equal(count_kind(plan, PYHOOK_USDT), 3);
	assert_string_equal(pyhooks_get(plan, 0)->what, "pyebpf_hooks:begin");
	assert_string_equal(pyhooks_get(plan, 2)->what, "pyebpf_hooks:end");
	assert_int_equal(pyhooks_get(plan, 2)->pid, 9);
	text = pyhooks_text(plan, "/* tool */");
	assert_non_null(text);
	assert_non_null(strstr(text, pyhooks_get(plan, 0)->fn));
	assert_non_null(strstr(text, "return on_end(ctx, args);"));
	free(text);
	pyhooks_free(plan);
}

static bool never_called;

static int refuse(void *ctx, struct pyhook_plan *plan, const struct pyhook_target *t, char *how,
		  size_t howlen)
{
	(void)ctx, (void)plan, (void)t, (void)how, (void)howlen;
	never_called = false;
	return 1;
}

/* A pid that is no CPython, or gone, is skipped (0 pids planned), never planned. */
static void a_pid_that_is_no_python_is_skipped(void **state)
{
	struct pyhook_plan *plan = pyhooks_new();
	struct pyhook_planner p = { .plan = refuse };
	pid_t pids[] = { getpid(), 0 };
	pid_t child = fork();

	(void)state;
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	pids[1] = child; /* gone */
	never_called = true;
	assert_int_equal(pyhooks_plan_pids(plan, pids, 2, &p), 0);
	assert_true(never_called);
	assert_int_equal(pyhooks_count(plan), 0);
	pyhooks_free(plan);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(finds_a_function_and_its_clones),
		cmocka_unit_test(hooks_entry_and_return_of_each_clone),
		cmocka_unit_test(uprobes_by_symbol_or_offset),
		cmocka_unit_test(usdt_probes_all_or_none),
		cmocka_unit_test(a_pid_that_is_no_python_is_skipped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
