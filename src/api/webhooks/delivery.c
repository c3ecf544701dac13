#include "api/webhooks/delivery.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "core/clock.h"
#include "events/outbox.h"
#include "http/http.h"
#include "store/store.h"
#include "webhooks/engine.h"
#include "webhooks/subscriptions.h"

#define DAY_MS (24LL * 3600 * 1000)
#define RETRY_WINDOW_MS (30 * DAY_MS)  /* v1: after the original event */
#define REPLAY_WINDOW_MS (90 * DAY_MS) /* v2 */

#define DLV_COLS                                                                            \
	"id, subscription_id, event_id, event_type, surface, target, url, state,"           \
	" attempt_count, next_attempt_at, event_created_at, created_at, delivered_at,"    \
	" dead_lettered_at, portfolio_id, seq, lane, rate_per_s"

static json_t *time_or_null(struct store_rows *r, int col)
{
	char ts[CLOCK_RFC3339_LEN];

	if (store_is_null(r, col))
		return json_null();
	clock_format_ms(store_int(r, col), ts);
	return json_string(ts);
}

/* The attempt log of one delivery, oldest first. */
static json_t *attempts_json(struct store_tx *tx, const char *id)
{
	struct store_rows *r;
	json_t *list = json_array(), *a;
	char ts[CLOCK_RFC3339_LEN];

	if (store_query(tx,
			"SELECT n, started_at, duration_ms, http_status, error, response_snippet"
			" FROM webhook_attempts WHERE delivery_id = $1 ORDER BY n",
			(struct store_val[]){sv_text(id)}, 1, &r) != STORE_OK)
		return list;
	while (store_next(r) == 1) {
		clock_format_ms(store_int(r, 1), ts);
		a = json_pack("{s:I, s:s, s:I, s:o, s:s?, s:s}", "n", (json_int_t)store_int(r, 0),
			      "at", ts, "duration_ms", (json_int_t)store_int(r, 2), "http_status",
			      store_is_null(r, 3) ? json_null() : json_integer(store_int(r, 3)),
			      "error", store_text(r, 4), "response_snippet", store_text(r, 5));
		json_array_append_new(list, a);
	}
	store_rows_close(r);
	return list;
}

/* A delivery object from a DLV_COLS row. next_attempt_at is shown only
 * while the delivery waits (during an attempt it is the time the
 * delivery became due). */
static json_t *delivery_json(struct store_tx *tx, struct store_rows *r)
{
	const char *state = store_text(r, 7);
	int waiting = !strcmp(state, "pending") || !strcmp(state, "retry_scheduled");

	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:o, s:o, s:o, s:o, s:o,"
			 " s:o}",
			 "id", store_text(r, 0), "subscription_id", store_text(r, 1), "event_id",
			 store_text(r, 2), "event_type", store_text(r, 3), "surface", store_text(r, 4),
			 "target", store_text(r, 5), "url", store_text(r, 6), "state", state,
			 "attempt_count", (json_int_t)store_int(r, 8), "next_attempt_at",
			 waiting ? time_or_null(r, 9) : json_null(),
			 "event_created_at", time_or_null(r, 10), "created_at", time_or_null(r, 11),
			 "delivered_at", time_or_null(r, 12), "dead_lettered_at", time_or_null(r, 13),
			 "attempts", attempts_json(tx, store_text(r, 0)));
}

static json_t *delivery_row(struct store_tx *tx, struct store_rows *r, void *arg, char *key,
			    size_t keycap)
{
	(void)arg;
	snprintf(key, keycap, "%" PRId64, store_int(r, 15));
	return delivery_json(tx, r);
}

/* Pages a delivery list newest first. where is an SQL condition on $1
 * (the portfolio) and $2 (the list's parameter, may be NULL); the cursor
 * is the last seq shown. */
