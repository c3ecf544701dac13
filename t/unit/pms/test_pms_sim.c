/* Unit tests for pms_sim_core: rates and previous_rate against an oracle,
 * idempotency, fault injection, every validation message, the range and
 * capacity limits, and threads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/id.h"
#include "pms/pms_sim_core.h"

static struct pms_sim *new_sim(const char *fail)
{
	struct pms_sim *s = pms_sim_new(fail);

	assert_non_null(s);
	return s;
}

/* Posts the JSON text body for code; returns the status, *resp owned. */
static int post_text(struct pms_sim *s, const char *code, const char *body, json_t **resp)
{
	json_error_t err;
	json_t *req = json_loads(body, JSON_REJECT_DUPLICATES, &err);
	int status;

	if (!req)
		fail_msg("bad test JSON %s: %s", body, err.text);
	status = pms_sim_write(s, code, req, resp);
	json_decref(req);
	assert_non_null(*resp);
	return status;
}

/* Posts a well-formed write. */
static int post(struct pms_sim *s, const char *code, const char *room, const char *from,
		const char *to, const char *cur, long long minor, const char *key, json_t **resp)
{
	json_t *req = json_pack("{s:s,s:s,s:s,s:{s:s,s:I},s:s}", "room_type_code", room, "from",
				from, "to", to, "rate", "currency", cur, "minor_units",
				(json_int_t)minor, "idempotency_key", key);
	int status;

	assert_non_null(req);
	status = pms_sim_write(s, code, req, resp);
	json_decref(req);
	assert_non_null(*resp);
	return status;
}

/* The minor_units of the response's previous_rate, or 0 when null. */
static long long prev_minor(const json_t *resp)
{
	const json_t *p = json_object_get(resp, "previous_rate");

	assert_non_null(p);
	if (json_is_null(p))
		return 0;
	assert_int_equal(json_object_size(p), 2);
	assert_true(json_is_string(json_object_get(p, "currency")));
	return (long long)json_integer_value(json_object_get(p, "minor_units"));
}

/* A write that must succeed; returns previous_rate's minor_units (0 = null). */
static long long ok_write(struct pms_sim *s, const char *code, const char *room, const char *from,
			  const char *to, long long minor, const char *key)
{
	json_t *resp;
	long long prev;

	assert_int_equal(post(s, code, room, from, to, "PLN", minor, key, &resp), 200);
	prev = prev_minor(resp);
	json_decref(resp);
	return prev;
}

static size_t written_count(struct pms_sim *s)
{
	json_t *w = pms_sim_written(s);
	size_t n;

	assert_non_null(w);
	n = json_array_size(w);
	json_decref(w);
	return n;
}

static const char *error_of(const json_t *resp)
{
	const char *e = json_string_value(json_object_get(resp, "error"));

	assert_non_null(e);
	assert_int_equal(json_object_size(resp), 1);
	return e;
}

/* The response has exactly pms_ref (pms_ + id body), previous_rate, at. */
static void check_response_shape(const json_t *resp)
{
	const char *ref = json_string_value(json_object_get(resp, "pms_ref"));
	const char *at = json_string_value(json_object_get(resp, "at"));

	assert_int_equal(json_object_size(resp), 3);
	assert_non_null(ref);
	assert_true(id_valid("pms_", ref));
	assert_non_null(at);
	assert_int_equal(strlen(at), CLOCK_RFC3339_LEN - 1);
	assert_int_equal(at[10], 'T');
	assert_int_equal(at[23], 'Z');
	assert_non_null(json_object_get(resp, "previous_rate"));
}

/* previous_rate follows the chain of writes for one (code, room type,
 * from) and is independent across room types and property codes. */
