/* signing: webhook signing secrets and the two signatures every delivery
 * carries (API-CONTRACT §5). X-Service-Signature is the lowercase hex
 * HMAC-SHA256 of the raw body keyed with the secret string itself; the
 * Standard Webhooks "webhook-signature" is "v1,<base64 HMAC-SHA256 of
 * "<msg_id>.<timestamp>.<body>">" keyed with the base64-decoded part of the
 * secret after "whsec_". Bodies are raw bytes (they may hold NULs). All
 * OpenSSL use goes through crypto. */
#ifndef REVOPS_SIGNING_H
#define REVOPS_SIGNING_H
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"

#define SIGNING_SECRET_LEN 51 /* "whsec_" + base64 of 32 bytes (44 chars) + NUL */
#define SIGNING_HEX_LEN 65    /* lowercase hex SHA-256 + NUL */

/* A new secret "whsec_<standard base64 of 32 random bytes>". 0 or -1. */
int signing_new_secret(char out[SIGNING_SECRET_LEN]) WUR;
/* X-Service-Signature: lowercase hex HMAC-SHA256 of the raw body, keyed with
 * the secret string's bytes exactly as returned to the subscriber (the whole
 * "whsec_…" string). */
void signing_service_signature(const char *secret, const void *body, size_t len,
			       char out[SIGNING_HEX_LEN]);
/* Standard Webhooks: webhook-signature "v1,<base64 HMAC-SHA256 of
 * "<msg_id>.<timestamp>.<body>">", keyed with the base64-DECODED part after
 * "whsec_". out needs >= 64 bytes. Returns 0, or -1 when the secret is not
 * whsec_ + valid base64. */
int signing_standard_signature(const char *secret, const char *msg_id, int64_t timestamp,
			       const void *body, size_t len, char *out, size_t cap) WUR;
/* A secret set up for signing many deliveries: both signatures' keys are
 * prepared once. NULL when out of memory or the secret is not whsec_ +
 * valid base64. Not shared between threads; free with signing_key_free
 * (NULL is fine). */
struct signing_key;
struct signing_key *signing_key_new(const char *secret);
/* Both signatures of one delivery, as signing_service_signature (hex) and
 * signing_standard_signature (std, cap >= 48 bytes) would make them.
 * Returns 0, or -1 (bad arguments, out of memory). */
int signing_key_sign(struct signing_key *k, const char *msg_id, int64_t timestamp, const void *body,
		     size_t len, char hex[SIGNING_HEX_LEN], char *std, size_t cap) WUR;
void signing_key_free(struct signing_key *k);
/* Verifies an X-Service-Signature header value in constant time: 1 valid,
 * 0 not. Accepts the hex in any case. */
int signing_verify_service(const char *secret, const void *body, size_t len, const char *header);
/* Verifies a Standard Webhooks "webhook-signature" header (space-separated
 * list of "v1,<sig>" entries: valid if any matches) and the timestamp
 * tolerance (|now - timestamp| <= tolerance_s); 1 valid, 0 not. */
int signing_verify_standard(const char *secret, const char *msg_id, const char *timestamp_header,
			    const void *body, size_t len, const char *signature_header,
			    int64_t now_s, int64_t tolerance_s);

#endif
