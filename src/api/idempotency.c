#include "api/idempotency.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crypto.h"
#include "core/log.h"
#include "store/store.h"

static unsigned char seal_key[32];
static int have_seal_key;

void idempotency_set_seal_key(const unsigned char key[32])
{
	memcpy(seal_key, key, sizeof seal_key);
	have_seal_key = 1;
}

/* The associated data a stored body is sealed to: it cannot be moved to
 * another row and opened there. */
static void seal_aad(const char *portfolio, const char *principal, const char *key, struct buf *b)
{
	buf_init(b, 0);
	if (buf_printf(b, "%s|%s|%s", portfolio, principal, key) < 0)
		buf_free(b);
}

int idempotency_key_valid(const char *key)
{
	size_t i;

	for (i = 0; key[i]; i++)
		if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7e ||
		    i >= IDEMPOTENCY_KEY_MAX)
			return 0;
	return i > 0;
}

void idempotency_fingerprint(const char *method, const char *path, const char *query,
			     const void *body, size_t len, char out[65])
{
	struct buf b;
	const char *parts[3] = {method, path, query ? query : ""};
	int i, ok = 1;

	buf_init(&b, 0);
	for (i = 0; i < 3; i++)
		ok &= buf_printf(&b, "%zu:%s\n", strlen(parts[i]), parts[i]) == 0;
	ok &= buf_printf(&b, "%zu:", len) == 0;
	ok &= buf_append(&b, body, len) == 0;
	if (ok)
		crypto_sha256_hex(b.data, b.len, out);
	else
		memset(out, 'x', 64), out[64] = '\0'; /* never matches a real hash */
	buf_free(&b);
}

enum idem_action idempotency_decide(const struct idem_row *row, const char *fingerprint,
				    int64_t now_ms)
{
	if (!row || !row->exists || row->expires_at <= now_ms)
		return IDEM_PROCEED;
	if (!crypto_equal(row->fingerprint, fingerprint, 64))
		return IDEM_MISMATCH;
	if (row->done)
		return IDEM_REPLAY;
	if (row->locked_at + IDEMPOTENCY_LEASE_MS <= now_ms)
		return IDEM_PROCEED;
	return IDEM_IN_PROGRESS;
}

static int load_row(struct store_tx *tx, const struct store_val *k, struct idem_row *row,
		    struct idem_stored *out)
{
	struct store_rows *r;
	const char *h;
	int rc;

