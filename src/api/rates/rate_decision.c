#include "api/rates/rate_decision.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/ctx.h"
#include "identity/directory.h"
#include "api/respond.h"
#include "core/clock.h"
#include "core/currency.h"
#include "core/id.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "core/validate.h"
#include "events/outbox.h"
#include "pms/pms.h"
#include "rates/audit_trail.h"
#include "store/store.h"

#define MAX_PROPERTIES 64
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

static int blank(const char *s)
{
	for (; s && *s; s++)
		if (!isspace((unsigned char)*s))
			return 0;
	return 1;
}

static json_t *money(const char *currency, int64_t minor)
{
	return json_pack("{s:s, s:I}", "currency", currency, "minor_units", (json_int_t)minor);
}

/* "client:cli_…" or "user:<userName>": who proposed (or asked for) a change. */
static int principal_actor(struct ctx *c, struct store_tx *tx, char *out, size_t cap,
			   char *user_name, size_t ucap)
{
	struct store_rows *r;
	int rc;

	user_name[0] = '\0';
	if (!c->p.user_id[0]) {
		snprintf(out, cap, "client:%s", c->p.client_id);
		return 0;
	}
	rc = store_query(tx, "SELECT user_name FROM users WHERE id = $1",
			 (struct store_val[]){sv_text(c->p.user_id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1)
		snprintf(user_name, ucap, "%s", store_text(r, 0));
	store_rows_close(r);
	if (rc < 0)
		return rc;
	snprintf(out, cap, "user:%s", user_name[0] ? user_name : c->p.user_id);
	return 0;
}

/* Checks the approver of a decision or a revert: an active user of the
 * portfolio with role revenue-approver who is not the proposer. Returns 0
 * (approved; *user_id filled), 1 (refused: *why), or < 0. */
static int check_approver(struct store_tx *tx, const char *pf, const char *subject,
			  const char *proposer_user_id, char *user_id, json_t **roles,
			  const char **why)
{
	struct store_rows *r;
	char lower[1024];
	size_t i;
	json_t *v;
	int rc, has = 0;

	*roles = NULL;
	for (i = 0; subject[i] && i + 1 < sizeof lower; i++)
		lower[i] = (char)tolower((unsigned char)subject[i]);
	lower[i] = '\0';
	rc = store_query(tx, "SELECT id FROM users WHERE portfolio_id = $1 AND user_name_lower = $2",
			 (struct store_val[]){sv_text(pf), sv_text(lower)}, 2, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1)
		snprintf(user_id, ID_MAX, "%s", store_text(r, 0));
	store_rows_close(r);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		*why = "the approver is not a user of this portfolio";
		return 1;
	}
	rc = directory_user_roles(tx, pf, user_id, roles);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		*why = "the approver is deactivated";
		return 1;
	}
	json_array_foreach(*roles, i, v)
		has |= !strcmp(json_string_value(v), "revenue-approver");
	if (!has) {
		*why = "the approver lacks the revenue-approver role";
		return 1;
	}
	if (proposer_user_id && proposer_user_id[0] && !strcmp(proposer_user_id, user_id)) {
		*why = "the approver is the proposer";
		return 1;
	}
	return 0;
}

/* ---------------------------------------------------- representation */

static json_t *decision_json(struct store_rows *r)
{
	json_t *props = json_loads(store_text(r, 12), 0, NULL);
	json_t *receipts = json_loads(store_text(r, 13), 0, NULL), *written = json_array(), *rec;
	json_t *failure = store_is_null(r, 14) ? json_null() : json_loads(store_text(r, 14), 0, NULL);
	json_t *revert = json_null(), *short_rec = json_array();
	char url[128];
	size_t i;

	json_array_foreach(receipts, i, rec) {
		json_array_append(written, json_object_get(rec, "property"));
		json_array_append_new(short_rec, json_pack("{s:O, s:O, s:O}", "property",
							   json_object_get(rec, "property"), "pms_ref",
							   json_object_get(rec, "pms_ref"), "at",
							   json_object_get(rec, "at")));
	}
	/* After a revert, nothing of the decision stays written. */
	if (!strcmp(store_text(r, 1), "reverted") || !strcmp(store_text(r, 1), "failed")) {
		json_decref(written);
		written = json_array();
	}
	if (!store_is_null(r, 17))
		revert = json_pack("{s:s, s:s, s:o}", "reason", store_text(r, 15),
				   "approver_saml_subject", store_text(r, 16), "reverted_at",
				   jsonw_time(store_int(r, 17)));
	snprintf(url, sizeof url, "/rate-decisions/%s/audit-trail", store_text(r, 0));
	json_decref(receipts);
	return json_pack("{s:s, s:s, s:o, s:s, s:{s:s, s:s}, s:o, s:{s:s, s:s, s:s}, s:s, s:o,"
			 " s:o, s:s, s:o, s:o, s:o, s:o}",
			 "id", store_text(r, 0), "status", store_text(r, 1), "properties",
			 props ? props : json_array(), "room_type_code", store_text(r, 2),
			 "date_range", "from", store_text(r, 3), "to", store_text(r, 4),
			 "proposed_rate", money(store_text(r, 5), store_int(r, 6)), "governance",
			 "brand_ceiling_id", store_text(r, 7), "approver_saml_subject",
			 store_text(r, 8), "justification", store_text(r, 9), "proposed_by",
			 store_text(r, 10), "properties_written", written, "pms_write_receipts",
			 short_rec, "audit_trail_url", url, "failure", failure ? failure : json_null(),
			 "revert", revert, "created_at", jsonw_time(store_int(r, 11)), "updated_at",
			 jsonw_time(store_int(r, 18)));
}

