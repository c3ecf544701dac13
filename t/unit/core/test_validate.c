/* Unit tests for validate: strict body parsing and field specs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "core/validate.h"

/* Parses n bytes; returns the result and leaves the message in err. */
static int parse(const char *s, size_t n, json_t **out, struct buf *err)
{
	int rc;

	buf_reset(err);
	rc = validate_parse_body(s, n, out, err);
	if (rc < 0)
		assert_null(*out);
	return rc;
}

/* Expects the body s (NUL-terminated) to be rejected with exactly msg. */
static void reject(const char *s, const char *msg)
{
	struct buf err;
	json_t *j = (json_t *)1;

	buf_init(&err, 4096);
	assert_int_equal(parse(s, strlen(s), &j, &err), -1);
	assert_non_null(err.data);
	assert_string_equal(err.data, msg);
	buf_free(&err);
}

/* Same with explicit length (for bodies holding NUL bytes). */
static void reject_n(const char *s, size_t n, const char *msg)
{
	struct buf err;
	json_t *j = (json_t *)1;

	buf_init(&err, 4096);
	assert_int_equal(parse(s, n, &j, &err), -1);
	assert_non_null(err.data);
	assert_string_equal(err.data, msg);
	buf_free(&err);
}

/* Expects s to be accepted; returns the object (caller json_decref()s). */
static json_t *accept(const char *s)
{
	struct buf err;
	json_t *j = NULL;

	buf_init(&err, 4096);
	if (parse(s, strlen(s), &j, &err) != 0)
		fail_msg("rejected: %s", err.data ? err.data : "(no message)");
	assert_true(json_is_object(j));
	buf_free(&err);
	return j;
}

/* A string of n copies of open, then close n times: depth n. */
static char *nest(size_t n, const char *open, const char *inner, const char *close)
{
	size_t lo = strlen(open), li = strlen(inner), lc = strlen(close), i, o = 0;
	char *s = malloc(n * (lo + lc) + li + 1);

	assert_non_null(s);
	for (i = 0; i < n; i++, o += lo)
		memcpy(s + o, open, lo);
	memcpy(s + o, inner, li);
	o += li;
	for (i = 0; i < n; i++, o += lc)
		memcpy(s + o, close, lc);
	s[o] = '\0';
	return s;
}

/* Asserts details is exactly the (field, issue) pairs given, in order,
 * terminated by a NULL field. */
static void expect_details(const json_t *details, ...)
{
	const char *field, *issue;
	size_t i = 0;
	va_list ap;
	json_t *d;

	va_start(ap, details);
	while ((field = va_arg(ap, const char *)) != NULL) {
		issue = va_arg(ap, const char *);
		d = json_array_get(details, i);
		if (!d)
			fail_msg("missing detail %zu: %s %s", i, field, issue);
		assert_int_equal(json_object_size(d), 2);
		assert_string_equal(json_string_value(json_object_get(d, "field")), field);
		assert_string_equal(json_string_value(json_object_get(d, "issue")), issue);
		i++;
	}
	va_end(ap);
	assert_int_equal(json_array_size(details), i);
}

/* Parses body (which must be well-formed), validates it against spec and
 * returns the details array; *n gets validate_object's result. */
static json_t *check(const char *body, const struct vfield *spec, int *n)
{
	json_t *obj = accept(body), *details = json_array();

	assert_non_null(details);
	*n = validate_object(obj, spec, "", details);
	json_decref(obj);
	return details;
}

/* ---- validate_parse_body ---- */

static void test_parse_ok(void **state)
{
	json_t *j;

	(void)state;
	j = accept(" {\"a\": [1, 2.5, \"x\", true, null, {}], \"b\": {\"c\": \"\xc5\xbc\"}}\n");
	assert_int_equal(json_object_size(j), 2);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "b"), "c")),
			    "\xc5\xbc");
	json_decref(j);
	j = accept("{}");
	json_decref(j);
}

static void test_parse_empty(void **state)
{
	struct buf err;
	json_t *j = (json_t *)1;

	(void)state;
	reject("", "request body is empty");
	reject(" \r\n\t ", "request body is empty");
	buf_init(&err, 0);
	assert_int_equal(validate_parse_body(NULL, 0, &j, &err), -1);
	assert_null(j);
	assert_string_equal(err.data, "request body is empty");
	/* err may be NULL when the caller does not want a message. */
	assert_int_equal(validate_parse_body("", 0, &j, NULL), -1);
	buf_free(&err);
}

