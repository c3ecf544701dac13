#include "core/crypto.h"

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/rsa.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int crypto_random(void *out, size_t n)
{
	return RAND_bytes(out, (int)n) == 1 ? 0 : -1;
}

void crypto_sha256(const void *p, size_t n, unsigned char out[CRYPTO_SHA256_LEN])
{
	unsigned int len = CRYPTO_SHA256_LEN;

	EVP_Digest(p, n, out, &len, EVP_sha256(), NULL);
}

void crypto_hex(const unsigned char *in, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hx[in[i] >> 4];
		out[2 * i + 1] = hx[in[i] & 15];
	}
	out[2 * n] = '\0';
}

void crypto_sha256_hex(const void *p, size_t n, char out[2 * CRYPTO_SHA256_LEN + 1])
{
	unsigned char md[CRYPTO_SHA256_LEN];

	crypto_sha256(p, n, md);
	crypto_hex(md, sizeof md, out);
}

/* An HMAC-SHA256 context with the digest already chosen, made once and
 * copied per call: the one-shot HMAC() looks the MAC and the digest up by
 * name in the provider on every call, which was most of its cost for the
 * small messages signed here (two per webhook attempt). */
static EVP_MAC_CTX *hmac_template;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void hmac_template_make(void)
{
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	char digest[] = "SHA256";
	OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
			       OSSL_PARAM_construct_end()};

	hmac_template = mac ? EVP_MAC_CTX_new(mac) : NULL;
	if (hmac_template && !EVP_MAC_CTX_set_params(hmac_template, params)) {
		EVP_MAC_CTX_free(hmac_template);
		hmac_template = NULL;
	}
	EVP_MAC_free(mac); /* the context keeps its own reference */
}

void crypto_hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
			unsigned char out[CRYPTO_SHA256_LEN])
{
	unsigned int len = CRYPTO_SHA256_LEN;
	size_t outl = 0;
	EVP_MAC_CTX *ctx;

	pthread_once(&hmac_once, hmac_template_make);
	ctx = hmac_template ? EVP_MAC_CTX_dup(hmac_template) : NULL;
	if (ctx && EVP_MAC_init(ctx, key, klen, NULL) && EVP_MAC_update(ctx, msg, mlen) &&
	    EVP_MAC_final(ctx, out, &outl, CRYPTO_SHA256_LEN) && outl == CRYPTO_SHA256_LEN) {
		EVP_MAC_CTX_free(ctx);
		return;
	}
	EVP_MAC_CTX_free(ctx);
	HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &len);
}

/* HMAC-SHA256 as RFC 2104 defines it, with the key's two padded blocks
 * hashed once: inner and outer hold SHA-256 after (K ^ ipad) and (K ^
 * opad), and a message costs a copy of each plus its own blocks. The
 * EVP_MAC route copied a whole HMAC context per message (about a dozen
 * allocations, 1.3-1.5 us per delivery's two signatures). work is reused,
 * so a crypto_hmac is not shared between threads. crypto_hmac_sha256
 * above stays on OpenSSL's own HMAC: one-off MACs are not hot, and
 * test_units checks this one against it. */
#define HMAC_BLOCK 64

struct crypto_hmac {
	EVP_MD_CTX *inner, *outer, *work;
};

/* ctx := SHA-256 after the block (k ^ pad). */
static int hmac_pad(EVP_MD_CTX *ctx, const unsigned char k[HMAC_BLOCK], unsigned char pad)
{
	unsigned char b[HMAC_BLOCK];
	int i, ok;

	for (i = 0; i < HMAC_BLOCK; i++)
		b[i] = k[i] ^ pad;
	ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, b, sizeof b);
	OPENSSL_cleanse(b, sizeof b);
	return ok ? 0 : -1;
}

struct crypto_hmac *crypto_hmac_new(const void *key, size_t klen)
{
	struct crypto_hmac *h = calloc(1, sizeof *h);
	unsigned char k[HMAC_BLOCK] = {0};
	int ok = 1;

	if (!h)
		return NULL;
	/* A key longer than a block is replaced by its hash. */
	if (klen > HMAC_BLOCK)
		ok = EVP_Digest(key, klen, k, NULL, EVP_sha256(), NULL);
	else if (klen)
		memcpy(k, key, klen);
	h->inner = EVP_MD_CTX_new();
	h->outer = EVP_MD_CTX_new();
	h->work = EVP_MD_CTX_new();
	ok = ok && h->inner && h->outer && h->work && hmac_pad(h->inner, k, 0x36) == 0 &&
	     hmac_pad(h->outer, k, 0x5c) == 0;
	OPENSSL_cleanse(k, sizeof k);
	if (!ok) {
		crypto_hmac_free(h);
		h = NULL;
	}
	return h;
}

