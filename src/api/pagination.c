#include "api/pagination.h"

#include <string.h>

#include "core/crypto.h"

#define MAC_LEN 16
#define ID_LEN_MAX 128

int pagination_limit(const char *s, int max, int *out)
{
	long n = 0;
	size_t i;

	if (!s) {
		*out = PAGINATION_DEFAULT_LIMIT < max ? PAGINATION_DEFAULT_LIMIT : max;
		return 0;
	}
	if (!*s || strlen(s) > 6)
		return -1;
	for (i = 0; s[i]; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		n = n * 10 + (s[i] - '0');
	}
	if (n < 1 || n > max)
		return -1;
	*out = (int)n;
	return 0;
}

static void cursor_mac(const unsigned char key[32], const char *scope, const char *id, size_t idlen,
		       unsigned char mac[CRYPTO_SHA256_LEN])
{
	unsigned char msg[CRYPTO_SHA256_LEN + ID_LEN_MAX];

	/* SHA-256 of the scope binds all of it, however long. */
	crypto_sha256(scope, strlen(scope), msg);
	memcpy(msg + CRYPTO_SHA256_LEN, id, idlen);
	crypto_hmac_sha256(key, 32, msg, CRYPTO_SHA256_LEN + idlen, mac);
}

int pagination_cursor_encode(const unsigned char key[32], const char *scope, const char *last_id,
			     char *out, size_t cap)
{
	unsigned char raw[ID_LEN_MAX + MAC_LEN], mac[CRYPTO_SHA256_LEN];
	size_t n = strlen(last_id);

	if (!n || n > ID_LEN_MAX || (n + MAC_LEN + 2) / 3 * 4 + 1 > cap)
		return -1;
	cursor_mac(key, scope, last_id, n, mac);
	memcpy(raw, last_id, n);
	memcpy(raw + n, mac, MAC_LEN);
	crypto_b64url_encode(raw, n + MAC_LEN, out);
	return 0;
}

int pagination_cursor_decode(const unsigned char key[32], const char *scope, const char *cursor,
			     char *last_id, size_t cap)
{
	unsigned char raw[ID_LEN_MAX + MAC_LEN], mac[CRYPTO_SHA256_LEN];
	size_t len, n, i;

	if (strlen(cursor) > PAGINATION_CURSOR_MAX ||
	    crypto_b64url_decode(cursor, strlen(cursor), raw, sizeof raw, &len) < 0 || len <= MAC_LEN)
		return -1;
	n = len - MAC_LEN;
	cursor_mac(key, scope, (const char *)raw, n, mac);
	if (!crypto_equal(mac, raw + n, MAC_LEN) || n >= cap)
		return -1;
	for (i = 0; i < n; i++)
		if (raw[i] < 0x21 || raw[i] > 0x7e)
			return -1;
	memcpy(last_id, raw, n);
	last_id[n] = '\0';
	return 0;
}
