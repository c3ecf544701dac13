/* Unit tests for http_parse: request heads and chunked bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http/http_parse.h"

static struct http_head head;

/* Parses the NUL-terminated head s (a copy); returns the status. */
static int parse(const char *s, char **copy)
{
	const char *msg = NULL;
	size_t scan = 0, len = strlen(s), end;
	int st;

	*copy = strdup(s);
	end = http_head_end(*copy, len, &scan);
	assert_int_equal(end, len);
	st = http_parse_head(*copy, end, &head, &msg);
	if (st)
		assert_non_null(msg);
	return st;
}

static int status_of(const char *s)
{
	char *copy;
	int st = parse(s, &copy);

	free(copy);
	return st;
}

static void test_head_end(void **state)
{
	const char *h = "GET / HTTP/1.1\r\nHost: x\r\n\r\nNEXT";
	size_t scan = 0, i, end = 0;

	(void)state;
	/* fed a byte at a time, found exactly once, at the empty line */
	for (i = 1; i <= strlen(h) && !end; i++)
		end = http_head_end(h, i, &scan);
	assert_int_equal(end, strlen(h) - 4);
	scan = 0;
	assert_int_equal(http_head_end("GET / HTTP/1.1\nHost: x\n\n", 24, &scan), 24);
	scan = 0;
	assert_int_equal(http_head_end("GET / HTTP/1.1\r\nHost: x\r\n", 25, &scan), 0);
	/* bytes without a LF are not searched again on the next call */
	scan = 0;
	assert_int_equal(http_head_end("GET /aaaa", 9, &scan), 0);
	assert_int_equal(scan, 9);
}

static void test_good_heads(void **state)
{
	char *c;

	(void)state;
	assert_int_equal(parse("GET /v2/portfolios?limit=2 HTTP/1.1\r\nHost: x\r\n"
			       "X-A:   padded \t\r\nX-Empty:\r\n\r\n",
			       &c),
			 0);
	assert_string_equal(head.method, "GET");
	assert_string_equal(head.target, "/v2/portfolios?limit=2");
	assert_int_equal(head.minor, 1);
	assert_int_equal(head.nfields, 3);
	assert_string_equal(head.fields[1].name, "X-A");
	assert_string_equal(head.fields[1].value, "padded");
	assert_string_equal(head.fields[2].value, "");
	free(c);
	assert_int_equal(parse("POST /x HTTP/1.0\nContent-Length: 2 \n\n", &c), 0);
	assert_int_equal(head.minor, 0);
	assert_string_equal(head.fields[0].value, "2 "); /* framing fields as sent */
	free(c);
	assert_int_equal(parse("GET / HTTP/1.9\r\n\r\n", &c), 0);
	assert_int_equal(head.minor, 1);
	free(c);
}

static void test_bad_heads(void **state)
{
	(void)state;
	assert_int_equal(status_of("GET  / HTTP/1.1\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/1.1 \r\n\r\n"), 400);
	assert_int_equal(status_of("GET /\r\n\r\n"), 400);
	assert_int_equal(status_of("G(T / HTTP/1.1\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTX/1.1\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/1.10\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/0.9\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/2.0\r\n\r\n"), 505);
	assert_int_equal(status_of("GET /\x01 HTTP/1.1\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/1.1\r\nHost : x\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/1.1\r\n: x\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/1.1\r\nNoColon\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/1.1\r\nX: 1\r\n 2\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/1.1\r\nX: 1\r\n\t2\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/1.1\r\nX: a\x0b\r\n\r\n"), 400);
	assert_int_equal(status_of("GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n"), 400);
}

static void test_nul_in_head(void **state)
{
	char h[] = "GET / HTTP/1.1\r\nContent-Length: 2\0 40\r\n\r\n";
	size_t len = sizeof h - 1, scan = 0;
	const char *msg;

	(void)state;
	assert_int_equal(http_head_end(h, len, &scan), len);
	assert_int_equal(http_parse_head(h, len, &head, &msg), 400);
}

