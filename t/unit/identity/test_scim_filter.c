/* Unit tests for scim_filter: every operator, precedence, not, parentheses,
 * value paths, URN prefixes, case-insensitivity, the lenient filters of the
 * Microsoft SCIM conformance collection, date-time comparison, presence,
 * multi-valued matching, every parse error and limit, and PATCH paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "json_fixture.h"

#include "identity/scim_filter.h"

#define ENT SCIM_URN_ENTERPRISE

static json_t *user1, *user2;

static int setup(void **state)
{
	(void)state;
	user1 = load("{\"schemas\": [\"" SCIM_URN_USER "\", \"" ENT "\"],"
		     " \"id\": \"2819c223-7f76-453a-919d-413861904646\","
		     " \"externalId\": \"Ext-1\", \"userName\": \"OMalley@example.com\","
		     " \"name\": {\"familyName\": \"Employee\", \"givenName\": \"Test\"},"
		     " \"displayName\": \"BobIsAmazing\", \"active\": true, \"loginCount\": 42,"
		     " \"title\": \"\", \"nickName\": null, \"roles\": [],"
		     " \"emails\": [{\"type\": \"work\", \"value\": \"test@example.com\", \"primary\": true},"
		     "   {\"type\": \"home\", \"value\": \"home@example.org\"}],"
		     " \"meta\": {\"created\": \"2015-10-10T22:00:00.000Z\","
		     "   \"lastModified\": \"2016-01-01T00:00:00Z\", \"resourceType\": \"User\"},"
		     " \"" ENT "\": {\"employeeNumber\": \"701984\", \"department\": \"Sales\","
		     "   \"manager\": {\"value\": \"m1\"}}}");
	user2 = load("{\"id\": \"u2\", \"userName\": \"bob\","
		     " \"name\": {\"familyName\": \"Other\"}, \"active\": false,"
		     " \"emails\": [{\"type\": \"work\", \"value\": \"bob@example.net\"}],"
		     " \"meta\": {\"created\": \"2014-01-01T00:00:00-05:00\"}}");
	return user1 && user2 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	json_decref(user1);
	json_decref(user2);
	return 0;
}

/* Parses text (which must succeed) and matches it against res. */
static int m(const char *text, const json_t *res)
{
	struct scim_filter *f = NULL;
	char err[256];
	int r;

	if (scim_filter_parse(text, &f, err, sizeof err) != 0)
		fail_msg("filter %s: %s", text, err);
	assert_non_null(f);
	r = scim_filter_match(f, res);
	scim_filter_free(f);
	return r;
}

/* Expects text to be rejected with a message containing want. */
static void bad(const char *text, const char *want)
{
	struct scim_filter *f = (struct scim_filter *)1;
	char err[256] = "";

	assert_int_equal(scim_filter_parse(text, &f, err, sizeof err), -1);
	assert_null(f);
	if (!strstr(err, want))
		fail_msg("filter \"%.80s\": message \"%s\" lacks \"%s\"", text, err, want);
}

static void test_eq_ne(void **state)
{
	(void)state;
	assert_true(m("userName eq \"omalley@EXAMPLE.com\"", user1));
	assert_false(m("userName eq \"omalley\"", user1));
	assert_true(m("id eq \"2819c223-7f76-453a-919d-413861904646\"", user1));
	assert_false(m("id eq \"2819C223-7F76-453A-919D-413861904646\"", user1));
	assert_true(m("externalId eq \"Ext-1\"", user1));
	assert_false(m("externalId eq \"ext-1\"", user1));
	assert_true(m("userName ne \"x\"", user1));
	assert_false(m("userName ne \"OMALLEY@example.com\"", user1));
	assert_true(m("nickName ne \"x\"", user1));
	assert_true(m("missing ne \"x\"", user1));
	assert_false(m("missing eq \"x\"", user1));
	assert_true(m("nickName eq null", user1));
	assert_true(m("missing eq null", user1));
	assert_false(m("title eq null", user1));
	assert_true(m("userName ne null", user1));
	assert_false(m("nickName ne null", user1));
}