static void test_parse_invalid_json(void **state)
{
	(void)state;
	reject("{\"a\": x}", "invalid JSON at line 1 column 7: invalid token near 'x'");
	reject("{\"a\":1,}", "invalid JSON at line 1 column 8: string or '}' expected near '}'");
	reject("{\"a\":1", "invalid JSON at line 1 column 6: '}' expected near end of file");
	reject("{\n\"a\":\n tru}", "invalid JSON at line 3 column 4: invalid token near 'tru'");
	reject("{\"a\":\"\x01\"}",
	       "invalid JSON at line 1 column 6: control character 0x1 near '\"'");
	reject("{\"a\":\"\\ud800\"}",
	       "invalid JSON at line 1 column 13: invalid Unicode '\\uD800' near '\"\\ud800\"'");
	reject("{\"a\":1e400}",
	       "invalid JSON at line 1 column 10: real number overflow near '1e400'");
	reject("\xef\xbb\xbf{}",
	       "invalid JSON at line 1 column 1: invalid token near '\xef\xbb\xbf'");
}

static void test_parse_trailing_garbage(void **state)
{
	(void)state;
	reject("{\"a\":1} x", "invalid JSON at line 1 column 9: end of file expected near 'x'");
	reject("{}{}", "invalid JSON at line 1 column 3: end of file expected near '{'");
	reject("{} []", "invalid JSON at line 1 column 4: end of file expected near '['");
	json_decref(accept("{}  \n"));
}

static void test_parse_top_level_not_object(void **state)
{
	(void)state;
	reject("[]", "request body must be a JSON object");
	reject("[{\"a\":1}]", "request body must be a JSON object");
	reject("\"str\"", "request body must be a JSON object");
	reject("42", "request body must be a JSON object");
	reject("null", "request body must be a JSON object");
	reject("true", "request body must be a JSON object");
}

static void test_parse_depth_32_ok(void **state)
{
	char *s;
	json_t *j;

	(void)state;
	/* 32 objects. */
	s = nest(32, "{\"a\":", "1", "}");
	j = accept(s);
	json_decref(j);
	free(s);
	/* 1 object holding 31 arrays. */
	s = nest(31, "[", "", "]");
	{
		char *b = malloc(strlen(s) + 8);

		assert_non_null(b);
		strcpy(b, "{\"a\":");
		strcat(b, s);
		strcat(b, "}");
		j = accept(b);
		json_decref(j);
		free(b);
	}
	free(s);
	/* Depth goes up and down: many siblings at depth 32 are fine. */
	s = nest(30, "{\"a\":", "[[],[1],{}]", "}");
	j = accept(s);
	json_decref(j);
	free(s);
}

