/* Unit tests for tpformat: reading tracepoint format files (fields, symbol tables). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tpformat.h"

/* Trimmed from this kernel's (6.18) tcp/tcp_send_reset/format. */
static const char send_reset[] =
	"name: tcp_send_reset\n"
	"ID: 1680\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:const void * skaddr;\toffset:16;\tsize:8;\tsigned:0;\n"
	"\tfield:int state;\toffset:24;\tsize:4;\tsigned:1;\n"
	"\tfield:enum sk_rst_reason reason;\toffset:28;\tsize:4;\tsigned:0;\n"
	"\tfield:__u8 saddr[28];\toffset:32;\tsize:28;\tsigned:0;\n"
	"\n"
	"print fmt: \"skaddr=%p state=%s reason=%s\", REC->skaddr, REC->state ? "
	"__print_symbolic(REC->state, { TCP_ESTABLISHED, \"TCP_ESTABLISHED\" }, { TCP_CLOSE, \"TCP_CLOSE\" }) "
	": \"UNKNOWN\", __print_symbolic(REC->reason, { 0, \"NOT_SPECIFIED\" }, { 1, \"NO_SOCKET\" }, "
	"{ 14, \"TCP_STATE\" }, { 25, \"MAX\" })\n";

static void fields_are_found_by_exact_name(void **state)
{
	(void)state;
	assert_true(tpformat_text_has_field(send_reset, "reason"));
	assert_true(tpformat_text_has_field(send_reset, "saddr")); /* an array */
	assert_true(tpformat_text_has_field(send_reset, "skaddr")); /* a pointer */
	assert_false(tpformat_text_has_field(send_reset, "addr"));
	assert_false(tpformat_text_has_field(send_reset, "err"));
	assert_false(tpformat_text_has_field("", "reason"));
}

static void numeric_symbol_tables_are_read(void **state)
{
	struct tpformat_symbols s;
	(void)state;
	assert_int_equal(tpformat_text_symbols(send_reset, "reason", &s), 4);
	assert_string_equal(tpformat_symbol_name(&s, 1), "NO_SOCKET");
	assert_string_equal(tpformat_symbol_name(&s, 14), "TCP_STATE");
	assert_string_equal(tpformat_symbol_name(&s, 25), "MAX");
	assert_null(tpformat_symbol_name(&s, 2));
	tpformat_symbols_free(&s);
	assert_int_equal(s.n, 0);
}

static void symbolic_constants_and_missing_fields_give_nothing(void **state)
{
	struct tpformat_symbols s;
	(void)state;
	/* { TCP_ESTABLISHED, ... }: a name, not a number, is not guessed */
	assert_int_equal(tpformat_text_symbols(send_reset, "state", &s), 0);
	tpformat_symbols_free(&s);
	assert_int_equal(tpformat_text_symbols(send_reset, "family", &s), 0);
	tpformat_symbols_free(&s);
}

/* This kernel's syscalls/sys_enter_sendmsg/format (fields part). */
static const char sendmsg[] =
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n"
	"\tfield:int fd;\toffset:16;\tsize:8;\tsigned:0;\n"
	"\tfield:struct user_msghdr * msg;\toffset:24;\tsize:8;\tsigned:0;\n"
	"\tfield:unsigned int flags;\toffset:32;\tsize:8;\tsigned:0;\n"
	"\n"
	"print fmt: \"fd: 0x%08lx, msg: 0x%08lx, flags: 0x%08lx\", ...\n";

/* What libbcc 0.26 itself declared for it (its DEBUG_PREPROCESSOR output, this kernel). */
static const char sendmsg_struct[] =
	"struct tracepoint__syscalls__sys_enter_sendmsg {\n"
	"\tu64 __do_not_use__;\n"
	"\tint __syscall_nr;\n"
	"\tchar __pad_12;\n\tchar __pad_13;\n\tchar __pad_14;\n\tchar __pad_15;\n"
	"\ts64 fd;\n"
	"\tstruct user_msghdr * msg;\n"
	"\tu64 flags;\n"
	"};\n";

static void args_struct_is_libbccs(void **state)
{
	char *s;
	(void)state;
	s = tpformat_text_struct(sendmsg, "syscalls", "sys_enter_sendmsg", NULL, NULL);
	assert_non_null(s);
	assert_string_equal(s, sendmsg_struct);
	free(s);
	/* enum fields are copied verbatim (the BPF text declares the enum) */
	s = tpformat_text_struct(send_reset, "tcp", "tcp_send_reset", NULL, NULL);
	assert_non_null(s);
	assert_non_null(strstr(s, "\n\tconst void * skaddr;\n\tint state;\n"
				  "\tenum sk_rst_reason reason;\n\t__u8 saddr[28];\n};\n"));
	free(s);
}

static int comm_len(void *ctx, const char *name, long long *value)
{
	(*(int *)ctx)++;
	if (strcmp(name, "TASK_COMM_LEN"))
		return -1;
	*value = 16;
	return 0;
}

static void data_loc_and_named_array_sizes(void **state)
{
	static const char text[] =
		"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
		"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
		"\tfield:char comm[TASK_COMM_LEN];\toffset:8;\tsize:16;\tsigned:0;\n"
		"\tfield:char other[NOT_KNOWN];\toffset:24;\tsize:4;\tsigned:0;\n"
		"\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;\n"
		"\tfield:unsigned char small;\toffset:32;\tsize:2;\tsigned:0;\n";
	int calls = 0;
	char *s;
	(void)state;
	s = tpformat_text_struct(text, "x", "y", comm_len, &calls);
	assert_non_null(s);
	/* the gap after common_type is padded, as libbcc pads it */
	assert_string_equal(s, "struct tracepoint__x__y {\n\tu64 __do_not_use__;\n"
			       "\tchar __pad_2;\n\tchar __pad_3;\n\tchar comm[16];\n\tchar other[NOT_KNOWN];\n"
			       "\tint data_loc_name;\n\tu16 small;\n};\n");
	assert_int_equal(calls, 2);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fields_are_found_by_exact_name),
		cmocka_unit_test(numeric_symbol_tables_are_read),
		cmocka_unit_test(symbolic_constants_and_missing_fields_give_nothing),
		cmocka_unit_test(args_struct_is_libbccs),
		cmocka_unit_test(data_loc_and_named_array_sizes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
