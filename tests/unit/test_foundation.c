/* Unit tests for the shared modules that need neither root nor BPF (one skips without root). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inetfmt.h"
#include "kbtf.h"
#include "kheaders.h"
#include "opts.h"
#include "procinfo.h"
#include "utf8.h"

static void utf8_keeps_valid_text(void **state)
{
	char out[64];
	(void)state;
	assert_int_equal(utf8_repair("héllo ✓", 64, out, sizeof(out)), strlen("héllo ✓"));
	assert_string_equal(out, "héllo ✓");
}

static void utf8_replaces_each_invalid_byte(void **state)
{
	char out[64];
	(void)state;
	/* a lone continuation byte, an overlong '/', a surrogate, a cut sequence */
	utf8_repair("a\x80" "b\xc0\xaf" "c\xed\xa0\x80" "d\xe2\x9c", 64, out, sizeof(out));
	assert_string_equal(out, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd"
				 "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
				 "d\xef\xbf\xbd\xef\xbf\xbd");
}

static void utf8_never_splits_a_character(void **state)
{
	char out[4];
	(void)state;
	/* "a" + a 3-byte character does not fit in 3 bytes + NUL: the character is dropped */
	utf8_repair("a✓", 16, out, sizeof(out));
	assert_string_equal(out, "a");
	utf8_repair("abc", 2, out, sizeof(out)); /* stops at len */
	assert_string_equal(out, "ab");
}

static void inet_formats_both_families_and_mapped(void **state)
{
	uint8_t a[16];
	char buf[64];
	(void)state;
	assert_int_equal(inet_parse("10.1.2.3", a), AF_INET);
	inet_format(AF_INET, a, buf, sizeof(buf));
	assert_string_equal(buf, "10.1.2.3");
	assert_int_equal(inet_parse("::ffff:127.0.0.1", a), AF_INET6);
	inet_format(AF_INET6, a, buf, sizeof(buf));
	assert_string_equal(buf, "127.0.0.1");
	assert_int_equal(inet_parse("fd00::1", a), AF_INET6);
	inet_format(AF_INET6, a, buf, sizeof(buf));
	assert_string_equal(buf, "fd00::1");
	assert_int_equal(inet_parse("300.1.1.1", a), 0);
	assert_int_equal(inet_parse("localhost", a), 0);
}

static void opts_numbers_are_range_checked(void **state)
{
	unsigned long v;
	double d;
	(void)state;
	assert_int_equal(opts_parse_ulong("port", "8080", 1, 65535, &v), 0);
	assert_int_equal(v, 8080);
	assert_int_equal(opts_parse_ulong("port", "0", 1, 65535, &v), -1);
	assert_int_equal(opts_parse_ulong("port", "65536", 1, 65535, &v), -1);
	assert_int_equal(opts_parse_ulong("port", "-1", 0, 65535, &v), -1);
	assert_int_equal(opts_parse_ulong("port", "12x", 0, 65535, &v), -1);
	assert_int_equal(opts_parse_ulong("port", "", 0, 65535, &v), -1);
	assert_int_equal(opts_parse_double("min-ms", "2.5", 0, 1e6, &d), 0);
	assert_true(d == 2.5);
	assert_int_equal(opts_parse_double("min-ms", "nan", 0, 1e6, &d), -1);
}

static const struct opt table[] = {
	OPT_ENTRY_PID, OPT_ENTRY_DURATION, OPT_ENTRY_JSON, OPT_ENTRY_ENV,
	{ OPT_TOOL_BASE, 0, "min-us", "US", "a tool option" }, OPT_END,
};
static const struct tool_doc doc = { "unittool", "summary", NULL, NULL };

static int take_min_us(int id, const char *arg, void *ctx)
{
	if (id != OPT_TOOL_BASE)
		return -1;
	return opts_parse_ulong("min-us", arg, 0, 100, ctx);
}

static void opts_parse_fills_common_and_tool_options(void **state)
{
	char self[16];
	char *argv[] = { "unittool", "-p", self, "--duration", "5", "-j", "-e", "prod",
			 "--min-us", "42", NULL };
	struct common_opts c = { 0 };
	unsigned long min_us = 0;
	(void)state;
	snprintf(self, sizeof(self), "%d,%d", getpid(), getppid());
	assert_int_equal(opts_parse(&doc, table, 10, argv, &c, take_min_us, &min_us), 10);
	assert_int_equal(c.npids, 2);
	assert_int_equal(c.pids[0], getpid());
	assert_int_equal(c.duration_s, 5);
	assert_true(c.json);
	assert_string_equal(c.env, "prod");
	assert_int_equal(min_us, 42);
}