static void test_field_count(void **state)
{
	char buf[8192];
	size_t i;
	int n = 0;

	(void)state;
	n += snprintf(buf + n, sizeof buf - (size_t)n, "GET / HTTP/1.1\r\n");
	for (i = 0; i < HTTP_FIELDS_MAX; i++)
		n += snprintf(buf + n, sizeof buf - (size_t)n, "X-%zu: v\r\n", i);
	snprintf(buf + n, sizeof buf - (size_t)n, "\r\n");
	assert_int_equal(status_of(buf), 0);
	snprintf(buf + n, sizeof buf - (size_t)n, "X-Last: v\r\n\r\n");
	assert_int_equal(status_of(buf), 431);
}

static void test_plausible(void **state)
{
	(void)state;
	assert_true(http_head_plausible("GE", 2));
	assert_true(http_head_plausible("GET /x HT", 9));
	assert_true(http_head_plausible("GET /x HTTP/1.1\r\n", 17));
	assert_false(http_head_plausible("\x16\x03\x01", 3));
	assert_false(http_head_plausible(" GET", 4));
	assert_false(http_head_plausible("GET /x\r\n", 8));
	assert_false(http_head_plausible("GET /x FOO\r\n", 12));
}

/* Feeds s to a fresh decoder in pieces of step bytes. */
static int feed(const char *s, size_t len, size_t step, struct buf *out, size_t *consumed)
{
	struct http_chunked d;
	const char *msg = NULL;
	size_t off = 0, used, n;
	int r = 0;

	memset(&d, 0, sizeof d);
	while (off < len) {
		n = len - off < step ? len - off : step;
		r = http_chunked_feed(&d, s + off, n, &used, out, &msg);
		off += used;
		if (r)
			break;
		assert_int_equal(used, n);
	}
	if (r > 1)
		assert_non_null(msg);
	*consumed = off;
	return r;
}

static void test_chunked(void **state)
{
	const char *ok = "5;name=val\r\nhello\r\n06\r\n world\r\n0\r\nTrailer: x\r\n\r\nGET";
	struct buf out;
	size_t used, step;

	(void)state;
	for (step = 1; step < 8; step++) {
		buf_init(&out, 1024);
		assert_int_equal(feed(ok, strlen(ok), step, &out, &used), 1);
		assert_string_equal(out.data, "hello world");
		assert_int_equal(used, strlen(ok) - 3); /* the pipelined GET stays */
		buf_free(&out);
	}
	buf_init(&out, 1024);
	assert_int_equal(feed("3\nabc\n0\n\n", 10, 3, &out, &used), 1);
	buf_free(&out);
}

static void test_chunked_refusals(void **state)
{
	static const char *bad[] = {"zz\r\nabc\r\n0\r\n\r\n",
				    "\r\n",
				    "5 5\r\n",
				    "3\r\nabcX\r\n",
				    "3;\x01\r\nabc\r\n0\r\n\r\n",
				    "0\r\nX: \x01\r\n\r\n",
				    "00000000000000001\r\nx\r\n",
				    "-1\r\n"};
	struct buf out;
	char big[8192];
	size_t i, used;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		buf_init(&out, 1024);
		assert_int_equal(feed(bad[i], strlen(bad[i]), 2, &out, &used), 400);
		buf_free(&out);
	}
	/* sixteen digits are fine; a long extension is not */
	buf_init(&out, 1024);
	assert_int_equal(feed("0000000000000001\r\nx\r\n0\r\n\r\n", 26, 4, &out, &used), 1);
	buf_free(&out);
	memset(big, 'a', sizeof big);
	memcpy(big, "5;", 2);
	buf_init(&out, 1024);
	assert_int_equal(feed(big, sizeof big, 1000, &out, &used), 400);
	buf_free(&out);
	/* a chunk larger than what is left of the cap: 413 before its data */
	buf_init(&out, 1024);
	assert_int_equal(feed("401\r\n", 5, 5, &out, &used), 413);
	assert_int_equal(out.len, 0);
	buf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head_end),    cmocka_unit_test(test_good_heads),
		cmocka_unit_test(test_bad_heads),   cmocka_unit_test(test_nul_in_head),
		cmocka_unit_test(test_field_count), cmocka_unit_test(test_plausible),
		cmocka_unit_test(test_chunked),     cmocka_unit_test(test_chunked_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
