/* Unit tests for signing: secret format, X-Service-Signature and Standard
 * Webhooks signatures against fixed vectors, and both verifiers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/crypto.h"
#include "webhooks/signing.h"

/* The Standard Webhooks reference vector (standard-webhooks repository,
 * libraries/python/tests/test_webhooks.py, test_sign_function; the same
 * values appear in the other reference libraries' tests). */
#define SW_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SW_MSG_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SW_TS 1614265330
#define SW_TS_STR "1614265330"
#define SW_BODY "{\"test\": 2432232314}"
#define SW_SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
/* Another signature of the right shape that matches nothing here (from the
 * same test file's multi-signature case). */
#define SW_OTHER "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="

/* Vectors computed independently with Python's hmac module:
 *   hmac.new(SW_SECRET.encode(), body, hashlib.sha256).hexdigest()
 *   base64.b64encode(hmac.new(base64.b64decode(SW_SECRET[6:]),
 *       b"msg_1.1700000000." + NUL_BODY, hashlib.sha256).digest())      */
#define HEX_SW_BODY "80ec8a89ce3cd22133a1066caecb4d04fea7467657c8514d717ec42c38a5c94c"
#define HEX_EMPTY "da5f5865984e699a69cfec62ce49a76daf8ae4601b54a781fa13f3b2d3b2088a"
#define HEX_NUL_BODY "1e633cf5b2b880bc3ed9d72e5565e8dc252ae773767199845b882e4e0ba7a7a0"
#define STD_NUL_BODY "v1,+OvtkdD0dIwzgWc/8bQszJzpynMTPJDr2rBZJ+a7VNo="
static const char NUL_BODY[] = {'a', 0, 'b', 0, (char)0xff, 'c'};

#define LEN(s) (sizeof(s) - 1)

/* Verifies the Standard Webhooks vector with the given header values. */
static int verify_sw(const char *ts, const char *sig, int64_t now, int64_t tol)
{
	return signing_verify_standard(SW_SECRET, SW_MSG_ID, ts, SW_BODY, LEN(SW_BODY), sig, now,
				       tol);
}

static void test_service_signature_vectors(void **state)
{
	char hex[SIGNING_HEX_LEN];

	(void)state;
	signing_service_signature(SW_SECRET, SW_BODY, LEN(SW_BODY), hex);
	assert_string_equal(hex, HEX_SW_BODY);
	signing_service_signature(SW_SECRET, "", 0, hex);
	assert_string_equal(hex, HEX_EMPTY);
	signing_service_signature(SW_SECRET, NULL, 0, hex);
	assert_string_equal(hex, HEX_EMPTY);
}

static void test_service_signature_nul_body(void **state)
{
	char hex[SIGNING_HEX_LEN], first[SIGNING_HEX_LEN];

	(void)state;
	signing_service_signature(SW_SECRET, NUL_BODY, sizeof NUL_BODY, hex);
	assert_string_equal(hex, HEX_NUL_BODY);
	/* The bytes after the first NUL count: not signed as a C string. */
	signing_service_signature(SW_SECRET, NUL_BODY, 1, first);
	assert_string_not_equal(hex, first);
}

static void test_standard_signature_vector(void **state)
{
	char sig[64];

	(void)state;
	assert_int_equal(signing_standard_signature(SW_SECRET, SW_MSG_ID, SW_TS, SW_BODY,
						    LEN(SW_BODY), sig, sizeof sig),
			 0);
	assert_string_equal(sig, SW_SIG);
	/* The smallest buffer that holds it is enough. */
	assert_int_equal(signing_standard_signature(SW_SECRET, SW_MSG_ID, SW_TS, SW_BODY,
						    LEN(SW_BODY), sig, LEN(SW_SIG) + 1),
			 0);
	assert_string_equal(sig, SW_SIG);
}

static void test_standard_signature_nul_body(void **state)
{
	char sig[64];

	(void)state;
	assert_int_equal(signing_standard_signature(SW_SECRET, "msg_1", 1700000000, NUL_BODY,
						    sizeof NUL_BODY, sig, sizeof sig),
			 0);
	assert_string_equal(sig, STD_NUL_BODY);
}