/* BCC's habits: `tool -p 42 10`, `-d 0.5` */
static void opts_parse_takes_fractional_and_positional_durations(void **state)
{
	char *frac[] = { "unittool", "-d", "0.5", NULL };
	char *positional[] = { "unittool", "-j", "2.5", NULL };
	char *twice[] = { "unittool", "-d", "1", "2", NULL };
	char *two[] = { "unittool", "1", "2", NULL };
	struct common_opts c = { 0 };
	(void)state;
	assert_int_equal(opts_parse(&doc, table, 3, frac, &c, take_min_us, NULL), 3);
	assert_true(c.duration_s == 0.5);
	c = (struct common_opts){ 0 };
	assert_int_equal(opts_parse(&doc, table, 3, positional, &c, take_min_us, NULL), 3);
	assert_true(c.duration_s == 2.5 && c.json);
	c = (struct common_opts){ 0 };
	assert_int_equal(opts_parse(&doc, table, 4, twice, &c, take_min_us, NULL), -1);
	c = (struct common_opts){ 0 };
	assert_int_equal(opts_parse(&doc, table, 3, two, &c, take_min_us, NULL), -1);
}

static void opts_parse_rejects_bad_input(void **state)
{
	char *unknown[] = { "unittool", "--nope", NULL };
	char *nopid[] = { "unittool", "-p", "0", NULL };
	/* a pid that is no process is the tracker's to skip (pytargets.h), not a usage error */
	char *gone[] = { "unittool", "-p", "2147483600", NULL };
	char *operand[] = { "unittool", "extra", NULL };
	char *zero[] = { "unittool", "-d", "0", NULL };
	struct common_opts c = { 0 };
	(void)state;
	assert_int_equal(opts_parse(&doc, table, 2, unknown, &c, take_min_us, NULL), -1);
	assert_int_equal(opts_parse(&doc, table, 3, nopid, &c, take_min_us, NULL), -1);
	assert_int_equal(opts_parse(&doc, table, 3, gone, &c, take_min_us, NULL), 3);
	assert_int_equal(c.npids, 1);
	c.npids = 0;
	assert_int_equal(opts_parse(&doc, table, 2, operand, &c, take_min_us, NULL), -1);
	assert_int_equal(opts_parse(&doc, table, 3, zero, &c, take_min_us, NULL), -1);
}

static void opts_help_lists_every_option(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	(void)state;
	opts_print_help(f, &doc, table);
	fclose(f);
	assert_non_null(strstr(buf, "Usage: unittool [OPTIONS] [DURATION]\n"));
	assert_non_null(strstr(buf, "  -p, --pid PID "));
	assert_non_null(strstr(buf, "      --min-us US "));
	assert_non_null(strstr(buf, "  -j, --json "));
	free(buf);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void kheaders_builtin_set_is_usable(void **state)
{
	char dir[] = "/tmp/pyebpf-unit-XXXXXX";
	char path[PATH_MAX];
	struct stat st;
	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_false(kheaders_usable(dir));
	assert_int_equal(kheaders_write_builtin(dir), 0);
	assert_true(kheaders_usable(dir));
	snprintf(path, sizeof(path), "%s/include/linux/types.h", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 100);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
}

static void kheaders_user_dir_without_headers_falls_back_to_builtin(void **state)
{
	char dir[] = "/tmp/pyebpf-unit-XXXXXX";
	struct kheaders kh;
	char built[PATH_MAX];
	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(kheaders_find(dir, &kh), 0);
	assert_true(kh.temporary);
	assert_true(kh.builtin);
	assert_string_equal(kh.what, "pyebpf's built-in minimal headers");
	assert_non_null(strstr(kh.why, "has none"));
	snprintf(built, sizeof(built), "%s", kh.dir);
	kheaders_release(&kh);
	assert_int_not_equal(access(built, F_OK), 0); /* the temporary tree is gone */
	rmdir(dir);
}

static void kheaders_user_dir_with_headers_is_used_as_is(void **state)
{
	char dir[] = "/tmp/pyebpf-unit-XXXXXX";
	char path[PATH_MAX];
	struct kheaders kh;
	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "mkdir -p %s/include/linux", dir);
	assert_int_equal(system(path), 0);
	snprintf(path, sizeof(path), "%s/include/linux/kconfig.h", dir);
	write_file(path, "\n");
	assert_int_equal(kheaders_find(dir, &kh), 0);
	assert_false(kh.temporary);
	assert_false(kh.builtin);
	assert_string_equal(kh.dir, dir);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
}