#define DECISION_COLS                                                                        \
	"id, status, room_type_code, date_from, date_to, currency, minor_units,"             \
	" brand_ceiling_id, approver_saml_subject, justification, proposer, created_at,"     \
	" properties, receipts, failure, revert_reason, revert_approver, reverted_at,"       \
	" updated_at"

/* Loads one decision of the portfolio as JSON (and its property list).
 * Returns 1, 0 (no such decision in any portfolio), 2 (it belongs to another
 * portfolio), or < 0. */
static int load_decision(struct store_tx *tx, const char *pf, const char *id, json_t **out)
{
	struct store_rows *r;
	int rc, other = 0;

	*out = NULL;
	rc = store_query(tx, "SELECT " DECISION_COLS ", portfolio_id FROM rate_decisions WHERE id = $1",
			 (struct store_val[]){sv_text(id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		other = strcmp(store_text(r, 19), pf) != 0;
		if (!other)
			*out = decision_json(r);
	}
	store_rows_close(r);
	if (rc <= 0)
		return rc;
	return other ? 2 : (*out ? 1 : STORE_ERR);
}

/* Answers 404/403 for load_decision's 0/2 and the token-reach rule: every
 * property of the decision must be inside the token. Returns 1 to go on. */
static int decision_visible(struct ctx *c, int rc, const json_t *d)
{
	json_t *v;
	size_t i;

	if (rc == 0) {
		respond_error(c, ERR_NOT_FOUND, NULL, "no rate decision %s", ctx_param(c, 0));
		return 0;
	}
	if (rc == 2) {
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the rate decision belongs to another portfolio");
		return 0;
	}
	if (rc < 0) {
		respond_store_error(c, rc);
		return 0;
	}
	json_array_foreach(json_object_get(d, "properties"), i, v)
		if (!auth_property_allowed(&c->p, json_string_value(v)) ||
		    (c->property_header && strcmp(c->property_header, json_string_value(v)))) {
			respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
				      "the rate decision touches a property outside this token");
			return 0;
		}
	return 1;
}

static void respond_decision(struct ctx *c, int status, json_t *d)
{
	c->meta_sla_tier = 1;
	respond_data(c, status, d);
}

/* ------------------------------------------------------------- create */

struct target {
	char id[ID_MAX];
	char code[64];
	char brand[128];
	char currency[4];
};

struct ceiling {
	int found;
	char brand[128];
	char currency[4];
	int64_t max;
	json_t *room_types;
	int64_t from_days;
	int has_to;
	int64_t to_days;
};

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
	minor = json_integer_value(json_object_get(json_object_get(b, "proposed_rate"), "minor_units"));
	if (minor <= 0)
		validate_add_detail(details, "proposed_rate.minor_units", "must be a positive integer");
	if (blank(str(b, "governance.brand_ceiling_id")))
		validate_add_detail(details, "governance.brand_ceiling_id", "must not be empty");
	if (blank(str(b, "governance.approver_saml_subject")))
		validate_add_detail(details, "governance.approver_saml_subject", "must not be empty");
	if (blank(str(b, "governance.justification")))
		validate_add_detail(details, "governance.justification", "must not be empty");
}

static int load_ceiling(struct store_tx *tx, const char *pf, const char *id, struct ceiling *ce)
{
	struct store_rows *r;
	int rc;

	memset(ce, 0, sizeof *ce);
	rc = store_query(tx,
			 "SELECT brand, currency, max_minor_units, room_type_codes, valid_from, valid_to"
			 " FROM brand_ceilings WHERE portfolio_id = $1 AND id = $2",
			 (struct store_val[]){sv_text(pf), sv_text(id)}, 2, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		ce->found = 1;
		snprintf(ce->brand, sizeof ce->brand, "%s", store_text(r, 0));
		snprintf(ce->currency, sizeof ce->currency, "%s", store_text(r, 1));
		ce->max = store_int(r, 2);
		ce->room_types = json_loads(store_text(r, 3), 0, NULL);
		if (clock_parse_date(store_text(r, 4), &ce->from_days) < 0)
			ce->from_days = INT64_MAX; /* unreadable: nothing is inside */
		ce->has_to = !store_is_null(r, 5);
		if (ce->has_to && clock_parse_date(store_text(r, 5), &ce->to_days) < 0)
			ce->to_days = INT64_MIN;
	}
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

/* One property's ceiling check: a details object with passed and reasons. */
static json_t *ceiling_check(const struct target *t, const struct ceiling *ce, const char *ceiling_id,
			     const char *room, int64_t from, int64_t to, const char *currency,
			     int64_t minor)
{
	json_t *reasons = json_array(), *v;
	size_t i;
	int covered = 0;

	if (!ce->found) {
		json_array_append_new(reasons, json_string("no such brand ceiling in this portfolio"));
	} else {
		if (strcmp(t->brand, ce->brand))
			json_array_append_new(reasons, json_string("the property's brand is not the ceiling's brand"));
		json_array_foreach(ce->room_types, i, v)
			covered |= json_is_string(v) && !strcmp(json_string_value(v), room);
		if (json_array_size(ce->room_types) && !covered)
			json_array_append_new(reasons, json_string("the room type is not covered by the ceiling"));
		if (strcmp(currency, ce->currency))
			json_array_append_new(reasons, json_string("the currency is not the ceiling's currency"));
		if (strcmp(currency, t->currency))
			json_array_append_new(reasons, json_string("the currency is not the property's currency"));
		if (from < ce->from_days || (ce->has_to && to > ce->to_days))
			json_array_append_new(reasons, json_string("the dates are outside the ceiling's validity"));
		if (minor > ce->max)
			json_array_append_new(reasons, json_string("the proposed rate is above the ceiling"));
	}
	return json_pack("{s:s, s:s, s:s, s:o, s:o, s:b, s:o}", "property", t->id,
			 "pms_property_code", t->code, "ceiling", ceiling_id, "limit",
			 ce->found ? money(ce->currency, ce->max) : json_null(), "proposed",
			 money(currency, minor), "passed", json_array_size(reasons) == 0, "reasons",
			 reasons);
}

/* Loads the requested properties of the portfolio, in request order.
 * Returns 0, 1 (one is not in the portfolio: *bad = its index), or < 0. */
static int load_targets(struct store_tx *tx, const char *pf, const json_t *props,
			struct target *t, size_t *bad)
{
	struct store_rows *r;
	size_t i;
	int rc;

	for (i = 0; i < json_array_size(props); i++) {
		rc = store_query(tx,
				 "SELECT id, pms_property_code, brand, currency FROM properties"
				 " WHERE portfolio_id = $1 AND id = $2",
				 (struct store_val[]){sv_text(pf),
						      sv_text(json_string_value(json_array_get(props, i)))},
				 2, &r);
		if (rc != STORE_OK)
			return rc;
		rc = store_next(r);
		if (rc == 1) {
			snprintf(t[i].id, sizeof t[i].id, "%s", store_text(r, 0));
			snprintf(t[i].code, sizeof t[i].code, "%s", store_text(r, 1));
			snprintf(t[i].brand, sizeof t[i].brand, "%s", store_text(r, 2));
			snprintf(t[i].currency, sizeof t[i].currency, "%s", store_text(r, 3));
		}
		store_rows_close(r);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			*bad = i;
			return 1;
		}
	}
	return 0;
}