static void test_standard_signature_bad_secret(void **state)
{
	static const char *bad[] = {
		"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",        /* no prefix */
		"WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",  /* prefix in other case */
		"whsec",                                   /* prefix only, cut */
		"whsec_",                                  /* no key */
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS",   /* not a multiple of 4 */
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa!w",  /* not base64 */
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa_w",  /* base64url, not standard */
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw ", /* trailing space */
		"whsec_AAAA",                              /* 3-byte key: too short */
	};
	char sig[64];
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_LEN(bad); i++)
		assert_int_equal(signing_standard_signature(bad[i], SW_MSG_ID, SW_TS, SW_BODY,
							    LEN(SW_BODY), sig, sizeof sig),
				 -1);
	/* A buffer one byte short is refused rather than overrun. */
	assert_int_equal(signing_standard_signature(SW_SECRET, SW_MSG_ID, SW_TS, SW_BODY,
						    LEN(SW_BODY), sig, LEN(SW_SIG)),
			 -1);
}

static void test_new_secret_format(void **state)
{
	char a[SIGNING_SECRET_LEN], b[SIGNING_SECRET_LEN], sig[64];
	unsigned char raw[64];
	size_t n;

	(void)state;
	assert_int_equal(signing_new_secret(a), 0);
	assert_int_equal(signing_new_secret(b), 0);
	assert_int_equal(strncmp(a, "whsec_", 6), 0);
	assert_int_equal(strlen(a), SIGNING_SECRET_LEN - 1);
	assert_int_equal(strlen(a), 6 + 44);
	assert_int_equal(crypto_b64_decode(a + 6, strlen(a + 6), raw, sizeof raw, &n), 0);
	assert_int_equal(n, 32);
	assert_string_not_equal(a, b);
	/* A fresh secret is a valid Standard Webhooks key. */
	assert_int_equal(signing_standard_signature(a, SW_MSG_ID, SW_TS, SW_BODY, LEN(SW_BODY), sig,
						    sizeof sig),
			 0);
	assert_true(signing_verify_standard(a, SW_MSG_ID, SW_TS_STR, SW_BODY, LEN(SW_BODY), sig,
					    SW_TS, 300));
	assert_false(signing_verify_standard(b, SW_MSG_ID, SW_TS_STR, SW_BODY, LEN(SW_BODY), sig,
					     SW_TS, 300));
}

static void test_verify_service(void **state)
{
	char hex[SIGNING_HEX_LEN], other[SIGNING_HEX_LEN + 1];
	size_t i;

	(void)state;
	assert_true(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), HEX_SW_BODY));
	/* Any case. */
	for (i = 0; i < 64; i++)
		hex[i] = (char)(HEX_SW_BODY[i] >= 'a' ? HEX_SW_BODY[i] - 32 : HEX_SW_BODY[i]);
	hex[64] = '\0';
	assert_true(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), hex));
	hex[2] = 'e'; /* mixed case */
	assert_true(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), hex));
	/* One digit wrong. */
	strcpy(hex, HEX_SW_BODY);
	hex[63] = hex[63] == '0' ? '1' : '0';
	assert_false(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), hex));
	/* Truncated, extended, empty, non-hex, padded. */
	strcpy(hex, HEX_SW_BODY);
	hex[63] = '\0';
	assert_false(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), hex));
	strcpy(other, HEX_SW_BODY "0");
	assert_false(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), other));
	assert_false(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), ""));
	strcpy(hex, HEX_SW_BODY);
	hex[0] = 'g';
	assert_false(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), hex));
	assert_false(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), " " HEX_SW_BODY));
	assert_false(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), "sha256=" HEX_SW_BODY));
	/* Wrong secret (the decoded-key form is not the key here), other body. */
	assert_false(signing_verify_service("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx", SW_BODY,
					    LEN(SW_BODY), HEX_SW_BODY));
	assert_false(signing_verify_service("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", SW_BODY,
					    LEN(SW_BODY), HEX_SW_BODY));
	assert_false(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY) - 1, HEX_SW_BODY));
	assert_false(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), NULL));
	assert_false(signing_verify_service(NULL, SW_BODY, LEN(SW_BODY), HEX_SW_BODY));
	/* What signing_service_signature makes verifies. */
	signing_service_signature(SW_SECRET, SW_BODY, LEN(SW_BODY), hex);
	assert_true(signing_verify_service(SW_SECRET, SW_BODY, LEN(SW_BODY), hex));
	assert_true(signing_verify_service(SW_SECRET, "", 0, HEX_EMPTY));
}

