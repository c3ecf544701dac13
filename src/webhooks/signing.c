#include "webhooks/signing.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crypto.h"

#define SECRET_PREFIX "whsec_"
#define SECRET_PREFIX_LEN (sizeof SECRET_PREFIX - 1)
#define SECRET_RAW_LEN 32
/* Standard Webhooks symmetric keys: at least 24 bytes (192 bits), at most
 * 512 bits. The reference test vector uses a 24-byte key, ours are 32. */
#define STD_KEY_MIN 24
#define STD_KEY_MAX 64
/* Base64 of a SHA-256 MAC: 4 * ceil(32 / 3) characters. */
#define MAC_B64_LEN 44
/* "v1," + base64 MAC + NUL. */
#define STD_SIG_LEN (3 + MAC_B64_LEN + 1)
/* Longest timestamp we parse: 18 digits cannot overflow int64_t. */
#define TS_DIGITS_MAX 18

int signing_new_secret(char out[SIGNING_SECRET_LEN])
{
	unsigned char raw[SECRET_RAW_LEN];

	if (crypto_random(raw, sizeof raw) < 0)
		return -1;
	memcpy(out, SECRET_PREFIX, SECRET_PREFIX_LEN);
	crypto_b64_encode(raw, sizeof raw, out + SECRET_PREFIX_LEN);
	crypto_wipe(raw, sizeof raw);
	return 0;
}

void signing_service_signature(const char *secret, const void *body, size_t len,
			       char out[SIGNING_HEX_LEN])
{
	unsigned char mac[CRYPTO_SHA256_LEN];

	crypto_hmac_sha256(secret, strlen(secret), body, len, mac);
	crypto_hex(mac, sizeof mac, out);
}

/* Value of one hex digit in either case, or -1. */
/* Decodes exactly 2n hex digits (any case) from s into out. Returns 0, or -1
 * on a non-hex character. The caller has checked the length. */