static int set_status(struct store_tx *tx, const char *id, const char *status,
		      const json_t *receipts, const json_t *failure)
{
	char *rs = receipts ? json_dumps(receipts, JSON_COMPACT) : NULL;
	char *fs = failure ? json_dumps(failure, JSON_COMPACT) : NULL;
	int rc;

	rc = store_exec(tx,
			"UPDATE rate_decisions SET status = $2, receipts = COALESCE($3, receipts),"
			" failure = $4, updated_at = $5 WHERE id = $1",
			(struct store_val[]){sv_text(id), sv_text(status), sv_text(rs), sv_text(fs),
					     sv_int(clock_now_ms())}, 5);
	free(rs);
	free(fs);
	return rc < 0 ? rc : 0;
}

/* Writes a rate to each of n properties (purpose names the idempotency
 * key's last part). On any failure, writes already made are compensated
 * with their previous rates. Fills w[]; comp[] says for each write made
 * whether it was compensated (1), had nothing to restore (2) or the
 * compensation itself failed (3). Returns 0 when all writes succeeded, 1
 * when any failed (and compensation was attempted), -1 on a local error. */
static int write_all(struct pms *pms, struct pms_write *w, size_t n, int *comp,
		     struct pms_write *cw)
{
	size_t i, k = 0;
	int failed = 0;

	if (pms_write_all(pms, w, n) < 0)
		return -1;
	for (i = 0; i < n; i++)
		failed |= !w[i].ok;
	if (!failed)
		return 0;
	for (i = 0; i < n; i++) {
		comp[i] = 0;
		if (!w[i].ok)
			continue;
		if (!w[i].has_previous) {
			comp[i] = 2;
			continue;
		}
		cw[k] = w[i];
		snprintf(cw[k].idempotency_key, sizeof cw[k].idempotency_key, "%.140s:compensate",
			 w[i].idempotency_key);
		cw[k].currency = w[i].prev_currency;
		cw[k].minor_units = w[i].prev_minor_units;
		cw[k].ok = 0;
		k++;
	}
	if (k && pms_write_all(pms, cw, k) < 0)
		return -1;
	for (i = 0, k = 0; i < n; i++) {
		if (!w[i].ok || comp[i] == 2)
			continue;
		comp[i] = cw[k].ok ? 1 : 3;
		k++;
	}
	return 1;
}

static json_t *write_entry(const struct target *t, const struct pms_write *w, const char *purpose)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:s}", "property", t->id,
			 "pms_property_code", t->code, "purpose", purpose, "pms_ref", w->pms_ref,
			 "at", w->at, "rate", money(w->currency, w->minor_units), "previous_rate",
			 w->has_previous ? money(w->prev_currency, w->prev_minor_units) : json_null(),
			 "idempotency_key", w->idempotency_key);
}

/* Records the outcome of a failed batch of writes in the trail and the
 * outbox (connection.d_edge.failed per failing property). Returns the
 * failure object (owned) or NULL on a store error. */
static json_t *record_failure(struct store_tx *tx, struct audit_chain *ch, const char *pf,
			      const char *decision_id, const struct target *t,
			      const struct pms_write *w, const int *comp, const struct pms_write *cw,
			      size_t n, const char *purpose, int64_t now)
{
	json_t *failed = json_array(), *d, *props, *data;
	size_t i, k = 0;
	int rc = 0;

	for (i = 0; i < n && rc == 0; i++) {
		if (!w[i].ok)
			continue;
		d = write_entry(&t[i], &w[i], purpose);
		rc = audit_append(tx, ch, "pms_write", "pms", d, now);
		json_decref(d);
	}
	for (i = 0; i < n && rc == 0; i++) {
		if (!w[i].ok || !comp[i])
			continue;
		if (comp[i] == 2)
			d = json_pack("{s:s, s:s, s:s}", "property", t[i].id, "result",
				      "nothing to restore: the PMS had no previous rate", "of_pms_ref",
				      w[i].pms_ref);
		else
			d = json_pack("{s:s, s:s, s:s, s:o, s:s?, s:s}", "property", t[i].id, "result",
				      comp[i] == 1 ? "restored" : "restore failed", "of_pms_ref",
				      w[i].pms_ref, "restored_rate",
				      money(w[i].prev_currency, w[i].prev_minor_units), "pms_ref",
				      comp[i] == 1 ? cw[k].pms_ref : NULL, "error",
				      comp[i] == 1 ? "" : cw[k].error);
		if (comp[i] != 2)
			k++;
		rc = audit_append(tx, ch, "pms_compensation", "pms", d, now);
		json_decref(d);
	}
	for (i = 0; i < n && rc == 0; i++) {
		if (w[i].ok)
			continue;
		json_array_append_new(failed, json_pack("{s:s, s:s, s:I, s:s}", "property", t[i].id,
							"pms_property_code", t[i].code,
							"http_status", (json_int_t)w[i].http_status,
							"error", w[i].error));
		props = json_pack("[s]", t[i].id);
		data = json_pack("{s:s, s:s, s:s, s:I, s:s}", "decision_id", decision_id,
				 "property_id", t[i].id, "pms_property_code", t[i].code,
				 "http_status", (json_int_t)w[i].http_status, "error", w[i].error);
		rc = outbox_append(tx, "v1", "connection.d_edge.failed", pf, props, data, NULL, 0);
		json_decref(props);
		json_decref(data);
	}
	if (rc < 0) {
		json_decref(failed);
		return NULL;
	}
	return json_pack("{s:s, s:o}", "stage", purpose, "failed_writes", failed);
}