	memset(row, 0, sizeof *row);
	rc = store_query(tx,
			 "SELECT fingerprint, state, locked_at, expires_at, status, headers, body,"
			 " portfolio_id, principal_id, idem_key"
			 " FROM idempotency_keys WHERE portfolio_id = $1 AND principal_id = $2"
			 " AND idem_key = $3",
			 k, 3, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		row->exists = 1;
		snprintf(row->fingerprint, sizeof row->fingerprint, "%s", store_text(r, 0));
		row->done = !strcmp(store_text(r, 1), "done");
		row->locked_at = store_int(r, 2);
		row->expires_at = store_int(r, 3);
		if (row->done && out) {
			out->status = (int)store_int(r, 4);
			h = store_text(r, 5);
			out->headers = h ? json_loads(h, 0, NULL) : NULL;
			buf_init(&out->body, 0);
			if (buf_append(&out->body, store_text(r, 6) ? store_text(r, 6) : "",
				       store_len(r, 6)) < 0)
				rc = -1;
			if (rc >= 0 && have_seal_key && out->body.len > 3 &&
			    !strncmp(out->body.data, "v1:", 3)) {
				struct buf aad;
				char *plain;

				seal_aad(store_text(r, 7), store_text(r, 8), store_text(r, 9), &aad);
				plain = aad.data ? crypto_open(seal_key, out->body.data, aad.data)
						 : NULL;
				buf_free(&aad);
				buf_reset(&out->body);
				if (!plain || buf_puts(&out->body, plain) < 0)
					rc = -1; /* unreadable: never replay or re-run blindly */
				if (plain)
					crypto_wipe(plain, strlen(plain));
				free(plain);
			}
		}
	}
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

enum idem_action idempotency_begin(struct store *st, const char *portfolio, const char *principal,
				   const char *key, const char *fingerprint, int64_t now_ms,
				   int64_t window_ms, struct idem_stored *out)
{
	struct store_val k[3] = {sv_text(portfolio), sv_text(principal), sv_text(key)};
	struct store_tx *tx;
	struct idem_row row;
	enum idem_action act;
	int rc;

	memset(out, 0, sizeof *out);
	if ((out->error = store_begin(st, 1, &tx)) != STORE_OK)
		return IDEM_ERROR;
	if ((rc = load_row(tx, k, &row, out)) < 0)
		goto out;
	act = idempotency_decide(&row, fingerprint, now_ms);
	if (act == IDEM_PROCEED) {
		if ((rc = store_exec(tx,
				     "INSERT INTO idempotency_keys (portfolio_id, principal_id, idem_key,"
				     " fingerprint, state, locked_at, expires_at)"
				     " VALUES ($1, $2, $3, $4, 'in_flight', $5, $6)"
				     " ON CONFLICT (portfolio_id, principal_id, idem_key) DO UPDATE SET"
				     " fingerprint = $4, state = 'in_flight', status = NULL,"
				     " headers = NULL, body = NULL, locked_at = $5, expires_at = $6",
				     (struct store_val[]){k[0], k[1], k[2], sv_text(fingerprint),
							  sv_int(now_ms), sv_int(now_ms + window_ms)},
				     6)) < 0)
			goto out;
	}
	if (act != IDEM_REPLAY)
		idempotency_stored_free(out);
	if ((rc = store_commit(tx)) != STORE_OK) {
		idempotency_stored_free(out);
		out->error = rc;
		return IDEM_ERROR;
	}
	return act;
out:
	idempotency_stored_free(out);
	out->error = rc < 0 ? rc : STORE_ERR;
	store_rollback(tx);
	return IDEM_ERROR;
}

int idempotency_store(struct store_tx *tx, const char *portfolio, const char *principal,
		      const char *key, int status, const json_t *headers, const void *body,
		      size_t len)
{
	char *h = headers ? json_dumps(headers, JSON_COMPACT) : NULL, *sealed = NULL, *plain = NULL;
	struct buf aad = {NULL, 0, 0, 0};
	int rc = STORE_ERR;

	if (have_seal_key && len) {
		plain = strndup(body, len);
		seal_aad(portfolio, principal, key, &aad);
		if (!plain || strlen(plain) != len || !aad.data ||
		    !(sealed = crypto_seal(seal_key, plain, aad.data)))
			goto out; /* a body that cannot be sealed is not stored */
		body = sealed;
		len = strlen(sealed);
	}
	rc = store_exec(tx,
			"UPDATE idempotency_keys SET state = 'done', status = $4, headers = $5,"
			" body = $6 WHERE portfolio_id = $1 AND principal_id = $2 AND idem_key = $3",
			(struct store_val[]){sv_text(portfolio), sv_text(principal), sv_text(key),
					     sv_int(status), sv_text(h), sv_blob(body, len)},
			6);
	rc = rc < 0 ? rc : STORE_OK;
out:
	free(h);
	free(sealed);
	if (plain)
		crypto_wipe(plain, strlen(plain));
	free(plain);
	buf_free(&aad);
	return rc;
}

void idempotency_release(struct store *st, const char *portfolio, const char *principal,
			 const char *key)
{
	struct store_tx *tx;

	if (store_begin(st, 1, &tx) != STORE_OK)
		return;
	if (store_exec(tx,
		       "DELETE FROM idempotency_keys WHERE portfolio_id = $1 AND principal_id = $2"
		       " AND idem_key = $3 AND state = 'in_flight'",
		       (struct store_val[]){sv_text(portfolio), sv_text(principal), sv_text(key)},
		       3) < 0) {
		store_rollback(tx);
		log_msg(LOG_WARN, "idempotency", "could not release a key");
		return;
	}
	if (store_commit(tx) != STORE_OK)
		log_msg(LOG_WARN, "idempotency", "could not release a key");
}

int idempotency_purge(struct store *st, int64_t now_ms)
{
	struct store_tx *tx;
	int n;

	if (store_begin(st, 1, &tx) != STORE_OK)
		return -1;
	n = store_exec(tx, "DELETE FROM idempotency_keys WHERE expires_at <= $1",
		       (struct store_val[]){sv_int(now_ms)}, 1);
	if (n < 0) {
		store_rollback(tx);
		return -1;
	}
	return store_commit(tx) == STORE_OK ? n : -1;
}

void idempotency_stored_free(struct idem_stored *s)
{
	json_decref(s->headers);
	s->headers = NULL;
	buf_free(&s->body);
}
