#include "identity/auth.h"

#include <stdio.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/id.h"
#include "store/store.h"

static const char *const scope_names[] = {
	"portfolios:read",    "rates:read",          "rates:write", "webhooks:manage",
	"guest-threads:read", "alerts:read",         "tasks:read",  "tasks:write",
	"fiscal:write",       "audit:read",          "feeds:write", "reviews:read",
	"reviews:write",      "guest-threads:write", "fiscal:read",
};

unsigned auth_scope_bit(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(scope_names); i++)
		if (!strcmp(scope_names[i], name))
			return 1u << i;
	return 0;
}

void auth_scope_string(unsigned scopes, char *out, size_t cap)
{
	size_t i, len = 0, n;

	if (cap)
		out[0] = '\0';
	for (i = 0; i < ARRAY_LEN(scope_names); i++) {
		if (!(scopes & (1u << i)))
			continue;
		n = strlen(scope_names[i]);
		if (len + n + 2 > cap)
			break;
		if (len)
			out[len++] = ' ';
		memcpy(out + len, scope_names[i], n + 1);
		len += n;
	}
}

int64_t auth_plan_rate_limit(const char *plan)
{
	if (!strcmp(plan, "enterprise"))
		return 5000;
	if (!strcmp(plan, "group"))
		return 2000;
	return 500;
}

int auth_plan_max_page(const char *plan)
{
	if (!strcmp(plan, "enterprise"))
		return 500;
	if (!strcmp(plan, "group"))
		return 200;
	return 100;
}

int64_t auth_plan_idempotency_ms(const char *plan)
{
	return (int64_t)(strcmp(plan, "enterprise") ? 48 : 72) * 3600 * 1000;
}

const char *auth_plan_sla_tier(const char *plan)
{
	if (!strcmp(plan, "enterprise"))
		return "platinum";
	if (!strcmp(plan, "group"))
		return "gold";
	return "standard";
}

int auth_bearer(const char *h, char *out, size_t cap)
{
	size_t n;

	if (!h)
		return AUTH_NONE;
	if (strncasecmp(h, "Bearer ", 7) != 0)
		return AUTH_INVALID;
	h += 7;
	while (*h == ' ')
		h++;
	n = strlen(h);
	while (n && h[n - 1] == ' ')
		n--;
	if (!n || n >= cap)
		return AUTH_INVALID;
	memcpy(out, h, n);
	out[n] = '\0';
	return AUTH_OK;
}

/* Parses the space-separated scope names stored with a token. */
static unsigned parse_scopes(const char *s)
{
	char name[64];
	unsigned bits = 0;
	size_t n;

	while (s && *s) {
		n = strcspn(s, " ");
		if (n && n < sizeof name) {
			memcpy(name, s, n);
			name[n] = '\0';
			bits |= auth_scope_bit(name);
		}
		s += n;
		while (*s == ' ')
			s++;
	}
	return bits;
}

static int load_props(struct principal *p, const char *json)
{
	json_t *arr, *v;
	size_t i;

	p->all_properties = json == NULL;
	p->nprops = 0;
	if (!json)
		return 0;
	arr = json_loads(json, 0, NULL);
	if (!json_is_array(arr)) {
		json_decref(arr);
		return -1;
	}
	json_array_foreach(arr, i, v) {
		if (p->nprops == AUTH_MAX_PROPS || !json_is_string(v) ||
		    strlen(json_string_value(v)) >= ID_MAX)
			break;
		strcpy(p->props[p->nprops++], json_string_value(v));
	}
	json_decref(arr);
	return 0;
}

/* A small cache of validated tokens, so a busy client does not cost a
 * database transaction per call. An entry lives at most CACHE_TTL_MS (so an
 * operator's rate-limit override or a scope change applies within a second)
 * and never past the token's expiry; any revocation in this process bumps
 * revocation_epoch, which invalidates every entry at once, so a revoked
 * token is refused on the very next call. (Another process revoking tokens
 * is seen within CACHE_TTL_MS.) */
#define CACHE_SLOTS 4096
#define CACHE_TTL_MS 250