int crypto_hmac_parts(struct crypto_hmac *h, size_t n, const void *const *p, const size_t *len,
		      unsigned char out[CRYPTO_SHA256_LEN])
{
	unsigned char ih[CRYPTO_SHA256_LEN];
	unsigned int il = 0, ol = 0;
	size_t i;
	int rc;

	if (!EVP_MD_CTX_copy_ex(h->work, h->inner))
		return -1;
	for (i = 0; i < n; i++)
		if (!EVP_DigestUpdate(h->work, p[i], len[i]))
			return -1;
	rc = EVP_DigestFinal_ex(h->work, ih, &il) && il == sizeof ih &&
			     EVP_MD_CTX_copy_ex(h->work, h->outer) &&
			     EVP_DigestUpdate(h->work, ih, il) &&
			     EVP_DigestFinal_ex(h->work, out, &ol) && ol == CRYPTO_SHA256_LEN
		     ? 0
		     : -1;
	OPENSSL_cleanse(ih, sizeof ih);
	return rc;
}

void crypto_hmac_free(struct crypto_hmac *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->inner);
	EVP_MD_CTX_free(h->outer);
	EVP_MD_CTX_free(h->work);
	free(h);
}

int crypto_equal(const void *a, const void *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}

static size_t b64_encode(const unsigned char *in, size_t n, char *out, const char *alpha, int pad)
{
	size_t i, o = 0;
	unsigned v;

	for (i = 0; i + 2 < n; i += 3) {
		v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
		out[o++] = alpha[v >> 18 & 63];
		out[o++] = alpha[v >> 12 & 63];
		out[o++] = alpha[v >> 6 & 63];
		out[o++] = alpha[v & 63];
	}
	if (n - i == 1) {
		v = (unsigned)in[i] << 16;
		out[o++] = alpha[v >> 18 & 63];
		out[o++] = alpha[v >> 12 & 63];
		if (pad) {
			out[o++] = '=';
			out[o++] = '=';
		}
	} else if (n - i == 2) {
		v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;
		out[o++] = alpha[v >> 18 & 63];
		out[o++] = alpha[v >> 12 & 63];
		out[o++] = alpha[v >> 6 & 63];
		if (pad)
			out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static const char B64STD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t crypto_b64url_encode(const void *in, size_t n, char *out)
{
	return b64_encode(in, n, out, B64URL, 0);
}

size_t crypto_b64_encode(const void *in, size_t n, char *out)
{
	return b64_encode(in, n, out, B64STD, 1);
}

static int b64url_val(char c, int std)
{
	if (std && (c == '-' || c == '_'))
		return -1;
	if (std && c == '+')
		return 62;
	if (std && c == '/')
		return 63;
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

static int b64_decode(const char *in, size_t n, unsigned char *out, size_t outcap, size_t *outlen,
		      int std)
{
	size_t i, o = 0, need;
	unsigned acc = 0;
	int bits = 0, v;

	if (n % 4 == 1)
		return -1;
	need = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
	if (need > outcap)
		return -1;
	for (i = 0; i < n; i++) {
		v = b64url_val(in[i], std);
		if (v < 0)
			return -1;
		acc = (acc << 6 | (unsigned)v) & 0xffffff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	/* Leftover bits must be zero, so each byte string has one encoding. */
	if (bits && (acc & ((1u << bits) - 1)))
		return -1;
	*outlen = o;
	return 0;
}

int crypto_b64url_decode(const char *in, size_t n, unsigned char *out, size_t outcap, size_t *outlen)
{
	return b64_decode(in, n, out, outcap, outlen, 0);
}

int crypto_b64_decode(const char *in, size_t n, unsigned char *out, size_t outcap, size_t *outlen)
{
	if (n % 4)
		return -1;
	if (n && in[n - 1] == '=')
		n--;
	if (n && in[n - 1] == '=')
		n--;
	return b64_decode(in, n, out, outcap, outlen, 1);
}

void crypto_wipe(void *p, size_t n)
{
	OPENSSL_cleanse(p, n);
}

int crypto_token(const char *prefix, size_t nbytes, char *out, size_t outcap)
{
	unsigned char raw[64];
	size_t plen = strlen(prefix);

	if (nbytes > sizeof raw || plen + (nbytes + 2) / 3 * 4 + 1 > outcap)
		return -1;
	if (crypto_random(raw, nbytes) < 0)
		return -1;
	memcpy(out, prefix, plen);
	crypto_b64url_encode(raw, nbytes, out + plen);
	crypto_wipe(raw, sizeof raw);
	return 0;
}

int crypto_cert_pem_valid(const char *pem)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	X509 *cert = NULL, *extra = NULL;
	int ok = 0;

	if (!bio)
		return 0;
	cert = PEM_read_bio_X509(bio, NULL, NULL, NULL);
	if (cert) {
		extra = PEM_read_bio_X509(bio, NULL, NULL, NULL);
		ok = extra == NULL;
	}
	X509_free(cert);
	X509_free(extra);
	BIO_free(bio);
	return ok;
}

static char *bio_string(BIO *bio)
{
	char *data, *out;
	long n = BIO_get_mem_data(bio, &data);

	if (n <= 0)
		return NULL;
	out = malloc((size_t)n + 1);
	if (out) {
		memcpy(out, data, (size_t)n);
		out[n] = '\0';
	}
	return out;
}

int crypto_self_signed(const char *cn, int days, char **key_pem, char **cert_pem)
{
	EVP_PKEY *key = EVP_RSA_gen(2048);
	X509 *cert = X509_new();
	X509_NAME *name;
	BIO *kb = BIO_new(BIO_s_mem()), *cb = BIO_new(BIO_s_mem());
	unsigned char serial[16];
	BIGNUM *bn = NULL;
	int rc = -1;

	*key_pem = *cert_pem = NULL;
	if (!key || !cert || !kb || !cb || crypto_random(serial, sizeof serial) < 0)
		goto out;
	serial[0] &= 0x7f;
	bn = BN_bin2bn(serial, sizeof serial, NULL);
	name = X509_get_subject_name(cert);
	if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) ||
	    !X509_set_version(cert, 2) || !X509_gmtime_adj(X509_getm_notBefore(cert), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(cert), (long)days * 86400) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
					-1, 0) ||
	    !X509_set_issuer_name(cert, name) || !X509_set_pubkey(cert, key) ||
	    !X509_sign(cert, key, EVP_sha256()) ||
	    !PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) ||
	    !PEM_write_bio_X509(cb, cert))
		goto out;
	*key_pem = bio_string(kb);
	*cert_pem = bio_string(cb);
	if (*key_pem && *cert_pem)
		rc = 0;
	else {
		free(*key_pem);
		free(*cert_pem);
		*key_pem = *cert_pem = NULL;
	}