static void test_substring_ops(void **state)
{
	(void)state;
	assert_true(m("userName co \"MALLEY\"", user1));
	assert_false(m("userName co \"xyz\"", user1));
	assert_true(m("userName sw \"omal\"", user1));
	assert_false(m("userName sw \"mal\"", user1));
	assert_true(m("userName ew \"EXAMPLE.COM\"", user1));
	assert_false(m("userName ew \"example.org\"", user1));
	assert_false(m("userName ew \"a-much-longer-suffix-than-the-value@example.com\"", user1));
	assert_true(m("id co \"7f76\"", user1));
	assert_false(m("id co \"7F76\"", user1));
	assert_true(m("userName co \"\"", user1));
	assert_false(m("loginCount co \"4\"", user1));
	assert_false(m("active co \"t\"", user1));
}

static void test_ordering(void **state)
{
	(void)state;
	assert_true(m("loginCount gt 41", user1));
	assert_false(m("loginCount gt 42", user1));
	assert_true(m("loginCount ge 42", user1));
	assert_false(m("loginCount lt 42", user1));
	assert_true(m("loginCount le 42", user1));
	assert_true(m("loginCount lt 4.2e1.5", user1) == 0);
	assert_true(m("loginCount eq 42", user1));
	assert_true(m("loginCount eq 42.0", user1));
	assert_true(m("loginCount eq \"42\"", user1));
	assert_true(m("loginCount ne 41", user1));
	assert_true(
		m("urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber gt 99999",
		  user1));
	assert_true(m("userName gt \"a\"", user1));
	assert_true(m("userName gt \"NA\"", user1));
	assert_false(m("userName lt \"NA\"", user1));
	assert_true(m("displayName lt \"c\"", user1));
	assert_true(m("displayName le \"BOBISAMAZING\"", user1));
	assert_true(m("displayName ge \"bobisamazing\"", user1));
	assert_true(m("loginCount gt -1e2", user1));
	assert_true(m("loginCount lt 1E+3", user1));
	assert_true(m("loginCount lt 4.21e-0001e", user1) == 0);
	assert_true(m("loginCount ge 0.5", user1));
	assert_false(m("loginCount eq -0", user1));
	assert_true(m("userName gt 1", user1));
}

static void test_booleans(void **state)
{
	(void)state;
	assert_true(m("active eq true", user1));
	assert_false(m("active eq false", user1));
	assert_true(m("active ne false", user1));
	assert_true(m("active eq True", user1));
	assert_true(m("active eq \"True\"", user1));
	assert_true(m("active eq false", user2));
	assert_false(m("active gt false", user1));
	assert_false(m("active eq 1", user1));
	assert_true(m("emails[primary eq true]", user1));
	assert_false(m("emails[primary eq true]", user2));
}

