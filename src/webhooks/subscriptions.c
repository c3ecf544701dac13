#include "webhooks/subscriptions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/id.h"
#include "core/jsonw.h"
#include "core/validate.h"
#include "events/outbox.h"
#include "net/egress.h"
#include "store/store.h"

/* ------------------------------------------------------------- checks */

/* Checks a target URL the way every send will: https, and (unless
 * allow_private) resolving only to public addresses. */
static void check_url(const char *field, const char *url, int allow_private, json_t *details)
{
	struct egress_target t;
	char issue[220];

	if (egress_check(url, 0, allow_private, &t) == EGRESS_OK)
		return;
	snprintf(issue, sizeof issue, "must be an https URL of a public host (%s)", t.why);
	validate_add_detail(details, field, issue);
}

void subscriptions_check_events(const char *surface, const json_t *events, json_t *details)
{
	char field[32], issue[64];
	const json_t *v;
	size_t i, j;

	if (!json_array_size(events))
		validate_add_detail(details, "events", "must name at least one event type");
	json_array_foreach(events, i, v) {
		snprintf(field, sizeof field, "events[%zu]", i);
		if (!outbox_event_known(surface, json_string_value(v))) {
			snprintf(issue, sizeof issue, "is not a %s event type", surface);
			validate_add_detail(details, field, issue);
			continue;
		}
		for (j = 0; j < i; j++)
			if (!strcmp(json_string_value(json_array_get(events, j)),
				    json_string_value(v))) {
				validate_add_detail(details, field, "repeats an earlier event type");
				break;
			}
	}
}

int subscriptions_check(const struct subscription_request *rq, json_t *details)
{
	if (rq->mirror_url && strcmp(rq->plan, "enterprise"))
		return SUBSCRIPTIONS_PLAN;
	check_url("url", rq->url, rq->allow_private, details);
	if (rq->mirror_url)
		check_url("mirror_url", rq->mirror_url, rq->allow_private, details);
	subscriptions_check_events(rq->surface, rq->events, details);
	return 0;
}

/* ---------------------------------------------------------- API reads */

#define SUB_COLS "id, surface, url, mirror_url, events, description, status, created_at"

static json_t *subscription_json(struct store_rows *r)
{
	json_t *events = json_loads(store_text(r, 4), 0, NULL);

	return json_pack("{s:s, s:s, s:s, s:s?, s:o, s:s?, s:s, s:o}", "id", store_text(r, 0),
			 "surface", store_text(r, 1), "url", store_text(r, 2), "mirror_url",
			 store_text(r, 3), "events", events ? events : json_array(), "description",
			 store_text(r, 5), "status", store_text(r, 6), "created_at",
			 jsonw_time(store_int(r, 7)));
}

/* Loads an enabled subscription by id inside tx: SUBSCRIPTIONS_MINE with
 * its JSON in *out when it is pf's, _NONE (none, or deleted), _OTHER, or a
 * negative store status. */