static json_t *failure_details(const json_t *failure)
{
	json_t *details = json_array(), *f;
	size_t i;

	json_array_foreach(json_object_get(failure, "failed_writes"), i, f) {
		json_t *d = json_deep_copy(f);

		json_object_set_new(d, "field", json_string("properties"));
		json_object_set_new(d, "issue", json_string(json_string_value(json_object_get(f, "error"))));
		json_array_append_new(details, d);
	}
	return details;
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
	s = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (s) {
		buf_reset(&c->res->body);
		if (buf_puts(&c->res->body, s) < 0)
			log_msg(LOG_WARN, "rate_decision", "could not add decision_id to an error");
	}
	free(s);
	json_decref(body);
}

/* Takes the write lock again after the PMS writes and reads the tip of
 * the decision's chain. Returns 0, or -1 after answering (the caller
 * rolls *tx back, which may be NULL). */
static int reopen_chain(struct ctx *c, const char *id, struct store_tx **tx,
			struct audit_chain *ch)
{
	int rc = store_begin(c->svc->store, 1, tx);

	if (rc == STORE_OK && (rc = audit_open(*tx, id, ch)) == 0)
		return 0;
	respond_store_error(c, rc == STORE_OK ? STORE_ERR : rc);
	return -1;
}

/* Reads a decision back after its change committed, in a read transaction
 * left in *tx for the caller to roll back. Returns it, or NULL after
 * answering. */
static json_t *reload(struct ctx *c, const char *id, struct store_tx **tx)
{
	json_t *d = NULL;
	int rc = store_begin(c->svc->store, 0, tx);

	if (rc == STORE_OK && load_decision(*tx, c->p.portfolio_id, id, &d) == 1)
		return d;
	json_decref(d);
	respond_store_error(c, rc == STORE_OK ? STORE_ERR : rc);
	return NULL;
}

/* Prepares the next entry of ch into ent[*n] (details stolen). Returns 0
 * or -1. */
static int prepare_next(struct audit_chain *ch, const char *kind, const char *actor,
			json_t *details, int64_t now, struct audit_entry *ent, int *n)
{
	int rc = details ? audit_prepare(ch, kind, actor, details, now, &ent[*n]) : -1;

	json_decref(details);
	if (rc == 0)
		(*n)++;
	return rc;
}

/* Takes the write lock; on failure answers and returns -1. */
static int begin_write(struct ctx *c, struct store_tx **tx)
{
	int rc = store_begin(c->svc->store, 1, tx);

	if (rc == STORE_OK)
		return 0;
	*tx = NULL;
	respond_store_error(c, rc);
	return -1;
}