struct cache_entry {
	char hash[2 * CRYPTO_SHA256_LEN + 1];
	int64_t loaded_mono_ms;
	int64_t expires_ms;
	unsigned epoch;
	struct principal p;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cache_entry *cache;
static atomic_uint revocation_epoch;

void auth_revocation_bump(void)
{
	atomic_fetch_add(&revocation_epoch, 1);
}

static size_t cache_slot(const char *hash)
{
	size_t h = 0;
	int i;

	for (i = 0; i < 8; i++)
		h = h * 16 + (size_t)(hash[i] <= '9' ? hash[i] - '0' : hash[i] - 'a' + 10);
	return h % CACHE_SLOTS;
}

static int cache_get(const char *hash, int64_t now_ms, struct principal *p)
{
	struct cache_entry *e;
	int hit = 0;

	pthread_mutex_lock(&cache_lock);
	if (cache) {
		e = &cache[cache_slot(hash)];
		if (!strcmp(e->hash, hash) && e->epoch == atomic_load(&revocation_epoch) &&
		    clock_mono_ms() - e->loaded_mono_ms < CACHE_TTL_MS && e->expires_ms > now_ms) {
			*p = e->p;
			hit = 1;
		}
	}
	pthread_mutex_unlock(&cache_lock);
	return hit;
}

static void cache_put(const char *hash, unsigned epoch, int64_t expires_ms, const struct principal *p)
{
	struct cache_entry *e;

	pthread_mutex_lock(&cache_lock);
	if (!cache)
		cache = calloc(CACHE_SLOTS, sizeof *cache);
	if (cache) {
		e = &cache[cache_slot(hash)];
		memcpy(e->hash, hash, sizeof e->hash);
		e->loaded_mono_ms = clock_mono_ms();
		e->expires_ms = expires_ms;
		e->epoch = epoch;
		e->p = *p;
	}
	pthread_mutex_unlock(&cache_lock);
}

int auth_lookup_token(struct store *st, const char *token, int64_t now_ms, struct principal *p)
{
	static const char *sql =
		"SELECT t.portfolio_id, p.plan, p.rate_limit_per_minute, t.client_id, t.user_id,"
		" t.scopes, t.property_ids, t.expires_at, t.revoked_at, u.active"
		" FROM access_tokens t JOIN portfolios p ON p.id = t.portfolio_id"
		" LEFT JOIN users u ON u.id = t.user_id WHERE t.token_hash = $1";
	char hash[2 * CRYPTO_SHA256_LEN + 1];
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	int rc, result = AUTH_ERROR;

	unsigned epoch = atomic_load(&revocation_epoch);
	int64_t expires = 0;

	memset(p, 0, sizeof *p);
	crypto_sha256_hex(token, strlen(token), hash);
	if (cache_get(hash, now_ms, p))
		return AUTH_OK;
	if (store_begin(st, STORE_READ_ONE, &tx) != STORE_OK)
		return AUTH_ERROR;
	if (store_query(tx, sql, (struct store_val[]){sv_text(hash)}, 1, &r) != STORE_OK)
		goto out;
	rc = store_next(r);
	if (rc < 0)
		goto out;
	result = AUTH_INVALID;
	/* The lookup is by hash, so its timing says nothing about the token. */
	if (rc == 0 || store_int(r, 7) <= now_ms || !store_is_null(r, 8) ||
	    (!store_is_null(r, 4) && store_int(r, 9) != 1))
		goto out;
	snprintf(p->portfolio_id, sizeof p->portfolio_id, "%s", store_text(r, 0));
	snprintf(p->plan, sizeof p->plan, "%s", store_text(r, 1));
	p->rate_limit = store_is_null(r, 2) ? auth_plan_rate_limit(p->plan) : store_int(r, 2);
	snprintf(p->client_id, sizeof p->client_id, "%s",
		 store_is_null(r, 3) ? "" : store_text(r, 3));
	snprintf(p->user_id, sizeof p->user_id, "%s", store_is_null(r, 4) ? "" : store_text(r, 4));
	p->scopes = parse_scopes(store_text(r, 5));
	if (load_props(p, store_is_null(r, 6) ? NULL : store_text(r, 6)) < 0) {
		result = AUTH_ERROR;
		goto out;
	}
	expires = store_int(r, 7);
	result = AUTH_OK;
out:
	store_rows_close(r);
	store_rollback(tx);
	if (result == AUTH_OK)
		cache_put(hash, epoch, expires, p);
	return result;
}

int auth_property_allowed(const struct principal *p, const char *property_id)
{
	int i;

	if (p->all_properties)
		return 1;
	for (i = 0; i < p->nprops; i++)
		if (!strcmp(p->props[i], property_id))
			return 1;
	return 0;
}

int auth_lookup_scim_token(struct store *st, const char *token, struct principal *p)
{
	char hash[2 * CRYPTO_SHA256_LEN + 1];
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	int rc, result = AUTH_ERROR;

	memset(p, 0, sizeof *p);
	crypto_sha256_hex(token, strlen(token), hash);
	if (store_begin(st, STORE_READ_ONE, &tx) != STORE_OK)
		return AUTH_ERROR;
	if (store_query(tx,
			"SELECT s.portfolio_id, p.plan, p.rate_limit_per_minute FROM scim_tokens s"
			" JOIN portfolios p ON p.id = s.portfolio_id"
			" WHERE s.token_hash = $1 AND s.revoked_at IS NULL",
			(struct store_val[]){sv_text(hash)}, 1, &r) != STORE_OK)
		goto out;
	rc = store_next(r);
	if (rc < 0)
		goto out;
	result = AUTH_INVALID;
	if (rc == 0)
		goto out;
	snprintf(p->portfolio_id, sizeof p->portfolio_id, "%s", store_text(r, 0));
	snprintf(p->plan, sizeof p->plan, "%s", store_text(r, 1));
	p->rate_limit = store_is_null(r, 2) ? auth_plan_rate_limit(p->plan) : store_int(r, 2);
	snprintf(p->client_id, sizeof p->client_id, "scim");
	p->all_properties = 1;
	result = AUTH_OK;
out:
	store_rows_close(r);
	store_rollback(tx);
	return result;
}

static void bump(void *arg)
{
	(void)arg;
	auth_revocation_bump();
}

int auth_revocation_bump_at_commit(struct store_tx *tx)
{
	return store_after_commit(tx, bump, 0) ? STORE_OK : STORE_ERR;
}

int auth_revoke_user_tokens(struct store_tx *tx, const char *user_id, int64_t now_ms)
{
	/* Bumped before the change commits: a lookup racing with it reloads
	 * (and sees the revocation once committed) rather than trusting an
	 * entry cached before it; and again once it committed (which a store
	 * scope may hold past the caller's store_commit), for the entries
	 * cached meanwhile. */
	int rc = auth_revocation_bump_at_commit(tx);

	auth_revocation_bump();
	if (rc < 0)
		return rc;
	return store_exec(tx,
			  "UPDATE access_tokens SET revoked_at = $2 WHERE user_id = $1"
			  " AND revoked_at IS NULL AND expires_at > $2",
			  (struct store_val[]){sv_text(user_id), sv_int(now_ms)}, 2);
}

int auth_client_verify(struct store_tx *tx, const char *client_id, const char *secret,
		       struct auth_client *cl)
{
	static const char dummy[65] =
		"0000000000000000000000000000000000000000000000000000000000000000";
	char given[2 * CRYPTO_SHA256_LEN + 1], stored[65];
	struct store_rows *r;
	int rc, ok;

