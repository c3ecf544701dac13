#include "api/rates/rate_suggestion.h"

#include <stdio.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "api/scope.h"
#include "core/clock.h"
#include "core/validate.h"
#include "rates/audit_trail.h"
#include "rates/suggestion.h"
#include "store/store.h"

static const struct vfield approve_spec[] = {
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};
static const struct vfield reject_spec[] = {
	{"reason", V_STRING, 0, 1, 2000, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static void h_get(struct ctx *c)
{
	scope_get(c, suggestion_load, "rate suggestion");
}

static void h_audit(struct ctx *c)
{
	struct store_tx *tx;
	json_t *s = NULL, *trail = NULL;
	int rc;

	if ((rc = store_begin(c->svc->store, STORE_READ, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = suggestion_load(tx, c->p.portfolio_id, ctx_param(c, 0), &s);
	if (rc == 1 && (rc = audit_load(tx, ctx_param(c, 0), &trail)) == 0)
		rc = STORE_ERR; /* a suggestion always has a trail */
	store_rollback(tx);
	if (scope_visible(c, rc, s, "rate suggestion")) {
		respond_data(c, 200, trail);
		trail = NULL;
	}
	json_decref(s);
	json_decref(trail);
}

static json_t *row(struct store_tx *tx, struct store_rows *r, void *arg, char *key, size_t keycap)
{
	(void)tx;
	(void)arg;
	snprintf(key, keycap, "%s", suggestion_row_id(r));
	return suggestion_from_row(r);
}

/* A ?date_from / ?date_to query parameter: absent, or a date. */
static int date_param(struct ctx *c, const char *name, const char **out)
{
	int64_t day;

	*out = http_query(c->req, name);
	if (!*out || clock_parse_date(*out, &day) == 0)
		return 0;
	respond_error(c, ERR_REQUEST_MALFORMED, NULL, "%s must be a date YYYY-MM-DD", name);
	return -1;
}

static void h_list(struct ctx *c)
{
	static const char *const statuses[] = {"pending_approval", "approved", "rejected", "expired"};
	struct suggestion_filter f = {NULL, http_query(c->req, "property_id"), NULL, NULL, NULL, 0};
	struct scope_page pg;
	struct store_rows *r = NULL;
	int rc;

	if (scope_query_enum(c, "status", statuses, ARRAY_LEN(statuses), &f.status) < 0 ||
	    date_param(c, "date_from", &f.date_from) < 0 || date_param(c, "date_to", &f.date_to) < 0 ||
	    scope_list_begin(c, "rate-suggestions",
			     (const char *[]){f.status, f.date_from, f.date_to}, 3, &pg) < 0)
		return;
	f.props = pg.props;
	f.nprops = pg.nprops;
	rc = suggestion_list(pg.tx, c->p.portfolio_id, pg.after, &f, pg.limit + 1, &r);
	respond_rows_page(c, pg.tx, rc, r, pg.limit, pg.scope, row, NULL);
}

/* The answer to an outcome that did not reach the suggestion, as a read
 * of it would answer. */
static void refuse(struct ctx *c, const struct suggestion_outcome *o)
{
	scope_visible(c,
		      o->result == SUGGESTION_NOT_FOUND         ? 0
		      : o->result == SUGGESTION_OTHER_PORTFOLIO ? 2
								: 1,
		      o->body, "rate suggestion");
}

/* Answers a decision on a suggestion: suggestion_decide's status and
 * outcome. */
static void answer(struct ctx *c, int rc, const struct suggestion_outcome *o)
{
	if (rc < 0) {
		respond_store_error(c, rc);
		return;
	}
	switch (o->result) {
	case SUGGESTION_DONE:
		respond_data(c, 200, json_incref(o->body));
		return;
	case SUGGESTION_NOT_FOUND:
	case SUGGESTION_OTHER_PORTFOLIO:
	case SUGGESTION_OUT_OF_REACH:
		refuse(c, o);
		break;
	case SUGGESTION_NOT_APPROVER:
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL, "%s", o->why);
		break;
	case SUGGESTION_CONFLICT:
		respond_error(c, ERR_CONFLICT, NULL, "%s", o->why);
		break;
	case SUGGESTION_CEILING_EXCEEDED:
		respond_error(c, ERR_RATE_CEILING_EXCEEDED, json_incref(o->body),
			      "the proposed rate fails the brand ceiling; nothing was pushed and "
			      "the suggestion stays pending approval");
		break;
	case SUGGESTION_PUSH_FAILED:
		respond_error(c, ERR_PMS_WRITE_FAILED,
			      json_pack("[{s:s, s:s}]", "field", "booking_engine", "issue", o->why),
			      "the booking engine did not accept the rate; the suggestion stays "
			      "pending approval");
		break;
	}
}

/* suggestion_who.record: the answer, stored for the Idempotency-Key with
 * the record it answers. */
static int record(void *arg, struct store_tx *tx, const struct suggestion_outcome *o)
{
	answer(arg, 0, o);
	return respond_key_store(arg, tx);
}

/* Approves (approve 1) or rejects the suggestion of the path; an approval
 * pushes to the booking engine between its transactions, so the answer
 * is stored by record. */
static void decide(struct ctx *c, int approve)
{
	const char *reason = json_string_value(json_object_get(c->body, "reason"));
	struct suggestion_who who = {c->p.portfolio_id, c->p.user_id, scope_reaches, c,
				     c->idem.key ? record : NULL};
	struct suggestion_outcome o;
	int rc;

	respond_key_own(c);
	/* A blank reason is no reason. */
	rc = suggestion_decide(c->svc->store, c->svc->booking, &who, ctx_param(c, 0), approve,
			       validate_blank(reason) ? NULL : reason, &o);
	answer(c, rc, &o);
	json_decref(o.body);
}

static void h_approve(struct ctx *c)
{
	decide(c, 1);
}

static void h_reject(struct ctx *c)
{
	decide(c, 0);
}

static const struct route routes[] = {
	ROUTE_V2("GET", "/v2/rate-suggestions", h_list, AUTH_SCOPE_RATES_READ),
	ROUTE_V2_ETAG("GET", "/v2/rate-suggestions/{id}", h_get, AUTH_SCOPE_RATES_READ),
	ROUTE_V2_ETAG("GET", "/v2/rate-suggestions/{id}/audit-trail", h_audit, AUTH_SCOPE_RATES_READ),
	ROUTE_V2_JSON_OPT_OUT("POST", "/v2/rate-suggestions/{id}/approve", h_approve,
			      AUTH_SCOPE_RATES_WRITE, approve_spec, LANE_BOOKING),
	ROUTE_V2_JSON_OPT("POST", "/v2/rate-suggestions/{id}/reject", h_reject,
			  AUTH_SCOPE_RATES_WRITE, reject_spec),
};
const struct route_table rate_suggestion_routes = ROUTE_TABLE(routes);