void rate_decision_h_create(struct ctx *c)
{
	const json_t *b = c->body, *props = json_object_get(b, "properties");
	const char *room = str(b, "room_type_code"), *from = str(b, "date_range.from");
	const char *to = str(b, "date_range.to"), *currency = str(b, "proposed_rate.currency");
	const char *ceiling_id = str(b, "governance.brand_ceiling_id");
	const char *approver = str(b, "governance.approver_saml_subject");
	int64_t minor = json_integer_value(json_object_get(json_object_get(b, "proposed_rate"), "minor_units"));
	size_t n = json_array_size(props), i, bad = 0;
	struct target t[MAX_PROPERTIES];
	struct pms_write w[MAX_PROPERTIES], cw[MAX_PROPERTIES];
	int comp[MAX_PROPERTIES];
	struct ceiling ce = {0};
	struct audit_chain ch;
	struct audit_entry ent[MAX_PROPERTIES + 3];
	int nent = 0, rejected;
	struct store_tx *tx = NULL;
	json_t *details = json_array(), *checks = json_array(), *roles = NULL, *d = NULL;
	json_t *final = NULL;
	json_t *receipts = NULL, *failure = NULL, *decision = NULL, *data = NULL;
	char id[ID_MAX], actor[300], proposer_name[300], approver_id[ID_MAX] = "";
	char *props_s = NULL;
	const char *why = NULL;
	int64_t df = 0, dt = 0, now = clock_now_ms();
	int rc, ceiling_ok = 1, outcome;

	rate_decision_check(b, details);
	if (json_array_size(details)) {
		respond_error(c, ERR_VALIDATION_FAILED, details, "the rate decision is not valid");
		details = NULL;
		goto out;
	}
	if (clock_parse_date(from, &df) < 0 || clock_parse_date(to, &dt) < 0) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error"); /* checked above */
		goto out;
	}
	for (i = 0; i < n; i++) {
		const char *pid = json_string_value(json_array_get(props, i));

		if (!auth_property_allowed(&c->p, pid) ||
		    (c->property_header && strcmp(c->property_header, pid))) {
			respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
				      "properties[%zu] is outside this token", i);
			goto out;
		}
	}
	/* Governance reads one consistent snapshot without the write lock;
	 * the lock is taken only for the inserts below. */
	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		tx = NULL;
		respond_store_error(c, rc);
		goto out;
	}
	rc = load_targets(tx, c->p.portfolio_id, props, t, &bad);
	if (rc == 1) {
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "properties[%zu] is not a property of this portfolio", bad);
		goto out;
	}
	if (rc < 0 || (rc = load_ceiling(tx, c->p.portfolio_id, ceiling_id, &ce)) < 0 ||
	    (rc = principal_actor(c, tx, actor, sizeof actor, proposer_name, sizeof proposer_name)) < 0) {
		respond_store_error(c, rc);
		goto out;
	}
	for (i = 0; i < n; i++) {
		json_t *chk = ceiling_check(&t[i], &ce, ceiling_id, room, df, dt, currency, minor);

		if (!json_is_true(json_object_get(chk, "passed"))) {
			json_t *reasons = json_object_get(chk, "reasons"), *dd;
			char field[48], issue[400] = "";
			size_t j;

			ceiling_ok = 0;
			for (j = 0; j < json_array_size(reasons); j++)
				snprintf(issue + strlen(issue), sizeof issue - strlen(issue), "%s%s",
					 j ? "; " : "", json_string_value(json_array_get(reasons, j)));
			snprintf(field, sizeof field, "properties[%zu]", i);
			dd = json_pack("{s:s, s:s, s:O, s:O, s:O, s:O}", "field", field, "issue", issue,
				       "property", json_object_get(chk, "property"), "ceiling",
				       json_object_get(chk, "ceiling"), "limit",
				       json_object_get(chk, "limit"), "proposed",
				       json_object_get(chk, "proposed"));
			json_array_append_new(details, dd);
		}
		json_array_append_new(checks, chk);
	}
	if (ceiling_ok) {
		rc = check_approver(tx, c->p.portfolio_id, approver, c->p.user_id, approver_id, &roles,
				    &why);
		if (rc < 0) {
			respond_store_error(c, rc);
			goto out;
		}
	}
	/* Record the decision and the governance outcome before any PMS call.
	 * The entries (JSON, hashes) are computed first; the write lock then
	 * covers only the inserts. A new decision's chain starts at genesis. */
	store_rollback(tx);
	tx = NULL;
	props_s = json_dumps(props, JSON_COMPACT);
	if (!props_s || id_new("rd_", id, sizeof id) < 0) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		goto out;
	}
	memset(&ch, 0, sizeof ch);
	snprintf(ch.decision_id, sizeof ch.decision_id, "%s", id);
	snprintf(ch.head, sizeof ch.head, "%s", AUDIT_GENESIS);
	rejected = !ceiling_ok || why;
	rc = prepare_next(&ch, "proposed", actor,
			  json_pack("{s:O, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:s}", "properties",
				    props, "room_type_code", room, "date_range", "from", from, "to", to,
				    "proposed_rate", money(currency, minor), "brand_ceiling_id",
				    ceiling_id, "approver_saml_subject", approver, "justification",
				    str(b, "governance.justification")),
			  now, ent, &nent);
	for (i = 0; i < n && rc == 0; i++)
		rc = prepare_next(&ch, "ceiling_check", "revops",
				  json_incref(json_array_get(checks, i)), now, ent, &nent);
	if (rc == 0 && rejected) {
		final = ceiling_ok ? json_pack("{s:s, s:s}", "code", "SVC-GOVERNANCE-REJECTED", "reason", why)
				   : json_pack("{s:s, s:O}", "code", "SVC-RATE-CEILING-EXCEEDED",
					       "failed_checks", details);
		rc = prepare_next(&ch, "rejected", "revops", json_incref(final), now, ent, &nent);
	} else if (rc == 0) {
		rc = prepare_next(&ch, "approved", approver,
				  json_pack("{s:s, s:s, s:O}", "approver_saml_subject", approver,
					    "user_id", approver_id, "roles", roles),
				  now, ent, &nent);
	}
	if (rc < 0) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		goto out;
	}
	if (begin_write(c, &tx) < 0)
		goto out;
	rc = store_exec(tx,
			"INSERT INTO rate_decisions (id, portfolio_id, status, room_type_code,"
			" date_from, date_to, currency, minor_units, brand_ceiling_id,"
			" approver_saml_subject, justification, proposer, properties, created_at,"
			" updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,"
			" $14, $14)",
			(struct store_val[]){sv_text(id), sv_text(c->p.portfolio_id),
					     sv_text(rejected ? "rejected" : "pending"),
					     sv_text(room), sv_text(from), sv_text(to), sv_text(currency),
					     sv_int(minor), sv_text(ceiling_id), sv_text(approver),
					     sv_text(str(b, "governance.justification")), sv_text(actor),
					     sv_text(props_s), sv_int(now)}, 14);
	for (i = 0; i < (size_t)nent && rc >= 0; i++)
		rc = audit_insert(tx, id, &ent[i]);
	if (rc >= 0 && rejected)
		rc = set_status(tx, id, "rejected", NULL, final);
	rc = store_finish(tx, rc);
	tx = NULL;
	if (rc != STORE_OK) {
		respond_store_error(c, rc);
		goto out;
	}
	if (rejected) {
		if (!ceiling_ok) {
			respond_decision_error(c, ERR_RATE_CEILING_EXCEEDED, details, id,
					       "the proposed rate fails the brand ceiling; nothing was "
					       "written to any PMS");
			details = NULL;
		} else {
			json_t *gd = json_pack("[{s:s, s:s}]", "field", "governance.approver_saml_subject",
					       "issue", why);

			respond_decision_error(c, ERR_GOVERNANCE_REJECTED, gd, id, why);
		}
		goto out;
	}

	/* The PMS writes, outside any transaction. */
	memset(w, 0, sizeof w);
	for (i = 0; i < n; i++) {
		w[i].property_code = t[i].code;
		w[i].room_type_code = room;
		w[i].from = from;
		w[i].to = to;
		w[i].currency = currency;
		w[i].minor_units = minor;
		snprintf(w[i].idempotency_key, sizeof w[i].idempotency_key, "%.60s:%.60s:publish", id,
			 t[i].id);
	}
	outcome = write_all(c->svc->pms, w, n, comp, cw);
	now = clock_now_ms();
	if (outcome < 0) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		goto out;
	}
	if (outcome == 1) {
		if (reopen_chain(c, id, &tx, &ch) < 0)
			goto out;
		failure = record_failure(tx, &ch, c->p.portfolio_id, id, t, w, comp, cw, n, "publish",
					 now);
		rc = failure ? audit_append(tx, &ch, "failed", "revops", failure, now) : STORE_ERR;
		if (rc == 0)
			rc = set_status(tx, id, "failed", NULL, failure);
		rc = store_finish(tx, rc);
		tx = NULL;
		if (rc != STORE_OK) {
			respond_store_error(c, rc);
			goto out;
		}
		respond_decision_error(c, ERR_PMS_WRITE_FAILED, failure_details(failure), id,
				       "a PMS write failed; the writes already made were compensated");
		goto out;
	}
	/* Success: the chain's tip is still the one computed above (no one
	 * else appends to a pending decision), so these entries too are
	 * prepared before taking the write lock. */
	for (i = 0; i < (size_t)nent; i++)
		audit_entry_free(&ent[i]);
	nent = 0;
	rc = 0;
	receipts = json_array();
	for (i = 0; i < n && rc == 0; i++) {
		json_array_append_new(receipts,
				      json_pack("{s:s, s:s, s:s, s:s, s:o}", "property", t[i].id,
						"pms_property_code", t[i].code, "pms_ref", w[i].pms_ref,
						"at", w[i].at, "previous_rate",
						w[i].has_previous ? money(w[i].prev_currency, w[i].prev_minor_units)
								  : json_null()));
		rc = prepare_next(&ch, "pms_write", "pms", write_entry(&t[i], &w[i], "publish"), now,
				  ent, &nent);
	}
	data = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:s}", "decision_id", id, "room_type_code",
			 room, "date_range", "from", from, "to", to, "approver_saml_subject", approver,
			 "brand_ceiling_id", ceiling_id);
	if (rc == 0)
		rc = prepare_next(&ch, "published", "revops",
				  json_pack("{s:O}", "properties_written", props), now, ent, &nent);
	if (rc < 0) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		goto out;
	}
	if (begin_write(c, &tx) < 0)
		goto out;
	for (i = 0; i < (size_t)nent && rc >= 0; i++)
		rc = audit_insert(tx, id, &ent[i]);
	if (rc >= 0)
		rc = set_status(tx, id, "published", receipts, NULL);
	if (rc >= 0)
		rc = outbox_append(tx, "v2", "rate.decision.published", c->p.portfolio_id, props, data,
				   NULL, 0);
	rc = store_finish(tx, rc);
	tx = NULL;
	if (rc != STORE_OK) {
		respond_store_error(c, rc);
		goto out;
	}
	{
		/* The spec's response: id, status, properties_written,
		 * audit_trail_url, pms_write_receipts (built from what was just
		 * committed, without reading it back). */
		json_t *short_rec = json_array(), *rec;
		char url[128];

		json_array_foreach(receipts, i, rec)
			json_array_append_new(short_rec,
					      json_pack("{s:O, s:O, s:O}", "property",
							json_object_get(rec, "property"), "pms_ref",
							json_object_get(rec, "pms_ref"), "at",
							json_object_get(rec, "at")));
		snprintf(url, sizeof url, "/rate-decisions/%s/audit-trail", id);
		respond_decision(c, 201,
				 json_pack("{s:s, s:s, s:O, s:s, s:o}", "id", id, "status", "published",
					   "properties_written", props, "audit_trail_url", url,
					   "pms_write_receipts", short_rec));
	}