static void test_verify_service_nul_body(void **state)
{
	(void)state;
	assert_true(signing_verify_service(SW_SECRET, NUL_BODY, sizeof NUL_BODY, HEX_NUL_BODY));
	assert_false(signing_verify_service(SW_SECRET, NUL_BODY, 1, HEX_NUL_BODY));
	assert_false(signing_verify_service(SW_SECRET, NUL_BODY, sizeof NUL_BODY - 1, HEX_NUL_BODY));
}

static void test_verify_standard_vector(void **state)
{
	(void)state;
	assert_true(verify_sw(SW_TS_STR, SW_SIG, SW_TS, 300));
	/* Wrong, truncated, other case, other scheme label, no label. */
	assert_false(verify_sw(SW_TS_STR, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=", SW_TS,
			       300));
	assert_false(
		verify_sw(SW_TS_STR, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE", SW_TS, 300));
	assert_false(verify_sw(SW_TS_STR, "v1,G0HM9SSE+OTPJTGT/TMIKTSYZLE3UFJELVLNIOLJ1OE=", SW_TS,
			       300));
	assert_false(verify_sw(SW_TS_STR, "V1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", SW_TS,
			       300));
	assert_false(verify_sw(SW_TS_STR, "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", SW_TS,
			       300));
	assert_false(verify_sw(SW_TS_STR, "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", SW_TS, 300));
	assert_false(verify_sw(SW_TS_STR, "", SW_TS, 300));
	assert_false(verify_sw(SW_TS_STR, NULL, SW_TS, 300));
	/* Other id, body, secret. */
	assert_false(signing_verify_standard(SW_SECRET, "msg_other", SW_TS_STR, SW_BODY,
					     LEN(SW_BODY), SW_SIG, SW_TS, 300));
	assert_false(signing_verify_standard(SW_SECRET, SW_MSG_ID, SW_TS_STR, SW_BODY,
					     LEN(SW_BODY) - 1, SW_SIG, SW_TS, 300));
	assert_false(signing_verify_standard("whsec_AAAAr8GKYqrTwjUPD8ILPZIo2LaLaSw", SW_MSG_ID,
					     SW_TS_STR, SW_BODY, LEN(SW_BODY), SW_SIG, SW_TS, 300));
}

static void test_verify_standard_multiple(void **state)
{
	(void)state;
	assert_true(verify_sw(SW_TS_STR, SW_OTHER " " SW_SIG, SW_TS, 300));
	assert_true(verify_sw(SW_TS_STR, SW_SIG " " SW_OTHER, SW_TS, 300));
	/* Other schemes are skipped; extra spaces are harmless. */
	assert_true(verify_sw(SW_TS_STR,
			      SW_OTHER " v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=  v1a,"
				       "hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymV"
				       "JaA7AZdpXwVLPo3mNl8EM+m7TBAg== " SW_SIG " ",
			      SW_TS, 300));
	assert_true(verify_sw(SW_TS_STR, "  " SW_SIG, SW_TS, 300));
	assert_false(verify_sw(SW_TS_STR, SW_OTHER " " SW_OTHER, SW_TS, 300));
	/* Entries are separated by spaces, not commas or tabs. */
	assert_false(verify_sw(SW_TS_STR, SW_OTHER "," SW_SIG, SW_TS, 300));
	assert_false(verify_sw(SW_TS_STR, SW_OTHER "\t" SW_SIG, SW_TS, 300));
}

static void test_verify_standard_tolerance(void **state)
{
	(void)state;
	assert_true(verify_sw(SW_TS_STR, SW_SIG, SW_TS + 300, 300));
	assert_true(verify_sw(SW_TS_STR, SW_SIG, SW_TS - 300, 300));
	assert_false(verify_sw(SW_TS_STR, SW_SIG, SW_TS + 301, 300));
	assert_false(verify_sw(SW_TS_STR, SW_SIG, SW_TS - 301, 300));
	assert_true(verify_sw(SW_TS_STR, SW_SIG, SW_TS, 0));
	assert_false(verify_sw(SW_TS_STR, SW_SIG, SW_TS + 1, 0));
	assert_false(verify_sw(SW_TS_STR, SW_SIG, SW_TS, -1));
	/* Extreme clocks neither overflow nor pass. */
	assert_false(verify_sw(SW_TS_STR, SW_SIG, INT64_MIN, INT64_MAX));
	assert_true(verify_sw(SW_TS_STR, SW_SIG, INT64_MAX, INT64_MAX));
	assert_false(verify_sw(SW_TS_STR, SW_SIG, INT64_MAX, 300));
}

static void test_verify_standard_bad_timestamp(void **state)
{
	static const char *bad[] = {
		"hello",        "",
		"-1614265330",  "+1614265330",
		" 1614265330",  "1614265330 ",
		"1614265330.0", "0x603815f2",
		"1614265330a",  "1234567890123456789",
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_LEN(bad); i++)
		assert_false(verify_sw(bad[i], SW_SIG, SW_TS, INT64_MAX));
	assert_false(verify_sw(NULL, SW_SIG, SW_TS, 300));
	/* The signed timestamp is the header's: a different one fails. */
	assert_false(verify_sw("1614265331", SW_SIG, SW_TS, 300));
}

static void test_verify_standard_bad_secret(void **state)
{
	(void)state;
	assert_false(signing_verify_standard("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", SW_MSG_ID,
					     SW_TS_STR, SW_BODY, LEN(SW_BODY), SW_SIG, SW_TS, 300));
	assert_false(signing_verify_standard("whsec_", SW_MSG_ID, SW_TS_STR, SW_BODY, LEN(SW_BODY),
					     SW_SIG, SW_TS, 300));
	assert_false(signing_verify_standard(NULL, SW_MSG_ID, SW_TS_STR, SW_BODY, LEN(SW_BODY),
					     SW_SIG, SW_TS, 300));
	assert_false(signing_verify_standard(SW_SECRET, NULL, SW_TS_STR, SW_BODY, LEN(SW_BODY),
					     SW_SIG, SW_TS, 300));
}

static void test_verify_standard_nul_body(void **state)
{
	(void)state;
	assert_true(signing_verify_standard(SW_SECRET, "msg_1", "1700000000", NUL_BODY,
					    sizeof NUL_BODY, STD_NUL_BODY, 1700000000, 300));
	assert_false(signing_verify_standard(SW_SECRET, "msg_1", "1700000000", NUL_BODY, 1,
					     STD_NUL_BODY, 1700000000, 300));
}

/* A prepared key gives the independent vectors, over and over (each
 * signature starts from a copy of the keyed state), NUL bytes included. */
static void test_signing_key(void **state)
{
	char hex[SIGNING_HEX_LEN], sig[64];
	struct signing_key *k = signing_key_new(SW_SECRET);
	int i;

	(void)state;
	assert_non_null(k);
	for (i = 0; i < 3; i++) {
		assert_int_equal(signing_key_sign(k, SW_MSG_ID, SW_TS, SW_BODY, LEN(SW_BODY), hex,
						  sig, sizeof sig),
				 0);
		assert_string_equal(hex, HEX_SW_BODY);
		assert_string_equal(sig, SW_SIG);
		assert_int_equal(signing_key_sign(k, "msg_1", 1700000000, NUL_BODY, sizeof NUL_BODY,
						  hex, sig, sizeof sig),
				 0);
		assert_string_equal(hex, HEX_NUL_BODY);
		assert_string_equal(sig, STD_NUL_BODY);
	}
	assert_int_equal(signing_key_sign(k, "msg_1", 1, NULL, 0, hex, sig, sizeof sig), 0);
	assert_string_equal(hex, HEX_EMPTY);
	assert_int_equal(signing_key_sign(k, "msg_1", 1, NULL, 3, hex, sig, sizeof sig), -1);
	assert_int_equal(signing_key_sign(k, "msg_1", 1, "x", 1, hex, sig, LEN(SW_SIG)), -1);
	signing_key_free(k);
	assert_null(signing_key_new("whsec_AAAA"));
	assert_null(signing_key_new("no-prefix"));
	assert_null(signing_key_new(NULL));
	signing_key_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_service_signature_vectors),
		cmocka_unit_test(test_signing_key),
		cmocka_unit_test(test_service_signature_nul_body),
		cmocka_unit_test(test_standard_signature_vector),
		cmocka_unit_test(test_standard_signature_nul_body),
		cmocka_unit_test(test_standard_signature_bad_secret),
		cmocka_unit_test(test_new_secret_format),
		cmocka_unit_test(test_verify_service),
		cmocka_unit_test(test_verify_service_nul_body),
		cmocka_unit_test(test_verify_standard_vector),
		cmocka_unit_test(test_verify_standard_multiple),
		cmocka_unit_test(test_verify_standard_tolerance),
		cmocka_unit_test(test_verify_standard_bad_timestamp),
		cmocka_unit_test(test_verify_standard_bad_secret),
		cmocka_unit_test(test_verify_standard_nul_body),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