static void list_page(struct ctx *c, const char *scope, const char *where, const char *param)
{
	char after[ID_MAX] = "", sql[768];
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	int64_t before = INT64_MAX;
	int limit, rc;

	if (respond_page_args(c, scope, &limit, after, sizeof after) < 0)
		return;
	if (after[0])
		before = strtoll(after, NULL, 10);
	snprintf(sql, sizeof sql,
		 "SELECT " DLV_COLS " FROM webhook_deliveries WHERE portfolio_id = $1 AND (%s)"
		 " AND seq < $3 ORDER BY seq DESC LIMIT $4",
		 where);
	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = store_query(tx, sql,
			 (struct store_val[]){sv_text(c->p.portfolio_id), sv_text(param),
					      sv_int(before), sv_int(limit + 1)},
			 4, &r);
	respond_rows_page(c, tx, rc, r, limit, scope, delivery_row, NULL);
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

static const char *const states[] = {"pending", "retry_scheduled", "delivered", "dead_lettered"};

void delivery_h_list(struct ctx *c)
{
	const char *sub = ctx_param(c, 0), *state = http_query(c->req, "state");
	char scope[300];
	size_t i;

	if (state) {
		for (i = 0; i < ARRAY_LEN(states) && strcmp(state, states[i]); i++)
			;
		if (i == ARRAY_LEN(states)) {
			respond_error(c, ERR_REQUEST_MALFORMED, NULL,
				      "state must be pending, retry_scheduled, delivered or"
				      " dead_lettered");
			return;
		}
	}
	if (!subscription_visible(c, sub))
		return;
	snprintf(scope, sizeof scope, "deliveries|%s|%s|%s", c->p.portfolio_id, sub,
		 state ? state : "");
	/* The state filter rides in the scope; the SQL names it directly
	 * (it is one of the four literals checked above). */
	if (!state) {
		list_page(c, scope, "subscription_id = $2", sub);
	} else {
		char where[128];

		snprintf(where, sizeof where, "subscription_id = $2 AND state = '%s'", state);
		list_page(c, scope, where, sub);
	}
}

void delivery_h_dead_letters(struct ctx *c)
{
	const char *sub = http_query(c->req, "subscription_id");
	char scope[300];

	if (sub && !subscription_visible(c, sub))
		return;
	snprintf(scope, sizeof scope, "dead-letters|%s|%s", c->p.portfolio_id, sub ? sub : "");
	list_page(c, scope, "state = 'dead_lettered' AND ($2 IS NULL OR subscription_id = $2)", sub);
}

/* Loads delivery id for the caller inside tx: 1 (row in *out, open), or
 * answers 404 / 403 and returns 0, or < 0 after answering the store error.
 * surface, when not NULL, must match (other surfaces are not found). */
static int load_delivery(struct ctx *c, struct store_tx *tx, const char *id, const char *surface,
			 struct store_rows **out)
{
	struct store_rows *r;
	int rc;

	*out = NULL;
	rc = store_query(tx, "SELECT " DLV_COLS " FROM webhook_deliveries WHERE id = $1",
			 (struct store_val[]){sv_text(id)}, 1, &r);
	if (rc == STORE_OK && (rc = store_next(r)) == 1) {
		if (surface && strcmp(store_text(r, 4), surface)) {
			rc = 0;
		} else if (strcmp(store_text(r, 14), c->p.portfolio_id)) {
			store_rows_close(r);
			respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
				      "the delivery belongs to another portfolio");
			return 0;
		} else {
			*out = r;
			return 1;
		}
	}
	if (rc >= 0 || rc == STORE_OK)
		store_rows_close(r);
	if (rc < 0) {
		respond_store_error(c, rc);
		return rc;
	}
	respond_error(c, ERR_NOT_FOUND, NULL, "no %swebhook delivery %s",
		      surface ? (strcmp(surface, "v1") ? "v2 " : "v1 ") : "", id);
	return 0;
}

void delivery_h_get(struct ctx *c)
{
	struct store_tx *tx;
	struct store_rows *r;
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	if (load_delivery(c, tx, ctx_param(c, 0), NULL, &r) == 1) {
		json_t *d = delivery_json(tx, r);

		store_rows_close(r);
		respond_data(c, 200, d);
	}
	store_rollback(tx);
}

/* Manual recovery: one new attempt now. v1 retry takes dead-lettered
 * deliveries only; v2 replay takes delivered or dead-lettered ones. Both
 * within window_ms (scaled) of the original event. */