out:
	store_rollback(tx);
	json_decref(details);
	json_decref(checks);
	json_decref(roles);
	json_decref(d);
	json_decref(receipts);
	json_decref(failure);
	json_decref(decision);
	json_decref(data);
	json_decref(ce.room_types);
	json_decref(final);
	for (i = 0; i < (size_t)nent; i++)
		audit_entry_free(&ent[i]);
	free(props_s);
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
	rc = load_decision(tx, c->p.portfolio_id, ctx_param(c, 0), &d);
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
	rc = load_decision(tx, c->p.portfolio_id, ctx_param(c, 0), &d);
	if (rc == 1 && (rc = audit_load(tx, ctx_param(c, 0), &trail)) == 0)
		rc = STORE_ERR; /* a decision always has a trail */
	store_rollback(tx);
	if (decision_visible(c, rc < 0 ? rc : (rc == 1 ? 1 : rc), d)) {
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
	json_t *d = decision_json(r), *v;
	size_t i;
	int ok = 1;

	(void)tx;
	json_array_foreach(json_object_get(d, "properties"), i, v)
		ok &= auth_property_allowed(&c->p, json_string_value(v)) &&
		      (!c->property_header || !strcmp(c->property_header, json_string_value(v)));
	if (!ok) {
		json_decref(d);
		return NULL;
	}
	snprintf(key, keycap, "%s", store_text(r, 0));
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
	rc = store_query(tx,
			 "SELECT " DECISION_COLS " FROM rate_decisions WHERE portfolio_id = $1"
			 " AND id > $2 AND ($3 = '' OR status = $3) ORDER BY id",
			 (struct store_val[]){sv_text(c->p.portfolio_id), sv_text(after),
					      sv_text(status ? status : "")}, 3, &r);
	c->meta_sla_tier = 1;
	respond_rows_page(c, tx, rc, r, limit, scope, decision_row, c);
}