static void test_previous_rate_chain(void **state)
{
	struct pms_sim *s = new_sim(NULL);
	json_t *r;

	(void)state;
	assert_int_equal(post(s, "WAW01", "DBL", "2026-11-22", "2026-11-22", "PLN", 45900, "k1", &r),
			 200);
	check_response_shape(r);
	assert_true(json_is_null(json_object_get(r, "previous_rate")));
	json_decref(r);
	assert_int_equal(post(s, "WAW01", "DBL", "2026-11-22", "2026-11-22", "EUR", 9900, "k2", &r),
			 200);
	check_response_shape(r);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "previous_rate"),
							      "currency")),
			    "PLN");
	assert_int_equal(prev_minor(r), 45900);
	json_decref(r);
	assert_int_equal(ok_write(s, "WAW01", "DBL", "2026-11-22", "2026-11-22", 300, "k3"), 9900);
	assert_int_equal(ok_write(s, "WAW01", "SGL", "2026-11-22", "2026-11-22", 400, "k4"), 0);
	assert_int_equal(ok_write(s, "KRK01", "DBL", "2026-11-22", "2026-11-22", 500, "k5"), 0);
	assert_int_equal(ok_write(s, "WAW01", "DBL", "2026-11-22", "2026-11-22", 600, "k6"), 300);
	assert_int_equal(written_count(s), 6);
	pms_sim_free(s);
}

/* The /written entries carry every field of the write, oldest first, and
 * the array handed out is a copy. */
static void test_written_entries(void **state)
{
	struct pms_sim *s = new_sim(NULL);
	json_t *r, *w, *e;

	(void)state;
	assert_int_equal(post(s, "WAW01", "DBL", "2026-01-01", "2026-01-03", "PLN", 100, "a", &r),
			 200);
	json_decref(r);
	assert_int_equal(post(s, "WAW01", "DBL", "2026-01-02", "2026-01-02", "PLN", 200, "b", &r),
			 200);
	w = pms_sim_written(s);
	assert_non_null(w);
	assert_int_equal(json_array_size(w), 2);
	e = json_array_get(w, 1);
	assert_int_equal(json_object_size(e), 9);
	assert_string_equal(json_string_value(json_object_get(e, "property_code")), "WAW01");
	assert_string_equal(json_string_value(json_object_get(e, "room_type_code")), "DBL");
	assert_string_equal(json_string_value(json_object_get(e, "from")), "2026-01-02");
	assert_string_equal(json_string_value(json_object_get(e, "to")), "2026-01-02");
	assert_string_equal(json_string_value(json_object_get(e, "idempotency_key")), "b");
	assert_string_equal(json_string_value(json_object_get(json_object_get(e, "rate"), "currency")),
			    "PLN");
	assert_int_equal(json_integer_value(
				 json_object_get(json_object_get(e, "rate"), "minor_units")),
			 200);
	assert_int_equal(json_object_size(json_object_get(e, "rate")), 2);
	assert_string_equal(json_string_value(json_object_get(e, "pms_ref")),
			    json_string_value(json_object_get(r, "pms_ref")));
	assert_string_equal(json_string_value(json_object_get(e, "at")),
			    json_string_value(json_object_get(r, "at")));
	assert_true(json_equal(json_object_get(e, "previous_rate"),
			       json_object_get(r, "previous_rate")));
	assert_string_equal(json_string_value(
				    json_object_get(json_array_get(w, 0), "idempotency_key")),
			    "a");
	assert_true(json_is_null(json_object_get(json_array_get(w, 0), "previous_rate")));
	json_array_clear(w);
	json_decref(w);
	json_decref(r);
	assert_int_equal(written_count(s), 2);
	pms_sim_free(s);
}

/* Multi-day writes set every day inclusive; overlapping writes split and
 * replace the spans below them (each day probed once, by a one-day write
 * that only changes that day). */