static int load_subscription(struct store_tx *tx, const char *pf, const char *id, json_t **out)
{
	struct store_rows *r;
	int rc, other = 0;

	*out = NULL;
	rc = store_query(tx,
			 "SELECT " SUB_COLS ", portfolio_id FROM webhook_subscriptions"
			 " WHERE id = $1 AND status = 'enabled'",
			 (struct store_val[]){sv_text(id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		other = strcmp(store_text(r, 8), pf) != 0;
		if (!other)
			*out = subscription_json(r);
	}
	store_rows_close(r);
	if (rc <= 0)
		return rc;
	return other ? SUBSCRIPTIONS_OTHER : SUBSCRIPTIONS_MINE;
}

int subscriptions_page(struct store *st, const char *portfolio_id, const char *after, int limit,
		       struct store_tx **tx, struct store_rows **rows)
{
	int rc;

	*rows = NULL;
	if ((rc = store_begin(st, 0, tx)) != STORE_OK) {
		*tx = NULL;
		return rc;
	}
	rc = store_query(*tx,
			 "SELECT " SUB_COLS " FROM webhook_subscriptions WHERE portfolio_id = $1"
			 " AND status = 'enabled' AND id > $2 ORDER BY id LIMIT $3",
			 (struct store_val[]){sv_text(portfolio_id), sv_text(after),
					      sv_int(limit + 1)},
			 3, rows);
	if (rc != STORE_OK)
		*rows = NULL;
	return rc;
}

json_t *subscriptions_item(struct store_tx *tx, struct store_rows *r, void *arg, char *key,
			   size_t keycap)
{
	(void)tx;
	(void)arg;
	snprintf(key, keycap, "%s", store_text(r, 0));
	return subscription_json(r);
}

int subscriptions_get(struct store *st, const char *portfolio_id, const char *id, json_t **out)
{
	struct store_tx *tx;
	int rc;

	*out = NULL;
	if ((rc = store_begin(st, 0, &tx)) != STORE_OK)
		return rc;
	rc = load_subscription(tx, portfolio_id, id, out);
	store_rollback(tx);
	return rc;
}

int subscriptions_owner(struct store *st, const char *portfolio_id, const char *id)
{
	struct store_tx *tx;
	struct store_rows *r;
	int rc, mine = 0;

	if ((rc = store_begin(st, 0, &tx)) != STORE_OK)
		return rc;
	rc = store_query(tx, "SELECT portfolio_id FROM webhook_subscriptions WHERE id = $1",
			 (struct store_val[]){sv_text(id)}, 1, &r);
	if (rc == STORE_OK) {
		rc = store_next(r);
		if (rc == 1)
			mine = !strcmp(store_text(r, 0), portfolio_id);
		store_rows_close(r);
	}
	store_rollback(tx);
	if (rc <= 0)
		return rc;
	return mine ? SUBSCRIPTIONS_MINE : SUBSCRIPTIONS_OTHER;
}

int subscriptions_ping_target(struct store_tx *tx, const char *portfolio_id, const char *id,
			      const char *surface, int *mirror)
{
	struct store_rows *r;
	int rc, mine = 0;

	*mirror = 0;
	rc = store_query(tx,
			 "SELECT portfolio_id, mirror_url FROM webhook_subscriptions WHERE id = $1"
			 " AND surface = $2 AND status = 'enabled'",
			 (struct store_val[]){sv_text(id), sv_text(surface)}, 2, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		mine = !strcmp(store_text(r, 0), portfolio_id);
		*mirror = !store_is_null(r, 1);
	}
	store_rows_close(r);
	if (rc <= 0)
		return rc;
	return mine ? SUBSCRIPTIONS_MINE : SUBSCRIPTIONS_OTHER;
}

/* ------------------------------------------------------------- writes */

/* Makes (or, with rotate, replaces) the portfolio's v2 signing secret inside
 * tx, sealed to the portfolio id. secret gets the new secret when one was
 * made; with rotate = 0 and a secret already present, nothing changes and
 * secret stays empty. Returns 0 or a negative store status. */
static int portfolio_secret(struct store_tx *tx, const unsigned char seal_key[32], const char *pf,
			    int rotate, char secret[SIGNING_SECRET_LEN])
{
	int64_t one, now = clock_now_ms();
	char *sealed;
	int rc;

	secret[0] = '\0';
	rc = store_query_int(tx, "SELECT 1 FROM webhook_portfolio_secrets WHERE portfolio_id = $1",
			     (struct store_val[]){sv_text(pf)}, 1, &one);
	if (rc < 0 || (rc == 1 && !rotate))
		return rc < 0 ? rc : 0;
	if (signing_new_secret(secret) < 0)
		return STORE_ERR;
	sealed = crypto_seal(seal_key, secret, pf);
	if (!sealed)
		return STORE_ERR;
	rc = store_exec(tx,
			"INSERT INTO webhook_portfolio_secrets (portfolio_id, secret_sealed, created_at)"
			" VALUES ($1, $2, $3) ON CONFLICT (portfolio_id) DO UPDATE SET"
			" secret_sealed = $2, rotated_at = $3",
			(struct store_val[]){sv_text(pf), sv_text(sealed), sv_int(now)}, 3);
	free(sealed);
	return rc < 0 ? rc : 0;
}

/* A subscription being created: its id, its events as stored, and (v1) its
 * own secret and that secret sealed to the id. */
struct draft {
	char id[ID_MAX];
	char secret[SIGNING_SECRET_LEN];
	char *events, *sealed;
};

/* Fills d for rq. Returns 0 or STORE_ERR (out of memory, no randomness). */
static int draft_make(const unsigned char seal_key[32], const struct subscription_request *rq,
		      struct draft *d)
{
	d->events = json_dumps(rq->events, JSON_COMPACT);
	if (!d->events || id_new("wh_", d->id, sizeof d->id) < 0)
		return STORE_ERR;
	/* A v1 subscription has its own secret, sealed to its id. */
	if (!strcmp(rq->surface, "v1") && (signing_new_secret(d->secret) < 0 ||
					   !(d->sealed = crypto_seal(seal_key, d->secret, d->id))))
		return STORE_ERR;
	return 0;
}

/* Inside the write transaction tx: the count limit, the portfolio's v2
 * secret, the row, and the row read back into *out. Returns 0,
 * SUBSCRIPTIONS_FULL or a negative store status. */
static int create_in(struct store_tx *tx, const unsigned char seal_key[32],
		     const struct subscription_request *rq, struct draft *d, json_t **out)
{
	int64_t count = 0;
	int rc;

	rc = store_query_int(tx,
			     "SELECT COUNT(*) FROM webhook_subscriptions WHERE portfolio_id = $1"
			     " AND status = 'enabled'",
			     (struct store_val[]){sv_text(rq->portfolio_id)}, 1, &count);
	if (rc < 0)
		return rc;
	if (count >= SUBSCRIPTIONS_MAX)
		return SUBSCRIPTIONS_FULL;
	if (!strcmp(rq->surface, "v2") &&
	    (rc = portfolio_secret(tx, seal_key, rq->portfolio_id, 0, d->secret)) < 0)
		return rc;
	rc = store_exec(tx,
			"INSERT INTO webhook_subscriptions (id, portfolio_id, surface, url, mirror_url,"
			" events, description, secret_sealed, created_at)"
			" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
			(struct store_val[]){sv_text(d->id), sv_text(rq->portfolio_id),
					     sv_text(rq->surface), sv_text(rq->url),
					     sv_text(rq->mirror_url), sv_text(d->events),
					     sv_text(rq->description), sv_text(d->sealed),
					     sv_int(clock_now_ms())},
			9);
	if (rc < 0)
		return rc;
	rc = load_subscription(tx, rq->portfolio_id, d->id, out);
	return rc < 0 ? rc : rc == SUBSCRIPTIONS_MINE ? 0 : STORE_ERR;
}

int subscriptions_create(struct store *st, const unsigned char seal_key[32],
			 const struct subscription_request *rq, json_t **out)
{
	struct draft d = {.secret = ""};
	struct store_tx *tx = NULL;
	json_t *sub = NULL;
	int rc;

	*out = NULL;
	if ((rc = draft_make(seal_key, rq, &d)) < 0)
		goto out;
	if ((rc = store_begin(st, 1, &tx)) != STORE_OK) {
		tx = NULL;
		goto out;
	}
	rc = create_in(tx, seal_key, rq, &d, &sub);
	if (rc != 0)
		goto out;
	rc = store_commit(tx);
	tx = NULL;
	if (rc != STORE_OK)
		goto out;
	/* The secret appears once: v1 on every creation, v2 when the
	 * portfolio's secret was made by this call. */
	json_object_set_new(sub, "signing_secret", d.secret[0] ? json_string(d.secret) : json_null());
	*out = sub;
	sub = NULL;
out:
	store_rollback(tx);
	crypto_wipe(d.secret, sizeof d.secret);
	json_decref(sub);
	free(d.sealed);
	free(d.events);
	return rc;
}

int subscriptions_delete(struct store *st, const char *portfolio_id, const char *id)
{
	struct store_tx *tx;
	json_t *sub = NULL;
	int rc;

	if ((rc = store_begin(st, 1, &tx)) != STORE_OK)
		return rc;
	rc = load_subscription(tx, portfolio_id, id, &sub);
	json_decref(sub);
	if (rc != SUBSCRIPTIONS_MINE) {
		store_rollback(tx);
		return rc;
	}
	rc = store_exec(tx,
			"UPDATE webhook_subscriptions SET status = 'deleted', deleted_at = $2"
			" WHERE id = $1",
			(struct store_val[]){sv_text(id), sv_int(clock_now_ms())}, 2);
	rc = store_finish(tx, rc);
	return rc < 0 ? rc : SUBSCRIPTIONS_MINE;
}

int subscriptions_rotate(struct store *st, const unsigned char seal_key[32],
			 const char *portfolio_id, char secret[SIGNING_SECRET_LEN])
{
	struct store_tx *tx;
	int rc;

	secret[0] = '\0';
	if ((rc = store_begin(st, 1, &tx)) != STORE_OK)
		return rc;
	rc = portfolio_secret(tx, seal_key, portfolio_id, 1, secret);
	return store_finish(tx, rc);
}

/* ------------------------------------------------------------ fan-out */

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

void subscriptions_free(struct subscription *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(s[i].id);
		free(s[i].portfolio_id);
		free(s[i].surface);
		free(s[i].url);
		free(s[i].mirror_url);
		free(s[i].events);
		free(s[i].plan);
	}
	free(s);
}

/* Appends the current row of the fan-out scan to *s (cnt of cap). 0 or
 * STORE_ERR (out of memory). */
static int sub_append(struct store_rows *r, struct subscription **s, size_t *cnt, size_t *cap)
{
	struct subscription *grown;

	if (*cnt == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;

		grown = realloc(*s, ncap * sizeof *grown);
		if (!grown)
			return STORE_ERR;
		*s = grown;
		*cap = ncap;
	}
	(*s)[*cnt] = (struct subscription){strdup(store_text(r, 0)),      strdup(store_text(r, 1)),
					   strdup(store_text(r, 2)),      strdup(store_text(r, 3)),
					   dup_or_null(store_text(r, 4)), strdup(store_text(r, 5)),
					   strdup(store_text(r, 7)),      store_int(r, 6)};
	(*cnt)++;
	return 0;
}

/* The plan comes from the same scan: a join kept here on purpose (see
 * scripts/check-owners.py), one query per fan-out batch. */
int subscriptions_load_enabled(struct store_tx *tx, const char *only, struct subscription **out,
			       size_t *n)
{
	struct store_rows *r;
	struct subscription *s = NULL;
	size_t cap = 0, cnt = 0;
	int rc;

	*out = NULL;
	*n = 0;
	rc = store_query(tx,
			 "SELECT s.id, s.portfolio_id, s.surface, s.url, s.mirror_url, s.events,"
			 " s.created_at, p.plan FROM webhook_subscriptions s JOIN portfolios p"
			 " ON p.id = s.portfolio_id WHERE s.status = 'enabled'"
			 " AND s.id = COALESCE($1, s.id)",
			 (struct store_val[]){sv_text(only)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1)
		if ((rc = sub_append(r, &s, &cnt, &cap)) < 0)
			break;
	store_rows_close(r);
	if (rc < 0) {
		subscriptions_free(s, cnt);
		return rc;
	}
	*out = s;
	*n = cnt;
	return 0;
}

/* events is a compact JSON array of names, and names never contain
 * quotes, so a quoted search is exact. */
int subscriptions_wants(const struct subscription *s, const char *type)
{
	char quoted[160];

	if (snprintf(quoted, sizeof quoted, "\"%s\"", type) >= (int)sizeof quoted)
		return 0;
	return strstr(s->events, quoted) != NULL;
}

/* ------------------------------------------------------------ signing */

int subscriptions_sealed_secret(struct store_tx *tx, const char *surface, const char *portfolio_id,
				const char *subscription_id, char *out, size_t cap)
{
	struct store_rows *r;
	int v1 = !strcmp(surface, "v1");
	int rc;

	rc = store_query(tx,
			 v1 ? "SELECT secret_sealed FROM webhook_subscriptions WHERE id = $1"
			    : "SELECT secret_sealed FROM webhook_portfolio_secrets WHERE portfolio_id = $1",
			 (struct store_val[]){sv_text(v1 ? subscription_id : portfolio_id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1 && store_is_null(r, 0))
		rc = 0;
	if (rc == 1 && snprintf(out, cap, "%s", store_text(r, 0)) >= (int)cap)
		rc = STORE_ERR;
	store_rows_close(r);
	return rc;
}

char *subscriptions_open_secret(const unsigned char seal_key[32], const char *sealed,
				const char *surface, const char *portfolio_id,
				const char *subscription_id)
{
	return crypto_open(seal_key, sealed, strcmp(surface, "v1") ? portfolio_id : subscription_id);
}
