/* Unit tests for http_fields (X-Request-Id, Accept-Encoding, If-None-Match)
 * and http_gzip (the output inflates back to the input). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <zlib.h>

#include "http/http_fields.h"
#include "http/http_gzip.h"

static void test_request_id(void **state)
{
	char max[HTTP_REQUEST_ID_MAX + 2];

	(void)state;
	assert_true(http_request_id_ok("req_01ABC"));
	assert_true(http_request_id_ok("4bf92f35-77b3-4da6-a3ce-929d0e0e4736"));
	assert_true(http_request_id_ok("a"));
	assert_true(http_request_id_ok("~!#$%&'()*+,-./:;<=>?@[]^_`{|}"));
	assert_false(http_request_id_ok(NULL));
	assert_false(http_request_id_ok(""));
	assert_false(http_request_id_ok("has space"));
	assert_false(http_request_id_ok("tab\there"));
	assert_false(http_request_id_ok("quote\"d"));
	assert_false(http_request_id_ok("back\\slash"));
	assert_false(http_request_id_ok("caf\xc3\xa9"));
	assert_false(http_request_id_ok("del\x7f"));
	memset(max, 'x', HTTP_REQUEST_ID_MAX);
	max[HTTP_REQUEST_ID_MAX] = '\0';
	assert_true(http_request_id_ok(max));
	max[HTTP_REQUEST_ID_MAX] = 'x';
	max[HTTP_REQUEST_ID_MAX + 1] = '\0';
	assert_false(http_request_id_ok(max));
}

static void test_accept_encoding(void **state)
{
	(void)state;
	assert_false(http_accepts_gzip(NULL));
	assert_false(http_accepts_gzip(""));
	assert_false(http_accepts_gzip("identity"));
	assert_false(http_accepts_gzip("br, deflate"));
	assert_true(http_accepts_gzip("gzip"));
	assert_true(http_accepts_gzip("GZIP"));
	assert_true(http_accepts_gzip("x-gzip"));
	assert_true(http_accepts_gzip("gzip, deflate, br"));
	assert_true(http_accepts_gzip("br;q=1.0, gzip;q=0.8, *;q=0.1"));
	assert_true(http_accepts_gzip("*"));
	assert_true(http_accepts_gzip("gzip ; q=0.5"));
	assert_true(http_accepts_gzip("gzip;level=1;q=0.3"));
	/* q=0 excludes; an explicit gzip entry wins over '*' */
	assert_false(http_accepts_gzip("gzip;q=0"));
	assert_false(http_accepts_gzip("gzip;q=0.000"));
	assert_false(http_accepts_gzip("gzip;q=0, *"));
	assert_false(http_accepts_gzip("*;q=0"));
	assert_true(http_accepts_gzip("*;q=0, gzip"));
	/* identity preferred over gzip: identity */
	assert_false(http_accepts_gzip("gzip;q=0.5, identity"));
	assert_true(http_accepts_gzip("gzip, identity;q=0.5"));
	assert_true(http_accepts_gzip("gzip;q=0.5, identity;q=0.5"));
	/* malformed q-values count as 0 */
	assert_false(http_accepts_gzip("gzip;q=2"));
	assert_false(http_accepts_gzip("gzip;q=1.5"));
	assert_false(http_accepts_gzip("gzip;q=0.1234"));
	assert_false(http_accepts_gzip("gzip;q="));
	assert_false(http_accepts_gzip("gzip;q=abc"));
	assert_false(http_accepts_gzip("gzip x"));
	assert_true(http_accepts_gzip("gzip;q=1.000"));
	assert_true(http_accepts_gzip("gzip;q=0.001"));
	/* empty members and stray commas */
	assert_true(http_accepts_gzip(",, gzip ,"));
	assert_false(http_accepts_gzip(",;q=1"));
}

static void test_etag_match(void **state)
{
	(void)state;
	assert_false(http_etag_match(NULL, "abc", "-gzip"));
	assert_true(http_etag_match("*", "abc", "-gzip"));
	assert_true(http_etag_match("\"abc\"", "abc", "-gzip"));
	assert_true(http_etag_match("W/\"abc\"", "abc", "-gzip"));
	assert_true(http_etag_match("\"abc-gzip\"", "abc", "-gzip"));
	assert_false(http_etag_match("\"abc-gzip\"", "abc", NULL));
	assert_true(http_etag_match("\"x\", \"y\",\"abc\"", "abc", "-gzip"));
	assert_true(http_etag_match("garbage, \"abc\"", "abc", NULL));
	assert_false(http_etag_match("\"abcd\"", "abc", "-gzip"));
	assert_false(http_etag_match("\"ab\"", "abc", "-gzip"));
	assert_false(http_etag_match("abc", "abc", "-gzip"));
	assert_false(http_etag_match("\"abc", "abc", "-gzip"));
	assert_false(http_etag_match("w/\"abc\"", "abc", "-gzip"));
	assert_false(http_etag_match("\"abc-gzipx\"", "abc", "-gzip"));
	assert_false(http_etag_match("\"*\"", "abc", "-gzip"));
	assert_false(http_etag_match("", "abc", "-gzip"));
}

static void test_gzip_round_trip(void **state)
{
	char in[20000], back[20000];
	struct buf z;
	uLongf n = sizeof back;
	z_stream s = {0};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof in; i++)
		in[i] = "{\"data\":[1,2,3]}"[i % 16];
	buf_init(&z, 0);
	assert_int_equal(http_gzip(in, sizeof in, 1, &z), 0);
	assert_true(z.len > 18 && z.len < sizeof in / 4);
	assert_int_equal((unsigned char)z.data[0], 0x1f); /* gzip magic */
	assert_int_equal((unsigned char)z.data[1], 0x8b);
	assert_int_equal(inflateInit2(&s, 15 + 16), Z_OK);
	s.next_in = (Bytef *)z.data;
	s.avail_in = (uInt)z.len;
	s.next_out = (Bytef *)back;
	s.avail_out = (uInt)n;
	assert_int_equal(inflate(&s, Z_FINISH), Z_STREAM_END);
	assert_int_equal(s.total_out, sizeof in);
	assert_memory_equal(back, in, sizeof in);
	inflateEnd(&s);
	assert_int_equal(http_gzip("", 0, 9, &z), 0);
	assert_true(z.len >= 18);
	buf_free(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_id),
		cmocka_unit_test(test_accept_encoding),
		cmocka_unit_test(test_etag_match),
		cmocka_unit_test(test_gzip_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