static void test_ranges_and_overlaps(void **state)
{
	struct pms_sim *s = new_sim(NULL);
	static const struct {
		const char *day;
		long long want;
	} probes[] = {
		{"2025-12-31", 0},   {"2026-01-01", 100}, {"2026-01-02", 100}, {"2026-01-03", 700},
		{"2026-01-04", 700}, {"2026-01-05", 700}, {"2026-01-06", 700}, {"2026-01-07", 700},
		{"2026-01-08", 700}, {"2026-01-09", 700}, {"2026-01-10", 300}, {"2026-01-11", 0},
		{"2026-01-12", 0},
	};
	char key[32];
	size_t i;

	(void)state;
	assert_int_equal(ok_write(s, "P", "R", "2026-01-01", "2026-01-03", 100, "w1"), 0);
	assert_int_equal(ok_write(s, "P", "R", "2026-01-05", "2026-01-07", 200, "w2"), 0);
	assert_int_equal(ok_write(s, "P", "R", "2026-01-09", "2026-01-10", 300, "w3"), 0);
	/* Covers the end of w1, the gap, all of w2, the gap, the start of w3. */
	assert_int_equal(ok_write(s, "P", "R", "2026-01-03", "2026-01-09", 700, "w4"), 100);
	for (i = 0; i < ARRAY_LEN(probes); i++) {
		snprintf(key, sizeof key, "probe-%zu", i);
		assert_int_equal(ok_write(s, "P", "R", probes[i].day, probes[i].day, 1, key),
				 probes[i].want);
	}
	/* Across a leap day and a year end. */
	assert_int_equal(ok_write(s, "P", "L", "2028-02-27", "2028-03-01", 50, "l1"), 0);
	assert_int_equal(ok_write(s, "P", "L", "2028-02-29", "2028-02-29", 60, "l2"), 50);
	assert_int_equal(ok_write(s, "P", "L", "2028-03-01", "2028-03-01", 70, "l3"), 50);
	assert_int_equal(ok_write(s, "P", "L", "2028-03-02", "2028-03-02", 70, "l4"), 0);
	assert_int_equal(ok_write(s, "P", "Y", "2026-12-30", "2027-01-02", 80, "y1"), 0);
	assert_int_equal(ok_write(s, "P", "Y", "2027-01-02", "2027-01-02", 90, "y2"), 80);
	assert_int_equal(ok_write(s, "P", "Y", "2027-01-03", "2027-01-03", 90, "y3"), 0);
	pms_sim_free(s);
}

/* Random overlapping writes over 120 days against a per-day array. */
static void test_random_against_oracle(void **state)
{
	struct pms_sim *s = new_sim(NULL);
	long long oracle[120] = {0};
	unsigned seed = 12345;
	char from[11], to[11], key[32];
	int64_t base;
	int i, a, b, d;

	(void)state;
	assert_int_equal(clock_parse_date("2026-03-01", &base), 0);
	for (i = 0; i < 3000; i++) {
		a = rand_r(&seed) % 120;
		b = a + rand_r(&seed) % (i % 7 ? 4 : 60);
		if (b >= 120)
			b = 119;
		clock_format_date(base + a, from);
		clock_format_date(base + b, to);
		snprintf(key, sizeof key, "r%d", i);
		assert_int_equal(ok_write(s, "P", "R", from, to, i + 1, key), oracle[a]);
		for (d = a; d <= b; d++)
			oracle[d] = i + 1;
	}
	pms_sim_free(s);
}

/* A repeated key with the same body answers the stored response, changes
 * nothing and adds no /written entry; keys are scoped per property code. */
static void test_idempotent_replay(void **state)
{
	struct pms_sim *s = new_sim(NULL);
	json_t *first, *again;

	(void)state;
	assert_int_equal(post(s, "WAW01", "DBL", "2026-05-01", "2026-05-02", "PLN", 100, "K1", &first),
			 200);
	assert_int_equal(ok_write(s, "WAW01", "DBL", "2026-05-01", "2026-05-01", 200, "K2"), 100);
	/* Same body, keys in another order. */
	assert_int_equal(post_text(s, "WAW01",
				   "{\"idempotency_key\": \"K1\", \"rate\": {\"minor_units\": 100,"
				   " \"currency\": \"PLN\"}, \"to\": \"2026-05-02\","
				   " \"from\": \"2026-05-01\", \"room_type_code\": \"DBL\"}",
				   &again),
			 200);
	assert_true(json_equal(first, again));
	assert_true(json_is_null(json_object_get(again, "previous_rate")));
	json_decref(again);
	/* K1 was not applied again: 05-01 still has K2's rate. */
	assert_int_equal(ok_write(s, "WAW01", "DBL", "2026-05-01", "2026-05-01", 300, "K3"), 200);
	assert_int_equal(ok_write(s, "WAW01", "DBL", "2026-05-02", "2026-05-02", 300, "K4"), 100);
	assert_int_equal(written_count(s), 4);
	/* The same key for another property is a new write. */
	assert_int_equal(ok_write(s, "KRK01", "DBL", "2026-05-01", "2026-05-02", 100, "K1"), 0);
	assert_int_equal(written_count(s), 5);
	json_decref(first);
	pms_sim_free(s);
}

