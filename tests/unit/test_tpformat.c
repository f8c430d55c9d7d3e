/* Unit tests for tpformat: reading tracepoint format files (fields, symbol tables). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fields_are_found_by_exact_name),
		cmocka_unit_test(numeric_symbol_tables_are_read),
		cmocka_unit_test(symbolic_constants_and_missing_fields_give_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
