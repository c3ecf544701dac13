#include "api/webhooks/delivery.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "core/clock.h"
#include "http/http.h"
#include "webhooks/engine.h"
#include "webhooks/subscriptions.h"

#define DAY_MS (24LL * 3600 * 1000)

/* Pages a delivery list newest first: reads ?limit and ?cursor (the last
 * seq shown) for scope, then the page from engine_deliveries_page (state
 * may be NULL) or, with dead = 1, engine_dead_letters_page. */
static void list_page(struct ctx *c, const char *scope, int dead, const char *sub, const char *state)
{
	char after[ID_MAX] = "";
	struct store_tx *tx;
	struct store_rows *r;
	int64_t before = INT64_MAX;
	int limit, rc;

	if (respond_page_args(c, scope, &limit, after, sizeof after) < 0)
		return;
	if (after[0])
		before = strtoll(after, NULL, 10);
	if (dead)
		rc = engine_dead_letters_page(c->svc->store, c->p.portfolio_id, sub, before, limit,
					      &tx, &r);
	else
		rc = engine_deliveries_page(c->svc->store, c->p.portfolio_id, sub, state, before,
					    limit, &tx, &r);
	respond_rows_page(c, tx, rc, r, limit, scope, engine_delivery_item, NULL);
}

/* 1 when subscription id belongs to the portfolio (any surface, also
 * deleted: its deliveries stay visible); answers 404 / 403 otherwise. */
static int subscription_visible(struct ctx *c, const char *id)
{
	int rc = subscriptions_owner(c->svc->store, c->p.portfolio_id, id);

	if (rc < 0)
		respond_store_error(c, rc);
	else if (rc == SUBSCRIPTIONS_NONE)
		respond_error(c, ERR_NOT_FOUND, NULL, "no webhook subscription %s", id);
	else if (rc == SUBSCRIPTIONS_OTHER)
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the subscription belongs to another portfolio");
	return rc == SUBSCRIPTIONS_MINE;
}

void delivery_h_list(struct ctx *c)
{
	const char *sub = ctx_param(c, 0), *state = http_query(c->req, "state");
	char scope[300];

	if (state && !engine_delivery_state_known(state)) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL,
			      "state must be pending, retry_scheduled, delivered or"
			      " dead_lettered");
		return;
	}
	if (!subscription_visible(c, sub))
		return;
	/* The state filter rides in the scope. */
	snprintf(scope, sizeof scope, "deliveries|%s|%s|%s", c->p.portfolio_id, sub,
		 state ? state : "");
	list_page(c, scope, 0, sub, state);
}

void delivery_h_dead_letters(struct ctx *c)
{
	const char *sub = http_query(c->req, "subscription_id");
	char scope[300];

	if (sub && !subscription_visible(c, sub))
		return;
	snprintf(scope, sizeof scope, "dead-letters|%s|%s", c->p.portfolio_id, sub ? sub : "");
	list_page(c, scope, 1, sub, NULL);
}

/* Answers a delivery lookup's ENGINE_NONE (404; surface, when not NULL,
 * is the one asked for), ENGINE_OTHER (403) or store error. */
static void delivery_missing(struct ctx *c, int rc, const char *surface)
{
	if (rc < 0)
		respond_store_error(c, rc);
	else if (rc == ENGINE_OTHER)
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the delivery belongs to another portfolio");
	else
		respond_error(c, ERR_NOT_FOUND, NULL, "no %swebhook delivery %s",
			      surface ? (strcmp(surface, "v1") ? "v2 " : "v1 ") : "",
			      ctx_param(c, 0));
}

void delivery_h_get(struct ctx *c)
{
	json_t *d = NULL;
	int rc = engine_delivery_get(c->svc->store, c->p.portfolio_id, ctx_param(c, 0), &d);

	if (rc != ENGINE_MINE) {
		delivery_missing(c, rc, NULL);
		return;
	}
	respond_data(c, 200, d);
}

/* Manual recovery (engine_redeliver): v1 retry, v2 replay. */
static void recover(struct ctx *c, const char *surface)
{
	struct engine_redelivery out;
	int rc = engine_redeliver(c->svc->engine, c->svc->store, c->p.portfolio_id, ctx_param(c, 0),
				  surface, &out);

	if (rc == ENGINE_MINE) {
		respond_data(c, 202, out.delivery);
	} else if (rc == ENGINE_STATE) {
		respond_error(c, ERR_CONFLICT, NULL, "the delivery is %s; %s", out.state,
			      !strcmp(surface, "v1") ? "only a dead-lettered delivery can be retried"
						     : "only a delivered or dead-lettered delivery"
						       " can be replayed");
	} else if (rc == ENGINE_EXPIRED) {
		respond_error(c, ERR_WINDOW_EXPIRED, NULL, "the event is older than %d days",
			      out.window_days);
	} else {
		delivery_missing(c, rc, surface);
	}
}