	memset(cl, 0, sizeof *cl);
	crypto_sha256_hex(secret, strlen(secret), given);
	rc = store_query(tx,
			 "SELECT portfolio_id, secret_hash, scopes, property_codes FROM oauth_clients"
			 " WHERE id = $1 AND revoked_at IS NULL",
			 (struct store_val[]){sv_text(client_id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	snprintf(stored, sizeof stored, "%s", rc == 1 ? store_text(r, 1) : dummy);
	ok = crypto_equal(given, stored, 64) && rc == 1;
	if (ok) {
		snprintf(cl->portfolio_id, sizeof cl->portfolio_id, "%s", store_text(r, 0));
		cl->scopes = parse_scopes(store_text(r, 2));
		cl->codes = store_is_null(r, 3) ? NULL : json_loads(store_text(r, 3), 0, NULL);
	}
	store_rows_close(r);
	if (rc < 0) {
		json_decref(cl->codes);
		memset(cl, 0, sizeof *cl);
		return rc;
	}
	return ok;
}

int auth_client_create(struct store_tx *tx, const char *portfolio_id, const char *name,
		       unsigned scopes, const json_t *codes, char *id_out, size_t id_cap,
		       char *secret_out, size_t secret_cap)
{
	char hash[2 * CRYPTO_SHA256_LEN + 1], scope_s[512], *codes_s = NULL;
	int rc = STORE_ERR;

	if (id_new("cli_", id_out, id_cap) < 0 || crypto_token("", 32, secret_out, secret_cap) < 0)
		return STORE_ERR;
	crypto_sha256_hex(secret_out, strlen(secret_out), hash);
	auth_scope_string(scopes, scope_s, sizeof scope_s);
	if (codes && !(codes_s = json_dumps(codes, JSON_COMPACT)))
		goto out;
	rc = store_exec(tx,
			"INSERT INTO oauth_clients (id, portfolio_id, name, secret_hash, scopes,"
			" property_codes, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
			(struct store_val[]){sv_text(id_out), sv_text(portfolio_id), sv_text(name),
					     sv_text(hash), sv_text(scope_s), sv_text(codes_s),
					     sv_int(clock_now_ms())},
			7);
	if (rc > 0)
		rc = 0;
out:
	free(codes_s);
	return rc;
}

int auth_token_issue(struct store_tx *tx, const struct auth_grant *g, char *out, size_t cap)
{
	char hash[2 * CRYPTO_SHA256_LEN + 1], granted[512], *ids_s = NULL, *codes_s = NULL;
	int rc = STORE_ERR;

	if (crypto_token("rvo_at_", 32, out, cap) < 0)
		return STORE_ERR;
	crypto_sha256_hex(out, strlen(out), hash);
	auth_scope_string(g->scopes, granted, sizeof granted);
	ids_s = g->property_ids ? json_dumps(g->property_ids, JSON_COMPACT) : NULL;
	codes_s = json_dumps(g->property_codes, JSON_COMPACT);
	if ((g->property_ids && !ids_s) || !codes_s)
		goto out;
	rc = store_exec(tx,
			"INSERT INTO access_tokens (token_hash, portfolio_id, client_id, user_id,"
			" scopes, property_ids, property_codes, expires_at, created_at)"
			" VALUES ($1, $2, $3, $9, $4, $5, $6, $7, $8)",
			(struct store_val[]){sv_text(hash), sv_text(g->portfolio_id),
					     sv_text(g->client_id), sv_text(granted),
					     sv_text(ids_s), sv_text(codes_s), sv_int(g->expires_ms),
					     sv_int(g->now_ms), sv_text(g->user_id)},
			9);
	if (rc > 0)
		rc = 0;
out:
	free(ids_s);
	free(codes_s);
	return rc;
}

int auth_tokens_purge(struct store_tx *tx, int64_t now_ms)
{
	return store_exec(tx, "DELETE FROM access_tokens WHERE expires_at <= $1",
			  (struct store_val[]){sv_int(now_ms - 86400000)}, 1);
}

int auth_scim_token_create(struct store_tx *tx, const char *portfolio_id, char *out, size_t cap)
{
	char hash[2 * CRYPTO_SHA256_LEN + 1];
	int rc;

	if (crypto_token("rvo_scim_", 32, out, cap) < 0)
		return STORE_ERR;
	crypto_sha256_hex(out, strlen(out), hash);
	rc = store_exec(tx,
			"INSERT INTO scim_tokens (token_hash, portfolio_id, created_at)"
			" VALUES ($1, $2, $3)",
			(struct store_val[]){sv_text(hash), sv_text(portfolio_id),
					     sv_int(clock_now_ms())},
			3);
	return rc < 0 ? rc : 0;
}