static void test_datetime(void **state)
{
	json_t *u;

	(void)state;
	/* 22:00Z vs 21:38:21.86Z */
	assert_true(m("meta.created gt \"2015-10-10T14:38:21.8617979-07:00\"", user1));
	assert_true(m("meta.created eq \"2015-10-10T15:00:00-07:00\"", user1));
	assert_true(m("meta.created eq \"2015-10-10T15:00:00.000000000000-0700\"", user1));
	assert_false(m("meta.created lt \"2015-10-10T23:00:00+01:00\"", user1));
	assert_true(m("meta.created le \"2015-10-10T23:00:00+01:00\"", user1));
	assert_true(m("meta.created ge \"2015-10-10T23:00:00+01:00\"", user1));
	assert_true(m("meta.created lt \"2015-10-10T22:00:00.00000000000001Z\"", user1));
	assert_false(m("meta.created gt \"2015-10-10T22:00:00.00000000000001Z\"", user1));
	assert_true(m("meta.created gt \"2015-10-10T21:59:59.999999999999999Z\"", user1));
	/* no offset = UTC; a lowercase t */
	assert_true(m("meta.created eq \"2015-10-10t22:00:00\"", user1));
	/* across a day and a year boundary */
	assert_true(m("meta.lastModified eq \"2015-12-31T19:00:00-05:00\"", user1));
	assert_true(m("meta.lastModified ge \"2016-01-01T01:00:00+01:00\"", user1));
	assert_true(m("meta.created lt \"2014-01-01T06:00:01+01:00\"", user2));
	assert_false(m("meta.created lt \"2014-01-01T06:00:00+01:00\"", user2));
	/* not a date-time: a dateTime attribute never orders against it */
	assert_false(m("meta.created gt \"notadate\"", user1));
	assert_false(m("meta.created lt \"notadate\"", user1));
	assert_false(m("meta.created gt \"2015-02-30T00:00:00Z\"", user1));
	/* any two strings that parse as date-times compare as instants:
	 * 10:00+02:00 is 08:00Z, before 09:00Z, though "10" > "09" as text */
	u = load("{\"hireDate\": \"2020-01-01T10:00:00+02:00\"}");
	assert_false(m("hireDate gt \"2020-01-01T09:00:00Z\"", u));
	assert_true(m("hireDate lt \"2020-01-01T09:00:00Z\"", u));
	assert_true(m("hireDate eq 2020-01-01T08:00:00.000Z", u));
	/* leap days, offsets without a colon, malformed date-times */
	json_decref(u);
	u = load("{\"d\": \"2024-02-29T23:30:00-0100\"}");
	assert_true(m("d eq \"2024-03-01T00:30:00Z\"", u));
	assert_false(m("d eq \"2023-02-29T23:30:00-01:00\"", u));
	assert_false(m("d eq \"2024-02-29T23:30:00-1:00\"", u));
	assert_false(m("d eq \"2024-02-29T23:30:00-01:0\"", u));
	assert_false(m("d eq \"2024-02-29T23:30:00.Z\"", u));
	assert_false(m("d eq \"2024-02-29T24:30:00Z\"", u));
	assert_false(m("d eq \"2024-02-29T23:30:00Zjunk\"", u));
	assert_true(m("d gt \"1969-12-31T23:59:59Z\"", u));
	/* otherwise strings order as text */
	assert_true(m("hireDate lt \"2020-01-01T09\"", u) == 0);
	json_decref(u);
}

static void test_presence(void **state)
{
	(void)state;
	assert_true(m("userName pr", user1));
	assert_false(m("title pr", user1));
	assert_false(m("nickName pr", user1));
	assert_false(m("roles pr", user1));
	assert_false(m("missing pr", user1));
	assert_true(m("name pr", user1));
	assert_true(m("emails pr", user1));
	assert_true(m("emails.value pr", user1));
	assert_false(m("emails.display pr", user1));
	assert_false(m("name.middleName pr", user1));
	assert_true(m("name.givenName pr", user1));
	assert_false(m("name.givenName pr", user2));
	assert_true(m("active pr", user2));
	assert_true(m("loginCount PR", user1));
}

static void test_precedence(void **state)
{
	(void)state;
	/* and binds tighter: T or (x and F) = T; (T or x) and F would be F */
	assert_true(m("userName pr or displayName pr and title pr", user1));
	assert_true(m("title pr and userName pr or displayName pr", user1));
	assert_false(m("(userName pr or displayName pr) and title pr", user1));
	assert_true(m("userName pr and (title pr or displayName pr)", user1));
	assert_false(m("title pr or nickName pr or roles pr", user1));
	assert_true(m("title pr or nickName pr or roles pr or userName pr", user1));
	assert_true(m("userName pr and displayName pr and active eq true", user1));
	assert_false(m("userName pr and displayName pr and active eq false", user1));
	assert_true(m("((userName pr))", user1));
	assert_true(m("  userName  pr  ", user1));
	assert_true(m("userName pr\tand\ndisplayName pr", user1));
}

static void test_not(void **state)
{
	(void)state;
	assert_true(m("not (title pr)", user1));
	assert_false(m("NOT (userName pr)", user1));
	assert_false(m("not(userName pr)", user1));
	assert_true(m("not (not (userName pr))", user1));
	assert_true(m("not (title pr) and userName pr", user1));
	assert_false(m("not (title pr or userName pr)", user1));
	assert_true(m("userName eq \"x\" or not (active eq false)", user1));
	/* an attribute may be called "not" */
	assert_false(m("not eq \"x\"", user1));
}