/* The same key with any other body is refused and records nothing. */
static void test_key_reused_409(void **state)
{
	struct pms_sim *s = new_sim(NULL);
	json_t *r;

	(void)state;
	assert_int_equal(ok_write(s, "WAW01", "DBL", "2026-05-01", "2026-05-02", 100, "K"), 0);
	assert_int_equal(post(s, "WAW01", "DBL", "2026-05-01", "2026-05-02", "PLN", 101, "K", &r),
			 409);
	assert_string_equal(error_of(r), "idempotency key reused with a different request");
	json_decref(r);
	assert_int_equal(post(s, "WAW01", "DBL", "2026-05-01", "2026-05-03", "PLN", 100, "K", &r),
			 409);
	json_decref(r);
	assert_int_equal(post(s, "WAW01", "SGL", "2026-05-01", "2026-05-02", "PLN", 100, "K", &r),
			 409);
	json_decref(r);
	assert_int_equal(post(s, "WAW01", "DBL", "2026-05-01", "2026-05-02", "EUR", 100, "K", &r),
			 409);
	json_decref(r);
	assert_int_equal(written_count(s), 1);
	assert_int_equal(ok_write(s, "WAW01", "DBL", "2026-05-02", "2026-05-02", 5, "K2"), 100);
	pms_sim_free(s);
}

/* Failing codes answer 500 before anything else and record nothing; other
 * codes, even ones sharing a prefix, work. */
static void test_fail_codes(void **state)
{
	struct pms_sim *s = new_sim("BAD1,,BAD2,");
	json_t *r;

	(void)state;
	assert_int_equal(post(s, "BAD1", "DBL", "2026-05-01", "2026-05-01", "PLN", 100, "k", &r),
			 500);
	assert_string_equal(error_of(r), "injected failure");
	json_decref(r);
	assert_int_equal(post_text(s, "BAD2", "{}", &r), 500);
	assert_string_equal(error_of(r), "injected failure");
	json_decref(r);
	assert_int_equal(written_count(s), 0);
	assert_int_equal(ok_write(s, "BAD", "DBL", "2026-05-01", "2026-05-01", 100, "k"), 0);
	assert_int_equal(ok_write(s, "BAD12", "DBL", "2026-05-01", "2026-05-01", 100, "k"), 0);
	assert_int_equal(written_count(s), 2);
	pms_sim_free(s);
	s = new_sim("");
	assert_int_equal(ok_write(s, "BAD1", "DBL", "2026-05-01", "2026-05-01", 100, "k"), 0);
	pms_sim_free(s);
}

