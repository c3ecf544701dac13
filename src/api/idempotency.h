/* idempotency: the Idempotency-Key middleware (API-CONTRACT §3).
 *
 * Keyed by portfolio + principal + key. The first request inserts an
 * in_flight row in a short transaction of its own, runs, then stores its
 * status, headers and body inside the transaction of the write it answers
 * (idempotency_store; the pipeline and respond.h arrange that), so a crash
 * leaves both or neither. Responses with status 500 or 503 are not stored:
 * the row is released so the key can be retried. The same key again: the
 * same method, path and body replay the stored response; anything else is
 * 422; a key whose request is still running is 409. An in_flight row older
 * than IDEMPOTENCY_LEASE_MS is treated as abandoned (its process died) and
 * may be taken over. Rows expire after the plan's window. */
#ifndef REVOPS_IDEMPOTENCY_H
#define REVOPS_IDEMPOTENCY_H
#include <jansson.h>
#include <stdint.h>
#include "core/buf.h"
#include "core/common.h"

struct store;
struct store_tx;

#define IDEMPOTENCY_KEY_MAX 255
#define IDEMPOTENCY_LEASE_MS (60 * 1000)

enum idem_action { IDEM_PROCEED, IDEM_REPLAY, IDEM_MISMATCH, IDEM_IN_PROGRESS, IDEM_ERROR };

struct idem_row {
	int exists;
	int done; /* 1 = a stored response, 0 = in flight */
	char fingerprint[65];
	int64_t locked_at;
	int64_t expires_at;
};

struct idem_stored {
	int error; /* IDEM_ERROR: the store status that caused it */
	int status;
	json_t *headers; /* object name -> value; owned */
	struct buf body;
};

/* Sets the key that seals stored response bodies (AES-256-GCM, bound to
 * portfolio, principal and key), so a response that carries a secret (a
 * webhook signing secret on creation) is never stored readable. Call once
 * at start; without it bodies are stored as they are. */
void idempotency_set_seal_key(const unsigned char key[32]);
/* 1 when key is 1..255 printable ASCII characters (0x20..0x7e). */
int idempotency_key_valid(const char *key);
/* SHA-256 hex over method, path, query and body, each length-prefixed. */
void idempotency_fingerprint(const char *method, const char *path, const char *query,
			     const void *body, size_t len, char out[65]);
/* The pure decision for a stored row (NULL/!exists = none). */
enum idem_action idempotency_decide(const struct idem_row *row, const char *fingerprint,
				    int64_t now_ms);

/* Claims the key or finds what to do instead. On IDEM_REPLAY fills *out
 * (free with idempotency_stored_free). window_ms is the plan's window. */
enum idem_action idempotency_begin(struct store *st, const char *portfolio, const char *principal,
				   const char *key, const char *fingerprint, int64_t now_ms,
				   int64_t window_ms, struct idem_stored *out);
/* Stores the response of a claimed key inside tx, the transaction of the
 * write it answers, so the two commit together (the key must be claimed,
 * and tx must not see the claim's row locked by another transaction).
 * headers may be NULL. Returns a store status. */
int idempotency_store(struct store_tx *tx, const char *portfolio, const char *principal,
		      const char *key, int status, const json_t *headers, const void *body,
		      size_t len) WUR;
/* Forgets a claimed key (the request failed without a lasting effect). */
void idempotency_release(struct store *st, const char *portfolio, const char *principal,
			 const char *key);
/* Deletes expired rows; returns how many, or -1. */
int idempotency_purge(struct store *st, int64_t now_ms);
void idempotency_stored_free(struct idem_stored *s);

#endif