static void test_value_paths(void **state)
{
	(void)state;
	assert_true(m("emails[type eq \"work\" and value co \"example.com\"]", user1));
	assert_false(m("emails[type eq \"home\" and value co \"example.com\"]", user1));
	assert_true(m("emails[type eq \"home\" or primary eq true]", user1));
	assert_true(m("emails[not (type eq \"work\")]", user1));
	assert_false(m("emails[not (type eq \"work\")]", user2));
	assert_true(m("emails[(type eq \"x\" or type eq \"home\") and value ew \".org\"]", user1));
	assert_true(m("emails[type eq \"work\"].value ew \".com\"", user1));
	assert_false(m("emails[type eq \"home\"].value ew \".com\"", user1));
	assert_true(m("emails[type eq \"home\"].value pr", user1));
	assert_false(m("emails[type eq \"x\"]", user1));
	assert_false(m("missing[type eq \"x\"]", user1));
	assert_true(m("emails [type eq \"work\"] and userName sw \"O\"", user1));
	assert_false(m("emails[type eq \"work\"] and userName sw \"O\"", user2));
	assert_true(m("name[givenName eq \"test\"]", user1));
	/* names inside [...] are sub-attributes of each element */
	assert_false(m("emails[userName pr]", user1));
}

static void test_urn_paths(void **state)
{
	(void)state;
	assert_true(m(ENT ":employeeNumber eq \"701984\"", user1));
	assert_true(m(ENT ":manager.value eq \"m1\"", user1));
	assert_true(m(ENT ":manager eq \"m1\"", user1));
	assert_true(m(ENT ":department eq \"sales\"", user1));
	assert_false(m(ENT ":department pr", user2));
	assert_true(
		m("URN:IETF:PARAMS:SCIM:SCHEMAS:EXTENSION:ENTERPRISE:2.0:USER:Department eq \"SALES\"",
		  user1));
	assert_true(m(SCIM_URN_USER ":userName sw \"O\"", user1));
	assert_true(m(SCIM_URN_USER ":name.familyName eq \"employee\"", user1));
	assert_true(m(SCIM_URN_USER ":emails[type eq \"work\"]", user1));
	assert_false(m("urn:foo:bar:department pr", user1));
	assert_false(m("department pr", user1));
}

static void test_case_insensitive(void **state)
{
	(void)state;
	assert_true(m("USERNAME EQ \"omalley@example.com\"", user1));
	assert_true(m("userName Eq \"omalley@example.com\"", user1));
	assert_true(m("EMAILS[TYPE EQ \"WORK\"]", user1));
	assert_false(m("userName pr AND title pr", user1));
	assert_true(m("title pr Or userName pr", user1));
	assert_true(m("Emails.Value Co \"EXAMPLE\"", user1));
	assert_true(m("META.RESOURCETYPE eq \"user\"", user1));
}

/* The filters the Microsoft SCIM conformance collection sends. */
static void test_lenient_ms(void **state)
{
	const char *f1 =
		"name.FamilyName eq Employee and (emails.Value co example.com or emails.Value co example.org)";
	json_t *u3 = load("{\"userName\": \"Other\", \"name\": {\"familyName\": \"employee\"},"
			  " \"emails\": [{\"value\": \"x@example.org\"}]}");

	(void)state;
	assert_true(m(f1, user1));
	assert_false(m(f1, user2));
	assert_true(m(f1, u3));
	assert_true(m("userName sw O", user1));
	assert_false(m("userName sw O", user2));
	assert_true(m("userName sw O", u3));
	assert_true(m("meta.Created gt 2015-10-10T14:38:21.8617979-07:00", user1));
	assert_false(m("meta.Created gt 2015-10-10T14:38:21.8617979-07:00", user2));
	assert_false(m("meta.Created gt 2015-10-10T14:38:21.8617979-07:00", u3));
	assert_true(m("DisplayName eq \"BobIsAmazing\"", user1));
	assert_false(m("DisplayName eq \"BobIsAmazing\"", user2));
	/* more bare tokens */
	assert_true(m("(userName eq OMalley@example.com)", user1));
	assert_true(m("emails[type eq work]", user1));
	assert_true(m("loginCount eq 42", user1));
	assert_true(m(ENT ":employeeNumber eq 701984", user1));
	assert_true(m("userName ne 12abc", user1));
	assert_false(m("userName eq O'Malley or userName sw \xc3\xb3", user1));
	json_decref(u3);
}