static void recover(struct ctx *c, const char *surface, int64_t window_ms)
{
	struct engine_touched touched = {0};
	struct store_tx *tx;
	struct store_rows *r;
	char state[24], lane[300] = "";
	int64_t event_at, now = clock_now_ms();
	json_t *d = NULL;
	int rc, rate = 0, ok;

	if ((rc = store_begin(c->svc->store, 1, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	if (load_delivery(c, tx, ctx_param(c, 0), surface, &r) != 1)
		goto out;
	snprintf(state, sizeof state, "%s", store_text(r, 7));
	event_at = store_int(r, 10);
	if (strlen(store_text(r, 16)) < sizeof lane)
		snprintf(lane, sizeof lane, "%s", store_text(r, 16));
	rate = (int)store_int(r, 17);
	store_rows_close(r);
	ok = !strcmp(surface, "v1") ? !strcmp(state, "dead_lettered")
				    : !strcmp(state, "dead_lettered") || !strcmp(state, "delivered");
	if (!ok) {
		respond_error(c, ERR_CONFLICT, NULL, "the delivery is %s; %s", state,
			      !strcmp(surface, "v1") ? "only a dead-lettered delivery can be retried"
						     : "only a delivered or dead-lettered delivery"
						       " can be replayed");
		goto out;
	}
	if (now - event_at > clock_business_ms(window_ms)) {
		respond_error(c, ERR_WINDOW_EXPIRED, NULL, "the event is older than %d days",
			      (int)(window_ms / DAY_MS));
		goto out;
	}
	rc = store_exec(tx,
			"UPDATE webhook_deliveries SET state = 'pending', manual = 1,"
			" next_attempt_at = $2 WHERE id = $1 AND state = $3",
			(struct store_val[]){sv_text(ctx_param(c, 0)), sv_int(now), sv_text(state)}, 3);
	if (rc < 0 || load_delivery(c, tx, ctx_param(c, 0), surface, &r) != 1) {
		if (rc < 0)
			respond_store_error(c, rc);
		goto out;
	}
	d = delivery_json(tx, r);
	store_rows_close(r);
	if ((rc = store_commit(tx)) != STORE_OK) {
		tx = NULL;
		respond_store_error(c, rc);
		goto out;
	}
	tx = NULL;
	if (lane[0])
		engine_touch(&touched, lane, rate);
	else
		touched.overflow = 1;
	engine_notify(c->svc->engine, &touched);
	respond_data(c, 202, d);
	d = NULL;
out:
	json_decref(d);
	store_rollback(tx);
}

void delivery_h_replay(struct ctx *c)
{
	recover(c, "v2", REPLAY_WINDOW_MS);
}

void delivery_h_retry(struct ctx *c)
{
	recover(c, "v1", RETRY_WINDOW_MS);
}

/* What a ping's event fans out to (ping_fan_out's arg). */
struct ping_fan {
	struct store_tx *tx;
	const char *subscription_id;
	json_t *created;
	struct engine_touched *touched;
};

/* outbox_get's fn: the deliveries of the ping event to its subscription. */
static int ping_fan_out(const struct outbox_event *ev, void *arg)
{
	struct ping_fan *pf = arg;
	int rc = engine_fan_out(pf->tx, ev, pf->subscription_id, pf->created, pf->touched);

	return rc < 0 ? rc : 0;
}

/* Emits webhook.ping for one subscription of the surface: an outbox event
 * (kept like any other) and its deliveries, made in the same transaction so
 * the answer can name them. */
static void ping(struct ctx *c, const char *surface)
{
	struct engine_touched touched = {0};
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	char evt[ID_MAX];
	json_t *data = NULL, *props = json_array(), *created = json_array();
	int rc, mirror = 0;

	if ((rc = store_begin(c->svc->store, 1, &tx)) != STORE_OK) {
		tx = NULL;
		respond_store_error(c, rc);
		goto out;
	}
	rc = subscriptions_ping_target(tx, c->p.portfolio_id, ctx_param(c, 0), surface, &mirror);
	if (rc < 0) {
		respond_store_error(c, rc);
		goto out;
	}
	if (rc != SUBSCRIPTIONS_MINE) {
		if (rc == SUBSCRIPTIONS_OTHER)
			respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
				      "the subscription belongs to another portfolio");
		else
			respond_error(c, ERR_NOT_FOUND, NULL, "no %s webhook subscription %s",
				      surface, ctx_param(c, 0));
		goto out;
	}
	data = json_pack("{s:s, s:b}", "subscription_id", ctx_param(c, 0), "mirror", mirror);
	rc = outbox_append(tx, surface, "webhook.ping", c->p.portfolio_id, props, data, evt,
			   sizeof evt);
	if (rc == 0) {
		struct ping_fan pf = {tx, ctx_param(c, 0), created, &touched};

		rc = outbox_get(tx, evt, ping_fan_out, &pf);
		if (rc == 0)
			rc = STORE_ERR;
	}
	rc = store_finish(tx, rc);
	tx = NULL;
	if (rc != STORE_OK) {
		respond_store_error(c, rc);
		goto out;
	}
	engine_notify(c->svc->engine, &touched);
	respond_data(c, 202, json_pack("{s:s, s:s, s:O}", "event_id", evt, "subscription_id",
				       ctx_param(c, 0), "deliveries", created));
out:
	store_rows_close(r);
	store_rollback(tx);
	json_decref(data);
	json_decref(props);
	json_decref(created);
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
	struct store_tx *tx;
	struct store_rows *r;
	int64_t start, end, events = 0, delivered = 0;
	double ratio;
	int rc;

	if (parse_month(month, &start, &end) < 0) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL, "month must be given as YYYY-MM");
		return;
	}
	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	/* Primary v2 deliveries of real events (pings are synthetic). */
	rc = store_query(tx,
			 "SELECT COUNT(*), COALESCE(SUM(state = 'delivered'), 0) FROM"
			 " webhook_deliveries WHERE portfolio_id = $1 AND target = 'primary'"
			 " AND surface = 'v2' AND event_created_at >= $2 AND event_created_at < $3"
			 " AND event_type <> 'webhook.ping'",
			 (struct store_val[]){sv_text(c->p.portfolio_id), sv_int(start), sv_int(end)},
			 3, &r);
	if (rc == STORE_OK && (rc = store_next(r)) == 1) {
		events = store_int(r, 0);
		delivered = store_int(r, 1);
	}
	if (rc >= 0)
		store_rows_close(r);
	store_rollback(tx);
	if (rc < 0) {
		respond_store_error(c, rc);
		return;
	}
	ratio = events ? (double)delivered / (double)events : 1.0;
	respond_data(c, 200,
		     json_pack("{s:s, s:I, s:I, s:f, s:f, s:b}", "period", month, "events",
			       (json_int_t)events, "delivered", (json_int_t)delivered,
			       "delivered_ratio", ratio, "target", 0.9995, "credit_due",
			       ratio < 0.9990));
}

