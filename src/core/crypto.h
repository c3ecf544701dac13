/* crypto: the only module that calls OpenSSL. Hashes, MACs, randomness,
 * constant-time comparison and the encodings secrets travel in. */
#ifndef REVOPS_CRYPTO_H
#define REVOPS_CRYPTO_H
#include <stddef.h>
#include "core/common.h"

#define CRYPTO_SHA256_LEN 32

/* Fills out with n bytes from the CSPRNG. Returns 0, or -1 on failure. */
int crypto_random(void *out, size_t n) WUR;
void crypto_sha256(const void *p, size_t n, unsigned char out[CRYPTO_SHA256_LEN]);
/* Lowercase hex of SHA-256(p), NUL-terminated. */
void crypto_sha256_hex(const void *p, size_t n, char out[2 * CRYPTO_SHA256_LEN + 1]);
void crypto_hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
			unsigned char out[CRYPTO_SHA256_LEN]);
/* A keyed HMAC-SHA256, for many messages under one key: the key is set up
 * once, and each crypto_hmac_parts copies the keyed state. NULL when out of
 * memory. Free with crypto_hmac_free (NULL is fine). Not shared between
 * threads. */
struct crypto_hmac;
struct crypto_hmac *crypto_hmac_new(const void *key, size_t klen);
/* HMAC of the concatenation of n parts (p[i], len[i]) into out. Returns 0,
 * or -1 (out of memory). */
int crypto_hmac_parts(struct crypto_hmac *h, size_t n, const void *const *p, const size_t *len,
		      unsigned char out[CRYPTO_SHA256_LEN]) WUR;
void crypto_hmac_free(struct crypto_hmac *h);
/* 1 when the n bytes are equal, else 0; time depends only on n. */
int crypto_equal(const void *a, const void *b, size_t n);
/* Lowercase hex of n bytes into out (2n+1 bytes). */
void crypto_hex(const unsigned char *in, size_t n, char *out);
/* Base64url without padding; out needs 4*ceil(n/3)+1 bytes. Returns length. */
size_t crypto_b64url_encode(const void *in, size_t n, char *out);
/* Decodes unpadded base64url. Returns 0 and sets *outlen, or -1 on any
 * character outside the alphabet, a bad length, or outcap too small. */
int crypto_b64url_decode(const char *in, size_t n, unsigned char *out, size_t outcap,
			 size_t *outlen) WUR;
/* Decodes standard base64 with padding (as in HTTP Basic). Same contract as
 * crypto_b64url_decode. */
int crypto_b64_decode(const char *in, size_t n, unsigned char *out, size_t outcap, size_t *outlen) WUR;
/* Standard base64 with padding; out needs 4*ceil(n/3)+1 bytes. */
size_t crypto_b64_encode(const void *in, size_t n, char *out);
/* Makes an RSA-2048 key and a self-signed SHA-256 certificate for common
 * name cn, valid for days. Returns 0 with *key_pem and *cert_pem (free()),
 * or -1. Used for the demo's identity provider. */
int crypto_self_signed(const char *cn, int days, char **key_pem, char **cert_pem) WUR;
/* Seals plaintext with AES-256-GCM under key: the result is "v1:" +
 * base64url(12-byte nonce || ciphertext || 16-byte tag), NUL-terminated,
 * malloc'ed. aad (may be NULL) is authenticated, not stored: opening needs
 * the same aad (bind a secret to its row, e.g. the subscription id).
 * Returns NULL on failure. */
char *crypto_seal(const unsigned char key[32], const char *plaintext, const char *aad);
/* Opens what crypto_seal made. Returns the malloc'ed plaintext, or NULL
 * when the text is malformed, the key or aad is wrong, or it was altered. */
char *crypto_open(const unsigned char key[32], const char *sealed, const char *aad);
/* 1 when pem holds exactly one parseable X.509 certificate, else 0. */
int crypto_cert_pem_valid(const char *pem);
/* Overwrites n bytes in a way the compiler may not elide. */
void crypto_wipe(void *p, size_t n);
/* A random token: prefix followed by base64url of nbytes random bytes.
 * out needs strlen(prefix) + 4*ceil(nbytes/3) + 1 bytes. Returns 0 or -1. */
int crypto_token(const char *prefix, size_t nbytes, char *out, size_t outcap) WUR;

#endif