/* ---------------------------------------------------------- revert */

/* Loads the receipts and targets of a published decision for a revert.
 * Returns the number of receipts (>= 0) or < 0. */
static int load_receipts(struct store_tx *tx, const char *id, struct target *t,
			 struct pms_write *w, json_t **receipts, json_t **row)
{
	struct store_rows *r;
	json_t *rec;
	size_t i, n;
	int rc;

	*receipts = NULL;
	*row = NULL;
	rc = store_query(tx,
			 "SELECT receipts, room_type_code, date_from, date_to, currency, minor_units"
			 " FROM rate_decisions WHERE id = $1",
			 (struct store_val[]){sv_text(id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		*receipts = json_loads(store_text(r, 0), 0, NULL);
		*row = json_pack("{s:s, s:s, s:s, s:s, s:I}", "room", store_text(r, 1), "from",
				 store_text(r, 2), "to", store_text(r, 3), "currency", store_text(r, 4),
				 "minor", (json_int_t)store_int(r, 5));
	}
	store_rows_close(r);
	if (rc <= 0 || !json_is_array(*receipts) || !*row)
		return rc < 0 ? rc : STORE_ERR;
	n = json_array_size(*receipts);
	if (n > MAX_PROPERTIES)
		return STORE_ERR;
	memset(w, 0, n * sizeof *w);
	json_array_foreach(*receipts, i, rec) {
		json_t *prev = json_object_get(rec, "previous_rate");

		snprintf(t[i].id, sizeof t[i].id, "%s", json_string_value(json_object_get(rec, "property")));
		snprintf(t[i].code, sizeof t[i].code, "%s",
			 json_string_value(json_object_get(rec, "pms_property_code")));
		w[i].has_previous = json_is_object(prev);
		if (w[i].has_previous) {
			snprintf(w[i].prev_currency, sizeof w[i].prev_currency, "%s",
				 json_string_value(json_object_get(prev, "currency")));
			w[i].prev_minor_units = json_integer_value(json_object_get(prev, "minor_units"));
		}
	}
	return (int)n;
}

void rate_decision_h_revert(struct ctx *c)
{
	const char *id = ctx_param(c, 0), *reason = str(c->body, "reason");
	const char *approver = str(c->body, "approver_saml_subject"), *why = NULL;
	struct target t[MAX_PROPERTIES], rt[MAX_PROPERTIES];
	struct pms_write w[MAX_PROPERTIES], rw[MAX_PROPERTIES], cw[MAX_PROPERTIES];
	int comp[MAX_PROPERTIES];
	struct audit_chain ch;
	struct store_tx *tx = NULL;
	json_t *d = NULL, *receipts = NULL, *row = NULL, *roles = NULL, *failure = NULL, *data;
	json_t *restored = json_array(), *skipped = json_array();
	char actor[300], proposer_name[300], approver_id[ID_MAX], at[CLOCK_RFC3339_LEN];
	size_t i, k = 0;
	int rc, n, outcome;
	int64_t now = clock_now_ms();

	if (blank(reason) || blank(approver)) {
		json_t *det = json_array();

		if (blank(reason))
			validate_add_detail(det, "reason", "must not be empty");
		if (blank(approver))
			validate_add_detail(det, "approver_saml_subject", "must not be empty");
		respond_error(c, ERR_VALIDATION_FAILED, det, "the revert is not valid");
		goto out;
	}
	if ((rc = store_begin(c->svc->store, 1, &tx)) != STORE_OK) {
		tx = NULL;
		respond_store_error(c, rc);
		goto out;
	}
	rc = load_decision(tx, c->p.portfolio_id, id, &d);
	if (!decision_visible(c, rc, d))
		goto out;
	if (strcmp(json_string_value(json_object_get(d, "status")), "published")) {
		respond_error(c, ERR_CONFLICT, NULL, "only a published decision can be reverted (it is %s)",
			      json_string_value(json_object_get(d, "status")));
		goto out;
	}
	if ((rc = principal_actor(c, tx, actor, sizeof actor, proposer_name, sizeof proposer_name)) < 0 ||
	    (rc = check_approver(tx, c->p.portfolio_id, approver, c->p.user_id, approver_id, &roles,
				 &why)) < 0) {
		respond_store_error(c, rc);
		goto out;
	}
	if (why) {
		respond_error(c, ERR_GOVERNANCE_REJECTED,
			      json_pack("[{s:s, s:s}]", "field", "approver_saml_subject", "issue", why),
			      "%s", why);
		goto out;
	}
	n = load_receipts(tx, id, t, w, &receipts, &row);
	store_rollback(tx);
	tx = NULL;
	if (n < 0) {
		respond_store_error(c, n);
		goto out;
	}
	/* Write each property's previous rate back; properties that had none
	 * are left as the decision wrote them and listed as such. */
	memset(rw, 0, sizeof rw);
	for (i = 0; i < (size_t)n; i++) {
		if (!w[i].has_previous) {
			json_array_append_new(skipped, json_string(t[i].id));
			continue;
		}
		rt[k] = t[i];
		rw[k].property_code = rt[k].code;
		rw[k].room_type_code = json_string_value(json_object_get(row, "room"));
		rw[k].from = json_string_value(json_object_get(row, "from"));
		rw[k].to = json_string_value(json_object_get(row, "to"));
		rw[k].currency = w[i].prev_currency;
		rw[k].minor_units = w[i].prev_minor_units;
		snprintf(rw[k].idempotency_key, sizeof rw[k].idempotency_key, "%.60s:%.60s:revert", id,
			 t[i].id);
		k++;
	}
	outcome = write_all(c->svc->pms, rw, k, comp, cw);
	now = clock_now_ms();
	if (outcome < 0) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		goto out;
	}
	if (reopen_chain(c, id, &tx, &ch) < 0)
		goto out;
	/* Compensation of a failed revert writes the decision's rate back. */
	if (outcome == 1) {
		failure = record_failure(tx, &ch, c->p.portfolio_id, id, rt, rw, comp, cw, k, "revert",
					 now);
		rc = failure ? audit_append(tx, &ch, "failed", "revops", failure, now) : STORE_ERR;
		rc = store_finish(tx, rc);
		tx = NULL;
		if (rc != STORE_OK) {
			respond_store_error(c, rc);
			goto out;
		}
		respond_decision_error(c, ERR_PMS_WRITE_FAILED, failure_details(failure), id,
				       "a PMS write of the revert failed; the decision stays published");
		goto out;
	}
	rc = store_query_int(tx, "SELECT 1 FROM rate_decisions WHERE id = $1 AND status = 'published'",
			     (struct store_val[]){sv_text(id)}, 1, &(int64_t){0});
	if (rc == 0) {
		respond_error(c, ERR_CONFLICT, NULL, "the decision was reverted meanwhile");
		goto out;
	}
	for (i = 0; i < k && rc >= 0; i++) {
		json_t *e = write_entry(&rt[i], &rw[i], "revert");

		json_array_append_new(restored, json_string(rt[i].id));
		rc = audit_append(tx, &ch, "pms_write", "pms", e, now);
		json_decref(e);
	}
	clock_format_ms(now, at);
	if (rc >= 0) {
		json_t *e = json_pack("{s:s, s:s, s:s, s:O, s:O, s:O}", "reason", reason,
				      "approver_saml_subject", approver, "requested_by", actor,
				      "restored", restored, "not_restored_no_previous_rate", skipped,
				      "approver_roles", roles);

		rc = audit_append(tx, &ch, "reverted", approver, e, now);
		json_decref(e);
	}
	if (rc >= 0)
		rc = store_exec(tx,
				"UPDATE rate_decisions SET status = 'reverted', revert_reason = $2,"
				" revert_approver = $3, reverted_at = $4, updated_at = $4 WHERE id = $1",
				(struct store_val[]){sv_text(id), sv_text(reason), sv_text(approver),
						     sv_int(now)}, 4);
	if (rc >= 0) {
		data = json_pack("{s:s, s:s, s:s, s:s}", "decision_id", id, "reason", reason,
				 "approver_saml_subject", approver, "reverted_at", at);
		rc = outbox_append(tx, "v2", "rate.decision.reverted", c->p.portfolio_id,
				   json_object_get(d, "properties"), data, NULL, 0);
		json_decref(data);
	}
	rc = store_finish(tx, rc);
	tx = NULL;
	if (rc != STORE_OK) {
		respond_store_error(c, rc);
		goto out;
	}
	json_decref(d);
	d = NULL;
	if (!(d = reload(c, id, &tx)))
		goto out;
	respond_decision(c, 200, d);
	d = NULL;
out:
	store_rollback(tx);
	json_decref(d);
	json_decref(receipts);
	json_decref(row);
	json_decref(roles);
	json_decref(failure);
	json_decref(restored);
	json_decref(skipped);
}

int rate_decision_recover(struct store *st)
{
	struct store_tx *tx;
	struct store_rows *r;
	struct audit_chain ch;
	json_t *ids = json_array(), *v, *d;
	int64_t now = clock_now_ms();
	size_t i;
	int rc;

	if (store_begin(st, 1, &tx) != STORE_OK) {
		json_decref(ids);
		return -1;
	}
	rc = store_query(tx, "SELECT id FROM rate_decisions WHERE status = 'pending'", NULL, 0, &r);
	if (rc == STORE_OK) {
		while ((rc = store_next(r)) == 1)
			json_array_append_new(ids, json_string(store_text(r, 0)));
		store_rows_close(r);
	}
	d = json_pack("{s:s, s:s}", "stage", "publish", "reason",
		      "interrupted: the server stopped during the PMS writes; their outcome is "
		      "unknown and nothing was compensated");
	json_array_foreach(ids, i, v) {
		if (rc < 0)
			break;
		rc = audit_open(tx, json_string_value(v), &ch);
		if (rc == 0)
			rc = audit_append(tx, &ch, "failed", "revops", d, now);
		if (rc == 0)
			rc = set_status(tx, json_string_value(v), "failed", NULL, d);
	}
	json_decref(d);
	if (rc < 0) {
		store_rollback(tx);
		json_decref(ids);
		return -1;
	}
	rc = store_commit(tx) == STORE_OK ? (int)json_array_size(ids) : -1;
	json_decref(ids);
	return rc;
}

static const struct route routes[] = {
	ROUTE_V2_JSON("POST", "/v2/rate-decisions", rate_decision_h_create, AUTH_SCOPE_RATES_WRITE,
		      rate_decision_spec),
	ROUTE_V2("GET", "/v2/rate-decisions", rate_decision_h_list, AUTH_SCOPE_RATES_READ),
	ROUTE_V2("GET", "/v2/rate-decisions/{id}", rate_decision_h_get, AUTH_SCOPE_RATES_READ),
	ROUTE_V2("GET", "/v2/rate-decisions/{id}/audit-trail", rate_decision_h_audit,
		 AUTH_SCOPE_RATES_READ),
	ROUTE_V2_JSON("POST", "/v2/rate-decisions/{id}/revert", rate_decision_h_revert,
		      AUTH_SCOPE_RATES_WRITE, rate_revert_spec),
};
const struct route_table rate_decision_routes = ROUTE_TABLE(routes);