static const struct route routes[] = {
	{"POST", "/v1/webhooks/{id}/ping", delivery_h_ping_v1, ROUTE_BEARER,
	 AUTH_SCOPE_WEBHOOKS_MANAGE, 0, BODY_NONE, NULL, 0},
	{"POST", "/v1/webhooks/deliveries/{id}/retry", delivery_h_retry, ROUTE_BEARER,
	 AUTH_SCOPE_WEBHOOKS_MANAGE, 0, BODY_NONE, NULL, 0},
	/* Literal segments before /v2/webhooks/{id} (webhook_routes, listed
	 * after these): the first match wins. */
	ROUTE_V2("GET", "/v2/webhooks/dead-letters", delivery_h_dead_letters,
		 AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("GET", "/v2/webhooks/sla", delivery_h_sla, AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("GET", "/v2/webhooks/deliveries/{id}", delivery_h_get, AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("POST", "/v2/webhooks/deliveries/{id}/replay", delivery_h_replay,
		 AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("GET", "/v2/webhooks/{id}/deliveries", delivery_h_list, AUTH_SCOPE_WEBHOOKS_MANAGE),
	ROUTE_V2("POST", "/v2/webhooks/{id}/ping", delivery_h_ping_v2, AUTH_SCOPE_WEBHOOKS_MANAGE),
};
const struct route_table delivery_routes = ROUTE_TABLE(routes);