/* What a bare value may not be: the tolerance above covers words, not
 * malformed filters. */
static void test_bare_refused(void **state)
{
	struct scim_path p;
	char err[256];

	(void)state;
	bad("userName eq a\"b", "invalid character in the value after 'eq' at position 14");
	bad("userName eq a\\b", "invalid character");
	bad("userName eq \\u0041", "quote string values");
	bad("userName eq a(b", "invalid character");
	bad("userName eq ab[c", "invalid character");
	bad("userName eq [x]", "invalid character");
	bad("userName eq a\x01b", "invalid character");
	bad("userName eq a\x7f", "invalid character");
	bad("userName co abc\"", "after 'co' at position 16");
	bad("userName eq and", "missing value after 'eq' at position 13");
	bad("userName eq OR userName pr", "missing value after 'eq'");
	bad("userName eq Not", "missing value");
	bad("emails[type eq a\"b]", "invalid character");
	/* a PATCH path's value filter is read by the same rules */
	assert_int_equal(scim_path_parse("emails[type eq wo\"rk].value", &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "invalid character"));
	assert_int_equal(scim_path_parse("emails[type eq work].value", &p, err, sizeof err), 0);
	scim_path_free(&p);
	/* words that merely start like a keyword are values */
	assert_false(m("userName eq android", user1));
	assert_false(m("userName eq order", user1));
	assert_false(m("userName eq nothing", user1));
}

static void test_multi_valued(void **state)
{
	(void)state;
	assert_true(m("emails.value eq \"home@example.org\"", user1));
	assert_true(m("emails.value eq \"test@example.com\"", user1));
	assert_true(m("emails.type eq \"work\"", user1));
	assert_false(m("emails.type eq \"other\"", user1));
	assert_true(m("emails eq \"test@example.com\"", user1));
	assert_true(m("schemas eq \"" ENT "\"", user1));
	assert_true(m("emails.value ne \"test@example.com\"", user1));
	assert_false(m("emails.value ne \"bob@example.net\"", user2));
	assert_true(m("emails.primary eq true", user1));
	assert_false(m("roles eq \"x\"", user1));
}

static void test_strings_and_escapes(void **state)
{
	json_t *u2, *u = load("{\"displayName\": \"a\\\"b\\\\c/\\u00e9\\ud83d\\ude00\\t\"}");

	(void)state;
	assert_true(m("displayName eq \"a\\\"b\\\\c\\/\\u00E9\\uD83D\\uDE00\\t\"", u));
	assert_true(m("displayName eq \"a\\\"b\\\\c/\xc3\xa9\xf0\x9f\x98\x80\\t\"", u));
	assert_true(m("displayName sw \"A\\u0022\"", u));
	assert_true(m("displayName eq \"Bob\\u0049sAmazing\"", user1));
	assert_true(m("displayName co \"(x) and [y]\" or displayName pr", user1));
	assert_true(m("userName eq \"\" or userName pr", user1));
	u2 = load("{\"x\": \"\\b\\f\\n\\r\\u20ac\"}");
	assert_true(m("x eq \"\\b\\f\\n\\r\\u20AC\"", u2));
	assert_true(m("x eq \"\\b\\f\\n\\r\xe2\x82\xac\"", u2));
	json_decref(u2);
	json_decref(u);
}

/* n nested levels of open + inner + close. */
static char *nest(int n, const char *open, const char *inner, const char *close)
{
	size_t len = (size_t)n * (strlen(open) + strlen(close)) + strlen(inner) + 1;
	char *s = malloc(len);
	int i;

	assert_non_null(s);
	s[0] = '\0';
	for (i = 0; i < n; i++)
		strcat(s, open);
	strcat(s, inner);
	for (i = 0; i < n; i++)
		strcat(s, close);
	return s;
}

