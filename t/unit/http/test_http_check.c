/* Unit tests for http_check: request-head framing rules, the
 * request-target and query decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "http/http_check.h"

#define MAXB 1048576ULL

/* Checks fields given as name, value, name, value, ..., NULL. */
static int fields(const char **msg, ...)
{
	struct http_field f[16];
	size_t n = 0;
	va_list ap;
	const char *name;

	va_start(ap, msg);
	while ((name = va_arg(ap, const char *)) != NULL && n < 16) {
		f[n].name = name;
		f[n++].value = va_arg(ap, const char *);
	}
	va_end(ap);
	return http_check_fields(f, n, MAXB, msg);
}

static void test_plain_heads_pass(void **state)
{
	const char *msg = "unset";

	(void)state;
	assert_int_equal(fields(&msg, "Host", "x", "Accept", "*/*", NULL), 0);
	assert_null(msg);
	assert_int_equal(fields(&msg, "Host", "x", "Content-Length", "0", NULL), 0);
	assert_int_equal(fields(&msg, "Host", "x", "content-length", "1048576", NULL), 0);
	assert_int_equal(fields(&msg, "Host", "x", "Transfer-Encoding", "chunked", NULL), 0);
	assert_int_equal(fields(&msg, "Host", "x", "transfer-encoding", "CHUNKED", NULL), 0);
	assert_int_equal(fields(&msg, "Host", "x", "X-Tab", "a\tb", NULL), 0);
	assert_int_equal(fields(&msg, NULL), 0); /* HTTP/1.0 with no fields */
}

static void test_transfer_encoding_exactly_chunked(void **state)
{
	static const char *bad[] = {
		"chunked, identity", "chunked ",  "identity",    "identity, chunked",
		"gzip, chunked",     "xchunked",  "\"chunked\"", "",
		"\vchunked",         "chunked;x", "gzip"};
	const char *msg;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		msg = NULL;
		assert_int_equal(fields(&msg, "Host", "x", "Transfer-Encoding", bad[i], NULL), 400);
		assert_non_null(msg);
	}
	assert_int_equal(fields(&msg, "Transfer-Encoding", "chunked", "Transfer-Encoding",
				"chunked", NULL),
			 400);
	assert_string_equal(msg, "more than one Transfer-Encoding header");
	assert_int_equal(fields(&msg, "Transfer-Encoding", "chunked", "Content-Length", "3", NULL),
			 400);
	assert_string_equal(msg, "Content-Length together with Transfer-Encoding");
}

static void test_content_length(void **state)
{
	static const char *bad[] = {"",     "-1",   "+2",
				    "1x",   " 1",   "1 ",
				    "0x10", "2, 2", "12345678901234567890"};
	const char *msg;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		assert_int_equal(fields(&msg, "Content-Length", bad[i], NULL), 400);
		assert_string_equal(msg, "invalid Content-Length");
	}
	assert_int_equal(fields(&msg, "Content-Length", "1048577", NULL), 413);
	assert_int_equal(fields(&msg, "Content-Length", "9999999999999999999", NULL), 413);
	assert_int_equal(fields(&msg, "Content-Length", "1", "content-length", "1", NULL), 400);
	assert_string_equal(msg, "more than one Content-Length header");
}

static void test_host_and_authorization(void **state)
{
	const char *msg;

	(void)state;
	assert_int_equal(fields(&msg, "Host", "a", "host", "a", NULL), 400);
	assert_string_equal(msg, "more than one Host header");
	/* names and values are the parser's (test_http_parse.c); the meaning
	 * of Host and Authorization is checked here */
	assert_int_equal(fields(&msg, "Host", "127.0.0.1, evil.example", NULL), 400);
	assert_int_equal(fields(&msg, "Host", "a b", NULL), 400);
	assert_int_equal(fields(&msg, "Host", "[::1]:8080", NULL), 0);
	assert_int_equal(fields(&msg, "Host", "api.example.com:443", NULL), 0);
	assert_int_equal(fields(&msg, "Host", "", NULL), 0);
	assert_int_equal(fields(&msg, "Authorization", "Bearer a", "authorization", "Bearer b", NULL),
			 400);
	assert_string_equal(msg, "more than one Authorization header");
}

static void test_target(void **state)
{
	static const char *good[] = {"/v2/portfolios",
				     "/v2/%70ortfolios",
				     "/a?b=%00",
				     "/a?x=%2F&y=%zz",
				     "/scim/v2/Users?filter=userName%20eq%20%22a%22",
				     "*",
				     "/%2e%2e/x"};
	static const char *bad[] = {"/a%00", "/a%2f",  "/a%2Fb", "/a%",  "/a%0",  "/a%zz",
				    "/a%0g", "/a\x01", "/a\x7f", "/a b", "/a\tb", "/a?b\x01"};
	const char *msg;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof good / sizeof *good; i++)
		assert_int_equal(http_check_target(good[i], &msg), 0);
	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		msg = NULL;
		assert_int_equal(http_check_target(bad[i], &msg), 400);
		assert_non_null(msg);
	}
}

static void test_query(void **state)
{
	struct http_query q;
	char raw[4096];
	size_t i;

	(void)state;
	http_query_parse("a=1&b=x+y%2Bz&c&=v&d=", &q);
	assert_false(q.malformed);
	assert_int_equal(q.n, 5);
	assert_string_equal(q.name[1], "b");
	assert_string_equal(q.value[1], "x y+z");
	assert_string_equal(q.name[2], "c");
	assert_string_equal(q.value[2], "");
	assert_string_equal(q.name[3], ""); /* kept as sent: no route takes it */
	assert_string_equal(q.value[3], "v");
	assert_string_equal(q.value[4], "");
	http_query_free(&q);

	http_query_parse("a=%00", &q);
	assert_true(q.malformed);
	http_query_free(&q);
	http_query_parse("a=%zz&b=1", &q);
	assert_true(q.malformed);
	assert_int_equal(q.n, 1);
	http_query_free(&q);
	http_query_parse(NULL, &q);
	assert_int_equal(q.n, 0);
	assert_false(q.malformed);

	raw[0] = '\0';
	for (i = 0; i < 31; i++)
		strcat(raw, i ? "&a=1" : "a=1");
	http_query_parse(raw, &q);
	assert_false(q.malformed);
	assert_int_equal(q.n, 31);
	http_query_free(&q);
	strcat(raw, "&a=1");
	http_query_parse(raw, &q);
	assert_true(q.malformed);
	http_query_free(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_heads_pass),
		cmocka_unit_test(test_transfer_encoding_exactly_chunked),
		cmocka_unit_test(test_content_length),
		cmocka_unit_test(test_host_and_authorization),
		cmocka_unit_test(test_target),
		cmocka_unit_test(test_query),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
