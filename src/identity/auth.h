/* auth: permission scopes, the authenticated principal, OAuth clients,
 * and the issuing and checking of bearer tokens for API and SCIM calls. The
 * only module that touches oauth_clients, access_tokens and scim_tokens.
 * Secrets and tokens are stored only as SHA-256 hashes. */
#ifndef REVOPS_AUTH_H
#define REVOPS_AUTH_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"

struct store;
struct store_tx;

enum {
	AUTH_SCOPE_PORTFOLIOS_READ = 1u << 0,
	AUTH_SCOPE_RATES_READ = 1u << 1,
	AUTH_SCOPE_RATES_WRITE = 1u << 2,
	AUTH_SCOPE_WEBHOOKS_MANAGE = 1u << 3,
	AUTH_SCOPE_GUEST_THREADS_READ = 1u << 4,
	AUTH_SCOPE_ALERTS_READ = 1u << 5,
	AUTH_SCOPE_TASKS_READ = 1u << 6,
	AUTH_SCOPE_TASKS_WRITE = 1u << 7,
	AUTH_SCOPE_FISCAL_WRITE = 1u << 8,
	AUTH_SCOPE_AUDIT_READ = 1u << 9,
	AUTH_SCOPE_FEEDS_WRITE = 1u << 10,
	/* API-CONTRACT §6's further scopes. */
	AUTH_SCOPE_REVIEWS_READ = 1u << 11,
	AUTH_SCOPE_REVIEWS_WRITE = 1u << 12,
	AUTH_SCOPE_GUEST_THREADS_WRITE = 1u << 13,
	AUTH_SCOPE_FISCAL_READ = 1u << 14,
	AUTH_SCOPE_ALL = (1u << 15) - 1,
};

#define AUTH_MAX_PROPS 64
#define AUTH_TOKEN_MAX 128

struct principal {
	char portfolio_id[ID_MAX];
	char plan[16];
	char client_id[ID_MAX]; /* "" for user tokens */
	char user_id[ID_MAX];   /* "" for client tokens */
	unsigned scopes;
	int all_properties; /* 1: every property of the portfolio */
	int nprops;
	char props[AUTH_MAX_PROPS][ID_MAX]; /* property ids when narrowed */
	int64_t rate_limit;                 /* per minute: override or plan figure */
};

/* The scope bit for a name such as "rates:write", or 0 if unknown. */
unsigned auth_scope_bit(const char *name);
/* Space-separated names of the bits in scopes, in canonical order. */
void auth_scope_string(unsigned scopes, char *out, size_t cap);
/* The plan's requests per minute, page size maximum, Idempotency window. */
int64_t auth_plan_rate_limit(const char *plan);
int auth_plan_max_page(const char *plan);
int64_t auth_plan_idempotency_ms(const char *plan);
const char *auth_plan_sla_tier(const char *plan);

enum auth_result { AUTH_OK = 0, AUTH_NONE = 1, AUTH_INVALID = 2, AUTH_ERROR = -1 };

/* Extracts the bearer token from an Authorization header value into out.
 * Returns AUTH_OK, AUTH_NONE (no header) or AUTH_INVALID (malformed). */
int auth_bearer(const char *header, char *out, size_t cap);
/* Looks up an API access token: valid (not expired, not revoked, user still
 * active) fills p and returns AUTH_OK; unknown/expired/revoked AUTH_INVALID. */
int auth_lookup_token(struct store *st, const char *token, int64_t now_ms, struct principal *p) WUR;
/* Looks up a SCIM bearer token; fills portfolio_id, plan and rate_limit of
 * p (client_id "scim"). Returns AUTH_OK, AUTH_INVALID or AUTH_ERROR. */
int auth_lookup_scim_token(struct store *st, const char *token, struct principal *p) WUR;
/* Invalidates every cached token validation (call after committing a
 * revocation; auth_revoke_user_tokens also calls it). */
void auth_revocation_bump(void);
/* auth_revocation_bump once tx has committed (store_after_commit): for a
 * change a cached validation may hold (a user's active flag or roles).
 * Returns a store status. */
int auth_revocation_bump_at_commit(struct store_tx *tx) WUR;
/* Revokes every live token of user_id inside tx. Returns how many, or a
 * negative store status. */
int auth_revoke_user_tokens(struct store_tx *tx, const char *user_id, int64_t now_ms) WUR;
/* 1 when the principal may touch property_id (a prop_ id), else 0. */
int auth_property_allowed(const struct principal *p, const char *property_id);

/* An OAuth client as auth_client_verify() reads it: what a token issued
 * to it may carry at most. */
struct auth_client {
	char portfolio_id[ID_MAX];
	unsigned scopes;
	json_t *codes; /* property codes it is limited to (owned), or NULL: all */
};

/* Checks a client's secret in constant time, also for an unknown or
 * revoked client (compared against a fixed hash), so timing does not tell
 * which ids exist. Returns 1 with *cl filled (the caller decrefs
 * cl->codes), 0 when refused (*cl empty), or a negative store status. */
int auth_client_verify(struct store_tx *tx, const char *client_id, const char *secret,
		       struct auth_client *cl) WUR;
/* Registers a client of portfolio_id (which the caller has checked) with
 * scopes and, unless codes is NULL, a JSON array of the property codes it
 * is limited to. Writes the new id ("cli_...") to id_out and the secret,
 * returned only this once and stored as a hash, to secret_out (the caller
 * wipes it). Returns 0 or a negative store status. */
int auth_client_create(struct store_tx *tx, const char *portfolio_id, const char *name,
		       unsigned scopes, const json_t *codes, char *id_out, size_t id_cap,
		       char *secret_out, size_t secret_cap) WUR;

/* What an access token is issued for. */
struct auth_grant {
	const char *portfolio_id;
	const char *client_id; /* NULL: a user token without client */
	const char *user_id;   /* NULL: a client credentials token */
	unsigned scopes;
	const json_t *property_ids;   /* array of prop_ ids, or NULL: every property */
	const json_t *property_codes; /* array of the codes granted */
	int64_t now_ms, expires_ms;
};

/* Issues an opaque access token ("rvo_at_...") for g inside tx, storing its
 * hash. Writes the token to out (the caller wipes it). Returns 0 or a
 * negative store status. */
int auth_token_issue(struct store_tx *tx, const struct auth_grant *g, char *out, size_t cap) WUR;
/* Deletes the access tokens that expired more than a day before now_ms
 * (kept that long so a caller still sees 401, and operators can trace
 * recent use). Returns how many, or a negative store status. */
int auth_tokens_purge(struct store_tx *tx, int64_t now_ms) WUR;
/* Issues a SCIM bearer token ("rvo_scim_...") for portfolio_id inside tx,
 * storing its hash. Writes the token to out (the caller wipes it).
 * Returns 0, or a negative store status (STORE_CONSTRAINT: no such
 * portfolio). */
int auth_scim_token_create(struct store_tx *tx, const char *portfolio_id, char *out, size_t cap) WUR;

#endif
