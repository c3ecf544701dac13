/* Unit tests for the pure modules: crypto, id, clock, pagination, form,
 * router, auth (scopes, plans, bearer parsing), the error catalogue, and the
 * pure parts of idempotency. Fixed vectors come from RFCs or were computed
 * with Python's standard library (noted beside each). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/idempotency.h"
#include "api/pagination.h"
#include "api/respond.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/form.h"
#include "core/id.h"
#include "http/router.h"
#include "identity/auth.h"

/* A deterministic generator so a failure reproduces. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

/* ------------------------------------------------------------------ crypto */

static void test_sha256_vector(void **state)
{
	char hex[2 * CRYPTO_SHA256_LEN + 1];

	(void)state;
	crypto_sha256_hex("abc", 3, hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	crypto_sha256_hex("", 0, hex);
	assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

/* RFC 4231 test cases 1 and 2. */
static void test_hmac_rfc4231(void **state)
{
	unsigned char key1[20], mac[CRYPTO_SHA256_LEN];
	char hex[2 * CRYPTO_SHA256_LEN + 1];

	(void)state;
	memset(key1, 0x0b, sizeof key1);
	crypto_hmac_sha256(key1, sizeof key1, "Hi There", 8, mac);
	crypto_hex(mac, sizeof mac, hex);
	assert_string_equal(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	crypto_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac);
	crypto_hex(mac, sizeof mac, hex);
	assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

/* The prepared HMAC (crypto_hmac_*): RFC 4231 cases 1, 2, 6 and 7 (keys
 * shorter and longer than a block), one key reused across messages, a
 * message fed in parts, and agreement with the one-shot HMAC for every key
 * length around the 64-byte block. */
static void hmac_parts_hex(struct crypto_hmac *h, const char *msg, char hex[65])
{
	unsigned char mac[CRYPTO_SHA256_LEN];
	const void *p[] = {msg};
	size_t len[] = {strlen(msg)};

	assert_int_equal(crypto_hmac_parts(h, 1, p, len, mac), 0);
	crypto_hex(mac, sizeof mac, hex);
}

static void test_hmac_prepared(void **state)
{
	static const char c7[] = "This is a test using a larger than block-size key and a larger"
				 " than block-size data. The key needs to be hashed before being"
				 " used by the HMAC algorithm.";
	unsigned char key[200], one[CRYPTO_SHA256_LEN], parts[CRYPTO_SHA256_LEN];
	char hex[2 * CRYPTO_SHA256_LEN + 1];
	struct crypto_hmac *h;
	size_t klen;

	(void)state;
	memset(key, 0x0b, 20);
	h = crypto_hmac_new(key, 20);
	assert_non_null(h);
	hmac_parts_hex(h, "Hi There", hex);
	assert_string_equal(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	hmac_parts_hex(h, "Hi There", hex); /* the key state is not consumed */
	assert_string_equal(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	crypto_hmac_free(h);
	h = crypto_hmac_new("Jefe", 4);
	assert_non_null(h);
	{
		const void *p[] = {"what do ya ", "", "want for nothing?"};
		size_t len[] = {11, 0, 17};

		assert_int_equal(crypto_hmac_parts(h, 3, p, len, parts), 0);
		crypto_hex(parts, sizeof parts, hex);
		assert_string_equal(hex,
				    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	}
	crypto_hmac_free(h);
	memset(key, 0xaa, 131);
	h = crypto_hmac_new(key, 131);
	assert_non_null(h);
	hmac_parts_hex(h, "Test Using Larger Than Block-Size Key - Hash Key First", hex);
	assert_string_equal(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
	hmac_parts_hex(h, c7, hex);
	assert_string_equal(hex, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
	crypto_hmac_free(h);
	for (klen = 0; klen < sizeof key; klen++) {
		const void *p[] = {c7, c7 + 70};
		size_t len[] = {70, sizeof c7 - 71};

		key[klen] = (unsigned char)(klen * 37 + 1);
		crypto_hmac_sha256(key, klen, c7, sizeof c7 - 1, one);
		h = crypto_hmac_new(key, klen);
		assert_non_null(h);
		assert_int_equal(crypto_hmac_parts(h, 2, p, len, parts), 0);
		crypto_hmac_free(h);
		assert_memory_equal(one, parts, sizeof one);
	}
	crypto_hmac_free(NULL);
}

static void test_crypto_equal(void **state)
{
	unsigned char a[32], b[32];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof a; i++)
		a[i] = b[i] = (unsigned char)i;
	assert_int_equal(crypto_equal(a, b, sizeof a), 1);
	assert_int_equal(crypto_equal(a, b, 0), 1);
	for (i = 0; i < sizeof a; i++) {
		b[i] ^= 0x80;
		assert_int_equal(crypto_equal(a, b, sizeof a), 0);
		b[i] ^= 0x80;
	}
}

static void test_b64url_round_trip(void **state)
{
	unsigned char in[40], out[40];
	char enc[4 * 14 + 1];
	size_t n, len, outlen, i;

	(void)state;
	for (n = 0; n <= 40; n++) {
		assert_int_equal(crypto_random(in, n ? n : 1), 0);
		len = crypto_b64url_encode(in, n, enc);
		assert_int_equal(len, (4 * n + 2) / 3); /* unpadded length */
		assert_int_equal(strlen(enc), len);
		for (i = 0; i < len; i++)
			assert_null(strchr("=+/", enc[i]));
		outlen = 999;
		assert_int_equal(crypto_b64url_decode(enc, len, out, sizeof out, &outlen), 0);
		assert_int_equal(outlen, n);
		assert_memory_equal(in, out, n);
		/* one byte less room than needed is refused */
		if (n)
			assert_int_equal(crypto_b64url_decode(enc, len, out, n - 1, &outlen), -1);
	}
}

static void test_b64url_rejects(void **state)
{
	unsigned char out[64];
	size_t outlen;
	char enc[16];

	(void)state;
	/* "foob" is Zm9vYg in base64url without padding */
	assert_int_equal(crypto_b64url_decode("Zm9vYg", 6, out, sizeof out, &outlen), 0);
	assert_int_equal(outlen, 4);
	assert_memory_equal(out, "foob", 4);
	assert_int_equal(crypto_b64url_decode("Zm9vYg==", 8, out, sizeof out, &outlen), -1);
	assert_int_equal(crypto_b64url_decode("Zm9vYg=", 7, out, sizeof out, &outlen), -1);
	/* '+' and '/' belong to the standard alphabet, not this one */
	assert_int_equal(crypto_b64url_decode("ab+d", 4, out, sizeof out, &outlen), -1);
	assert_int_equal(crypto_b64url_decode("ab/d", 4, out, sizeof out, &outlen), -1);
	assert_int_equal(crypto_b64url_decode("ab-_", 4, out, sizeof out, &outlen), 0);
	assert_int_equal(crypto_b64url_decode("ab d", 4, out, sizeof out, &outlen), -1);
	/* n % 4 == 1 is never a valid length */
	assert_int_equal(crypto_b64url_decode("A", 1, out, sizeof out, &outlen), -1);
	assert_int_equal(crypto_b64url_decode("AAAAA", 5, out, sizeof out, &outlen), -1);
	/* non-zero trailing bits: "Zm9vYh" would also decode to "foob" */
	assert_int_equal(crypto_b64url_decode("Zm9vYh", 6, out, sizeof out, &outlen), -1);
	assert_int_equal(crypto_b64url_decode("Zg", 2, out, sizeof out, &outlen), 0);
	assert_int_equal(crypto_b64url_decode("Zh", 2, out, sizeof out, &outlen), -1);
	assert_int_equal(crypto_b64url_decode("Zm8", 3, out, sizeof out, &outlen), 0);
	assert_int_equal(outlen, 2);
	assert_memory_equal(out, "fo", 2);
	assert_int_equal(crypto_b64url_decode("Zm9", 3, out, sizeof out, &outlen), -1);
	assert_int_equal(crypto_b64url_decode("Zm-", 3, out, sizeof out, &outlen), -1);
	/* empty input decodes to nothing */
	outlen = 7;
	assert_int_equal(crypto_b64url_decode("", 0, out, sizeof out, &outlen), 0);
	assert_int_equal(outlen, 0);
	/* an embedded NUL is outside the alphabet */
	memcpy(enc, "Zm\0v", 4);
	assert_int_equal(crypto_b64url_decode(enc, 4, out, sizeof out, &outlen), -1);
}

static void test_b64_standard(void **state)
{
	unsigned char out[64];
	char enc[64];
	size_t outlen;

	(void)state;
	assert_int_equal(crypto_b64_decode("Zm9vYmFy", 8, out, sizeof out, &outlen), 0);
	assert_int_equal(outlen, 6);
	assert_memory_equal(out, "foobar", 6);
	assert_int_equal(crypto_b64_decode("Zm9vYg==", 8, out, sizeof out, &outlen), 0);
	assert_int_equal(outlen, 4);
	assert_memory_equal(out, "foob", 4);
	assert_int_equal(crypto_b64_decode("Zm9vYmE=", 8, out, sizeof out, &outlen), 0);
	assert_int_equal(outlen, 5);
	assert_memory_equal(out, "fooba", 5);
	assert_int_equal(crypto_b64_decode("", 0, out, sizeof out, &outlen), 0);
	assert_int_equal(outlen, 0);
	/* padding is required */
	assert_int_equal(crypto_b64_decode("Zm9vYg", 6, out, sizeof out, &outlen), -1);
	/* the url alphabet is refused; '+' and '/' are accepted */
	assert_int_equal(crypto_b64_decode("ab-_", 4, out, sizeof out, &outlen), -1);
	assert_int_equal(crypto_b64_decode("ab_d", 4, out, sizeof out, &outlen), -1);
	assert_int_equal(crypto_b64_decode("ab+/", 4, out, sizeof out, &outlen), 0);
	assert_int_equal(outlen, 3);
	assert_memory_equal(out, "\x69\xbf\xbf", 3);
	/* '=' inside the data */
	assert_int_equal(crypto_b64_decode("Zm=vYmFy", 8, out, sizeof out, &outlen), -1);
	assert_int_equal(crypto_b64_decode("Z===", 4, out, sizeof out, &outlen), -1);
	/* Encoder agrees with the decoder and pads. */
	assert_int_equal(crypto_b64_encode("foob", 4, enc), 8);
	assert_string_equal(enc, "Zm9vYg==");
	assert_int_equal(crypto_b64_encode("user:pass", 9, enc), 12);
	assert_string_equal(enc, "dXNlcjpwYXNz");
}

static void test_crypto_token(void **state)
{
	char a[64], b[64], small[10];
	unsigned char raw[32];
	size_t rawlen;

	(void)state;
	assert_int_equal(crypto_token("rvk_", 32, a, sizeof a), 0);
	assert_int_equal(crypto_token("rvk_", 32, b, sizeof b), 0);
	assert_int_equal(strncmp(a, "rvk_", 4), 0);
	assert_int_equal(strlen(a), 4 + 43);
	assert_int_equal(strlen(b), 4 + 43);
	assert_string_not_equal(a, b);
	assert_int_equal(crypto_b64url_decode(a + 4, 43, raw, sizeof raw, &rawlen), 0);
	assert_int_equal(rawlen, 32);
	/* exact fit: 4 + 44 + 1 */
	assert_int_equal(crypto_token("rvk_", 32, a, 49), 0);
	assert_int_equal(crypto_token("rvk_", 32, small, sizeof small), -1);
}

/* ---------------------------------------------------------------------- id */

#define NIDS 10000

static void test_id_format(void **state)
{
	char id[ID_MAX];
	size_t i;

	(void)state;
	assert_int_equal(id_new("pf_", id, sizeof id), 0);
	assert_int_equal(strlen(id), 3 + ID_BODY_LEN);
	assert_int_equal(strncmp(id, "pf_", 3), 0);
	for (i = 3; id[i]; i++)
		assert_non_null(strchr("0123456789ABCDEFGHJKMNPQRSTVWXYZ", id[i]));
	assert_true(id[3] <= '7');
	assert_int_equal(id_valid("pf_", id), 1);
	assert_int_equal(id_valid("prop_", id), 0);
	/* too small a buffer */
	assert_int_equal(id_new("pf_", id, 3 + ID_BODY_LEN), -1);
	assert_int_equal(id_new("pf_", id, 3 + ID_BODY_LEN + 1), 0);
	assert_int_equal(id_valid("pf_", id), 1);
}

static void test_id_ordered_unique(void **state)
{
	char(*ids)[ID_MAX] = malloc(NIDS * sizeof *ids);
	int i;

	(void)state;
	assert_non_null(ids);
	for (i = 0; i < NIDS; i++)
		assert_int_equal(id_new("evt_", ids[i], ID_MAX), 0);
	for (i = 0; i < NIDS; i++) {
		assert_int_equal(id_valid("evt_", ids[i]), 1);
		if (i)
			assert_true(strcmp(ids[i - 1], ids[i]) < 0);
	}
	free(ids);
}

static void test_id_valid_rejects(void **state)
{
	char id[ID_MAX], bad[ID_MAX + 8];
	static const char forbidden[] = "ILOU";
	size_t i;

	(void)state;
	assert_int_equal(id_new("rd_", id, sizeof id), 0);
	assert_int_equal(id_valid("rd_", id), 1);
	assert_int_equal(id_valid("rs_", id), 0);
	assert_int_equal(id_valid("r_", id), 0); /* a shorter prefix: body too long */
	assert_int_equal(id_valid("rd_", id + 1), 0);
	assert_int_equal(id_valid("rd_", "rd_"), 0);
	assert_int_equal(id_valid("rd_", ""), 0);
	/* wrong length */
	snprintf(bad, sizeof bad, "%.*s", (int)strlen(id) - 1, id);
	assert_int_equal(id_valid("rd_", bad), 0);
	snprintf(bad, sizeof bad, "%s0", id);
	assert_int_equal(id_valid("rd_", bad), 0);
	/* a fixed, valid body to edit */
	strcpy(bad, "rd_01JD3X5Q7E9ZK4M2N6P8R0T2V4");
	assert_int_equal(id_valid("rd_", bad), 1);
	bad[10] = 'q'; /* lowercase */
	assert_int_equal(id_valid("rd_", bad), 0);
	bad[10] = 'Q';
	assert_int_equal(id_valid("rd_", bad), 1);
	for (i = 0; forbidden[i]; i++) {
		bad[12] = forbidden[i];
		assert_int_equal(id_valid("rd_", bad), 0);
	}
	bad[12] = 'Z';
	assert_int_equal(id_valid("rd_", bad), 1);
	/* the first body digit holds 3 bits: '0'..'7' */
	bad[3] = '7';
	assert_int_equal(id_valid("rd_", bad), 1);
	bad[3] = '8';
	assert_int_equal(id_valid("rd_", bad), 0);
	bad[3] = 'Z';
	assert_int_equal(id_valid("rd_", bad), 0);
	bad[3] = '0';
	bad[20] = '-';
	assert_int_equal(id_valid("rd_", bad), 0);
}

/* ------------------------------------------------------------------- clock */

static void test_clock_format(void **state)
{
	char out[CLOCK_RFC3339_LEN];

	(void)state;
	clock_format_ms(0, out);
	assert_string_equal(out, "1970-01-01T00:00:00.000Z");
	/* Python: datetime.fromtimestamp(1795334400.123, timezone.utc) */
	clock_format_ms(INT64_C(1795334400123), out);
	assert_string_equal(out, "2026-11-22T08:00:00.123Z");
	clock_format_ms(-1, out);
	assert_string_equal(out, "1969-12-31T23:59:59.999Z");
	/* 2024-02-29 23:59:59.999 */
	clock_format_ms(INT64_C(19782) * 86400000 + 86399999, out);
	assert_string_equal(out, "2024-02-29T23:59:59.999Z");
}

static void test_clock_http_date(void **state)
{
	char out[30];

	(void)state;
	/* Python: email.utils.formatdate(1780272000, usegmt=True) */
	clock_format_http_date(INT64_C(1780272000000), out);
	assert_string_equal(out, "Mon, 01 Jun 2026 00:00:00 GMT");
	clock_format_http_date(0, out);
	assert_string_equal(out, "Thu, 01 Jan 1970 00:00:00 GMT");
	/* Python: email.utils.formatdate(-31536000, usegmt=True) */
	clock_format_http_date(INT64_C(-31536000000), out);
	assert_string_equal(out, "Wed, 01 Jan 1969 00:00:00 GMT");
	clock_format_http_date(INT64_C(1795334400123), out);
	assert_string_equal(out, "Sun, 22 Nov 2026 08:00:00 GMT");
}

static void test_clock_parse_date(void **state)
{
	static const char *const bad[] = {
		"2023-02-29", "2026-13-01", "2026-00-10", "2026-1-01",  "2026-01-01x", "2026-01-32",
		"2026-04-31", "2100-02-29", "0000-01-01", "2026/01/01", "2026-01-0a",  " 026-01-01",
		"+026-01-01", "",           "20260101",   "2026-01-00",
	};
	int64_t d = -1;
	size_t i;

	(void)state;
	assert_int_equal(clock_parse_date("2024-02-29", &d), 0);
	assert_int_equal(d, 19782); /* Python: (date(2024,2,29) - date(1970,1,1)).days */
	assert_int_equal(clock_parse_date("1970-01-01", &d), 0);
	assert_int_equal(d, 0);
	assert_int_equal(clock_parse_date("2000-02-29", &d), 0);
	assert_int_equal(clock_parse_date("0001-01-01", &d), 0);
	assert_int_equal(d, -719162);
	assert_int_equal(clock_parse_date("9999-12-31", &d), 0);
	assert_int_equal(d, 2932896);
	for (i = 0; i < ARRAY_LEN(bad); i++) {
		d = 12345;
		if (clock_parse_date(bad[i], &d) != -1)
			fail_msg("accepted %s", bad[i]);
		assert_int_equal(d, 12345);
	}
}

static void test_clock_date_round_trip(void **state)
{
	char out[11], back[11];
	int64_t day, parsed;
	int i;

	(void)state;
	for (i = 0; i < 2000; i++) {
		/* any day in 0001-01-01 .. 9999-12-31 */
		day = -719162 + (int64_t)(rng() % (2932896 + 719162 + 1));
		clock_format_date(day, out);
		assert_int_equal(strlen(out), 10);
		if (clock_parse_date(out, &parsed) != 0)
			fail_msg("day %lld formatted as %s does not parse", (long long)day, out);
		assert_int_equal(parsed, day);
		clock_format_date(parsed, back);
		assert_string_equal(out, back);
	}
}

static int64_t day_ms(const char *date)
{
	int64_t d;

	assert_int_equal(clock_parse_date(date, &d), 0);
	return d * 86400000;
}

static void test_clock_add_months(void **state)
{
	const int64_t t = 8 * 3600000 + 123; /* a time of day is kept */

	(void)state;
	assert_int_equal(clock_add_months(day_ms("2026-06-01"), 18), day_ms("2027-12-01"));
	assert_int_equal(clock_add_months(day_ms("2026-06-01") + t, 18), day_ms("2027-12-01") + t);
	assert_int_equal(clock_add_months(day_ms("2026-01-31"), 1), day_ms("2026-02-28"));
	assert_int_equal(clock_add_months(day_ms("2024-01-31"), 1), day_ms("2024-02-29"));
	assert_int_equal(clock_add_months(day_ms("2024-02-29"), 12), day_ms("2025-02-28"));
	assert_int_equal(clock_add_months(day_ms("2024-02-29"), 48), day_ms("2028-02-29"));
	assert_int_equal(clock_add_months(day_ms("2026-03-31"), -1), day_ms("2026-02-28"));
	assert_int_equal(clock_add_months(day_ms("2026-01-15"), -13), day_ms("2024-12-15"));
	assert_int_equal(clock_add_months(day_ms("2026-12-31"), 12), day_ms("2027-12-31"));
	assert_int_equal(clock_add_months(day_ms("2026-05-31"), 0), day_ms("2026-05-31"));
}

static void test_clock_time_scale(void **state)
{
	(void)state;
	clock_set_time_scale(60);
	assert_true(clock_time_scale() == 60.0);
	assert_int_equal(clock_business_ms(3600000), 60000);
	assert_int_equal(clock_business_ms(INT64_C(72) * 3600000), INT64_C(72) * 60000);
	clock_set_time_scale(0.5); /* below 1 is clamped to 1 */
	assert_true(clock_time_scale() == 1.0);
	assert_int_equal(clock_business_ms(3600000), 3600000);
	clock_set_time_scale(1);
	assert_int_equal(clock_business_ms(1234), 1234);
}

static void test_clock_now(void **state)
{
	int64_t a = clock_mono_us(), b, now = clock_now_ms();

	(void)state;
	b = clock_mono_us();
	assert_true(b >= a);
	assert_true(now > INT64_C(1700000000000)); /* after 2023-11 */
}

/* -------------------------------------------------------------- pagination */

static void test_pagination_limit(void **state)
{
	static const char *const bad[] = {"0",       "-1",   "501",    "abc",    "",
					  "1.5",     "+5",   " 5",     "5 ",     "1e3",
					  "0000001", "0x10", "999999", "1000000"};
	int v;
	size_t i;

	(void)state;
	v = 0;
	assert_int_equal(pagination_limit(NULL, 500, &v), 0);
	assert_int_equal(v, 50);
	assert_int_equal(pagination_limit(NULL, 100, &v), 0);
	assert_int_equal(v, 50);
	assert_int_equal(pagination_limit(NULL, 20, &v), 0); /* max below the default */
	assert_int_equal(v, 20);
	assert_int_equal(pagination_limit("1", 500, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(pagination_limit("500", 500, &v), 0);
	assert_int_equal(v, 500);
	assert_int_equal(pagination_limit("100", 100, &v), 0);
	assert_int_equal(v, 100);
	assert_int_equal(pagination_limit("101", 100, &v), -1);
	/* Leading zeros are plain decimal and accepted while the text is at most
	 * 6 characters; a 7th character is refused whatever its value. */
	assert_int_equal(pagination_limit("000001", 500, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(pagination_limit("007", 500, &v), 0);
	assert_int_equal(v, 7);
	for (i = 0; i < ARRAY_LEN(bad); i++) {
		v = -42;
		if (pagination_limit(bad[i], 500, &v) != -1)
			fail_msg("limit \"%s\" accepted", bad[i]);
		assert_int_equal(v, -42);
	}
}

static const unsigned char KEY_A[32] = "0123456789abcdef0123456789abcdef";
static const unsigned char KEY_B[32] = "0123456789abcdef0123456789abcdeF";

static void test_cursor_round_trip(void **state)
{
	char cur[PAGINATION_CURSOR_MAX + 1], id[ID_MAX], back[ID_MAX];
	char longid[129], toolong[130];

	(void)state;
	assert_int_equal(id_new("rd_", id, sizeof id), 0);
	assert_int_equal(pagination_cursor_encode(KEY_A, "rd:pf_1", id, cur, sizeof cur), 0);
	assert_null(strpbrk(cur, "=+/ ")); /* url-safe as is */
	assert_null(strstr(cur, id));      /* not the bare id */
	memset(back, 0, sizeof back);
	assert_int_equal(pagination_cursor_decode(KEY_A, "rd:pf_1", cur, back, sizeof back), 0);
	assert_string_equal(back, id);
	/* the whole id range, including the longest accepted */
	memset(longid, 'x', 128);
	longid[128] = '\0';
	assert_int_equal(pagination_cursor_encode(KEY_A, "s", longid, cur, sizeof cur), 0);
	assert_true(strlen(cur) <= PAGINATION_CURSOR_MAX);
	assert_int_equal(pagination_cursor_decode(KEY_A, "s", cur, toolong, sizeof toolong), 0);
	assert_string_equal(toolong, longid);
	/* last_id buffer too small */
	assert_int_equal(pagination_cursor_decode(KEY_A, "s", cur, toolong, 128), -1);
	memset(toolong, 'x', 129);
	toolong[129] = '\0';
	assert_int_equal(pagination_cursor_encode(KEY_A, "s", toolong, cur, sizeof cur), -1);
	assert_int_equal(pagination_cursor_encode(KEY_A, "s", "", cur, sizeof cur), -1);
	assert_int_equal(pagination_cursor_encode(KEY_A, "s", id, cur, 8), -1);
}

static void test_cursor_tamper(void **state)
{
	char cur[PAGINATION_CURSOR_MAX + 1], edit[PAGINATION_CURSOR_MAX + 2], id[ID_MAX],
		back[ID_MAX];
	size_t i, n;

	(void)state;
	assert_int_equal(id_new("prop_", id, sizeof id), 0);
	assert_int_equal(pagination_cursor_encode(KEY_A, "props:pf_A", id, cur, sizeof cur), 0);
	/* another list, another key */
	assert_int_equal(pagination_cursor_decode(KEY_A, "props:pf_B", cur, back, sizeof back), -1);
	assert_int_equal(pagination_cursor_decode(KEY_A, "props:pf_A ", cur, back, sizeof back), -1);
	assert_int_equal(pagination_cursor_decode(KEY_A, "", cur, back, sizeof back), -1);
	assert_int_equal(pagination_cursor_decode(KEY_B, "props:pf_A", cur, back, sizeof back), -1);
	/* every single-character edit is refused */
	n = strlen(cur);
	for (i = 0; i < n; i++) {
		strcpy(edit, cur);
		edit[i] = edit[i] == 'A' ? 'B' : 'A';
		if (pagination_cursor_decode(KEY_A, "props:pf_A", edit, back, sizeof back) != -1)
			fail_msg("cursor with position %zu edited was accepted", i);
		edit[i] = edit[i] == 'A' ? 'w' : 'A'; /* a second, different replacement */
		if (strcmp(edit, cur) &&
		    pagination_cursor_decode(KEY_A, "props:pf_A", edit, back, sizeof back) != -1)
			fail_msg("cursor with position %zu edited was accepted", i);
	}
	/* truncated by 1..n characters */
	for (i = 1; i <= n; i++) {
		strcpy(edit, cur);
		edit[n - i] = '\0';
		assert_int_equal(pagination_cursor_decode(KEY_A, "props:pf_A", edit, back,
							  sizeof back),
				 -1);
	}
	/* extended */
	snprintf(edit, sizeof edit, "%sAAAA", cur);
	assert_int_equal(pagination_cursor_decode(KEY_A, "props:pf_A", edit, back, sizeof back), -1);
	/* outside the alphabet, padded */
	snprintf(edit, sizeof edit, "%s=", cur);
	assert_int_equal(pagination_cursor_decode(KEY_A, "props:pf_A", edit, back, sizeof back), -1);
	/* longer than PAGINATION_CURSOR_MAX */
	memset(edit, 'A', PAGINATION_CURSOR_MAX + 1);
	edit[PAGINATION_CURSOR_MAX + 1] = '\0';
	assert_int_equal(pagination_cursor_decode(KEY_A, "props:pf_A", edit, back, sizeof back), -1);
	edit[PAGINATION_CURSOR_MAX] = '\0';
	assert_int_equal(pagination_cursor_decode(KEY_A, "props:pf_A", edit, back, sizeof back), -1);
	/* still intact afterwards */
	assert_int_equal(pagination_cursor_decode(KEY_A, "props:pf_A", cur, back, sizeof back), 0);
	assert_string_equal(back, id);
}

/* A MAC that verifies over bytes that are not a printable id is still refused. */
static void test_cursor_rejects_unprintable_id(void **state)
{
	char cur[PAGINATION_CURSOR_MAX + 1], back[ID_MAX];

	(void)state;
	assert_int_equal(pagination_cursor_encode(KEY_A, "s", "a b", cur, sizeof cur), 0);
	assert_int_equal(pagination_cursor_decode(KEY_A, "s", cur, back, sizeof back), -1);
	assert_int_equal(pagination_cursor_encode(KEY_A, "s", "a\x7f", cur, sizeof cur), 0);
	assert_int_equal(pagination_cursor_decode(KEY_A, "s", cur, back, sizeof back), -1);
}

/* -------------------------------------------------------------------- form */

static int parse(const char *s, struct form *f, const char **why)
{
	*why = NULL;
	return form_parse(s, strlen(s), f, why);
}

static void test_form_basic(void **state)
{
	struct form f;
	const char *why;

	(void)state;
	assert_int_equal(parse("a=1&b=x+y%21", &f, &why), 0);
	assert_int_equal(f.n, 2);
	assert_string_equal(form_get(&f, "a"), "1");
	assert_string_equal(form_get(&f, "b"), "x y!");
	assert_null(form_get(&f, "c"));
	assert_null(form_get(&f, "A"));
	form_free(&f);

	assert_int_equal(parse("&&a=1&", &f, &why), 0);
	assert_int_equal(f.n, 1);
	assert_string_equal(form_get(&f, "a"), "1");
	form_free(&f);

	assert_int_equal(parse("", &f, &why), 0);
	assert_int_equal(f.n, 0);
	form_free(&f);

	assert_int_equal(parse("flag&x=&y==", &f, &why), 0);
	assert_int_equal(f.n, 3);
	assert_string_equal(form_get(&f, "flag"), "");
	assert_string_equal(form_get(&f, "x"), "");
	assert_string_equal(form_get(&f, "y"), "=");
	form_free(&f);

	/* escapes in names; lowercase and uppercase hex */
	assert_int_equal(parse("client%5fid=c%3a%3A&grant_type=client_credentials", &f, &why), 0);
	assert_string_equal(form_get(&f, "client_id"), "c::");
	assert_string_equal(form_get(&f, "grant_type"), "client_credentials");
	form_free(&f);

	/* len bounds the body: the rest is not read */
	assert_int_equal(form_parse("a=1&b=2", 3, &f, &why), 0);
	assert_int_equal(f.n, 1);
	assert_string_equal(form_get(&f, "a"), "1");
	form_free(&f);
}

static void test_form_rejects(void **state)
{
	static const char *const bad[] = {"a=%zz", "%zz=1", "a=%4", "a=%",   "a=%00",
					  "a=%g0", "%00=1", "a=1%", "a=1%2", "b=%%41"};
	struct form f;
	const char *why;
	char body[512];
	size_t i;
	int n;

	(void)state;
	assert_int_equal(parse("a=1&a=2", &f, &why), -1);
	assert_string_equal(why, "a parameter is repeated");
	assert_int_equal(f.n, 0);
	/* the same name after decoding is the same name */
	assert_int_equal(parse("scope=x&sc%6fpe=y", &f, &why), -1);
	assert_string_equal(why, "a parameter is repeated");
	for (i = 0; i < ARRAY_LEN(bad); i++) {
		if (parse(bad[i], &f, &why) != -1)
			fail_msg("form \"%s\" accepted", bad[i]);
		assert_non_null(why);
		assert_int_equal(f.n, 0);
	}
	/* an escape cut off by len, although the bytes after it would complete it */
	assert_int_equal(form_parse("a=%41", 4, &f, &why), -1);
	assert_int_equal(form_parse("a=%41", 5, &f, &why), 0);
	assert_string_equal(form_get(&f, "a"), "A");
	form_free(&f);
	/* a raw NUL byte in the body */
	assert_int_equal(form_parse("a=1\0b", 5, &f, &why), -1);
	/* 16 fields fit, 17 do not */
	body[0] = '\0';
	for (n = 0; n < 16; n++)
		snprintf(body + strlen(body), sizeof body - strlen(body), "%sf%d=%d", n ? "&" : "",
			 n, n);
	assert_int_equal(parse(body, &f, &why), 0);
	assert_int_equal(f.n, 16);
	assert_string_equal(form_get(&f, "f15"), "15");
	form_free(&f);
	strcat(body, "&f16=16");
	assert_int_equal(parse(body, &f, &why), -1);
	assert_non_null(why);
	assert_int_equal(f.n, 0);
}

static void test_form_decode(void **state)
{
	char *out = NULL;

	(void)state;
	assert_int_equal(form_decode("a%20b+c", 7, &out), 0);
	assert_string_equal(out, "a b c");
	free(out);
	assert_int_equal(form_decode("%C5%81%c3%b3d%C5%BA", 19, &out), 0);
	assert_string_equal(out, "\xc5\x81\xc3\xb3"
				 "d\xc5\xba"); /* "Łódź" */
	free(out);
	assert_int_equal(form_decode("", 0, &out), 0);
	assert_string_equal(out, "");
	free(out);
	out = NULL;
	assert_int_equal(form_decode("%2", 2, &out), -1);
	assert_null(out);
}

/* ------------------------------------------------------------------ router */

static const struct route ROUTES[] = {
	{.method = "GET", .pattern = "/v2/portfolios"},
	{.method = "GET", .pattern = "/v2/portfolios/{id}"},
	{.method = "GET", .pattern = "/v2/portfolios/{id}/properties"},
	{.method = "POST", .pattern = "/oauth/token"},
};

static int route(const char *method, const char *path, struct route_match *m, struct buf *allow)
{
	memset(m, 0x5a, sizeof *m);
	buf_reset(allow);
	return router_match(ROUTES, ARRAY_LEN(ROUTES), method, path, m, allow);
}

static void test_router_match(void **state)
{
	struct route_match m;
	struct buf allow;

	(void)state;
	buf_init(&allow, 256);
	assert_int_equal(route("GET", "/v2/portfolios", &m, &allow), 200);
	assert_ptr_equal(m.route, &ROUTES[0]);
	assert_int_equal(m.nparams, 0);
	assert_int_equal(route("GET", "/v2/portfolios/pf_01ABC", &m, &allow), 200);
	assert_ptr_equal(m.route, &ROUTES[1]);
	assert_int_equal(m.nparams, 1);
	assert_string_equal(m.params[0], "pf_01ABC");
	assert_int_equal(route("GET", "/v2/portfolios/pf_9/properties", &m, &allow), 200);
	assert_ptr_equal(m.route, &ROUTES[2]);
	assert_int_equal(m.nparams, 1);
	assert_string_equal(m.params[0], "pf_9");
	assert_int_equal(route("POST", "/oauth/token", &m, &allow), 200);
	assert_ptr_equal(m.route, &ROUTES[3]);
	assert_int_equal(m.nparams, 0);
	/* one trailing slash is ignored (SCIM clients send "/Users/?filter=") */
	assert_int_equal(route("GET", "/v2/portfolios/", &m, &allow), 200);
	assert_ptr_equal(m.route, &ROUTES[0]);
	assert_int_equal(route("GET", "/v2/portfolios/pf_1/", &m, &allow), 200);
	assert_ptr_equal(m.route, &ROUTES[1]);
	assert_string_equal(m.params[0], "pf_1");
	buf_free(&allow);
}

static void test_router_case_insensitive_flag(void **state)
{
	static const struct route scim[] = {
		{.method = "GET", .pattern = "/scim/v2/Users/{id}", .ci = 1},
		{.method = "GET", .pattern = "/v2/portfolios"},
	};
	struct route_match m;

	(void)state;
	assert_int_equal(router_match(scim, 2, "GET", "/scim/v2/users/usr_AbC", &m, NULL), 200);
	assert_string_equal(m.params[0], "usr_AbC"); /* parameters keep their case */
	assert_int_equal(router_match(scim, 2, "GET", "/SCIM/V2/USERS/x", &m, NULL), 200);
	assert_int_equal(router_match(scim, 2, "GET", "/V2/Portfolios", &m, NULL), 404);
}

static void test_router_not_found(void **state)
{
	static const char *const paths[] = {
		"/v2/portfolios//",
		"/v2/portfolios/pf_1//",
		"/v2/portfolios//properties",
		"/v2/portfolios/pf_1/x",
		"/v2/nothing",
		"/",
		"",
		"/v2",
		"v2/portfolios",
		"//v2/portfolios",
		"/V2/portfolios",
		"/v2/portfolio",
		"/v2/portfoliosx",
		"/oauth/token//",
		"/v2/portfolios/pf_1/properties/x",
	};
	struct route_match m;
	struct buf allow;
	size_t i;

	(void)state;
	buf_init(&allow, 256);
	for (i = 0; i < ARRAY_LEN(paths); i++)
		if (route("GET", paths[i], &m, &allow) != 404)
			fail_msg("GET \"%s\" is not 404", paths[i]);
	buf_free(&allow);
}

static void test_router_method_not_allowed(void **state)
{
	static const struct route two[] = {
		{.method = "GET", .pattern = "/v2/webhooks"},
		{.method = "POST", .pattern = "/v2/webhooks"},
		{.method = "GET", .pattern = "/v2/webhooks/{id}"},
		{.method = "DELETE", .pattern = "/v2/webhooks/{id}"},
	};
	struct route_match m;
	struct buf allow;

	(void)state;
	buf_init(&allow, 256);
	assert_int_equal(route("DELETE", "/v2/portfolios", &m, &allow), 405);
	assert_string_equal(allow.data, "GET, HEAD");
	assert_int_equal(route("GET", "/oauth/token", &m, &allow), 405);
	assert_string_equal(allow.data, "POST");
	assert_int_equal(route("get", "/v2/portfolios", &m, &allow),
			 405); /* methods are case-sensitive */
	buf_reset(&allow);
	assert_int_equal(router_match(two, ARRAY_LEN(two), "PUT", "/v2/webhooks", &m, &allow), 405);
	assert_string_equal(allow.data, "GET, HEAD, POST");
	buf_reset(&allow);
	assert_int_equal(router_match(two, ARRAY_LEN(two), "PATCH", "/v2/webhooks/wh_1", &m, &allow),
			 405);
	assert_string_equal(allow.data, "GET, HEAD, DELETE");
	/* HEAD takes the GET route (RFC 9110 §9.3.2) */
	assert_int_equal(router_match(two, ARRAY_LEN(two), "HEAD", "/v2/webhooks/wh_1", &m, &allow),
			 200);
	assert_ptr_equal(m.route, &two[2]);
	buf_reset(&allow);
	assert_int_equal(router_match(two, ARRAY_LEN(two), "DELETE", "/v2/webhooks/wh_1", &m, &allow),
			 200);
	assert_ptr_equal(m.route, &two[3]);
	assert_string_equal(m.params[0], "wh_1");
	/* allow may be NULL */
	assert_int_equal(router_match(two, ARRAY_LEN(two), "PUT", "/v2/webhooks", &m, NULL), 405);
	buf_free(&allow);
}

static void test_router_param_cap(void **state)
{
	char path[64 + ROUTER_PARAM_MAX + 8], param[ROUTER_PARAM_MAX + 1];
	struct route_match m;
	struct buf allow;

	(void)state;
	buf_init(&allow, 256);
	memset(param, 'p', ROUTER_PARAM_MAX - 1);
	param[ROUTER_PARAM_MAX - 1] = '\0';
	snprintf(path, sizeof path, "/v2/portfolios/%s/properties", param);
	assert_int_equal(route("GET", path, &m, &allow), 200);
	assert_string_equal(m.params[0], param);
	param[ROUTER_PARAM_MAX - 1] = 'p';
	param[ROUTER_PARAM_MAX] = '\0';
	snprintf(path, sizeof path, "/v2/portfolios/%s/properties", param);
	assert_int_equal(route("GET", path, &m, &allow), 404);
	snprintf(path, sizeof path, "/v2/portfolios/%s", param);
	assert_int_equal(route("GET", path, &m, &allow), 404);
	buf_free(&allow);
}

/* -------------------------------------------------------------------- auth */

static const char *const SCOPES[] = {
	"portfolios:read",    "rates:read",          "rates:write", "webhooks:manage",
	"guest-threads:read", "alerts:read",         "tasks:read",  "tasks:write",
	"fiscal:write",       "audit:read",          "feeds:write", "reviews:read",
	"reviews:write",      "guest-threads:write", "fiscal:read",
};

static void test_auth_scopes(void **state)
{
	unsigned all = 0, b;
	char out[512], want[512] = "";
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_LEN(SCOPES); i++) {
		b = auth_scope_bit(SCOPES[i]);
		assert_int_not_equal(b, 0);
		assert_int_equal(b & (b - 1), 0); /* one bit */
		assert_int_equal(all & b, 0);     /* distinct */
		all |= b;
		if (i)
			strcat(want, " ");
		strcat(want, SCOPES[i]);
	}
	assert_int_equal(all, AUTH_SCOPE_ALL);
	assert_int_equal(auth_scope_bit("rates:read"), AUTH_SCOPE_RATES_READ);
	assert_int_equal(auth_scope_bit("feeds:write"), AUTH_SCOPE_FEEDS_WRITE);
	assert_int_equal(auth_scope_bit("rates:delete"), 0);
	assert_int_equal(auth_scope_bit("Rates:read"), 0);
	assert_int_equal(auth_scope_bit("rates:read "), 0);
	assert_int_equal(auth_scope_bit(""), 0);
	assert_int_equal(auth_scope_bit("property:WAW01"), 0);

	auth_scope_string(AUTH_SCOPE_ALL, out, sizeof out);
	assert_string_equal(out, want);
	auth_scope_string(AUTH_SCOPE_RATES_WRITE | AUTH_SCOPE_PORTFOLIOS_READ, out, sizeof out);
	assert_string_equal(out, "portfolios:read rates:write");
	auth_scope_string(0, out, sizeof out);
	assert_string_equal(out, "");
	/* a short buffer holds whole names only */
	memset(out, 'z', sizeof out);
	auth_scope_string(AUTH_SCOPE_ALL, out, 20);
	assert_string_equal(out, "portfolios:read");
}

static void test_auth_plans(void **state)
{
	static const struct {
		const char *plan;
		int64_t rate;
		int page;
		int64_t idem_h;
		const char *tier;
	} t[] = {
		{"chain_starter", 500, 100, 48, "standard"},
		{"group", 2000, 200, 48, "gold"},
		{"enterprise", 5000, 500, 72, "platinum"},
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_LEN(t); i++) {
		assert_int_equal(auth_plan_rate_limit(t[i].plan), t[i].rate);
		assert_int_equal(auth_plan_max_page(t[i].plan), t[i].page);
		assert_int_equal(auth_plan_idempotency_ms(t[i].plan), t[i].idem_h * 3600 * 1000);
		assert_string_equal(auth_plan_sla_tier(t[i].plan), t[i].tier);
	}
}

static void test_auth_bearer(void **state)
{
	char tok[AUTH_TOKEN_MAX], hdr[AUTH_TOKEN_MAX + 16];

	(void)state;
	assert_int_equal(auth_bearer(NULL, tok, sizeof tok), AUTH_NONE);
	assert_int_equal(auth_bearer("Bearer abc", tok, sizeof tok), AUTH_OK);
	assert_string_equal(tok, "abc");
	assert_int_equal(auth_bearer("bearer abc", tok, sizeof tok), AUTH_OK);
	assert_string_equal(tok, "abc");
	assert_int_equal(auth_bearer("BEARER xyz", tok, sizeof tok), AUTH_OK);
	assert_string_equal(tok, "xyz");
	assert_int_equal(auth_bearer("Basic x", tok, sizeof tok), AUTH_INVALID);
	assert_int_equal(auth_bearer("Bearer ", tok, sizeof tok), AUTH_INVALID);
	assert_int_equal(auth_bearer("Bearer    ", tok, sizeof tok), AUTH_INVALID);
	assert_int_equal(auth_bearer("Bearer", tok, sizeof tok), AUTH_INVALID);
	assert_int_equal(auth_bearer("", tok, sizeof tok), AUTH_INVALID);
	assert_int_equal(auth_bearer("Bearerabc", tok, sizeof tok), AUTH_INVALID);
	/* the longest token that fits, then one more character */
	memcpy(hdr, "Bearer ", 7);
	memset(hdr + 7, 't', AUTH_TOKEN_MAX - 1);
	hdr[7 + AUTH_TOKEN_MAX - 1] = '\0';
	assert_int_equal(auth_bearer(hdr, tok, sizeof tok), AUTH_OK);
	assert_int_equal(strlen(tok), AUTH_TOKEN_MAX - 1);
	hdr[7 + AUTH_TOKEN_MAX - 1] = 't';
	hdr[7 + AUTH_TOKEN_MAX] = '\0';
	assert_int_equal(auth_bearer(hdr, tok, sizeof tok), AUTH_INVALID);
}

static void test_auth_property_allowed(void **state)
{
	struct principal *p = calloc(1, sizeof *p);

	(void)state;
	assert_non_null(p);
	p->all_properties = 1;
	assert_int_equal(auth_property_allowed(p, "prop_A"), 1);
	assert_int_equal(auth_property_allowed(p, "prop_anything"), 1);
	p->all_properties = 0;
	p->nprops = 0;
	assert_int_equal(auth_property_allowed(p, "prop_A"), 0);
	strcpy(p->props[0], "prop_A");
	strcpy(p->props[1], "prop_B");
	p->nprops = 2;
	assert_int_equal(auth_property_allowed(p, "prop_A"), 1);
	assert_int_equal(auth_property_allowed(p, "prop_B"), 1);
	assert_int_equal(auth_property_allowed(p, "prop_C"), 0);
	assert_int_equal(auth_property_allowed(p, "prop_"), 0);
	assert_int_equal(auth_property_allowed(p, "prop_AB"), 0);
	assert_int_equal(auth_property_allowed(p, ""), 0);
	free(p);
}

/* ----------------------------------------------------------------- respond */

static void test_error_catalogue(void **state)
{
	/* API-CONTRACT §1, written out. */
	static const struct {
		enum err e;
		int status;
		const char *code;
	} t[] = {
		{ERR_REQUEST_MALFORMED, 400, "SVC-REQUEST-MALFORMED"},
		{ERR_VALIDATION_FAILED, 400, "SVC-VALIDATION-FAILED"},
		{ERR_PORTFOLIO_REQUIRED, 400, "SVC-PORTFOLIO-REQUIRED"},
		{ERR_UNAUTHENTICATED, 401, "SVC-AUTH-UNAUTHENTICATED"},
		{ERR_INSUFFICIENT_ROLE, 403, "SVC-AUTH-INSUFFICIENT-ROLE"},
		{ERR_PLAN_FEATURE_UNAVAILABLE, 403, "SVC-PLAN-FEATURE-UNAVAILABLE"},
		{ERR_NOT_FOUND, 404, "SVC-NOT-FOUND"},
		{ERR_METHOD_NOT_ALLOWED, 405, "SVC-METHOD-NOT-ALLOWED"},
		{ERR_CONFLICT, 409, "SVC-CONFLICT"},
		{ERR_IDEMPOTENCY_IN_PROGRESS, 409, "SVC-IDEMPOTENCY-IN-PROGRESS"},
		{ERR_WINDOW_EXPIRED, 410, "SVC-WINDOW-EXPIRED"},
		{ERR_PAYLOAD_TOO_LARGE, 413, "SVC-PAYLOAD-TOO-LARGE"},
		{ERR_UNSUPPORTED_MEDIA_TYPE, 415, "SVC-UNSUPPORTED-MEDIA-TYPE"},
		{ERR_IDEMPOTENCY_KEY_REUSED, 422, "SVC-IDEMPOTENCY-KEY-REUSED"},
		{ERR_RATE_CEILING_EXCEEDED, 422, "SVC-RATE-CEILING-EXCEEDED"},
		{ERR_GOVERNANCE_REJECTED, 422, "SVC-GOVERNANCE-REJECTED"},
		{ERR_RATE_LIMITED, 429, "SVC-RATE-LIMITED"},
		{ERR_PMS_WRITE_FAILED, 502, "SVC-PMS-WRITE-FAILED"},
		{ERR_UNAVAILABLE, 503, "SVC-UNAVAILABLE"},
		{ERR_INTERNAL, 500, "SVC-INTERNAL"},
	};
	int seen[ERR__COUNT] = {0};
	size_t i, j;

	(void)state;
	assert_int_equal(ARRAY_LEN(t), ERR__COUNT);
	for (i = 0; i < ARRAY_LEN(t); i++) {
		assert_non_null(err_code(t[i].e));
		assert_string_equal(err_code(t[i].e), t[i].code);
		assert_int_equal(err_status(t[i].e), t[i].status);
		seen[t[i].e]++;
		for (j = 0; j < i; j++)
			assert_string_not_equal(err_code(t[i].e), err_code(t[j].e));
	}
	for (i = 0; i < ERR__COUNT; i++)
		assert_int_equal(seen[i], 1);
}

/* ------------------------------------------------------ idempotency (pure) */

static void test_idem_key_valid(void **state)
{
	char key[300];
	unsigned c;

	(void)state;
	assert_int_equal(idempotency_key_valid(""), 0);
	assert_int_equal(idempotency_key_valid("a"), 1);
	assert_int_equal(idempotency_key_valid("order 42 / retry"), 1);
	assert_int_equal(idempotency_key_valid(" "), 1);
	memset(key, 'k', 255);
	key[255] = '\0';
	assert_int_equal(idempotency_key_valid(key), 1);
	key[255] = 'k';
	key[256] = '\0';
	assert_int_equal(idempotency_key_valid(key), 0);
	assert_int_equal(idempotency_key_valid("a\tb"), 0);
	assert_int_equal(idempotency_key_valid("a\nb"), 0);
	assert_int_equal(idempotency_key_valid("\x1f"), 0);
	assert_int_equal(idempotency_key_valid("a\x7f"), 0);
	assert_int_equal(idempotency_key_valid("\xc5\x81"), 0); /* non-ASCII */
	for (c = 0x20; c <= 0x7e; c++) {
		key[0] = (char)c;
		key[1] = '\0';
		assert_int_equal(idempotency_key_valid(key), 1);
	}
}

static void test_idem_fingerprint(void **state)
{
	char a[65], b[65];
	size_t i;

	(void)state;
	idempotency_fingerprint("POST", "/v2/rate-decisions", NULL, "{\"a\":1}", 7, a);
	assert_int_equal(strlen(a), 64);
	for (i = 0; i < 64; i++)
		assert_non_null(strchr("0123456789abcdef", a[i]));
	idempotency_fingerprint("POST", "/v2/rate-decisions", NULL, "{\"a\":1}", 7, b);
	assert_string_equal(a, b);
	idempotency_fingerprint("POST", "/v2/rate-decisions", "", "{\"a\":1}", 7, b);
	assert_string_equal(a, b); /* NULL query is the empty query */
	idempotency_fingerprint("PUT", "/v2/rate-decisions", NULL, "{\"a\":1}", 7, b);
	assert_string_not_equal(a, b);
	idempotency_fingerprint("POST", "/v2/rate-decisionz", NULL, "{\"a\":1}", 7, b);
	assert_string_not_equal(a, b);
	idempotency_fingerprint("POST", "/v2/rate-decisions", "x=1", "{\"a\":1}", 7, b);
	assert_string_not_equal(a, b);
	idempotency_fingerprint("POST", "/v2/rate-decisions", NULL, "{\"a\":2}", 7, b);
	assert_string_not_equal(a, b);
	idempotency_fingerprint("POST", "/v2/rate-decisions", NULL, "{\"a\":1}", 6, b);
	assert_string_not_equal(a, b);
	/* length prefixes keep field boundaries apart */
	idempotency_fingerprint("POST", "/a", NULL, "b", 1, a);
	idempotency_fingerprint("POST", "/", NULL, "ab", 2, b);
	assert_string_not_equal(a, b);
	idempotency_fingerprint("POS", "T/a", NULL, "b", 1, b);
	assert_string_not_equal(a, b);
	/* an empty body and a NUL-containing body */
	idempotency_fingerprint("POST", "/a", NULL, NULL, 0, a);
	idempotency_fingerprint("POST", "/a", NULL, "\0", 1, b);
	assert_string_not_equal(a, b);
}

static void test_idem_decide(void **state)
{
	const int64_t now = INT64_C(1780272000000);
	struct idem_row row;
	char fp[65], other[65];

	(void)state;
	idempotency_fingerprint("POST", "/x", NULL, "1", 1, fp);
	idempotency_fingerprint("POST", "/x", NULL, "2", 1, other);
	assert_int_equal(idempotency_decide(NULL, fp, now), IDEM_PROCEED);
	memset(&row, 0, sizeof row);
	assert_int_equal(idempotency_decide(&row, fp, now), IDEM_PROCEED);

	row.exists = 1;
	row.done = 1;
	strcpy(row.fingerprint, fp);
	row.locked_at = now - 1000;
	row.expires_at = now + 1000;
	assert_int_equal(idempotency_decide(&row, fp, now), IDEM_REPLAY);
	assert_int_equal(idempotency_decide(&row, other, now), IDEM_MISMATCH);
	/* expired: a fresh start whatever the fingerprint */
	row.expires_at = now;
	assert_int_equal(idempotency_decide(&row, fp, now), IDEM_PROCEED);
	assert_int_equal(idempotency_decide(&row, other, now), IDEM_PROCEED);
	row.expires_at = now - 1;
	assert_int_equal(idempotency_decide(&row, fp, now), IDEM_PROCEED);

	/* in flight */
	row.done = 0;
	row.expires_at = now + 3600000;
	row.locked_at = now - 10;
	assert_int_equal(idempotency_decide(&row, fp, now), IDEM_IN_PROGRESS);
	assert_int_equal(idempotency_decide(&row, other, now), IDEM_MISMATCH);
	row.locked_at = now - IDEMPOTENCY_LEASE_MS + 1;
	assert_int_equal(idempotency_decide(&row, fp, now), IDEM_IN_PROGRESS);
	row.locked_at = now - IDEMPOTENCY_LEASE_MS;
	assert_int_equal(idempotency_decide(&row, fp, now), IDEM_PROCEED);
	row.locked_at = now - IDEMPOTENCY_LEASE_MS - 5000;
	assert_int_equal(idempotency_decide(&row, fp, now), IDEM_PROCEED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256_vector),
		cmocka_unit_test(test_hmac_rfc4231),
		cmocka_unit_test(test_hmac_prepared),
		cmocka_unit_test(test_crypto_equal),
		cmocka_unit_test(test_b64url_round_trip),
		cmocka_unit_test(test_b64url_rejects),
		cmocka_unit_test(test_b64_standard),
		cmocka_unit_test(test_crypto_token),
		cmocka_unit_test(test_id_format),
		cmocka_unit_test(test_id_ordered_unique),
		cmocka_unit_test(test_id_valid_rejects),
		cmocka_unit_test(test_clock_format),
		cmocka_unit_test(test_clock_http_date),
		cmocka_unit_test(test_clock_parse_date),
		cmocka_unit_test(test_clock_date_round_trip),
		cmocka_unit_test(test_clock_add_months),
		cmocka_unit_test(test_clock_time_scale),
		cmocka_unit_test(test_clock_now),
		cmocka_unit_test(test_pagination_limit),
		cmocka_unit_test(test_cursor_round_trip),
		cmocka_unit_test(test_cursor_tamper),
		cmocka_unit_test(test_cursor_rejects_unprintable_id),
		cmocka_unit_test(test_form_basic),
		cmocka_unit_test(test_form_rejects),
		cmocka_unit_test(test_form_decode),
		cmocka_unit_test(test_router_match),
		cmocka_unit_test(test_router_not_found),
		cmocka_unit_test(test_router_case_insensitive_flag),
		cmocka_unit_test(test_router_method_not_allowed),
		cmocka_unit_test(test_router_param_cap),
		cmocka_unit_test(test_auth_scopes),
		cmocka_unit_test(test_auth_plans),
		cmocka_unit_test(test_auth_bearer),
		cmocka_unit_test(test_auth_property_allowed),
		cmocka_unit_test(test_error_catalogue),
		cmocka_unit_test(test_idem_key_valid),
		cmocka_unit_test(test_idem_fingerprint),
		cmocka_unit_test(test_idem_decide),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