static void test_limits(void **state)
{
	char *s;
	size_t i;

	(void)state;
	s = nest(16, "(", "userName pr", ")");
	assert_true(m(s, user1));
	free(s);
	s = nest(17, "(", "userName pr", ")");
	bad(s, "deeper than 16");
	free(s);
	s = nest(8, "not (", "title pr", ")");
	assert_false(m(s, user1)); /* an even number of nots */
	free(s);
	s = nest(9, "not (", "title pr", ")");
	bad(s, "deeper than 16");
	free(s);
	s = nest(15, "(", "emails[type eq \"work\"]", ")");
	assert_true(m(s, user1));
	free(s);
	s = nest(16, "(", "emails[type eq \"work\"]", ")");
	bad(s, "deeper than 16");
	free(s);

	/* 64 comparisons and 63 "or": 127 nodes; 65 and 64: 129 */
	s = calloc(1, 2048);
	assert_non_null(s);
	for (i = 0; i < 64; i++)
		strcat(s, i ? " or userName pr" : "userName pr");
	assert_true(m(s, user1));
	strcat(s, " or userName pr");
	bad(s, "more than 128 expressions");
	free(s);

	/* exactly 4096 bytes parse; 4097 do not */
	s = malloc(4098);
	assert_non_null(s);
	memcpy(s, "userName eq \"", 13);
	memset(s + 13, 'a', 4096 - 14);
	s[4095] = '"';
	s[4096] = '\0';
	assert_false(m(s, user1));
	s[4095] = 'a';
	s[4096] = '"';
	s[4097] = '\0';
	bad(s, "longer than 4096 bytes");
	free(s);
}

static void test_parse_errors(void **state)
{
	struct scim_filter *f = NULL;
	char small[8];

	(void)state;
	bad("userName eq \"abc", "unterminated string starting at position 13");
	bad("userName \"x\"", "expected an operator after \"userName\" at position 10");
	bad("userName", "missing operator after \"userName\"");
	bad("userName xx \"a\"", "unknown operator \"xx\"");
	bad("userName equals \"a\"", "unknown operator \"equals\"");
	bad("userName eq", "missing value after 'eq'");
	bad("(userName eq)", "missing value after 'eq'");
	bad("userName pr title pr", "unexpected \"title pr\" at position 13");
	bad("userName pr)", "unexpected \")\"");
	bad("", "empty filter");
	bad("   \t ", "empty filter");
	bad("emails[type eq \"work\"", "missing ']'");
	bad("emails[type eq \"work\" userName pr]", "expected ']'");
	bad("emails[type eq \"work\"]]", "unexpected \"]\"");
	bad("emails]", "expected an operator after \"emails\" at position 7, found \"]\"");
	bad("[type eq \"work\"]", "expected an attribute path");
	bad("(userName pr", "missing ')'");
	bad("(userName pr userName pr)", "expected ')'");
	bad("userName pr and", "unexpected end of filter");
	bad("userName pr or ()", "expected an attribute path");
	bad("not (userName pr", "missing ')'");
	bad("not userName pr", "unknown operator \"userName\"");
	bad("1abc eq 1", "invalid attribute name");
	bad("a.b.c eq 1", "invalid attribute name");
	bad("name. eq 1", "invalid attribute name");
	bad(":name eq 1", "invalid attribute path");
	bad("urn:x: eq 1", "invalid attribute path");
	bad("name.givenName[type eq \"x\"]", "must follow the attribute name");
	bad("emails[type eq \"work\"].value", "missing operator after \"value\"");
	bad("emails[type eq \"work\"].", "expected a sub-attribute name");
	bad("userName eq \"\\q\"", "invalid escape");
	bad("userName eq \"\\u12\"", "invalid escape");
	bad("userName eq \"\\uDC00\"", "invalid escape");
	bad("userName eq \"\\uD800x\"", "invalid escape");
	bad("userName eq \"\\u0000\"", "\\u0000 is not allowed");
	bad("userName eq \"a\tb\"", "control character");
	bad("userName eq \"\xff\"", "not valid UTF-8");
	bad("userName eq \"\xc3\"", "not valid UTF-8");
	bad("a_very_long_attribute_name_that_goes_on_and_on_beyond_sixty_four_characters eq 1",
	    "longer than 63 characters");
	bad("userName # 1", "expected an operator");
	{
		char t[300];

		memset(t, 'u', sizeof t);
		memcpy(t, "urn:", 4);
		strcpy(t + 140, ":x pr");
		bad(t, "schema URN longer than 127 characters");
		strcpy(t, "emails[type pr].");
		memset(t + 16, 'v', 70);
		strcpy(t + 86, " pr");
		bad(t, "attribute name longer than 63 characters");
	}

	/* NULL text, tiny and zero error buffers */
	assert_int_equal(scim_filter_parse(NULL, &f, small, sizeof small), -1);
	assert_null(f);
	assert_int_equal(scim_filter_parse("userName eq \"abc", &f, small, sizeof small), -1);
	assert_int_equal(strlen(small), sizeof small - 1);
	assert_int_equal(scim_filter_parse("userName eq \"abc", &f, NULL, 0), -1);
	scim_filter_free(NULL);
	assert_true(scim_filter_match(NULL, user1));
}