/* Every malformed request gets 400 and its own message; none is recorded. */
static void test_validation(void **state)
{
#define OKRATE "\"rate\": {\"currency\": \"PLN\", \"minor_units\": 100}"
#define OKBODY(room, from, to, rate, key)                                          \
	"{\"room_type_code\": " room ", \"from\": " from ", \"to\": " to ", " rate \
	", \"idempotency_key\": " key "}"
	static const struct {
		const char *body, *msg;
	} cases[] = {
		{"[]", "the request body must be a JSON object"},
		{"{\"from\": \"2026-01-01\", \"to\": \"2026-01-01\", " OKRATE
		 ", \"idempotency_key\": \"k\"}",
		 "room_type_code is required"},
		{OKBODY("5", "\"2026-01-01\"", "\"2026-01-01\"", OKRATE, "\"k\""),
		 "room_type_code must be a string"},
		{OKBODY("null", "\"2026-01-01\"", "\"2026-01-01\"", OKRATE, "\"k\""),
		 "room_type_code must be a string"},
		{OKBODY("\"\"", "\"2026-01-01\"", "\"2026-01-01\"", OKRATE, "\"k\""),
		 "room_type_code must not be empty"},
		{"{\"room_type_code\": \"D\", \"to\": \"2026-01-01\", " OKRATE
		 ", \"idempotency_key\": \"k\"}",
		 "from is required"},
		{OKBODY("\"D\"", "20260101", "\"2026-01-01\"", OKRATE, "\"k\""),
		 "from must be a string"},
		{OKBODY("\"D\"", "\"2026-02-30\"", "\"2026-03-01\"", OKRATE, "\"k\""),
		 "from must be a date YYYY-MM-DD"},
		{OKBODY("\"D\"", "\"2026-1-01\"", "\"2026-03-01\"", OKRATE, "\"k\""),
		 "from must be a date YYYY-MM-DD"},
		{OKBODY("\"D\"", "\"2026-01-01T00:00:00Z\"", "\"2026-03-01\"", OKRATE, "\"k\""),
		 "from must be a date YYYY-MM-DD"},
		{"{\"room_type_code\": \"D\", \"from\": \"2026-01-01\", " OKRATE
		 ", \"idempotency_key\": \"k\"}",
		 "to is required"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "[]", OKRATE, "\"k\""), "to must be a string"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2027-02-29\"", OKRATE, "\"k\""),
		 "to must be a date YYYY-MM-DD"},
		{OKBODY("\"D\"", "\"2026-01-02\"", "\"2026-01-01\"", OKRATE, "\"k\""),
		 "to must not be before from"},
		{"{\"room_type_code\": \"D\", \"from\": \"2026-01-01\", \"to\": \"2026-01-01\","
		 " \"idempotency_key\": \"k\"}",
		 "rate is required"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"", "\"rate\": 100", "\"k\""),
		 "rate must be an object"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"", "\"rate\": null", "\"k\""),
		 "rate must be an object"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"minor_units\": 1}", "\"k\""),
		 "rate.currency is required"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": 985, \"minor_units\": 1}", "\"k\""),
		 "rate.currency must be a string"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": \"pln\", \"minor_units\": 1}", "\"k\""),
		 "rate.currency must be 3 uppercase letters (ISO 4217)"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": \"PLNX\", \"minor_units\": 1}", "\"k\""),
		 "rate.currency must be 3 uppercase letters (ISO 4217)"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": \"PL\", \"minor_units\": 1}", "\"k\""),
		 "rate.currency must be 3 uppercase letters (ISO 4217)"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": \"P1N\", \"minor_units\": 1}", "\"k\""),
		 "rate.currency must be 3 uppercase letters (ISO 4217)"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": \"\", \"minor_units\": 1}", "\"k\""),
		 "rate.currency must not be empty"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": \"PLN\"}", "\"k\""),
		 "rate.minor_units is required"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": \"PLN\", \"minor_units\": 0}", "\"k\""),
		 "rate.minor_units must be a positive integer"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": \"PLN\", \"minor_units\": -5}", "\"k\""),
		 "rate.minor_units must be a positive integer"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": \"PLN\", \"minor_units\": 100.0}", "\"k\""),
		 "rate.minor_units must be a positive integer"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": \"PLN\", \"minor_units\": \"100\"}", "\"k\""),
		 "rate.minor_units must be a positive integer"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"",
			"\"rate\": {\"currency\": \"PLN\", \"minor_units\": 1, \"tax\": 0}", "\"k\""),
		 "rate.tax is not a known field"},
		{"{\"room_type_code\": \"D\", \"from\": \"2026-01-01\", \"to\": \"2026-01-01\", " OKRATE
		 "}",
		 "idempotency_key is required"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"", OKRATE, "7"),
		 "idempotency_key must be a string"},
		{OKBODY("\"D\"", "\"2026-01-01\"", "\"2026-01-01\"", OKRATE, "\"\""),
		 "idempotency_key must not be empty"},
		{"{\"room_type_code\": \"D\", \"from\": \"2026-01-01\", \"to\": \"2026-01-01\", " OKRATE
		 ", \"idempotency_key\": \"k\", \"note\": \"x\"}",
		 "note is not a known field"},
	};
	struct pms_sim *s = new_sim(NULL);
	json_t *r;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_LEN(cases); i++) {
		if (post_text(s, "WAW01", cases[i].body, &r) != 400)
			fail_msg("case %zu: %s: not 400", i, cases[i].body);
		if (strcmp(error_of(r), cases[i].msg) != 0)
			fail_msg("case %zu: got \"%s\", want \"%s\"", i, error_of(r), cases[i].msg);
		json_decref(r);
	}
	assert_int_equal(written_count(s), 0);
	pms_sim_free(s);
