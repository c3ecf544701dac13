/* Unit tests for clock: RFC 3339 date-times (clock_parse_time) and dates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/clock.h"

/* 2026-11-22T08:00:00Z */
#define T0 1795334400000LL

static void test_parse_time_valid(void **state)
{
	int64_t ms;

	(void)state;
	assert_int_equal(clock_parse_time("2026-11-22T08:00:00Z", &ms), 0);
	assert_int_equal(ms, T0);
	assert_int_equal(clock_parse_time("2026-11-22t08:00:00z", &ms), 0);
	assert_int_equal(ms, T0);
	assert_int_equal(clock_parse_time("2026-11-22T08:00:00.123Z", &ms), 0);
	assert_int_equal(ms, T0 + 123);
	/* fractions: one digit is tenths; past milliseconds they are cut */
	assert_int_equal(clock_parse_time("2026-11-22T08:00:00.5Z", &ms), 0);
	assert_int_equal(ms, T0 + 500);
	assert_int_equal(clock_parse_time("2026-11-22T08:00:00.123456789Z", &ms), 0);
	assert_int_equal(ms, T0 + 123);
	/* offsets name the same instant */
	assert_int_equal(clock_parse_time("2026-11-22T09:00:00+01:00", &ms), 0);
	assert_int_equal(ms, T0);
	assert_int_equal(clock_parse_time("2026-11-22T02:30:00-05:30", &ms), 0);
	assert_int_equal(ms, T0);
	assert_int_equal(clock_parse_time("2026-11-22T08:00:00.250+00:00", &ms), 0);
	assert_int_equal(ms, T0 + 250);
	/* a leap day */
	assert_int_equal(clock_parse_time("2028-02-29T00:00:00Z", &ms), 0);
}

static void test_parse_time_invalid(void **state)
{
	static const char *const bad[] = {
		"",
		"2026-11-22",
		"2026-11-22 08:00:00Z",
		"2026-11-22T08:00:00",
		"2026-11-22T08:00Z",
		"2026-11-22T24:00:00Z",
		"2026-11-22T08:60:00Z",
		"2026-11-22T08:00:60Z",
		"2026-02-30T08:00:00Z",
		"2026-11-22T08:00:00.Z",
		"2026-11-22T08:00:00.1234567890Z",
		"2026-11-22T08:00:00+0100",
		"2026-11-22T08:00:00+24:00",
		"2026-11-22T08:00:00+01:60",
		"2026-11-22T08:00:00Zjunk",
		"2026-11-22T08:00:00+01:00 ",
		"2026-11-22T0a:00:00Z",
		"+2026-11-22T08:00:00Z",
	};
	int64_t ms;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (clock_parse_time(bad[i], &ms) != -1)
			fail_msg("\"%s\" was accepted", bad[i]);
}

static void test_dates(void **state)
{
	char out[11];
	int64_t d;

	(void)state;
	assert_int_equal(clock_parse_date("2026-11-22", &d), 0);
	assert_int_equal(d * 86400000LL, T0 - 8 * 3600000LL);
	clock_format_date(d + 40, out);
	assert_string_equal(out, "2027-01-01");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_time_valid),
		cmocka_unit_test(test_parse_time_invalid),
		cmocka_unit_test(test_dates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
