/* subscriptions: webhook subscriptions (API-CONTRACT §5), the one module
 * that names webhook_subscriptions and webhook_portfolio_secrets. A v1
 * subscription has its own signing secret; v2 subscriptions share their
 * portfolio's; a v2 subscription may add a mirror URL on Enterprise.
 * Secrets are returned once and stored sealed (crypto_seal, under the key
 * in <data-dir>/revops.key): a v1 secret bound to its subscription id, the
 * v2 secret to its portfolio id. The delivery engine reads subscriptions
 * and secrets through the functions at the end. No HTTP here. */
#ifndef REVOPS_SUBSCRIPTIONS_H
#define REVOPS_SUBSCRIPTIONS_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"
#include "webhooks/signing.h"

struct store;
struct store_tx;
struct store_rows;

#define SUBSCRIPTIONS_MAX 50 /* enabled subscriptions per portfolio */

/* Outcomes beside 0 and the negative store statuses. */
enum subscriptions_outcome {
	SUBSCRIPTIONS_NONE = 0,  /* no such subscription (or not enabled, where that counts) */
	SUBSCRIPTIONS_MINE = 1,  /* found, the caller's portfolio's */
	SUBSCRIPTIONS_OTHER = 2, /* found, another portfolio's */
	SUBSCRIPTIONS_PLAN = 3,  /* a mirror_url on a plan other than enterprise */
	SUBSCRIPTIONS_FULL = 4,  /* the portfolio has SUBSCRIPTIONS_MAX already */
};

/* A subscription to create. Strings and events are borrowed; mirror_url and
 * description may be NULL. events is an array of strings (the route's spec
 * checked that much). */
struct subscription_request {
	const char *portfolio_id, *plan, *surface; /* surface "v1" or "v2" */
	const char *url, *mirror_url, *description;
	const json_t *events;
	int allow_private; /* --allow-private-targets */
};

/* The checks of a subscription's "events" that its spec cannot express:
 * at least one, each an event type of surface ("v1" or "v2") named once.
 * Appends one details entry ({field, issue}) per problem. */
void subscriptions_check_events(const char *surface, const json_t *events, json_t *details);

/* Whether rq may be created, before any database work. Returns
 * SUBSCRIPTIONS_PLAN (details untouched) when it names a mirror off the
 * enterprise plan; else 0, with one details entry per problem: a URL that
 * is not https or resolves to a non-public address (unless allow_private),
 * and subscriptions_check_events's. */
int subscriptions_check(const struct subscription_request *rq, json_t *details) WUR;

/* Creates rq (already checked) in one write transaction, making the
 * portfolio's v2 secret when it has none. Returns 0 with *out the new
 * subscription's JSON (owned by the caller) carrying "signing_secret": the
 * secret shown this once (v1: its own; v2: the portfolio's when this call
 * made it, else null). Or SUBSCRIPTIONS_FULL, or a negative store status. */
int subscriptions_create(struct store *st, const unsigned char seal_key[32],
			 const struct subscription_request *rq, json_t **out) WUR;

/* A page of the portfolio's enabled subscriptions after id after ("" for
 * the first), in id order, limit + 1 rows so the caller knows whether more
 * follow. Begins a read snapshot in *tx and runs the query in *rows; both
 * are the caller's to close (respond_rows_page closes them), also on
 * failure (*tx NULL when the snapshot did not begin, *rows NULL when the
 * query failed). Returns STORE_OK or a negative store status. Rows go to
 * subscriptions_item. */
int subscriptions_page(struct store *st, const char *portfolio_id, const char *after, int limit,
		       struct store_tx **tx, struct store_rows **rows) WUR;
/* The subscription JSON of the current row of a subscriptions_page query,
 * with its id (the page key) in key. The shape of a respond_row_fn. */
json_t *subscriptions_item(struct store_tx *tx, struct store_rows *r, void *arg, char *key,
			   size_t keycap);

/* The enabled subscription id as JSON in *out (owned by the caller) when it
 * is portfolio_id's. Returns SUBSCRIPTIONS_MINE, _NONE, _OTHER (*out NULL)
 * or a negative store status. */
int subscriptions_get(struct store *st, const char *portfolio_id, const char *id, json_t **out) WUR;
/* Deletes (marks deleted) the enabled subscription id of portfolio_id: its
 * deliveries stay visible. Returns subscriptions_get's outcomes. */
int subscriptions_delete(struct store *st, const char *portfolio_id, const char *id) WUR;
/* Replaces the portfolio's v2 signing secret (making one when it has none)
 * in one write transaction; the new secret goes to secret (the caller
 * wipes it). Returns 0 or a negative store status. */
int subscriptions_rotate(struct store *st, const unsigned char seal_key[32],
			 const char *portfolio_id, char secret[SIGNING_SECRET_LEN]) WUR;
/* Whose subscription id is, in any state (a deleted one's deliveries stay
 * visible): SUBSCRIPTIONS_MINE, _NONE, _OTHER or a negative store status. */
int subscriptions_owner(struct store *st, const char *portfolio_id, const char *id) WUR;
/* Inside tx: the enabled subscription id of surface that a ping targets.
 * Returns SUBSCRIPTIONS_MINE (*mirror = 1 when it has a mirror URL),
 * _NONE, _OTHER or a negative store status. */
int subscriptions_ping_target(struct store_tx *tx, const char *portfolio_id, const char *id,
			      const char *surface, int *mirror) WUR;

/* An enabled subscription as fan-out uses it, with its portfolio's plan.
 * All strings malloc'ed; mirror_url may be NULL; events is the stored
 * compact JSON array of type names. */
struct subscription {
	char *id, *portfolio_id, *surface, *url, *mirror_url, *events, *plan;
	int64_t created_at;
};

/* Inside tx: every enabled subscription (or only the one named only) with
 * its portfolio's plan, in one scan. *out (free with subscriptions_free)
 * and *n. Returns 0 or a negative store status. */
int subscriptions_load_enabled(struct store_tx *tx, const char *only, struct subscription **out,
			       size_t *n) WUR;
void subscriptions_free(struct subscription *s, size_t n);
/* 1 when s lists the event type, else 0. */
int subscriptions_wants(const struct subscription *s, const char *type);

/* Inside tx: the sealed signing secret of a delivery: a v1 subscription's
 * own, or the v2 portfolio's (mirrors share it), copied into out (cap
 * bytes). Returns 1, 0 (no secret) or a negative store status (also when
 * it does not fit). */
int subscriptions_sealed_secret(struct store_tx *tx, const char *surface, const char *portfolio_id,
				const char *subscription_id, char *out, size_t cap) WUR;
/* Opens a secret subscriptions_sealed_secret read for the same surface,
 * portfolio and subscription. Returns the malloc'ed secret (the caller
 * wipes and frees it) or NULL (wrong key, or moved to another row). */
char *subscriptions_open_secret(const unsigned char seal_key[32], const char *sealed,
				const char *surface, const char *portfolio_id,
				const char *subscription_id);

#endif