static void kbtf_finds_nested_members_and_refuses_unknown(void **state)
{
	struct kbtf *b;
	struct kbtf_member m, direct;
	unsigned size;
	(void)state;
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		skip();
		return;
	}
	b = kbtf_open();
	assert_non_null(b);
	assert_int_equal(kbtf_member(b, "tcp_sock", "srtt_us", &m), 0);
	assert_int_equal(m.size, 4);
	/* through anonymous unions: sock_common.skc_dport sits inside skc_portpair */
	assert_int_equal(kbtf_member(b, "sock_common", "skc_dport", &m), 0);
	assert_int_equal(m.size, 2);
	/* a dotted path adds up: tcp_sock -> ... -> sock.__sk_common is at 0 */
	assert_int_equal(kbtf_member(b, "sock", "__sk_common.skc_dport", &direct), 0);
	assert_int_equal(direct.offset, m.offset);
	assert_int_equal(kbtf_member(b, "tcp_sock", "no_such_member", &m), -1);
	assert_int_equal(kbtf_member(b, "no_such_struct", "x", &m), -1);
	assert_int_equal(kbtf_struct_size(b, "upid", &size), 0);
	assert_int_equal(size, 16);
	kbtf_close(b);
}

static void procinfo_reads_own_ids(void **state)
{
	struct nsids ids;
	char comm[32];
	(void)state;
	assert_int_equal(procinfo_nsids(getpid(), getpid(), &ids), 0);
	assert_true(ids.pid > 0 && ids.tid == ids.pid && !ids.nested);
	assert_int_equal(procinfo_comm(getpid(), getpid(), comm, sizeof(comm)), 0);
	assert_string_equal(comm, "test_foundation");
	assert_int_equal(procinfo_ppid(getpid()), getppid());
	assert_true(procinfo_exists(getpid()));
	assert_true(procinfo_thread_exists(getpid(), getpid()));
	assert_false(procinfo_thread_exists(getpid(), getppid()));
	assert_int_equal(procinfo_nsids(2147483600, 2147483600, &ids), -1);
}

/* A process that is pid 1 of a PID namespace of its own: nested, with its ids there. */
static void procinfo_sees_a_nested_namespace(void **state)
{
	int fds[2];
	pid_t child, inner = 0;
	struct nsids ids = { 0 };
	(void)state;
	assert_int_equal(pipe(fds), 0);
	child = fork();
	if (child == 0) {
		/* the namespace is for the children of the one that unshares */
		pid_t k = unshare(CLONE_NEWPID) ? -1 : fork();
		if (k == 0) {
			pause();
			_exit(0);
		}
		if (write(fds[1], &k, sizeof(k)) != sizeof(k))
			_exit(1);
		waitpid(k, NULL, 0);
		_exit(0);
	}
	assert_int_equal(read(fds[0], &inner, sizeof(inner)), sizeof(inner));
	close(fds[0]);
	close(fds[1]);
	if (inner < 0) {
		waitpid(child, NULL, 0);
		skip(); /* unshare(CLONE_NEWPID) needs CAP_SYS_ADMIN */
	}
	assert_int_equal(procinfo_nsids(inner, inner, &ids), 0);
	kill(inner, SIGKILL);
	waitpid(child, NULL, 0);
	assert_true(ids.nested && ids.pid == 1 && ids.tid == 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(utf8_keeps_valid_text),
		cmocka_unit_test(utf8_replaces_each_invalid_byte),
		cmocka_unit_test(utf8_never_splits_a_character),
		cmocka_unit_test(inet_formats_both_families_and_mapped),
		cmocka_unit_test(opts_numbers_are_range_checked),
		cmocka_unit_test(opts_parse_fills_common_and_tool_options),
		cmocka_unit_test(opts_parse_takes_fractional_and_positional_durations),
		cmocka_unit_test(opts_parse_rejects_bad_input),
		cmocka_unit_test(opts_help_lists_every_option),
		cmocka_unit_test(kheaders_builtin_set_is_usable),
		cmocka_unit_test(kheaders_user_dir_without_headers_falls_back_to_builtin),
		cmocka_unit_test(kheaders_user_dir_with_headers_is_used_as_is),
		cmocka_unit_test(kbtf_finds_nested_members_and_refuses_unknown),
		cmocka_unit_test(procinfo_reads_own_ids),
		cmocka_unit_test(procinfo_sees_a_nested_namespace),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
