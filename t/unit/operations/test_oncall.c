/* Unit tests for operations/oncall's pick (no database): who is on call
 * for a property, a level and a moment, with hand-overs at wall times in
 * the property's time zone (across a daylight saving change), weeks
 * before the first hand-over, other periods, levels, property lists and
 * overrides in wall time and in absolute time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "core/clock.h"
#include "operations/oncall.h"
#include "portfolio/portfolio.h"

#define H (3600 * 1000LL)

static const char *const rota =
	"{\"rotations\": ["
	" {\"name\": \"duty\", \"level\": 1, \"first_handover\": \"2026-03-23T09:00\","
	"  \"people\": [{\"name\": \"A\"}, {\"name\": \"B\"}, {\"name\": \"C\"}]},"
	" {\"name\": \"nyc nights\", \"level\": 2, \"properties\": [\"prop_ny\"],"
	"  \"first_handover\": \"2026-03-23T21:00\", \"every_days\": 1,"
	"  \"people\": [{\"name\": \"N1\"}, {\"name\": \"N2\"}]},"
	" {\"name\": \"gm\", \"level\": 2, \"first_handover\": \"2026-01-05T09:00\","
	"  \"people\": [{\"name\": \"G\"}]}],"
	" \"overrides\": ["
	" {\"level\": 1, \"properties\": [\"prop_waw\"], \"from\": \"2026-12-24T18:00\","
	"  \"to\": \"2026-12-26T09:00\", \"person\": {\"name\": \"X\"}},"
	" {\"level\": 1, \"from\": \"2026-12-31T20:00:00Z\", \"to\": \"2026-12-31T22:00:00Z\","
	"  \"person\": {\"name\": \"Y\"}}]}";

static struct portfolio_property waw = {.id = "prop_waw", .timezone = "Europe/Warsaw"};
static struct portfolio_property ny = {.id = "prop_ny", .timezone = "America/New_York"};

/* Unix ms of a UTC time. */
static int64_t utc(int y, int mo, int d, int h, int mi)
{
	return clock_days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400000LL + h * H +
	       mi * 60000LL;
}

/* The name on call, or "-" for nobody. */
static const char *who(const json_t *doc, const struct portfolio_property *p, int level, int64_t at)
{
	static char name[64];
	json_t *w = oncall_pick(doc, p, level, at);

	snprintf(name, sizeof name, "%s", w ? json_string_value(json_object_get(w, "name")) : "-");
	json_decref(w);
	return name;
}

static json_t *load(void)
{
	json_t *doc = json_loads(rota, 0, NULL);

	assert_non_null(doc);
	return doc;
}

static void test_weekly_hand_over_in_local_time(void **state)
{
	json_t *doc = load();

	(void)state;
	/* Warsaw is UTC+1 until 2026-03-29 01:00 UTC, then UTC+2. */
	assert_string_equal(who(doc, &waw, 1, utc(2026, 3, 23, 7, 59)), "C"); /* the week before */
	assert_string_equal(who(doc, &waw, 1, utc(2026, 3, 23, 8, 0)), "A");  /* 09:00 local */
	assert_string_equal(who(doc, &waw, 1, utc(2026, 3, 30, 6, 59)), "A"); /* 08:59 CEST */
	assert_string_equal(who(doc, &waw, 1, utc(2026, 3, 30, 7, 0)), "B");  /* 09:00 CEST */
	assert_string_equal(who(doc, &waw, 1, utc(2026, 4, 6, 7, 0)), "C");
	assert_string_equal(who(doc, &waw, 1, utc(2026, 4, 13, 7, 0)), "A"); /* round again */
	/* New York (UTC-4 from 2026-03-08): 09:00 local is 13:00 UTC */
	assert_string_equal(who(doc, &ny, 1, utc(2026, 3, 23, 12, 59)), "C");
	assert_string_equal(who(doc, &ny, 1, utc(2026, 3, 23, 13, 0)), "A");
	json_decref(doc);
}

static void test_levels_properties_and_daily_periods(void **state)
{
	json_t *doc = load();

	(void)state;
	assert_int_equal(oncall_levels(doc), 2);
	/* level 2: New York has its own daily rotation (listed first), Warsaw
	 * the general one */
	assert_string_equal(who(doc, &ny, 2, utc(2026, 3, 24, 0, 59)), "N2"); /* 20:59, day -1 */
	assert_string_equal(who(doc, &ny, 2, utc(2026, 3, 24, 1, 0)), "N1");  /* 21:00, day 0 */
	assert_string_equal(who(doc, &ny, 2, utc(2026, 3, 25, 1, 0)), "N2");  /* day 1 */
	assert_string_equal(who(doc, &waw, 2, utc(2026, 3, 24, 1, 0)), "G");
	assert_string_equal(who(doc, &waw, 3, utc(2026, 3, 24, 1, 0)), "-");
	json_decref(doc);
}

static void test_overrides_win(void **state)
{
	json_t *doc = load(), *w;

	(void)state;
	/* wall-time override of Warsaw only: 18:00 CET is 17:00 UTC */
	assert_string_equal(who(doc, &waw, 1, utc(2026, 12, 24, 16, 59)), "A");
	assert_string_equal(who(doc, &waw, 1, utc(2026, 12, 24, 17, 0)), "X");
	assert_string_equal(who(doc, &waw, 1, utc(2026, 12, 26, 7, 59)), "X");
	assert_string_equal(who(doc, &waw, 1, utc(2026, 12, 26, 8, 0)), "A");
	/* week 39 since 2026-03-23 in both zones: A */
	assert_string_equal(who(doc, &ny, 1, utc(2026, 12, 24, 17, 0)), "A");
	/* absolute override of everyone, whatever their zone */
	assert_string_equal(who(doc, &waw, 1, utc(2026, 12, 31, 20, 0)), "Y");
	assert_string_equal(who(doc, &ny, 1, utc(2026, 12, 31, 21, 59)), "Y");
	assert_string_equal(who(doc, &ny, 1, utc(2026, 12, 31, 22, 0)), "B"); /* week 40 */
	w = oncall_pick(doc, &waw, 1, utc(2026, 12, 25, 0, 0));
	assert_string_equal(json_string_value(json_object_get(w, "source")), "override");
	assert_int_equal(json_integer_value(json_object_get(w, "from")), 0);
	json_decref(w);
	w = oncall_pick(doc, &waw, 1, utc(2026, 12, 1, 12, 0));
	assert_string_equal(json_string_value(json_object_get(w, "source")), "rotation");
	assert_string_equal(json_string_value(json_object_get(w, "from")), "duty");
	json_decref(w);
	json_decref(doc);
}

static void test_unknown_zone_reads_utc(void **state)
{
	struct portfolio_property odd = {.id = "prop_odd", .timezone = "Mars/Olympus"};
	json_t *doc = load();

	(void)state;
	assert_string_equal(who(doc, &odd, 1, utc(2026, 3, 23, 8, 59)), "C");
	assert_string_equal(who(doc, &odd, 1, utc(2026, 3, 23, 9, 0)), "A");
	json_decref(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_weekly_hand_over_in_local_time),
		cmocka_unit_test(test_levels_properties_and_daily_periods),
		cmocka_unit_test(test_overrides_win),
		cmocka_unit_test(test_unknown_zone_reads_utc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
