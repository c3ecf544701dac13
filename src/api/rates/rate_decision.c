#include "api/rates/rate_decision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "api/scope.h"
#include "cluster/cluster.h"
#include "core/jsonw.h"
#include "core/clock.h"
#include "core/currency.h"
#include "core/log.h"
#include "core/validate.h"
#include "rates/audit_trail.h"
#include "rates/decision.h"
#include "store/store.h"

#define MAX_PROPERTIES DECISION_MAX_PROPERTIES
#define MAX_RANGE_DAYS 366

static const struct vfield range_spec[] = {
	{"from", V_STRING, 1, 0, 10, NULL, 0, NULL},
	{"to", V_STRING, 1, 0, 10, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};
static const struct vfield money_spec[] = {
	{"currency", V_STRING, 1, 0, 3, NULL, 0, NULL},
	{"minor_units", V_INT, 1, 0, 0, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};
static const struct vfield governance_spec[] = {
	{"brand_ceiling_id", V_STRING, 1, 0, 64, NULL, 0, NULL},
	{"approver_saml_subject", V_STRING, 1, 0, 256, NULL, 0, NULL},
	{"justification", V_STRING, 1, 0, 2000, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};
const struct vfield rate_decision_spec[] = {
	{"properties", V_ARRAY, 1, 0, MAX_PROPERTIES, NULL, V_STRING, NULL},
	{"room_type_code", V_STRING, 1, 0, 32, NULL, 0, NULL},
	{"date_range", V_OBJECT, 1, 0, 0, range_spec, 0, NULL},
	{"proposed_rate", V_OBJECT, 1, 0, 0, money_spec, 0, NULL},
	{"governance", V_OBJECT, 1, 0, 0, governance_spec, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};
const struct vfield rate_revert_spec[] = {
	{"reason", V_STRING, 1, 0, 2000, NULL, 0, NULL},
	{"approver_saml_subject", V_STRING, 1, 0, 256, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

/* ------------------------------------------------------------- helpers */

static const char *str(const json_t *o, const char *path)
{
	const char *dot = strchr(path, '.');
	char head[64];

	if (!dot)
		return json_string_value(json_object_get(o, path));
	snprintf(head, sizeof head, "%.*s", (int)(dot - path), path);
	return str(json_object_get(o, head), dot + 1);
}

static struct decision_who who_of(struct ctx *c)
{
	return (struct decision_who){c->p.portfolio_id,
				     c->p.user_id,
				     c->p.client_id,
				     scope_reaches,
				     c,
				     c->svc->cluster ? cluster_node_id(c->svc->cluster) : NULL,
				     NULL};
}

static void respond_decision(struct ctx *c, int status, json_t *d)
{
	c->meta_sla_tier = 1;
	respond_data(c, status, d);
}

/* Answers an error whose body also names the decision it recorded. */
static void respond_decision_error(struct ctx *c, enum err e, json_t *details, const char *id,
				   const char *msg)
{
	json_t *body;
	char *s;

	respond_error(c, e, details, "%s", msg);
	body = json_loadb(c->res->body.data, c->res->body.len, 0, NULL);
	json_object_set_new(json_object_get(body, "error"), "decision_id", json_string(id));
	s = json_dumps(body, JSONW_DUMP);
	if (s) {
		buf_reset(&c->res->body);
		if (buf_puts(&c->res->body, s) < 0)
			log_msg(LOG_WARN, "rate_decision", "could not add decision_id to an error");
	}
	free(s);
	json_decref(body);
}

/* The API details of a failure: one per failed write. */
static json_t *failure_details(const json_t *failure)
{
	json_t *details = json_array(), *f;
	size_t i;

	json_array_foreach(json_object_get(failure, "failed_writes"), i, f) {
		json_t *d = json_deep_copy(f);

		json_object_set_new(d, "field", json_string("properties"));
		json_object_set_new(d, "issue",
				    json_string(json_string_value(json_object_get(f, "error"))));
		json_array_append_new(details, d);
	}
	return details;
}

/* Answers a publish or revert outcome (the successes are answered by the
 * callers). */
static void respond_outcome(struct ctx *c, const struct decision_outcome *o, const char *pms_msg)
{
	switch (o->result) {
	case DECISION_NOT_IN_PORTFOLIO:
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "properties[%zu] is not a property of this portfolio", o->index);
		break;
	case DECISION_CEILING_EXCEEDED:
		respond_decision_error(c, ERR_RATE_CEILING_EXCEEDED, json_incref(o->body), o->id,
				       "the proposed rate fails the brand ceiling; nothing was "
				       "written to any PMS");
		break;
	case DECISION_GOVERNANCE_REJECTED:
		respond_decision_error(c, ERR_GOVERNANCE_REJECTED,
				       json_pack("[{s:s, s:s}]", "field",
						 "governance.approver_saml_subject", "issue", o->why),
				       o->id, o->why);
		break;
	case DECISION_PMS_FAILED:
		respond_decision_error(c, ERR_PMS_WRITE_FAILED, failure_details(o->body), o->id,
				       pms_msg);
		break;
	case DECISION_UNRECORDED:
		respond_decision_error(c, ERR_UNAVAILABLE, NULL, o->id,
				       "the database refused the decision's record (busy, full or"
				       " unreachable), so its PMS writes were undone (the previous"
				       " rates written back); retry");
		break;
	case DECISION_UNSENT:
		respond_decision_error(c, ERR_UNAVAILABLE, failure_details(o->body), o->id,
				       "this server could not reach the PMS (a local fault, such as too"
				       " many open files): nothing was written, and the decision's record"
				       " says so; retry");
		break;
	case DECISION_NOT_FOUND:
		respond_error(c, ERR_NOT_FOUND, NULL, "no rate decision %s", ctx_param(c, 0));
		break;
	case DECISION_OTHER_PORTFOLIO:
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the rate decision belongs to another portfolio");
		break;
	case DECISION_OUT_OF_REACH:
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the rate decision touches a property outside this token");
		break;
	case DECISION_NOT_PUBLISHED:
		respond_error(c, ERR_CONFLICT, NULL,
			      "only a published decision can be reverted (it is %s)", o->status);
		break;
	case DECISION_REVERTED_MEANWHILE:
		respond_error(c, ERR_CONFLICT, NULL, "the decision was reverted meanwhile");
		break;
	case DECISION_DONE:
		break;
	}
}

/* Answers 404/403 for decision_load's 0/2 and the token-reach rule: every
 * property of the decision must be inside the token. Returns 1 to go on. */
static int decision_visible(struct ctx *c, int rc, const json_t *d)
{
	struct decision_who who = who_of(c);
	struct decision_outcome o = {.result = DECISION_DONE};

	if (rc < 0) {
		respond_store_error(c, rc);
		return 0;
	}
	if (rc == 0)
		o.result = DECISION_NOT_FOUND;
	else if (rc == 2)
		o.result = DECISION_OTHER_PORTFOLIO;
	else if (!decision_reached(&who, d))
		o.result = DECISION_OUT_OF_REACH;
	respond_outcome(c, &o, NULL);
	return o.result == DECISION_DONE;
}

/* ------------------------------------------------------------- create */

void rate_decision_check(const json_t *b, json_t *details)
{
	const json_t *props = json_object_get(b, "properties"), *v, *w;
	const char *from = str(b, "date_range.from"), *to = str(b, "date_range.to");
	int64_t df = 0, dt = 0, minor;
	size_t i, j;
	char field[48];

	if (!json_array_size(props))
		validate_add_detail(details, "properties", "must name at least one property");
	json_array_foreach(props, i, v) {
		snprintf(field, sizeof field, "properties[%zu]", i);
		if (!json_string_length(v) || json_string_length(v) >= ID_MAX) {
			validate_add_detail(details, field, "must be a property id");
			continue;
		}
		for (j = 0; j < i; j++) {
			w = json_array_get(props, j);
			if (json_is_string(w) && !strcmp(json_string_value(w), json_string_value(v))) {
				validate_add_detail(details, field, "repeats an earlier property");
				break;
			}
		}
	}
	if (!validate_code(str(b, "room_type_code")))
		validate_add_detail(details, "room_type_code",
				    "must be a code of letters, digits, '-', '_' or '.'");
	if (clock_parse_date(from, &df) < 0)
		validate_add_detail(details, "date_range.from", "must be a date YYYY-MM-DD");
	if (clock_parse_date(to, &dt) < 0)
		validate_add_detail(details, "date_range.to", "must be a date YYYY-MM-DD");
	else if (from && clock_parse_date(from, &df) == 0) {
		if (dt < df)
			validate_add_detail(details, "date_range.to", "must not be before from");
		else if (dt - df + 1 > MAX_RANGE_DAYS)
			validate_add_detail(details, "date_range", "must span at most 366 days");
	}
	if (!currency_known(str(b, "proposed_rate.currency")))
		validate_add_detail(details, "proposed_rate.currency",
				    "must be an ISO 4217 currency code such as PLN");
	minor = json_integer_value(
		json_object_get(json_object_get(b, "proposed_rate"), "minor_units"));
	if (minor <= 0)
		validate_add_detail(details, "proposed_rate.minor_units",
				    "must be a positive integer");
	if (validate_blank(str(b, "governance.brand_ceiling_id")))
		validate_add_detail(details, "governance.brand_ceiling_id", "must not be empty");
	if (validate_blank(str(b, "governance.approver_saml_subject")))
		validate_add_detail(details, "governance.approver_saml_subject", "must not be empty");
	if (validate_blank(str(b, "governance.justification")))
		validate_add_detail(details, "governance.justification", "must not be empty");
}

/* Answers a publication: decision_publish's status and outcome. */
static void answer_published(struct ctx *c, int rc, const struct decision_outcome *o)
{
	if (rc < 0)
		respond_store_error(c, rc);
	else if (o->result == DECISION_DONE)
		respond_decision(c, 201, json_incref(o->body));
	else
		respond_outcome(c, o, "a PMS write failed; the writes already made were compensated");
}

/* decision_who.record of a publication: its answer, stored for the
 * Idempotency-Key with the record it answers. */
static int record_published(void *arg, struct store_tx *tx, const struct decision_outcome *o)
{
	answer_published(arg, 0, o);
	return respond_key_store(arg, tx);
}

void rate_decision_h_create(struct ctx *c)
{
	const json_t *b = c->body, *props = json_object_get(b, "properties");
	struct decision_who who = who_of(c);
	struct decision_proposal p = {props,
				      str(b, "room_type_code"),
				      str(b, "date_range.from"),
				      str(b, "date_range.to"),
				      str(b, "proposed_rate.currency"),
				      json_integer_value(
					      json_object_get(json_object_get(b, "proposed_rate"),
							      "minor_units")),
				      str(b, "governance.brand_ceiling_id"),
				      str(b, "governance.approver_saml_subject"),
				      str(b, "governance.justification")};
	struct decision_outcome o;
	json_t *details = json_array();
	size_t i;
	int rc;

	rate_decision_check(b, details);
	if (json_array_size(details)) {
		respond_error(c, ERR_VALIDATION_FAILED, details, "the rate decision is not valid");
		return;
	}
	json_decref(details);
	for (i = 0; i < json_array_size(props); i++)
		if (!scope_reaches(c, json_string_value(json_array_get(props, i)))) {
			respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
				      "properties[%zu] is outside this token", i);
			return;
		}
	respond_key_own(c);
	who.record = c->idem.key ? record_published : NULL;
	rc = decision_publish(c->svc->store, c->svc->pms, &who, &p, &o);
	answer_published(c, rc, &o);
	json_decref(o.body);
}

/* --------------------------------------------------------- reading */

void rate_decision_h_get(struct ctx *c)
{
	struct store_tx *tx;
	json_t *d = NULL;
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = decision_load(tx, c->p.portfolio_id, ctx_param(c, 0), &d);
	store_rollback(tx);
	if (decision_visible(c, rc, d)) {
		respond_decision(c, 200, d);
		d = NULL;
	}
	json_decref(d);
}

void rate_decision_h_audit(struct ctx *c)
{
	struct store_tx *tx;
	json_t *d = NULL, *trail = NULL;
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = decision_load(tx, c->p.portfolio_id, ctx_param(c, 0), &d);
	if (rc == 1 && (rc = audit_load(tx, ctx_param(c, 0), &trail)) == 0)
		rc = STORE_ERR; /* a decision always has a trail */
	store_rollback(tx);
	if (decision_visible(c, rc, d)) {
		respond_decision(c, 200, trail);
		trail = NULL;
	}
	json_decref(d);
	json_decref(trail);
}

/* A list row: the decision, unless a narrowed token (or X-Service-Property)
 * does not reach every one of its properties. */
static json_t *decision_row(struct store_tx *tx, struct store_rows *r, void *arg, char *key,
			    size_t keycap)
{
	struct ctx *c = arg;
	struct decision_who who = who_of(c);
	json_t *d = decision_from_row(r);

	(void)tx;
	if (!decision_reached(&who, d)) {
		json_decref(d);
		return NULL;
	}
	snprintf(key, keycap, "%s", decision_row_id(r));
	return d;
}

void rate_decision_h_list(struct ctx *c)
{
	static const char *statuses[] = {"pending", "published", "rejected", "failed", "reverted"};
	const char *status = http_query(c->req, "status");
	char after[ID_MAX] = "", scope[256];
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	size_t i;
	int limit, rc;

	if (status) {
		for (i = 0; i < ARRAY_LEN(statuses) && strcmp(status, statuses[i]); i++)
			;
		if (i == ARRAY_LEN(statuses)) {
			respond_error(c, ERR_REQUEST_MALFORMED, NULL,
				      "status must be pending, published, rejected, failed or reverted");
			return;
		}
	}
	snprintf(scope, sizeof scope, "rate-decisions|%s|%s|%s", c->p.portfolio_id,
		 status ? status : "", c->property_header ? c->property_header : "");
	if (respond_page_args(c, scope, &limit, after, sizeof after) < 0)
		return;
	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	/* No LIMIT: rows outside a narrowed token are skipped. */
	rc = decision_list(tx, c->p.portfolio_id, after, status, &r);
	c->meta_sla_tier = 1;
	respond_rows_page(c, tx, rc, r, limit, scope, decision_row, c);
}

/* ---------------------------------------------------------- revert */

/* Answers a revert: decision_revert's status and outcome. */
static void answer_reverted(struct ctx *c, int rc, const struct decision_outcome *o)
{
	if (rc < 0)
		respond_store_error(c, rc);
	else if (o->result == DECISION_DONE)
		respond_decision(c, 200, json_incref(o->body));
	else if (o->result == DECISION_GOVERNANCE_REJECTED)
		respond_error(c, ERR_GOVERNANCE_REJECTED,
			      json_pack("[{s:s, s:s}]", "field", "approver_saml_subject", "issue",
					o->why),
			      "%s", o->why);
	else
		respond_outcome(c, o,
				"a PMS write of the revert failed; the decision stays published");
}

/* decision_who.record of a revert, as record_published. */
static int record_reverted(void *arg, struct store_tx *tx, const struct decision_outcome *o)
{
	answer_reverted(arg, 0, o);
	return respond_key_store(arg, tx);
}

void rate_decision_h_revert(struct ctx *c)
{
	const char *reason = str(c->body, "reason");
	const char *approver = str(c->body, "approver_saml_subject");
	struct decision_who who = who_of(c);
	struct decision_outcome o;
	int rc;

	if (validate_blank(reason) || validate_blank(approver)) {
		json_t *det = json_array();

		if (validate_blank(reason))
			validate_add_detail(det, "reason", "must not be empty");
		if (validate_blank(approver))
			validate_add_detail(det, "approver_saml_subject", "must not be empty");
		respond_error(c, ERR_VALIDATION_FAILED, det, "the revert is not valid");
		return;
	}
	respond_key_own(c);
	who.record = c->idem.key ? record_reverted : NULL;
	rc = decision_revert(c->svc->store, c->svc->pms, &who, ctx_param(c, 0), reason, approver, &o);
	answer_reverted(c, rc, &o);
	json_decref(o.body);
}

static const struct route routes[] = {
	ROUTE_V2_JSON_OUT("POST", "/v2/rate-decisions", rate_decision_h_create,
			  AUTH_SCOPE_RATES_WRITE, rate_decision_spec, LANE_PMS),
	ROUTE_V2("GET", "/v2/rate-decisions", rate_decision_h_list, AUTH_SCOPE_RATES_READ),
	ROUTE_V2_ETAG("GET", "/v2/rate-decisions/{id}", rate_decision_h_get, AUTH_SCOPE_RATES_READ),
	ROUTE_V2_ETAG("GET", "/v2/rate-decisions/{id}/audit-trail", rate_decision_h_audit,
		      AUTH_SCOPE_RATES_READ),
	ROUTE_V2_JSON_OUT("POST", "/v2/rate-decisions/{id}/revert", rate_decision_h_revert,
			  AUTH_SCOPE_RATES_WRITE, rate_revert_spec, LANE_PMS),
};
const struct route_table rate_decision_routes = ROUTE_TABLE(routes);
