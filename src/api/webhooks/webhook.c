#include "api/webhooks/webhook.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/id.h"
#include "core/jsonw.h"
#include "net/egress.h"
#include "store/store.h"
#include "webhooks/signing.h"

#define MAX_EVENTS 20
#define MAX_SUBSCRIPTIONS 50

static const char *const v1_events[] = {
	"rate.suggested", "rate.approved", "rate.rejected", "review.drafted",
	"review.published", "whatsapp.received", "whatsapp.sent", "invoice.issued",
	"invoice.corrected", "connection.d_edge.failed",
};
static const char *const v2_events[] = {
	"rate.decision.published", "rate.decision.reverted", "guest.thread.escalated",
	"reputation.score.dropped", "parity.breach.detected", "fiscal.batch.approved",
	"operations.task.escalated", "sso.user.provisioned", "sso.user.deprovisioned",
};

const struct vfield webhook_v1_spec[] = {
	{"url", V_STRING, 1, 0, 2048, NULL, 0, NULL},
	{"events", V_ARRAY, 1, 0, MAX_EVENTS, NULL, V_STRING, NULL},
	{"description", V_STRING, 0, 1, 500, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};
const struct vfield webhook_v2_spec[] = {
	{"url", V_STRING, 1, 0, 2048, NULL, 0, NULL},
	{"mirror_url", V_STRING, 0, 1, 2048, NULL, 0, NULL},
	{"events", V_ARRAY, 1, 0, MAX_EVENTS, NULL, V_STRING, NULL},
	{"description", V_STRING, 0, 1, 500, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

int webhook_event_known(const char *surface, const char *type)
{
	const char *const *list = strcmp(surface, "v1") ? v2_events : v1_events;
	size_t i, n = strcmp(surface, "v1") ? ARRAY_LEN(v2_events) : ARRAY_LEN(v1_events);

	for (i = 0; i < n; i++)
		if (!strcmp(list[i], type))
			return 1;
	return 0;
}

/* Checks a target URL the way every send will: https, and (unless
 * --allow-private-targets) resolving only to public addresses. */
static void check_url(struct ctx *c, const char *field, const char *url, json_t *details)
{
	struct egress_target t;
	char issue[220];

	if (egress_check(url, 0, c->svc->cfg->allow_private_targets, &t) == EGRESS_OK)
		return;
	snprintf(issue, sizeof issue, "must be an https URL of a public host (%s)", t.why);
	validate_add_detail(details, field, issue);
}

void webhook_check_events(const char *surface, const json_t *events, json_t *details)
{
	char field[32], issue[64];
	const json_t *v;
	size_t i, j;

	if (!json_array_size(events))
		validate_add_detail(details, "events", "must name at least one event type");
	json_array_foreach(events, i, v) {
		snprintf(field, sizeof field, "events[%zu]", i);
		if (!webhook_event_known(surface, json_string_value(v))) {
			snprintf(issue, sizeof issue, "is not a %s event type", surface);
			validate_add_detail(details, field, issue);
			continue;
		}
		for (j = 0; j < i; j++)
			if (!strcmp(json_string_value(json_array_get(events, j)), json_string_value(v))) {
				validate_add_detail(details, field, "repeats an earlier event type");
				break;
			}
	}
}

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

/* Loads an enabled subscription of the portfolio by id: 1, 0 (none, or
 * deleted), 2 (another portfolio's), or < 0. */
static int load_subscription(struct store_tx *tx, const char *pf, const char *id, json_t **out)
{
	struct store_rows *r;
	int rc, other = 0;

	*out = NULL;
	rc = store_query(tx, "SELECT " SUB_COLS ", portfolio_id FROM webhook_subscriptions"
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
	return other ? 2 : 1;
}

/* Makes (or, with rotate, replaces) the portfolio's v2 signing secret inside
 * tx. *secret gets the new secret when one was made; with rotate = 0 and a
 * secret already present, nothing changes and *secret stays empty. */
static int portfolio_secret(struct ctx *c, struct store_tx *tx, int rotate,
			    char secret[SIGNING_SECRET_LEN])
{
	int64_t one, now = clock_now_ms();
	char *sealed;
	int rc;

	secret[0] = '\0';
	rc = store_query_int(tx, "SELECT 1 FROM webhook_portfolio_secrets WHERE portfolio_id = $1",
			     (struct store_val[]){sv_text(c->p.portfolio_id)}, 1, &one);
	if (rc < 0 || (rc == 1 && !rotate))
		return rc < 0 ? rc : 0;
	if (signing_new_secret(secret) < 0)
		return STORE_ERR;
	sealed = crypto_seal(c->svc->seal_key, secret, c->p.portfolio_id);
	if (!sealed)
		return STORE_ERR;
	rc = store_exec(tx,
			"INSERT INTO webhook_portfolio_secrets (portfolio_id, secret_sealed, created_at)"
			" VALUES ($1, $2, $3) ON CONFLICT (portfolio_id) DO UPDATE SET"
			" secret_sealed = $2, rotated_at = $3",
			(struct store_val[]){sv_text(c->p.portfolio_id), sv_text(sealed), sv_int(now)}, 3);
	free(sealed);
	return rc < 0 ? rc : 0;
}

static void create(struct ctx *c, const char *surface)
{
	const char *url = json_string_value(json_object_get(c->body, "url"));
	const char *mirror = json_string_value(json_object_get(c->body, "mirror_url"));
	const json_t *events = json_object_get(c->body, "events");
	json_t *details = json_array(), *sub = NULL;
	struct store_tx *tx = NULL;
	char id[ID_MAX], secret[SIGNING_SECRET_LEN] = "", *sealed = NULL, *events_s = NULL;
	int64_t count = 0, now = clock_now_ms();
	int rc;

	if (mirror && strcmp(c->p.plan, "enterprise")) {
		respond_error(c, ERR_PLAN_FEATURE_UNAVAILABLE, NULL,
			      "mirror_url is available on the enterprise plan only");
		goto out;
	}
	check_url(c, "url", url, details);
	if (mirror)
		check_url(c, "mirror_url", mirror, details);
	webhook_check_events(surface, events, details);
	if (json_array_size(details)) {
		respond_error(c, ERR_VALIDATION_FAILED, details, "the subscription is not valid");
		details = NULL;
		goto out;
	}
	events_s = json_dumps(events, JSON_COMPACT);
	if (!events_s || id_new("wh_", id, sizeof id) < 0) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		goto out;
	}
	if (!strcmp(surface, "v1")) {
		/* A v1 subscription has its own secret, sealed to its id. */
		if (signing_new_secret(secret) < 0 || !(sealed = crypto_seal(c->svc->seal_key, secret, id))) {
			respond_error(c, ERR_INTERNAL, NULL, "internal error");
			goto out;
		}
	}
	if ((rc = store_begin(c->svc->store, 1, &tx)) != STORE_OK) {
		tx = NULL;
		respond_store_error(c, rc);
		goto out;
	}
	rc = store_query_int(tx, "SELECT COUNT(*) FROM webhook_subscriptions WHERE portfolio_id = $1"
				 " AND status = 'enabled'",
			     (struct store_val[]){sv_text(c->p.portfolio_id)}, 1, &count);
	if (rc < 0) {
		respond_store_error(c, rc);
		goto out;
	}
	if (count >= MAX_SUBSCRIPTIONS) {
		respond_error(c, ERR_CONFLICT, NULL, "a portfolio has at most %d subscriptions",
			      MAX_SUBSCRIPTIONS);
		goto out;
	}
	if (!strcmp(surface, "v2") && (rc = portfolio_secret(c, tx, 0, secret)) < 0) {
		respond_store_error(c, rc);
		goto out;
	}
	rc = store_exec(tx,
			"INSERT INTO webhook_subscriptions (id, portfolio_id, surface, url, mirror_url,"
			" events, description, secret_sealed, created_at)"
			" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
			(struct store_val[]){sv_text(id), sv_text(c->p.portfolio_id), sv_text(surface),
					     sv_text(url), sv_text(mirror), sv_text(events_s),
					     sv_text(json_string_value(json_object_get(c->body, "description"))),
					     sv_text(sealed), sv_int(now)}, 9);
	if (rc < 0 || (rc = load_subscription(tx, c->p.portfolio_id, id, &sub)) != 1) {
		respond_store_error(c, rc < 0 ? rc : STORE_ERR);
		goto out;
	}
	if ((rc = store_commit(tx)) != STORE_OK) {
		tx = NULL;
		respond_store_error(c, rc);
		goto out;
	}
	tx = NULL;
	/* The secret appears once: v1 on every creation, v2 when the
	 * portfolio's secret was made by this call. */
	json_object_set_new(sub, "signing_secret", secret[0] ? json_string(secret) : json_null());
	respond_data(c, 201, sub);
	sub = NULL;
out:
	store_rollback(tx);
	crypto_wipe(secret, sizeof secret);
	json_decref(details);
	json_decref(sub);
	free(sealed);
	free(events_s);
}

void webhook_h_create_v1(struct ctx *c)
{
	create(c, "v1");
}

void webhook_h_create_v2(struct ctx *c)
{
	create(c, "v2");
}

static json_t *subscription_row(struct store_tx *tx, struct store_rows *r, void *arg, char *key,
				size_t keycap)
{
	(void)tx;
	(void)arg;
	snprintf(key, keycap, "%s", store_text(r, 0));
	return subscription_json(r);
}

void webhook_h_list(struct ctx *c)
{
	char after[ID_MAX] = "", scope[128];
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	int limit, rc;

	snprintf(scope, sizeof scope, "webhooks|%s", c->p.portfolio_id);
	if (respond_page_args(c, scope, &limit, after, sizeof after) < 0)
		return;
	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = store_query(tx, "SELECT " SUB_COLS " FROM webhook_subscriptions WHERE portfolio_id = $1"
			     " AND status = 'enabled' AND id > $2 ORDER BY id LIMIT $3",
			 (struct store_val[]){sv_text(c->p.portfolio_id), sv_text(after),
					      sv_int(limit + 1)}, 3, &r);
	respond_rows_page(c, tx, rc, r, limit, scope, subscription_row, NULL);
}

/* Answers 404/403 for load_subscription's 0/2; 1 to go on. */
static int visible(struct ctx *c, int rc)
{
	if (rc == 1)
		return 1;
	if (rc == 0)
		respond_error(c, ERR_NOT_FOUND, NULL, "no webhook subscription %s", ctx_param(c, 0));
	else if (rc == 2)
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the subscription belongs to another portfolio");
	else
		respond_store_error(c, rc);
	return 0;
}

void webhook_h_get(struct ctx *c)
{
	struct store_tx *tx;
	json_t *sub = NULL;
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = load_subscription(tx, c->p.portfolio_id, ctx_param(c, 0), &sub);
	store_rollback(tx);
	if (visible(c, rc)) {
		respond_data(c, 200, sub);
		sub = NULL;
	}
	json_decref(sub);
}

void webhook_h_delete(struct ctx *c)
{
	struct store_tx *tx;
	json_t *sub = NULL;
	int rc;

	if ((rc = store_begin(c->svc->store, 1, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = load_subscription(tx, c->p.portfolio_id, ctx_param(c, 0), &sub);
	json_decref(sub);
	if (!visible(c, rc)) {
		store_rollback(tx);
		return;
	}
	rc = store_exec(tx,
			"UPDATE webhook_subscriptions SET status = 'deleted', deleted_at = $2"
			" WHERE id = $1",
			(struct store_val[]){sv_text(ctx_param(c, 0)), sv_int(clock_now_ms())}, 2);
	if (rc < 0) {
		store_rollback(tx);
		respond_store_error(c, rc);
		return;
	}
	if ((rc = store_commit(tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	c->res->status = 204;
	buf_reset(&c->res->body);
}

void webhook_h_rotate(struct ctx *c)
{
	char secret[SIGNING_SECRET_LEN], ts[CLOCK_RFC3339_LEN];
	struct store_tx *tx;
	int rc;

	if ((rc = store_begin(c->svc->store, 1, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = portfolio_secret(c, tx, 1, secret);
	if (rc < 0) {
		store_rollback(tx);
		respond_store_error(c, rc);
		goto out;
	}
	if ((rc = store_commit(tx)) != STORE_OK) {
		respond_store_error(c, rc);
		goto out;
	}
	clock_format_ms(clock_now_ms(), ts);
	respond_data(c, 200, json_pack("{s:s, s:s}", "signing_secret", secret, "rotated_at", ts));
out:
	crypto_wipe(secret, sizeof secret);
}

static const struct route routes[] = {
	{"POST", "/v1/webhooks", webhook_h_create_v1, ROUTE_BEARER, AUTH_SCOPE_WEBHOOKS_MANAGE, 0,
	 BODY_JSON, webhook_v1_spec, 0},
	ROUTE_V2_JSON("POST", "/v2/webhooks", webhook_h_create_v2, AUTH_SCOPE_WEBHOOKS_MANAGE,
		      webhook_v2_spec),
	ROUTE_V2("GET", "/v2/webhooks", webhook_h_list, AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("GET", "/v2/webhooks/{id}", webhook_h_get, AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("DELETE", "/v2/webhooks/{id}", webhook_h_delete, AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("POST", "/v2/webhooks/signing-secret/rotate", webhook_h_rotate,
		 AUTH_SCOPE_WEBHOOKS_MANAGE),
};
const struct route_table webhook_routes = ROUTE_TABLE(routes);
