#include "api/webhooks/webhook.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/id.h"
#include "store/store.h"
#include "webhooks/subscriptions.h"

#define MAX_EVENTS 20

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

static void create(struct ctx *c, const char *surface)
{
	struct subscription_request rq = {
		.portfolio_id = c->p.portfolio_id,
		.plan = c->p.plan,
		.surface = surface,
		.url = json_string_value(json_object_get(c->body, "url")),
		.mirror_url = json_string_value(json_object_get(c->body, "mirror_url")),
		.description = json_string_value(json_object_get(c->body, "description")),
		.events = json_object_get(c->body, "events"),
		.allow_private = c->svc->cfg->allow_private_targets,
	};
	json_t *details = json_array(), *sub = NULL;
	int rc;

	if (subscriptions_check(&rq, details) == SUBSCRIPTIONS_PLAN) {
		respond_error(c, ERR_PLAN_FEATURE_UNAVAILABLE, NULL,
			      "mirror_url is available on the enterprise plan only");
		goto out;
	}
	if (json_array_size(details)) {
		respond_error(c, ERR_VALIDATION_FAILED, details, "the subscription is not valid");
		details = NULL;
		goto out;
	}
	rc = subscriptions_create(c->svc->store, c->svc->seal_key, &rq, &sub);
	if (rc == SUBSCRIPTIONS_FULL) {
		respond_error(c, ERR_CONFLICT, NULL, "a portfolio has at most %d subscriptions",
			      SUBSCRIPTIONS_MAX);
		goto out;
	}
	if (rc != 0) {
		respond_store_error(c, rc);
		goto out;
	}
	respond_data(c, 201, sub);
	sub = NULL;
out:
	json_decref(details);
	json_decref(sub);
}

void webhook_h_create_v1(struct ctx *c)
{
	create(c, "v1");
}

void webhook_h_create_v2(struct ctx *c)
{
	create(c, "v2");
}

void webhook_h_list(struct ctx *c)
{
	char after[ID_MAX] = "", scope[128];
	struct store_tx *tx;
	struct store_rows *r;
	int limit, rc;

	snprintf(scope, sizeof scope, "webhooks|%s", c->p.portfolio_id);
	if (respond_page_args(c, scope, &limit, after, sizeof after) < 0)
		return;
	rc = subscriptions_page(c->svc->store, c->p.portfolio_id, after, limit, &tx, &r);
	respond_rows_page(c, tx, rc, r, limit, scope, subscriptions_item, NULL);
}

/* Answers 404/403 for SUBSCRIPTIONS_NONE/_OTHER, or the store error; 1 to
 * go on (SUBSCRIPTIONS_MINE). */
static int visible(struct ctx *c, int rc)
{
	if (rc == SUBSCRIPTIONS_MINE)
		return 1;
	if (rc == SUBSCRIPTIONS_NONE)
		respond_error(c, ERR_NOT_FOUND, NULL, "no webhook subscription %s", ctx_param(c, 0));
	else if (rc == SUBSCRIPTIONS_OTHER)
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the subscription belongs to another portfolio");
	else
		respond_store_error(c, rc);
	return 0;
}

void webhook_h_get(struct ctx *c)
{
	json_t *sub = NULL;

	if (visible(c, subscriptions_get(c->svc->store, c->p.portfolio_id, ctx_param(c, 0), &sub))) {
		respond_data(c, 200, sub);
		sub = NULL;
	}
	json_decref(sub);
}

void webhook_h_delete(struct ctx *c)
{
	if (!visible(c, subscriptions_delete(c->svc->store, c->p.portfolio_id, ctx_param(c, 0))))
		return;
	c->res->status = 204;
	buf_reset(&c->res->body);
}

void webhook_h_rotate(struct ctx *c)
{
	char secret[SIGNING_SECRET_LEN], ts[CLOCK_RFC3339_LEN];
	int rc;

	rc = subscriptions_rotate(c->svc->store, c->svc->seal_key, c->p.portfolio_id, secret);
	if (rc != STORE_OK) {
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
	 BODY_JSON, webhook_v1_spec, 0, 0, 0},
	ROUTE_V2_JSON("POST", "/v2/webhooks", webhook_h_create_v2, AUTH_SCOPE_WEBHOOKS_MANAGE,
		      webhook_v2_spec),
	ROUTE_V2("GET", "/v2/webhooks", webhook_h_list, AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2_ETAG("GET", "/v2/webhooks/{id}", webhook_h_get, AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("DELETE", "/v2/webhooks/{id}", webhook_h_delete, AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("POST", "/v2/webhooks/signing-secret/rotate", webhook_h_rotate,
		 AUTH_SCOPE_WEBHOOKS_MANAGE),
};
const struct route_table webhook_routes = ROUTE_TABLE(routes);