out:
	BN_free(bn);
	EVP_PKEY_free(key);
	X509_free(cert);
	BIO_free(kb);
	BIO_free(cb);
	return rc;
}

char *crypto_seal(const unsigned char key[32], const char *plaintext, const char *aad)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	size_t n = strlen(plaintext);
	unsigned char *raw = malloc(12 + n + 16);
	char *out = malloc(3 + (12 + n + 16 + 2) / 3 * 4 + 1);
	int len, ok = 0;

	if (!ctx || !raw || !out || crypto_random(raw, 12) < 0)
		goto done;
	if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, raw) != 1 ||
	    (aad && EVP_EncryptUpdate(ctx, NULL, &len, (const unsigned char *)aad,
				      (int)strlen(aad)) != 1) ||
	    EVP_EncryptUpdate(ctx, raw + 12, &len, (const unsigned char *)plaintext, (int)n) != 1 ||
	    EVP_EncryptFinal_ex(ctx, raw + 12 + len, &len) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, raw + 12 + n) != 1)
		goto done;
	memcpy(out, "v1:", 3);
	crypto_b64url_encode(raw, 12 + n + 16, out + 3);
	ok = 1;
done:
	EVP_CIPHER_CTX_free(ctx);
	if (raw)
		crypto_wipe(raw, 12 + n + 16);
	free(raw);
	if (!ok) {
		free(out);
		return NULL;
	}
	return out;
}

char *crypto_open(const unsigned char key[32], const char *sealed, const char *aad)
{
	EVP_CIPHER_CTX *ctx = NULL;
	size_t slen, rawlen = 0;
	unsigned char *raw = NULL;
	char *out = NULL;
	int len, ok = 0;

	if (!sealed || strncmp(sealed, "v1:", 3) != 0)
		return NULL;
	slen = strlen(sealed + 3);
	raw = malloc(slen / 4 * 3 + 3);
	if (!raw || crypto_b64url_decode(sealed + 3, slen, raw, slen / 4 * 3 + 3, &rawlen) < 0 ||
	    rawlen < 12 + 16)
		goto done;
	out = malloc(rawlen - 28 + 1);
	ctx = EVP_CIPHER_CTX_new();
	if (!out || !ctx || EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, raw) != 1 ||
	    (aad && EVP_DecryptUpdate(ctx, NULL, &len, (const unsigned char *)aad,
				      (int)strlen(aad)) != 1) ||
	    EVP_DecryptUpdate(ctx, (unsigned char *)out, &len, raw + 12, (int)(rawlen - 28)) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, raw + rawlen - 16) != 1 ||
	    EVP_DecryptFinal_ex(ctx, (unsigned char *)out + len, &len) != 1)
		goto done;
	out[rawlen - 28] = '\0';
	ok = (int)strlen(out) == (int)(rawlen - 28); /* no NUL inside */
done:
	EVP_CIPHER_CTX_free(ctx);
	free(raw);
	if (!ok && out) {
		crypto_wipe(out, rawlen > 28 ? rawlen - 28 : 0);
		free(out);
		out = NULL;
	}
	return out;
}