#undef OKBODY
#undef OKRATE
}

/* Strings are capped at 255 characters (code points, not bytes); the
 * property code must be non-empty and is capped likewise. */
static void test_string_limits(void **state)
{
	struct pms_sim *s = new_sim(NULL);
	char big[1100], room[1100];
	json_t *r, *req;
	size_t i;

	(void)state;
	memset(big, 'k', 255);
	big[255] = '\0';
	assert_int_equal(ok_write(s, "WAW01", "DBL", "2026-01-01", "2026-01-01", 1, big), 0);
	memset(big, 'k', 256);
	big[256] = '\0';
	assert_int_equal(post(s, "WAW01", "DBL", "2026-01-01", "2026-01-01", "PLN", 1, big, &r), 400);
	assert_string_equal(error_of(r), "idempotency_key must be at most 255 characters");
	json_decref(r);
	/* 255 two-byte characters (510 bytes) are fine, 256 are not. */
	for (i = 0; i < 255; i++)
		memcpy(room + 2 * i, "\xc5\x82", 2);
	room[510] = '\0';
	assert_int_equal(ok_write(s, "WAW01", room, "2026-01-01", "2026-01-01", 1, "u1"), 0);
	memcpy(room + 510, "\xc5\x82", 3);
	assert_int_equal(post(s, "WAW01", room, "2026-01-01", "2026-01-01", "PLN", 1, "u2", &r), 400);
	assert_string_equal(error_of(r), "room_type_code must be at most 255 characters");
	json_decref(r);
	assert_int_equal(post(s, "", "DBL", "2026-01-01", "2026-01-01", "PLN", 1, "u3", &r), 400);
	assert_string_equal(error_of(r), "the property code is empty");
	json_decref(r);
	assert_int_equal(post(s, big, "DBL", "2026-01-01", "2026-01-01", "PLN", 1, "u4", &r), 400);
	assert_string_equal(error_of(r), "the property code is longer than 255 characters");
	json_decref(r);
	/* A string with an embedded NUL (jansson can hold one). */
	req = json_pack("{s:o,s:s,s:s,s:{s:s,s:i},s:s}", "room_type_code", json_stringn("a\0b", 3),
			"from", "2026-01-01", "to", "2026-01-01", "rate", "currency", "PLN",
			"minor_units", 1, "idempotency_key", "u5");
	assert_non_null(req);
	assert_int_equal(pms_sim_write(s, "WAW01", req, &r), 400);
	assert_string_equal(error_of(r), "room_type_code must not contain NUL characters");
	json_decref(r);
	json_decref(req);
	/* An unknown key is named, cut at a character boundary. */
	req = json_pack("{s:s,s:s,s:s,s:{s:s,s:i},s:s}", "room_type_code", "D", "from",
			"2026-01-01", "to", "2026-01-01", "rate", "currency", "PLN", "minor_units",
			1, "idempotency_key", "u6");
	assert_non_null(req);
	memset(big, 'x', 63);
	for (i = 0; i < 20; i++)
		memcpy(big + 63 + 2 * i, "\xc5\x82", 2);
	big[103] = '\0';
	assert_int_equal(json_object_set_new(json_object_get(req, "rate"), big, json_true()), 0);
	assert_int_equal(pms_sim_write(s, "WAW01", req, &r), 400);
	big[63] = '\0';
	snprintf(room, sizeof room, "rate.%.100s... is not a known field", big);
	assert_string_equal(error_of(r), room);
	json_decref(r);
	json_decref(req);
	assert_int_equal(written_count(s), 2);
	pms_sim_free(s);
}