static int hex_decode(const char *s, unsigned char *out, size_t n)
{
	size_t i;
	int hi, lo;

	for (i = 0; i < n; i++) {
		hi = hex_value(s[2 * i]);
		lo = hex_value(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

int signing_verify_service(const char *secret, const void *body, size_t len, const char *header)
{
	unsigned char want[CRYPTO_SHA256_LEN], got[CRYPTO_SHA256_LEN];
	int ok;

	if (!secret || !header || (!body && len))
		return 0;
	/* The length and the characters of the header are public; only the
	 * comparison with the expected MAC has to take constant time. */
	if (strlen(header) != 2 * CRYPTO_SHA256_LEN || hex_decode(header, got, sizeof got) < 0)
		return 0;
	crypto_hmac_sha256(secret, strlen(secret), body, len, want);
	ok = crypto_equal(want, got, sizeof want);
	crypto_wipe(want, sizeof want);
	return ok;
}

/* Decodes the key of a "whsec_<base64>" secret into key (STD_KEY_MAX bytes;
 * the caller wipes it whatever the outcome). Returns the key length, or -1
 * when the prefix is missing, the rest is not padded standard base64, or the
 * key is outside STD_KEY_MIN..STD_KEY_MAX. */
static int std_key(const char *secret, unsigned char key[STD_KEY_MAX])
{
	size_t klen;

	if (strncmp(secret, SECRET_PREFIX, SECRET_PREFIX_LEN) != 0)
		return -1;
	secret += SECRET_PREFIX_LEN;
	if (crypto_b64_decode(secret, strlen(secret), key, STD_KEY_MAX, &klen) < 0 ||
	    klen < STD_KEY_MIN)
		return -1;
	return (int)klen;
}

/* The Standard Webhooks signature "v1,<base64 MAC>" of
 * "<msg_id>.<timestamp>.<body>" under h (keyed with the decoded key), fed
 * to the MAC in parts. Returns 0, or -1 (out of memory). */
static int standard_sign(struct crypto_hmac *h, const char *msg_id, int64_t timestamp,
			 const void *body, size_t len, char *out)
{
	unsigned char mac[CRYPTO_SHA256_LEN];
	char ts[24];
	int tsn = snprintf(ts, sizeof ts, "%" PRId64, timestamp);
	const void *part[] = {msg_id, ".", ts, ".", body ? body : ""};
	size_t plen[] = {strlen(msg_id), 1, (size_t)(tsn > 0 ? tsn : 0), 1, len};

	if (tsn <= 0 || (size_t)tsn >= sizeof ts || crypto_hmac_parts(h, 5, part, plen, mac) < 0)
		return -1;
	memcpy(out, "v1,", 3);
	crypto_b64_encode(mac, sizeof mac, out + 3);
	return 0;
}

/* Signs with the decoded key (wiped before returning). Returns 0, or -1 on
 * a bad secret, a NULL argument, cap < 48 or an allocation failure. */
int signing_standard_signature(const char *secret, const char *msg_id, int64_t timestamp,
			       const void *body, size_t len, char *out, size_t cap)
{
	unsigned char key[STD_KEY_MAX];
	struct crypto_hmac *h = NULL;
	int klen, rc = -1;

	if (!secret || !msg_id || !out || cap < STD_SIG_LEN || (!body && len))
		return -1;
	klen = std_key(secret, key);
	if (klen >= 0 && (h = crypto_hmac_new(key, (size_t)klen)))
		rc = standard_sign(h, msg_id, timestamp, body, len, out);
	crypto_hmac_free(h);
	crypto_wipe(key, sizeof key);
	return rc;
}

struct signing_key {
	struct crypto_hmac *service;  /* keyed with the whole secret string */
	struct crypto_hmac *standard; /* keyed with its decoded part */
};

struct signing_key *signing_key_new(const char *secret)
{
	unsigned char key[STD_KEY_MAX];
	struct signing_key *k = calloc(1, sizeof *k);
	int klen = secret ? std_key(secret, key) : -1;

	if (k && klen >= 0) {
		k->service = crypto_hmac_new(secret, strlen(secret));
		k->standard = crypto_hmac_new(key, (size_t)klen);
	}
	crypto_wipe(key, sizeof key);
	if (k && (!k->service || !k->standard)) {
		signing_key_free(k);
		k = NULL;
	}
	return k;
}

int signing_key_sign(struct signing_key *k, const char *msg_id, int64_t timestamp, const void *body,
		     size_t len, char hex[SIGNING_HEX_LEN], char *std, size_t cap)
{
	unsigned char mac[CRYPTO_SHA256_LEN];
	const void *part = body ? body : "";

	if (!msg_id || !std || cap < STD_SIG_LEN || (!body && len) ||
	    crypto_hmac_parts(k->service, 1, &part, &len, mac) < 0)
		return -1;
	crypto_hex(mac, sizeof mac, hex);
	return standard_sign(k->standard, msg_id, timestamp, body, len, std);
}

void signing_key_free(struct signing_key *k)
{
	if (!k)
		return;
	crypto_hmac_free(k->service);
	crypto_hmac_free(k->standard);
	free(k);
}

/* Parses a webhook-timestamp value: 1 to TS_DIGITS_MAX ASCII digits and
 * nothing else. Returns 0 with *ts, or -1. */
static int parse_timestamp(const char *s, int64_t *ts)
{
	int64_t v = 0;
	size_t i;

	for (i = 0; s[i]; i++) {
		if (s[i] < '0' || s[i] > '9' || i >= TS_DIGITS_MAX)
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (i == 0)
		return -1;
	*ts = v;
	return 0;
}

/* 1 when |now - ts| <= tol, computed without signed overflow: for a > b the
 * unsigned difference of the two's-complement values is exact. */
static int within_tolerance(int64_t ts, int64_t now, int64_t tol)
{
	uint64_t diff;

	if (tol < 0)
		return 0;
	diff = ts > now ? (uint64_t)ts - (uint64_t)now : (uint64_t)now - (uint64_t)ts;
	return diff <= (uint64_t)tol;
}

/* Every "v1," entry of the header is compared (no early exit), so the time
 * taken depends on the header's shape, not on where a match is. Entries of
 * other schemes (v1a, v2, …) are skipped, as the specification allows. */
int signing_verify_standard(const char *secret, const char *msg_id, const char *timestamp_header,
			    const void *body, size_t len, const char *signature_header,
			    int64_t now_s, int64_t tolerance_s)
{
	char want[STD_SIG_LEN];
	const char *p, *end;
	size_t n;
	int64_t ts;
	int ok = 0;

	if (!secret || !msg_id || !timestamp_header || !signature_header)
		return 0;
	if (parse_timestamp(timestamp_header, &ts) < 0 || !within_tolerance(ts, now_s, tolerance_s))
		return 0;
	if (signing_standard_signature(secret, msg_id, ts, body, len, want, sizeof want) < 0)
		return 0;
	for (p = signature_header; *p; p = end) {
		while (*p == ' ')
			p++;
		end = p;
		while (*end && *end != ' ')
			end++;
		n = (size_t)(end - p);
		if (n == STD_SIG_LEN - 1 && memcmp(p, "v1,", 3) == 0)
			ok |= crypto_equal(p + 3, want + 3, MAC_B64_LEN);
	}
	return ok;
}