static void test_match_non_object(void **state)
{
	struct scim_filter *f;
	char err[128];
	json_t *a = json_array();

	(void)state;
	assert_int_equal(scim_filter_parse("userName pr", &f, err, sizeof err), 0);
	assert_false(scim_filter_match(f, a));
	assert_false(scim_filter_match(f, NULL));
	scim_filter_free(f);
	json_decref(a);
}

static void test_path_parse(void **state)
{
	struct scim_path p;
	char err[256];
	json_t *e;

	(void)state;
	assert_int_equal(scim_path_parse("userName", &p, err, sizeof err), 0);
	assert_string_equal(p.urn, "");
	assert_string_equal(p.attr, "userName");
	assert_string_equal(p.sub, "");
	assert_null(p.filter);
	scim_path_free(&p);

	assert_int_equal(scim_path_parse(" name.givenName ", &p, err, sizeof err), 0);
	assert_string_equal(p.attr, "name");
	assert_string_equal(p.sub, "givenName");
	scim_path_free(&p);

	assert_int_equal(scim_path_parse(ENT ":manager", &p, err, sizeof err), 0);
	assert_string_equal(p.urn, ENT);
	assert_string_equal(p.attr, "manager");
	scim_path_free(&p);

	assert_int_equal(scim_path_parse(ENT ":manager.value", &p, err, sizeof err), 0);
	assert_string_equal(p.urn, ENT);
	assert_string_equal(p.attr, "manager");
	assert_string_equal(p.sub, "value");
	scim_path_free(&p);

	assert_int_equal(scim_path_parse(ENT, &p, err, sizeof err), 0);
	assert_string_equal(p.urn, ENT);
	assert_string_equal(p.attr, "");
	scim_path_free(&p);

	/* a prefix that is no URI names no schema (it reached "meta" once) */
	assert_int_equal(scim_path_parse("meta:created", &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "invalid attribute path"));
	assert_int_equal(scim_path_parse("urn:created", &p, err, sizeof err), -1);

	assert_int_equal(scim_path_parse("emails[type eq \"work\"].value", &p, err, sizeof err), 0);
	assert_string_equal(p.attr, "emails");
	assert_string_equal(p.sub, "value");
	assert_non_null(p.filter);
	e = load("{\"type\": \"WORK\", \"value\": \"a@b\"}");
	assert_true(scim_filter_match(p.filter, e));
	json_decref(e);
	scim_path_free(&p);
	assert_null(p.filter);
	scim_path_free(&p);

	assert_int_equal(scim_path_parse("members[value eq \"u2\" or value eq \"u3\"]", &p, err,
					 sizeof err),
			 0);
	assert_string_equal(p.attr, "members");
	assert_string_equal(p.sub, "");
	e = load("{\"value\": \"u3\"}");
	assert_true(scim_filter_match(p.filter, e));
	json_decref(e);
	scim_path_free(&p);

	assert_int_equal(scim_path_parse(SCIM_URN_USER ":emails[type eq \"work\"]", &p, err,
					 sizeof err),
			 0);
	assert_string_equal(p.urn, SCIM_URN_USER);
	assert_string_equal(p.attr, "emails");
	scim_path_free(&p);

#define BADPATH(text, want)                                                        \
	do {                                                                       \
		assert_int_equal(scim_path_parse(text, &p, err, sizeof err), -1);  \
		assert_null(p.filter);                                             \
		if (!strstr(err, want))                                            \
			fail_msg("path %s: \"%s\" lacks \"%s\"", text, err, want); \
	} while (0)
	BADPATH("", "empty path");
	BADPATH("  ", "empty path");
	BADPATH((const char *)NULL, "empty path");
	BADPATH("emails[type eq", "missing value");
	BADPATH("emails[type eq \"w\"", "missing ']'");
	BADPATH("emails[type eq \"w\"]x", "unexpected \"x\"");
	BADPATH("emails[type eq \"w\"].", "expected a sub-attribute name");
	BADPATH("emails[type eq \"w\"].value.x", "unexpected \".x\"");
	BADPATH("emails[type eq \"w\"].a:b", "unexpected \":b\"");
	BADPATH("name.", "invalid attribute name");
	BADPATH(".x", "invalid attribute name");
	BADPATH("a b", "unexpected \"b\"");
	BADPATH("emails]", "unexpected \"]\"");
	BADPATH("[x pr]", "expected an attribute path");
	BADPATH("name.givenName[x pr]", "must follow the attribute name");
	BADPATH("emails[]", "expected an attribute path");
#undef BADPATH
}

