/* Unit tests for trace: traceparent parsing (W3C Trace Context level 1
 * §3.2), formatting, span ids and the thread's current context. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/trace.h"

#define TID "4bf92f3577b34da6a3ce929d0e0e4736"
#define PID "00f067aa0ba902b7"

static void test_parse_valid(void **state)
{
	struct trace_ctx t;
	char out[TRACE_PARENT_LEN];

	(void)state;
	assert_int_equal(trace_parse("00-" TID "-" PID "-01", &t), 0);
	assert_string_equal(t.trace_id, TID);
	assert_string_equal(t.parent_id, PID);
	assert_string_equal(t.flags, "01");
	assert_string_equal(t.span_id, "");
	trace_format(&t, "b7ad6b7169203331", out);
	assert_string_equal(out, "00-" TID "-b7ad6b7169203331-01");
	/* a later version: its first four fields, what follows after '-' */
	assert_int_equal(trace_parse("cc-" TID "-" PID "-00", &t), 0);
	assert_int_equal(trace_parse("cc-" TID "-" PID "-00-future-fields", &t), 0);
	assert_string_equal(t.flags, "00");
}

static void test_parse_invalid(void **state)
{
	struct trace_ctx t;
	char longv[TRACE_PARENT_MAX + 8];

	(void)state;
	assert_int_equal(trace_parse(NULL, &t), -1);
	assert_int_equal(trace_parse("", &t), -1);
	assert_int_equal(trace_parse("00-" TID "-" PID "-0", &t), -1);
	assert_int_equal(trace_parse("00-" TID "-" PID "-01-", &t), -1); /* v00: exact */
	assert_int_equal(trace_parse("ff-" TID "-" PID "-01", &t), -1);  /* version ff */
	assert_int_equal(trace_parse("0g-" TID "-" PID "-01", &t), -1);
	assert_int_equal(trace_parse("00-4BF92F3577B34DA6A3CE929D0E0E4736-" PID "-01", &t), -1);
	assert_int_equal(trace_parse("00-00000000000000000000000000000000-" PID "-01", &t), -1);
	assert_int_equal(trace_parse("00-" TID "-0000000000000000-01", &t), -1);
	assert_int_equal(trace_parse("00_" TID "-" PID "-01", &t), -1);
	assert_int_equal(trace_parse("00-" TID "_" PID "-01", &t), -1);
	assert_int_equal(trace_parse("00-" TID "-" PID "_01", &t), -1);
	assert_int_equal(trace_parse("00-" TID "-" PID "-0x", &t), -1);
	assert_int_equal(trace_parse("cc-" TID "-" PID "-01x", &t), -1);
	assert_int_equal(trace_parse(" 00-" TID "-" PID "-01", &t), -1);
	memset(longv, 'a', sizeof longv - 1);
	longv[sizeof longv - 1] = '\0';
	memcpy(longv, "cc-" TID "-" PID "-01-", 56);
	assert_int_equal(trace_parse(longv, &t), -1);
	longv[TRACE_PARENT_MAX] = '\0';
	assert_int_equal(trace_parse(longv, &t), 0);
}

static void test_span_and_current(void **state)
{
	struct trace_ctx t;
	char a[17], b[17];

	(void)state;
	assert_int_equal(trace_new_span(a), 0);
	assert_int_equal(trace_new_span(b), 0);
	assert_int_equal(strlen(a), 16);
	assert_string_not_equal(a, b);
	assert_null(trace_current());
	assert_int_equal(trace_parse("00-" TID "-" PID "-01", &t), 0);
	memcpy(t.span_id, a, sizeof a);
	trace_set(&t);
	assert_non_null(trace_current());
	assert_string_equal(trace_current()->span_id, a);
	trace_set(NULL);
	assert_null(trace_current());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_valid),
		cmocka_unit_test(test_parse_invalid),
		cmocka_unit_test(test_span_and_current),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