/* 366 days inclusive is the longest range; 367 is refused. */
static void test_range_limit(void **state)
{
	struct pms_sim *s = new_sim(NULL);
	json_t *r;

	(void)state;
	assert_int_equal(ok_write(s, "P", "R", "2026-01-01", "2026-12-31", 1, "a"), 0); /* 365 */
	assert_int_equal(ok_write(s, "P", "R", "2028-01-01", "2028-12-31", 2, "b"), 0); /* 366 */
	assert_int_equal(ok_write(s, "P", "R", "2026-01-01", "2027-01-01", 3, "c"), 1); /* 366 */
	assert_int_equal(post(s, "P", "R", "2026-01-01", "2027-01-02", "PLN", 4, "d", &r), 400);
	assert_string_equal(error_of(r), "from..to covers 367 days; at most 366 are allowed");
	json_decref(r);
	assert_int_equal(post(s, "P", "R", "0001-01-01", "9999-12-31", "PLN", 4, "e", &r), 400);
	assert_string_equal(error_of(r), "from..to covers 3652059 days; at most 366 are allowed");
	json_decref(r);
	assert_int_equal(ok_write(s, "P", "R", "2027-01-01", "2027-01-01", 5, "f"), 3);
	assert_int_equal(ok_write(s, "P", "R", "2027-01-02", "2027-01-02", 5, "g"), 0);
	assert_int_equal(written_count(s), 5);
	pms_sim_free(s);
}

/* At capacity new writes get 503 while replays still answer; the
 * override can be lifted again. */
static void test_capacity(void **state)
{
	struct pms_sim *s = new_sim(NULL);
	json_t *first, *r;

	(void)state;
	pms_sim_set_capacity(s, 3);
	assert_int_equal(post(s, "P", "R", "2026-01-01", "2026-01-01", "PLN", 1, "k1", &first), 200);
	assert_int_equal(ok_write(s, "P", "R", "2026-01-01", "2026-01-01", 2, "k2"), 1);
	assert_int_equal(ok_write(s, "Q", "R", "2026-01-01", "2026-01-01", 3, "k3"), 0);
	assert_int_equal(post(s, "P", "R", "2026-01-01", "2026-01-01", "PLN", 4, "k4", &r), 503);
	assert_string_equal(error_of(r), "simulator full");
	json_decref(r);
	assert_int_equal(post(s, "P", "R", "2026-01-01", "2026-01-01", "PLN", 1, "k1", &r), 200);
	assert_true(json_equal(first, r));
	json_decref(r);
	assert_int_equal(post(s, "P", "R", "2026-01-01", "2026-01-01", "PLN", 9, "k1", &r), 409);
	json_decref(r);
	assert_int_equal(written_count(s), 3);
	pms_sim_set_capacity(s, 0);
	assert_int_equal(ok_write(s, "P", "R", "2026-01-01", "2026-01-01", 4, "k4"), 2);
	assert_int_equal(written_count(s), 4);
	json_decref(first);
	pms_sim_free(s);
}

#define THREADS 4
#define PER_THREAD 500

struct worker {
	struct pms_sim *s;
	int n;
	int64_t base; /* 2026-01-01 */
	int bad;      /* wrong answers seen */
	char refs[PER_THREAD][ID_MAX];
};

/* Each thread writes its own room type with rates 1, 2, 3... (so every
 * previous_rate is exactly the one before) and a shared room type, while
 * reading /written now and then. */