static void test_parse_depth_33_rejected(void **state)
{
	char *s;

	(void)state;
	s = nest(33, "{\"a\":", "1", "}");
	reject(s, "JSON nesting deeper than 32 levels at line 1 column 161");
	free(s);
	s = nest(33, "[", "", "]");
	reject(s, "JSON nesting deeper than 32 levels at line 1 column 33");
	free(s);
	s = nest(32, "{\"a\":", "[1]", "}");
	reject(s, "JSON nesting deeper than 32 levels at line 1 column 161");
	free(s);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_parse_deep_1mib_fast(void **state)
{
	size_t n = 1024 * 1024;
	char *s = malloc(n);
	struct buf err;
	json_t *j = NULL;
	double t0, dt;

	(void)state;
	assert_non_null(s);
	buf_init(&err, 4096);
	memset(s, '[', n);
	t0 = now();
	assert_int_equal(validate_parse_body(s, n, &j, &err), -1);
	dt = now() - t0;
	assert_string_equal(err.data, "JSON nesting deeper than 32 levels at line 1 column 33");
	/* Stops at byte 33: well under a millisecond even under ASan. */
	assert_true(dt < 0.01);
	/* Same with objects, behind a valid prefix. */
	memset(s, ' ', n);
	for (size_t i = 0; i + 5 < n; i += 5)
		memcpy(s + i, "{\"a\":", 5);
	assert_int_equal(validate_parse_body(s, n, &j, &err), -1);
	assert_string_equal(err.data, "JSON nesting deeper than 32 levels at line 1 column 161");
	buf_free(&err);
	free(s);
}

static void test_parse_brackets_in_strings(void **state)
{
	char *deep, *body;
	json_t *j;

	(void)state;
	/* 100 brackets inside string values and keys do not count. */
	deep = nest(100, "[{", "", "}]");
	body = malloc(2 * strlen(deep) + 32);
	assert_non_null(body);
	sprintf(body, "{\"%s\": \"%s\"}", deep, deep);
	j = accept(body);
	assert_string_equal(json_string_value(json_object_get(j, deep)), deep);
	json_decref(j);
	free(body);
	free(deep);
	/* Brackets in strings inside a body already at depth 32. */
	deep = nest(31, "{\"a\":", "{\"[[[[\":\"{{{{\"}", "}");
	j = accept(deep);
	json_decref(j);
	free(deep);
}

static void test_parse_escaped_quotes(void **state)
{
	char *deep, *body;
	json_t *j;

	(void)state;
	/* \" does not end the string, so the brackets after it are text. */
	deep = nest(40, "[", "", "");
	body = malloc(strlen(deep) + 64);
	assert_non_null(body);
	sprintf(body, "{\"a\": \"x\\\"%s\\\"\"}", deep);
	j = accept(body);
	json_decref(j);
	/* \\ is a whole escape: the next quote does end the string, so the
	 * brackets after it count (and are invalid JSON, too deep first). */
	sprintf(body, "{\"a\": \"x\\\\\"%s\"}", deep);
	reject(body, "JSON nesting deeper than 32 levels at line 1 column 43");
	/* \\\" : escaped backslash then escaped quote, still inside. */
	sprintf(body, "{\"a\": \"x\\\\\\\"%s\"}", deep);
	j = accept(body);
	json_decref(j);
	/* \u005c is a backslash character but not an escape of the quote. */
	j = accept("{\"a\": \"\\u005c\", \"b\": [[\"]]]]\"]]}");
	json_decref(j);
	free(body);
	free(deep);
}

static void test_parse_duplicate_keys(void **state)
{
	char body[256];

	(void)state;
	reject("{\"a\":1,\"a\":2}", "duplicate object key \"a\" at line 1 column 8");
	reject("{\"o\": {\"x\": 1,\n \"y\": 2, \"x\": 3}}",
	       "duplicate object key \"x\" at line 2 column 10");
	/* Keys with escapes are shown decoded (and re-escaped). */
	reject("{\"\\u00e9\\\"x\":1, \"\xc3\xa9\\\"x\":2}",
	       "duplicate object key \"\xc3\xa9\\\"x\" at line 1 column 17");
	reject("{\"a\\\\\":1, \"a\\\\\":2}", "duplicate object key \"a\\\\\" at line 1 column 11");
	/* Inside an array of objects. */
	reject("{\"l\": [{\"k\":1}, {\"k\":1, \"k\":2}]}",
	       "duplicate object key \"k\" at line 1 column 25");
	/* Long keys are shortened. */
	snprintf(body, sizeof body, "{\"%070d\":1, \"%070d\":2}", 0, 0);
	reject(body, "duplicate object key \"0000000000000000000000000000000000000000000000000"
		     "000000000000000\" (shortened) at line 1 column 78");
	/* Same key in different objects is fine. */
	json_decref(accept("{\"a\": {\"a\": 1}, \"b\": {\"a\": 2}}"));
}

static void test_parse_invalid_utf8(void **state)
{
	(void)state;
	/* Overlong "/" (C0 AF), overlong 3-byte (E0 80 AF), overlong 4-byte. */
	reject("{\"a\":\"\xc0\xaf\"}", "request body is not valid UTF-8 at line 1 column 7");
	reject("{\"a\":\"\xe0\x80\xaf\"}", "request body is not valid UTF-8 at line 1 column 7");
	reject("{\"a\":\"\xf0\x80\x80\xaf\"}", "request body is not valid UTF-8 at line 1 column 7");
	/* UTF-16 surrogates encoded in UTF-8 (U+D800, U+DFFF). */
	reject("{\"a\":\"\xed\xa0\x80\"}", "request body is not valid UTF-8 at line 1 column 7");
	reject("{\"a\":\"\xed\xbf\xbf\"}", "request body is not valid UTF-8 at line 1 column 7");
	/* Truncated sequences, mid-body and at the very end. */
	reject("{\"a\":\"\xe2\x82\"}", "request body is not valid UTF-8 at line 1 column 7");
	reject("{\"a\":\"\xc5\"}", "request body is not valid UTF-8 at line 1 column 7");
	reject("{}\xf0\x9f\x98", "request body is not valid UTF-8 at line 1 column 3");
	/* Stray continuation, above U+10FFFF, bytes never used. */
	reject("{\"a\":\"\x80\"}", "request body is not valid UTF-8 at line 1 column 7");
	reject("{\"a\":\"\xf4\x90\x80\x80\"}", "request body is not valid UTF-8 at line 1 column 7");
	reject("{\"a\":\"\xfe\"}", "request body is not valid UTF-8 at line 1 column 7");
	/* Outside strings, and the column counts characters, not bytes. */
	reject("{\"\xc5\xbc\xc3\xb3\":\n \"\xc5\xbc\", \xff}",
	       "request body is not valid UTF-8 at line 2 column 7");
	/* Edge values that are valid: U+007F, U+0080, U+FFFF, U+10FFFF. */
	json_decref(accept("{\"a\":\"\x7f\xc2\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf\"}"));
}

static void test_parse_nul(void **state)
{
	(void)state;
	reject_n("{\"a\":\"x\0\"}", 10, "request body contains a NUL byte at line 1 column 8");
	reject_n("{}\0", 3, "request body contains a NUL byte at line 1 column 3");
	reject("{\"a\":\"\\u0000\"}",
	       "invalid JSON at line 1 column 13: \\u0000 is not allowed in strings");
	reject("{\"\\u0000\":1}",
	       "invalid JSON at line 1 column 9: \\u0000 is not allowed in strings");
}

static void test_parse_message_is_clean(void **state)
{
	struct buf err;
	json_t *j = NULL;
	size_t cp;

	(void)state;
	/* jansson quotes raw input; control characters must not leak. */
	buf_init(&err, 4096);
	assert_int_equal(validate_parse_body("{\"a\":\"\x1b[31m\"}", 14, &j, &err), -1);
	assert_null(strchr(err.data, '\x1b'));
	assert_int_equal(validate_utf8_len(err.data, &cp), 0);
	/* A tiny err cap leaves err empty rather than half a message. */
	buf_free(&err);
	buf_init(&err, 8);
	assert_int_equal(validate_parse_body("[]", 2, &j, &err), -1);
	assert_true(err.len == 0);
	buf_free(&err);
}

/* ---- validate_utf8_len ---- */

static void test_utf8_len(void **state)
{
	size_t n = 99;

	(void)state;
	assert_int_equal(validate_utf8_len("", &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(validate_utf8_len("abc", &n), 0);
	assert_int_equal(n, 3);
	/* żółw: 4 characters, 7 bytes; € 3 bytes; 😀 4 bytes. */
	assert_int_equal(validate_utf8_len("\xc5\xbc\xc3\xb3\xc5\x82w", &n), 0);
	assert_int_equal(n, 4);
	assert_int_equal(validate_utf8_len("\xe2\x82\xac\xf0\x9f\x98\x80", &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(validate_utf8_len("x", NULL), 0);
	assert_int_equal(validate_utf8_len("\xc0\xaf", &n), -1);
	assert_int_equal(validate_utf8_len("\xc1\xbf", &n), -1);
	assert_int_equal(validate_utf8_len("\xe0\x9f\xbf", &n), -1);
	assert_int_equal(validate_utf8_len("\xf0\x8f\xbf\xbf", &n), -1);
	assert_int_equal(validate_utf8_len("\xed\xa0\x80", &n), -1);
	assert_int_equal(validate_utf8_len("\xed\xb0\x80", &n), -1);
	assert_int_equal(validate_utf8_len("a\xe2\x82", &n), -1);
	assert_int_equal(validate_utf8_len("\xe2\x82z", &n), -1);
	assert_int_equal(validate_utf8_len("\x80", &n), -1);
	assert_int_equal(validate_utf8_len("\xf4\x90\x80\x80", &n), -1);
	assert_int_equal(validate_utf8_len("\xf5\x80\x80\x80", &n), -1);
	assert_int_equal(validate_utf8_len("\xff", &n), -1);
	assert_int_equal(validate_utf8_len("\xed\x9f\xbf\xee\x80\x80", &n), 0);
	assert_int_equal(n, 2);
}

/* ---- validate_object ---- */

static const struct vfield money_spec[] = {
	{.name = "currency", .type = V_STRING, .required = 1, .max = 3},
	{.name = "minor_units", .type = V_INT, .required = 1},
	{0}};

static const struct vfield item_spec[] = {{.name = "sku", .type = V_STRING, .required = 1},
					  {.name = "qty", .type = V_INT},
					  {0}};

static const struct vfield body_spec[] = {
	{.name = "property_id", .type = V_STRING, .required = 1},
	{.name = "proposed_rate", .type = V_OBJECT, .required = 1, .fields = money_spec},
	{.name = "note", .type = V_STRING, .nullable = 1, .max = 10},
	{.name = "score", .type = V_NUMBER},
	{.name = "publish", .type = V_BOOL},
	{.name = "properties", .type = V_ARRAY, .items = V_STRING, .max = 5},
	{.name = "items", .type = V_ARRAY, .items = V_OBJECT, .item_fields = item_spec},
	{.name = "meta", .type = V_OBJECT},
	{.name = "tags", .type = V_ARRAY},
	{.name = "extra", .type = V_ANY},
	{.name = "maybe", .type = V_ANY, .nullable = 1},
	{0}};

static void test_validate_valid(void **state)
{
	json_t *d;
	int n;

	(void)state;
	d = check("{\"property_id\": \"prop_1\", \"proposed_rate\": {\"currency\": \"PLN\", "
		  "\"minor_units\": 45900}, \"note\": null, \"score\": 1.5, \"publish\": false, "
		  "\"properties\": [\"a\", \"b\"], \"items\": [{\"sku\": \"x\", \"qty\": 2}], "
		  "\"meta\": {\"anything\": [1, {}]}, \"tags\": [1, \"x\", null], "
		  "\"extra\": [], \"maybe\": null}",
		  body_spec, &n);
	assert_int_equal(n, 0);
	expect_details(d, NULL);
	json_decref(d);
	/* Optional fields may be left out. */
	d = check("{\"property_id\": \"p\", \"proposed_rate\": {\"currency\": \"EUR\", "
		  "\"minor_units\": -1}}",
		  body_spec, &n);
	assert_int_equal(n, 0);
	expect_details(d, NULL);
	json_decref(d);
}

static void test_validate_required(void **state)
{
	json_t *d;
	int n;

	(void)state;
	d = check("{}", body_spec, &n);
	assert_int_equal(n, 2);
	expect_details(d, "property_id", "is required", "proposed_rate", "is required", NULL);
	json_decref(d);
	/* Nested required fields, in spec order, with dotted paths. */
	d = check("{\"property_id\": \"p\", \"proposed_rate\": {}}", body_spec, &n);
	assert_int_equal(n, 2);
	expect_details(d, "proposed_rate.currency", "is required", "proposed_rate.minor_units",
		       "is required", NULL);
	json_decref(d);
}

static void test_validate_unknown(void **state)
{
	json_t *d;
	int n;

	(void)state;
	/* In the order they appear, before missing required fields. */
	d = check("{\"zeta\": 1, \"property_id\": \"p\", \"alpha\": 2, \"proposed_rate\": "
		  "{\"currency\": \"PLN\", \"minor_units\": 1, \"cents\": 3}, \"mid\": null}",
		  body_spec, &n);
	assert_int_equal(n, 4);
	expect_details(d, "zeta", "is not a known field", "alpha", "is not a known field",
		       "proposed_rate.cents", "is not a known field", "mid", "is not a known field",
		       NULL);
	json_decref(d);
	/* Matching is exact (case-sensitive). */
	d = check("{\"Property_id\": \"p\", \"proposed_rate\": {\"currency\": \"PLN\", "
		  "\"minor_units\": 1}}",
		  body_spec, &n);
	assert_int_equal(n, 2);
	expect_details(d, "Property_id", "is not a known field", "property_id", "is required", NULL);
	json_decref(d);
}

static void test_validate_types(void **state)
{
	static const struct vfield spec[] = {
		{.name = "s", .type = V_STRING}, {.name = "i", .type = V_INT},
		{.name = "n", .type = V_NUMBER}, {.name = "b", .type = V_BOOL},
		{.name = "o", .type = V_OBJECT}, {.name = "a", .type = V_ARRAY},
		{.name = "x", .type = V_ANY},    {0}};
	json_t *d;
	int n;

	(void)state;
	d = check("{\"s\": 1, \"i\": \"1\", \"n\": \"1.5\", \"b\": 0, \"o\": [], \"a\": {}, "
		  "\"x\": false}",
		  spec, &n);
	assert_int_equal(n, 6);
	expect_details(d, "s", "must be a string", "i", "must be an integer", "n",
		       "must be a number", "b", "must be a boolean", "o", "must be an object", "a",
		       "must be an array", NULL);
	json_decref(d);
	/* null where not nullable gives the same messages. */
	d = check("{\"s\": null, \"i\": null, \"n\": null, \"b\": null, \"o\": null, "
		  "\"a\": null, \"x\": null}",
		  spec, &n);
	assert_int_equal(n, 7);
	expect_details(d, "s", "must be a string", "i", "must be an integer", "n",
		       "must be a number", "b", "must be a boolean", "o", "must be an object", "a",
		       "must be an array", "x", "must not be null", NULL);
	json_decref(d);
	d = check("{\"s\": true, \"i\": true, \"n\": false, \"b\": \"true\", \"o\": \"{}\", "
		  "\"a\": \"[]\"}",
		  spec, &n);
	assert_int_equal(n, 6);
	json_decref(d);
}

static void test_validate_int_vs_real(void **state)
{
	static const struct vfield spec[] = {{.name = "i", .type = V_INT},
					     {.name = "n", .type = V_NUMBER},
					     {0}};
	json_t *d;
	int n;

	(void)state;
	d = check("{\"i\": 1.0, \"n\": 1}", spec, &n);
	assert_int_equal(n, 1);
	expect_details(d, "i", "must be an integer", NULL);
	json_decref(d);
	d = check("{\"i\": 1e2, \"n\": 1.0}", spec, &n);
	assert_int_equal(n, 1);
	expect_details(d, "i", "must be an integer", NULL);
	json_decref(d);
	d = check("{\"i\": -9223372036854775808, \"n\": 1e300}", spec, &n);
	assert_int_equal(n, 0);
	json_decref(d);
}

static void test_validate_nullable(void **state)
{
	static const struct vfield spec[] = {
		{.name = "s", .type = V_STRING, .nullable = 1, .required = 1},
		{.name = "o", .type = V_OBJECT, .nullable = 1, .fields = money_spec},
		{.name = "a", .type = V_ARRAY, .nullable = 1, .items = V_INT},
		{0}};
	json_t *d;
	int n;

	(void)state;
	/* Present-but-null satisfies required when nullable. */
	d = check("{\"s\": null, \"o\": null, \"a\": null}", spec, &n);
	assert_int_equal(n, 0);
	expect_details(d, NULL);
	json_decref(d);
	/* Nullable does not make other types acceptable. */
	d = check("{\"s\": 5, \"o\": 5, \"a\": 5}", spec, &n);
	assert_int_equal(n, 3);
	expect_details(d, "s", "must be a string", "o", "must be an object", "a",
		       "must be an array", NULL);
	json_decref(d);
}

static void test_validate_string_max(void **state)
{
	static const struct vfield spec[] = {{.name = "short", .type = V_STRING, .max = 4},
					     {.name = "dflt", .type = V_STRING},
					     {0}};
	char *body, *big;
	json_t *d;
	int n;

	(void)state;
	/* Counted in code points: żółw is 4 characters in 7 bytes. */
	d = check("{\"short\": \"\xc5\xbc\xc3\xb3\xc5\x82w\"}", spec, &n);
	assert_int_equal(n, 0);
	json_decref(d);
	d = check("{\"short\": \"\xc5\xbc\xc3\xb3\xc5\x82w!\"}", spec, &n);
	assert_int_equal(n, 1);
	expect_details(d, "short", "must be at most 4 characters", NULL);
	json_decref(d);
	/* Escapes count once: \u00e9 is one character. */
	d = check("{\"short\": \"\\u00e9\\u00e9\\u00e9\\u00e9\"}", spec, &n);
	assert_int_equal(n, 0);
	json_decref(d);
	/* Default 1024. */
	big = malloc(1026);
	body = malloc(1100);
	assert_non_null(big);
	assert_non_null(body);
	memset(big, 'x', 1024);
	big[1024] = '\0';
	sprintf(body, "{\"dflt\": \"%s\"}", big);
	d = check(body, spec, &n);
	assert_int_equal(n, 0);
	json_decref(d);
	strcat(big, "x");
	sprintf(body, "{\"dflt\": \"%s\"}", big);
	d = check(body, spec, &n);
	assert_int_equal(n, 1);
	expect_details(d, "dflt", "must be at most 1024 characters", NULL);
	json_decref(d);
	free(big);
	free(body);
}

static void test_validate_array_max(void **state)
{
	static const struct vfield spec[] = {{.name = "few", .type = V_ARRAY, .max = 2, .items = V_INT},
					     {.name = "dflt", .type = V_ARRAY},
					     {0}};
	json_t *obj, *arr, *d;
	int n, i;

	(void)state;
	d = check("{\"few\": [1, 2]}", spec, &n);
	assert_int_equal(n, 0);
	json_decref(d);
	/* Too many items, and the items are still checked. */
	d = check("{\"few\": [1, 2, \"3\"]}", spec, &n);
	assert_int_equal(n, 2);
	expect_details(d, "few", "must have at most 2 items", "few[2]", "must be an integer", NULL);
	json_decref(d);
	obj = json_object();
	arr = json_array();
	assert_non_null(obj);
	assert_non_null(arr);
	for (i = 0; i < 1000; i++)
		assert_int_equal(json_array_append_new(arr, json_integer(i)), 0);
	assert_int_equal(json_object_set_new(obj, "dflt", arr), 0);
	d = json_array();
	assert_int_equal(validate_object(obj, spec, "", d), 0);
	assert_int_equal(json_array_append_new(arr, json_null()), 0);
	assert_int_equal(validate_object(obj, spec, "", d), 1);
	expect_details(d, "dflt", "must have at most 1000 items", NULL);
	json_decref(d);
	json_decref(obj);
}

static void test_validate_nested_paths(void **state)
{
	json_t *d;
	int n;

	(void)state;
	d = check("{\"property_id\": \"p\", \"proposed_rate\": {\"currency\": \"PLN\", "
		  "\"minor_units\": \"12\"}, \"properties\": [\"a\", \"b\", 3], "
		  "\"items\": [{\"qty\": 1}, {\"sku\": \"s\", \"qty\": 1.5}, 7, null]}",
		  body_spec, &n);
	assert_int_equal(n, 6);
	expect_details(d, "proposed_rate.minor_units", "must be an integer", "properties[2]",
		       "must be a string", "items[0].sku", "is required", "items[1].qty",
		       "must be an integer", "items[2]", "must be an object", "items[3]",
		       "must be an object", NULL);
	json_decref(d);
}

static void test_validate_multiple_problems(void **state)
{
	json_t *d;
	int n;

	(void)state;
	/* Every problem once, in body order, then missing fields. */
	d = check("{\"note\": \"this is far too long\", \"score\": \"high\", "
		  "\"proposed_rate\": {\"currency\": \"PLNX\", \"extra\": 1}, "
		  "\"bogus\": {\"deep\": 1}, \"publish\": 1, "
		  "\"properties\": [1, 2, 3, 4, 5, 6], "
		  "\"items\": [{\"sku\": 1, \"colour\": \"red\"}], \"meta\": 5}",
		  body_spec, &n);
	assert_int_equal(n, 18);
	expect_details(d, "note", "must be at most 10 characters", "score", "must be a number",
		       "proposed_rate.currency", "must be at most 3 characters",
		       "proposed_rate.extra", "is not a known field", "proposed_rate.minor_units",
		       "is required", "bogus", "is not a known field", "publish",
		       "must be a boolean", "properties", "must have at most 5 items",
		       "properties[0]", "must be a string", "properties[1]", "must be a string",
		       "properties[2]", "must be a string", "properties[3]", "must be a string",
		       "properties[4]", "must be a string", "properties[5]", "must be a string",
		       "items[0].sku", "must be a string", "items[0].colour", "is not a known field",
		       "meta", "must be an object", "property_id", "is required", NULL);
	json_decref(d);
}

static void test_validate_prefix(void **state)
{
	json_t *obj, *d;

	(void)state;
	obj = accept("{\"currency\": 1, \"x\": 2}");
	d = json_array();
	assert_int_equal(validate_object(obj, money_spec, "rate", d), 3);
	expect_details(d, "rate.currency", "must be a string", "rate.x", "is not a known field",
		       "rate.minor_units", "is required", NULL);
	json_decref(d);
	/* NULL prefix is the top level; a non-object is one problem. */
	d = json_array();
	assert_int_equal(validate_object(obj, money_spec, NULL, d), 3);
	expect_details(d, "currency", "must be a string", "x", "is not a known field",
		       "minor_units", "is required", NULL);
	json_decref(d);
	d = json_array();
	assert_int_equal(validate_object(json_object_get(obj, "x"), money_spec, "rate", d), 1);
	expect_details(d, "rate", "must be an object", NULL);
	json_decref(d);
	json_decref(obj);
}

static void test_validate_long_unknown_key(void **state)
{
	static const struct vfield spec[] = {{0}};
	char body[512], want[128];
	json_t *d;
	int n;

	(void)state;
	/* 70 x 'ż' (140 bytes): cut at a character boundary to 64 bytes. */
	strcpy(body, "{\"");
	for (n = 0; n < 70; n++)
		strcat(body, "\xc5\xbc");
	strcat(body, "\": 1}");
	want[0] = '\0';
	for (n = 0; n < 32; n++)
		strcat(want, "\xc5\xbc");
	strcat(want, "...");
	d = check(body, spec, &n);
	assert_int_equal(n, 1);
	expect_details(d, want, "is not a known field", NULL);
	json_decref(d);
}

static void test_validate_details_cap(void **state)
{
	static const struct vfield spec[] = {{0}};
	json_t *obj, *d;
	char key[16];
	int i;

	(void)state;
	obj = json_object();
	assert_non_null(obj);
	for (i = 0; i < 1000; i++) {
		snprintf(key, sizeof key, "k%d", i);
		assert_int_equal(json_object_set_new(obj, key, json_true()), 0);
	}
	d = json_array();
	assert_int_equal(validate_object(obj, spec, "", d), 1000);
	assert_int_equal(json_array_size(d), VALIDATE_MAX_DETAILS);
	assert_string_equal(json_string_value(json_object_get(json_array_get(d, 0), "field")), "k0");
	json_decref(d);
	json_decref(obj);
}

static void test_add_detail(void **state)
{
	json_t *d = json_array();

	(void)state;
	validate_add_detail(d, "proposed_rate.minor_units", "must be a positive integer");
	validate_add_detail(d, "x", "\xff bad");
	validate_add_detail(d, NULL, "x");
	validate_add_detail(NULL, "x", "y");
	expect_details(d, "proposed_rate.minor_units", "must be a positive integer", NULL);
	json_decref(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_ok),
		cmocka_unit_test(test_parse_empty),
		cmocka_unit_test(test_parse_invalid_json),
		cmocka_unit_test(test_parse_trailing_garbage),
		cmocka_unit_test(test_parse_top_level_not_object),
		cmocka_unit_test(test_parse_depth_32_ok),
		cmocka_unit_test(test_parse_depth_33_rejected),
		cmocka_unit_test(test_parse_deep_1mib_fast),
		cmocka_unit_test(test_parse_brackets_in_strings),
		cmocka_unit_test(test_parse_escaped_quotes),
		cmocka_unit_test(test_parse_duplicate_keys),
		cmocka_unit_test(test_parse_invalid_utf8),
		cmocka_unit_test(test_parse_nul),
		cmocka_unit_test(test_parse_message_is_clean),
		cmocka_unit_test(test_utf8_len),
		cmocka_unit_test(test_validate_valid),
		cmocka_unit_test(test_validate_required),
		cmocka_unit_test(test_validate_unknown),
		cmocka_unit_test(test_validate_types),
		cmocka_unit_test(test_validate_int_vs_real),
		cmocka_unit_test(test_validate_nullable),
		cmocka_unit_test(test_validate_string_max),
		cmocka_unit_test(test_validate_array_max),
		cmocka_unit_test(test_validate_nested_paths),
		cmocka_unit_test(test_validate_multiple_problems),
		cmocka_unit_test(test_validate_prefix),
		cmocka_unit_test(test_validate_long_unknown_key),
		cmocka_unit_test(test_validate_details_cap),
		cmocka_unit_test(test_add_detail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