void delivery_h_replay(struct ctx *c)
{
	recover(c, "v2");
}

void delivery_h_retry(struct ctx *c)
{
	recover(c, "v1");
}

/* Emits webhook.ping for one subscription of the surface (engine_ping). */
static void ping(struct ctx *c, const char *surface)
{
	json_t *out = NULL;
	int rc = engine_ping(c->svc->engine, c->svc->store, surface, c->p.portfolio_id,
			     ctx_param(c, 0), &out);

	if (rc == ENGINE_MINE)
		respond_data(c, 202, out);
	else if (rc < 0)
		respond_store_error(c, rc);
	else if (rc == ENGINE_OTHER)
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the subscription belongs to another portfolio");
	else
		respond_error(c, ERR_NOT_FOUND, NULL, "no %s webhook subscription %s", surface,
			      ctx_param(c, 0));
}

void delivery_h_ping_v1(struct ctx *c)
{
	ping(c, "v1");
}

void delivery_h_ping_v2(struct ctx *c)
{
	ping(c, "v2");
}

/* Parses "YYYY-MM" strictly into the UTC month [start, end) in ms. */
static int parse_month(const char *s, int64_t *start, int64_t *end)
{
	unsigned y, m;
	char tail;

	if (!s || strlen(s) != 7 || s[4] != '-' || sscanf(s, "%4u-%2u%c", &y, &m, &tail) != 2 ||
	    y < 1970 || m < 1 || m > 12)
		return -1;
	for (int i = 0; i < 7; i++)
		if (i != 4 && (s[i] < '0' || s[i] > '9'))
			return -1;
	*start = clock_days_from_civil(y, m, 1) * DAY_MS;
	*end = (m == 12 ? clock_days_from_civil(y + 1, 1, 1) : clock_days_from_civil(y, m + 1, 1)) *
	       DAY_MS;
	return 0;
}

void delivery_h_sla(struct ctx *c)
{
	const char *month = http_query(c->req, "month");
	struct engine_sla sla;
	int64_t start, end;
	int rc;

	if (parse_month(month, &start, &end) < 0) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL, "month must be given as YYYY-MM");
		return;
	}
	if ((rc = engine_sla(c->svc->store, c->p.portfolio_id, start, end, &sla)) < 0) {
		respond_store_error(c, rc);
		return;
	}
	respond_data(c, 200,
		     json_pack("{s:s, s:I, s:I, s:f, s:f, s:b}", "period", month, "events",
			       (json_int_t)sla.events, "delivered", (json_int_t)sla.delivered,
			       "delivered_ratio", sla.ratio, "target", sla.target, "credit_due",
			       sla.credit_due));
}

static const struct route routes[] = {
	{"POST", "/v1/webhooks/{id}/ping", delivery_h_ping_v1, ROUTE_BEARER,
	 AUTH_SCOPE_WEBHOOKS_MANAGE, 0, BODY_NONE, NULL, 0, 0, 0},
	{"POST", "/v1/webhooks/deliveries/{id}/retry", delivery_h_retry, ROUTE_BEARER,
	 AUTH_SCOPE_WEBHOOKS_MANAGE, 0, BODY_NONE, NULL, 0, 0, 0},
	/* Literal segments before /v2/webhooks/{id} (webhook_routes, listed
	 * after these): the first match wins. */
	ROUTE_V2("GET", "/v2/webhooks/dead-letters", delivery_h_dead_letters,
		 AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("GET", "/v2/webhooks/sla", delivery_h_sla, AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2_ETAG("GET", "/v2/webhooks/deliveries/{id}", delivery_h_get,
		      AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("POST", "/v2/webhooks/deliveries/{id}/replay", delivery_h_replay,
		 AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("GET", "/v2/webhooks/{id}/deliveries", delivery_h_list, AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("POST", "/v2/webhooks/{id}/ping", delivery_h_ping_v2, AUTH_SCOPE_WEBHOOKS_MANAGE),
};
const struct route_table delivery_routes = ROUTE_TABLE(routes);