static void *worker_run(void *arg)
{
	struct worker *w = arg;
	char room[16], key[32], to[11];
	json_t *req, *resp, *snap, *prev;
	int i, st;

	snprintf(room, sizeof room, "T%d", w->n);
	for (i = 0; i < PER_THREAD; i++) {
		snprintf(key, sizeof key, "t%d-%d", w->n, i);
		clock_format_date(w->base + i % 3, to);
		req = json_pack("{s:s,s:s,s:s,s:{s:s,s:i},s:s}", "room_type_code",
				i % 2 ? room : "SHARED", "from", "2026-01-01", "to", to, "rate",
				"currency", "PLN", "minor_units", i + 1, "idempotency_key", key);
		resp = NULL;
		st = req ? pms_sim_write(w->s, "P", req, &resp) : -1;
		json_decref(req);
		if (st != 200) {
			w->bad++;
			json_decref(resp);
			continue;
		}
		/* No cmocka assertions off the main thread: count instead. */
		prev = json_object_get(resp, "previous_rate");
		if (i % 2 && (i > 1 ? json_integer_value(json_object_get(prev, "minor_units")) != i - 1
				    : !json_is_null(prev)))
			w->bad++;
		if (!(i % 2) && i > 0 && !json_is_object(prev))
			w->bad++;
		snprintf(w->refs[i], ID_MAX, "%s",
			 json_string_value(json_object_get(resp, "pms_ref")));
		json_decref(resp);
		if (i % 100 == 0) {
			snap = pms_sim_written(w->s);
			if (!snap)
				w->bad++;
			json_decref(snap);
		}
	}
	return NULL;
}

static int cmp_ref(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* 4 threads x 500 writes: 2000 entries, distinct pms_refs, every entry
 * whole, every previous_rate chain intact. */
static void test_threads(void **state)
{
	struct pms_sim *s = new_sim(NULL);
	struct worker *w = calloc(THREADS, sizeof *w);
	pthread_t th[THREADS];
	char(*all)[ID_MAX] = calloc(THREADS * PER_THREAD, ID_MAX);
	json_t *snap, *e;
	size_t i;
	int t;

	(void)state;
	assert_non_null(w);
	assert_non_null(all);
	for (t = 0; t < THREADS; t++) {
		w[t].s = s;
		w[t].n = t;
		assert_int_equal(clock_parse_date("2026-01-01", &w[t].base), 0);
		assert_int_equal(pthread_create(&th[t], NULL, worker_run, &w[t]), 0);
	}
	for (t = 0; t < THREADS; t++) {
		assert_int_equal(pthread_join(th[t], NULL), 0);
		assert_int_equal(w[t].bad, 0);
		memcpy(all[t * PER_THREAD], w[t].refs, sizeof w[t].refs);
	}
	snap = pms_sim_written(s);
	assert_non_null(snap);
	assert_int_equal(json_array_size(snap), THREADS * PER_THREAD);
	json_array_foreach(snap, i, e) {
		assert_int_equal(json_object_size(e), 9);
		assert_true(id_valid("pms_", json_string_value(json_object_get(e, "pms_ref"))));
	}
	json_decref(snap);
	qsort(all, THREADS * PER_THREAD, ID_MAX, cmp_ref);
	for (i = 1; i < THREADS * PER_THREAD; i++)
		assert_string_not_equal(all[i - 1], all[i]);
	free(all);
	free(w);
	pms_sim_free(s);
}

/* Freeing NULL and an unused simulator is fine. */
static void test_new_free(void **state)
{
	(void)state;
	pms_sim_free(NULL);
	pms_sim_free(new_sim(",,,"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_previous_rate_chain),
		cmocka_unit_test(test_written_entries),
		cmocka_unit_test(test_ranges_and_overlaps),
		cmocka_unit_test(test_random_against_oracle),
		cmocka_unit_test(test_idempotent_replay),
		cmocka_unit_test(test_key_reused_409),
		cmocka_unit_test(test_fail_codes),
		cmocka_unit_test(test_validation),
		cmocka_unit_test(test_string_limits),
		cmocka_unit_test(test_range_limit),
		cmocka_unit_test(test_capacity),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_new_free),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
