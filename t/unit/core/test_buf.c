/* Unit tests for buf: the capped appends and the decimal writer that hot
 * paths use instead of printf. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/buf.h"

/* buf_format_int writes what "%lld" writes, for the edges and a spread of
 * values of every length and sign. */
static void test_format_int_as_printf(void **state)
{
	static const int64_t edges[] = {0,
					1,
					-1,
					9,
					10,
					-10,
					99,
					100,
					65535,
					INT64_MAX,
					INT64_MIN,
					INT64_MIN + 1,
					1000000000000LL};
	char got[BUF_INT_MAX], want[32];
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	(void)state;
	for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
		size_t n = buf_format_int(edges[i], got);

		snprintf(want, sizeof want, "%lld", (long long)edges[i]);
		assert_string_equal(got, want);
		assert_int_equal(n, strlen(want));
	}
	for (int i = 0; i < 10000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int64_t v = (int64_t)(x >> (i % 64));

		buf_format_int(i % 2 ? v : -v, got);
		snprintf(want, sizeof want, "%lld", (long long)(i % 2 ? v : -v));
		assert_string_equal(got, want);
	}
}

static void test_put_int_and_cap(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b, 8);
	assert_int_equal(buf_put_int(&b, -42), 0);
	assert_int_equal(buf_putc(&b, ','), 0);
	assert_int_equal(buf_put_int(&b, 1234), 0);
	assert_string_equal(b.data, "-42,1234");
	/* past the cap: refused, the buffer unchanged */
	assert_int_equal(buf_put_int(&b, 5), -1);
	assert_string_equal(b.data, "-42,1234");
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_int_as_printf),
		cmocka_unit_test(test_put_int_and_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