static void test_template(void **state)
{
	struct scim_filter *f;
	char err[128];
	json_t *o = json_object(), *want;

	(void)state;
	assert_int_equal(scim_filter_parse("type eq \"work\" and primary eq true and n eq 5 and r eq 1.5",
					   &f, err, sizeof err),
			 0);
	assert_int_equal(scim_filter_template(f, o), 0);
	want = load("{\"type\": \"work\", \"primary\": true, \"n\": 5, \"r\": 1.5}");
	assert_true(json_equal(o, want));
	json_decref(want);
	scim_filter_free(f);

	assert_int_equal(scim_filter_parse("type co \"work\"", &f, err, sizeof err), 0);
	assert_int_equal(scim_filter_template(f, o), -1);
	scim_filter_free(f);
	assert_int_equal(scim_filter_parse("type eq \"a\" or type eq \"b\"", &f, err, sizeof err), 0);
	assert_int_equal(scim_filter_template(f, o), -1);
	scim_filter_free(f);
	assert_int_equal(scim_filter_parse("type eq null", &f, err, sizeof err), 0);
	assert_int_equal(scim_filter_template(f, o), -1);
	scim_filter_free(f);
	assert_int_equal(scim_filter_template(NULL, o), -1);
	json_decref(o);
}

static void test_object_get(void **state)
{
	const char *key = NULL;

	(void)state;
	assert_non_null(scim_object_get(user1, "USERNAME", &key));
	assert_string_equal(key, "userName");
	assert_non_null(scim_object_get(user1, "userName", &key));
	assert_string_equal(key, "userName");
	assert_null(scim_object_get(user1, "nope", &key));
	assert_null(scim_object_get(NULL, "x", NULL));
	assert_true(scim_urn_is_core(""));
	assert_true(scim_urn_is_core("urn:ietf:params:scim:schemas:core:2.0:group"));
	assert_false(scim_urn_is_core(ENT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eq_ne),
		cmocka_unit_test(test_substring_ops),
		cmocka_unit_test(test_ordering),
		cmocka_unit_test(test_booleans),
		cmocka_unit_test(test_datetime),
		cmocka_unit_test(test_presence),
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_not),
		cmocka_unit_test(test_value_paths),
		cmocka_unit_test(test_urn_paths),
		cmocka_unit_test(test_case_insensitive),
		cmocka_unit_test(test_lenient_ms),
		cmocka_unit_test(test_bare_refused),
		cmocka_unit_test(test_multi_valued),
		cmocka_unit_test(test_strings_and_escapes),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_match_non_object),
		cmocka_unit_test(test_path_parse),
		cmocka_unit_test(test_template),
		cmocka_unit_test(test_object_get),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
