#include "rates/suggestion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/jsonw.h"
#include "events/outbox.h"
#include "identity/directory.h"
#include "pms/pms.h"
#include "portfolio/portfolio.h"
#include "rates/audit_trail.h"
#include "rates/floors.h"
#include "rates/governance.h"
#include "store/store.h"

/* ------------------------------------------------------ the table */

#define SUGGESTION_COLS                                                                \
	"id, status, property_id, room_type_code, stay_date, currency, current_minor," \
	" proposed_minor, trigger_text, decided_by, decided_at, reason, booking_ref,"  \
	" booking_at, created_at, updated_at, portfolio_id, claim_until"

static json_t *trail_url(const char *id)
{
	char url[128];

	snprintf(url, sizeof url, "/rate-suggestions/%s/audit-trail", id);
	return json_string(url);
}

json_t *suggestion_from_row(struct store_rows *r)
{
	json_t *decision = json_null(), *booking = json_null();

	if (!store_is_null(r, 10))
		decision = json_pack("{s:s, s:o, s:o}", "by", store_text(r, 9), "at",
				     jsonw_time(store_int(r, 10)), "reason",
				     store_is_null(r, 11) ? json_null()
							  : json_string(store_text(r, 11)));
	if (!store_is_null(r, 12))
		booking = json_pack("{s:s, s:s}", "ref", store_text(r, 12), "at", store_text(r, 13));
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:o}", "id",
			 store_text(r, 0), "status", store_text(r, 1), "property_id",
			 store_text(r, 2), "room_type_code", store_text(r, 3), "date",
			 store_text(r, 4), "current_rate",
			 governance_money(store_text(r, 5), store_int(r, 6)), "proposed_rate",
			 governance_money(store_text(r, 5), store_int(r, 7)), "trigger",
			 store_text(r, 8), "decision", decision ? decision : json_null(),
			 "booking_engine", booking ? booking : json_null(), "audit_trail_url",
			 trail_url(store_text(r, 0)), "created_at", jsonw_time(store_int(r, 14)),
			 "updated_at", jsonw_time(store_int(r, 15)));
}

const char *suggestion_row_id(struct store_rows *r)
{
	return store_text(r, 0);
}

int suggestion_create(struct store_tx *tx, const char *pf, const struct suggestion_new *s,
		      int64_t now, struct outbox_later **later, char *id_out)
{
	struct audit_chain ch = {.seq = 0, .head = AUDIT_GENESIS};
	json_t *data = NULL, *props = NULL, *details = NULL;
	int rc;

	if (id_new("rs_", id_out, ID_MAX) < 0)
		return STORE_ERR;
	rc = store_send_row(
		tx,
		"INSERT INTO rate_suggestions (id, portfolio_id, property_id, room_type_code,"
		" stay_date, currency, current_minor, proposed_minor, trigger_text, status,"
		" created_at, updated_at)",
		"", 12,
		(struct store_val[]){sv_text(id_out), sv_text(pf), sv_text(s->property_id),
				     sv_text(s->room_type_code), sv_text(s->date),
				     sv_text(s->currency), sv_int(s->current_minor),
				     sv_int(s->proposed_minor), sv_text(s->trigger),
				     sv_text("pending_approval"), sv_int(now), sv_int(now)});
	if (rc < 0)
		return rc;
	data = json_pack("{s:s, s:s, s:s, s:o, s:o, s:s}", "suggestion_id", id_out,
			 "room_type_code", s->room_type_code, "date", s->date, "current_rate",
			 governance_money(s->currency, s->current_minor), "proposed_rate",
			 governance_money(s->currency, s->proposed_minor), "trigger", s->trigger);
	props = json_pack("[s]", s->property_id);
	details = json_pack("{s:s, s:O}", "property_id", s->property_id, "suggestion", data);
	snprintf(ch.decision_id, sizeof ch.decision_id, "%s", id_out);
	rc = data && props && details ? 0 : STORE_ERR;
	if (rc == 0)
		rc = audit_append(tx, &ch, "suggested", s->actor, details, now);
	if (rc == 0)
		rc = outbox_later_add(later, "v1", "rate.suggested", pf, props, data, NULL, 0);
	json_decref(data);
	json_decref(props);
	json_decref(details);
	return rc;
}

static void *api_row(struct store_rows *r)
{
	return suggestion_from_row(r);
}

#define SUGGESTION_BY_ID "SELECT " SUGGESTION_COLS " FROM rate_suggestions WHERE id = $1"

int suggestion_load(struct store_tx *tx, const char *pf, const char *id, json_t **out)
{
	void *v;
	int rc = store_get_owned(tx, SUGGESTION_BY_ID, id, 16, pf, api_row, &v);

	*out = v;
	return rc;
}

int suggestion_list(struct store_tx *tx, const char *pf, const char *after,
		    const struct suggestion_filter *f, int limit, struct store_rows **rows)
{
	struct store_sql q = {.len = 0};

	store_sql_page(&q, "SELECT " SUGGESTION_COLS " FROM rate_suggestions", pf, after);
	store_sql_eq(&q, "status", f->status);
	store_sql_eq(&q, "property_id", f->property_id);
	if (f->date_from && *f->date_from)
		store_sql_add(&q, " AND stay_date >= $#", sv_text(f->date_from));
	if (f->date_to && *f->date_to)
		store_sql_add(&q, " AND stay_date <= $#", sv_text(f->date_to));
	return store_sql_page_end(tx, &q, f->props, f->nprops, limit, rows);
}

/* ------------------------------------------------------ deciding */

/* What a decision reads of a suggestion. */
struct pending {
	char property_id[ID_MAX], room[64], date[16], currency[4], status[24];
	int64_t proposed, claim_until;
};

/* A row as a new struct pending (free() it), or NULL. */
static void *pending_from_row(struct store_rows *r)
{
	struct pending *p = calloc(1, sizeof *p);

	if (!p)
		return NULL;
	snprintf(p->status, sizeof p->status, "%s", store_text(r, 1));
	snprintf(p->property_id, sizeof p->property_id, "%s", store_text(r, 2));
	snprintf(p->room, sizeof p->room, "%s", store_text(r, 3));
	snprintf(p->date, sizeof p->date, "%s", store_text(r, 4));
	snprintf(p->currency, sizeof p->currency, "%s", store_text(r, 5));
	p->proposed = store_int(r, 7);
	p->claim_until = store_is_null(r, 17) ? 0 : store_int(r, 17);
	return p;
}

/* One decision under way. */
struct decide {
	const struct suggestion_who *who;
	const char *id, *reason;
	int approve;
	struct pending s;
	struct portfolio_property prop;
	char actor[320], user_name[300], user_id[ID_MAX];
	json_t *roles, *checks, *failed;
	struct pms_write w;
	int64_t now;
};

/* Checks who may act on the suggestion: its portfolio, property reach
 * and an active revenue-approver. Returns 0, 1 (out set) or < 0. */
static int check_actor(struct store_tx *tx, struct decide *d, struct suggestion_outcome *out)
{
	const char *why = NULL;
	void *row;
	int rc = store_get_owned(tx, SUGGESTION_BY_ID, d->id, 16, d->who->portfolio_id,
				 pending_from_row, &row);

	if (rc <= 0 || rc == 2) {
		out->result = rc == 0 ? SUGGESTION_NOT_FOUND : SUGGESTION_OTHER_PORTFOLIO;
		return rc < 0 ? rc : 1;
	}
	d->s = *(struct pending *)row;
	free(row);
	out->result = SUGGESTION_OUT_OF_REACH;
	if (!d->who->reaches(d->who->arg, d->s.property_id)) {
		out->body = json_pack("{s:s}", "property_id", d->s.property_id);
		return 1;
	}
	out->result = SUGGESTION_NOT_APPROVER;
	if (!d->who->user_id[0]) {
		snprintf(out->why, sizeof out->why,
			 "only a user with role revenue-approver may decide a suggestion; this "
			 "token is a client's");
		return 1;
	}
	rc = directory_user_name(tx, d->who->portfolio_id, d->who->user_id, d->user_name,
				 sizeof d->user_name);
	if (rc == 0)
		rc = governance_check_approver(tx, d->who->portfolio_id, d->user_name, NULL,
					       d->user_id, &d->roles, &why);
	if (rc < 0)
		return rc;
	if (rc == 1 || why) {
		snprintf(out->why, sizeof out->why, "%s",
			 why ? why : "the user is not a user of this portfolio");
		return 1;
	}
	snprintf(d->actor, sizeof d->actor, "user:%s", d->user_name);
	out->result = SUGGESTION_DONE;
	return 0;
}

/* 409 unless the suggestion is pending, unclaimed and not yet past its
 * date. Returns 0, 1 (out set) or 2 (out set: it has just expired). */
static int check_pending(struct decide *d, const char *today, struct suggestion_outcome *out)
{
	snprintf(out->status, sizeof out->status, "%s", d->s.status);
	out->result = SUGGESTION_CONFLICT;
	if (strcmp(d->s.status, "pending_approval")) {
		snprintf(out->why, sizeof out->why,
			 "only a suggestion pending approval can be %s (it is %s)",
			 d->approve ? "approved" : "rejected", d->s.status);
		return 1;
	}
	if (d->s.claim_until > d->now) {
		snprintf(out->why, sizeof out->why,
			 "an approval of this suggestion is pushing its rate right now");
		return 1;
	}
	if (strcmp(d->s.date, today) < 0) {
		snprintf(out->why, sizeof out->why,
			 "the suggestion's date %s has passed; it has expired", d->s.date);
		snprintf(out->status, sizeof out->status, "expired");
		return 2;
	}
	out->result = SUGGESTION_DONE;
	return 0;
}

/* Marks suggestion id expired inside tx, with its trail entry. */
static int expire_one(struct store_tx *tx, const char *id, int64_t now)
{
	struct audit_chain ch;
	json_t *why = json_pack("{s:s}", "reason", "not acted on before its date passed");
	int rc = why ? store_exec(tx,
				  "UPDATE rate_suggestions SET status = 'expired', updated_at = $2"
				  " WHERE id = $1",
				  (struct store_val[]){sv_text(id), sv_int(now)}, 2)
		     : STORE_ERR;

	if (rc >= 0)
		rc = audit_open(tx, id, &ch);
	if (rc >= 0)
		rc = audit_append(tx, &ch, "expired", "revops", why, now);
	json_decref(why);
	return rc < 0 ? rc : 0;
}

/* A ceiling of the property's brand that covers the room type and day. */
static int covers(const struct portfolio_ceiling *ce, const struct decide *d, int64_t day)
{
	json_t *v;
	size_t i;
	int room = json_array_size(ce->room_types) == 0;

	if (strcmp(ce->brand, d->prop.brand) || day < ce->from_days ||
	    (ce->has_to && day > ce->to_days))
		return 0;
	json_array_foreach(ce->room_types, i, v)
		room |= !strcmp(json_string_value(v), d->s.room);
	return room;
}

struct ceiling_walk {
	struct decide *d;
	int64_t day;
};

static int check_one_ceiling(void *arg, struct portfolio_ceiling *ce)
{
	struct ceiling_walk *cw = arg;
	struct decide *d = cw->d;
	struct governance_rate rate = {ce->id,  d->s.room,     cw->day,
				       cw->day, d->s.currency, d->s.proposed};
	json_t *chk;

	if (covers(ce, d, cw->day)) {
		chk = governance_ceiling_check(&d->prop, ce, &rate);
		if (!json_is_true(json_object_get(chk, "passed")))
			json_array_append(d->failed, chk);
		json_array_append_new(d->checks, chk);
	}
	portfolio_ceiling_free(ce);
	return 0;
}

/* Checks every brand ceiling covering the suggestion (at least one must):
 * d->checks, failures in d->failed. Returns 0 or < 0. */
static int check_ceilings(struct store_tx *tx, struct decide *d)
{
	struct ceiling_walk cw = {d, 0};
	char issue[400];
	int rc;

	if (clock_parse_date(d->s.date, &cw.day) < 0)
		return STORE_ERR;
	rc = portfolio_property_get(tx, d->who->portfolio_id, d->s.property_id, &d->prop);
	if (rc <= 0)
		return rc < 0 ? rc : STORE_ERR;
	if ((rc = portfolio_each_ceiling(tx, d->who->portfolio_id, check_one_ceiling, &cw)) < 0)
		return rc;
	if (!json_array_size(d->checks)) {
		snprintf(issue, sizeof issue,
			 "no brand ceiling of brand %s covers room type %s on %s", d->prop.brand,
			 d->s.room, d->s.date);
		json_array_append_new(d->failed,
				      json_pack("{s:s, s:s, s:n, s:n, s:o, s:b, s:[s]}", "property",
						d->prop.id, "pms_property_code", d->prop.code,
						"ceiling", "limit", "proposed",
						governance_money(d->s.currency, d->s.proposed),
						"passed", 0, "reasons", issue));
	}
	return 0;
}

/* Appends the entries of kinds[i] with details dets[i] (stolen) to the
 * trail of d->id inside tx. Returns 0 or < 0. */
static int append_entries(struct store_tx *tx, struct decide *d, const char *actor,
			  const char *kind, json_t *details)
{
	struct audit_chain ch;
	int rc = details ? audit_open(tx, d->id, &ch) : STORE_ERR;

	if (rc == 0)
		rc = audit_append(tx, &ch, kind, actor, details, d->now);
	json_decref(details);
	return rc;
}

/* Records the ceiling checks and, for a refusal, why; the suggestion stays
 * pending. Returns 0 or < 0. */
static int record_checks(struct store_tx *tx, struct decide *d)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < json_array_size(d->checks) && rc == 0; i++)
		rc = append_entries(tx, d, "revops", "ceiling_check",
				    json_incref(json_array_get(d->checks, i)));
	if (rc == 0 && json_array_size(d->failed))
		rc = append_entries(tx, d, d->actor, "approval_refused",
				    json_pack("{s:s, s:O}", "code", "SVC-RATE-CEILING-EXCEEDED",
					      "failed_checks", d->failed));
	return rc;
}

/* Takes (claim 1) or releases (0) the suggestion for an approval's push.
 * Returns 1 when taken, 0 when someone else acted first, or < 0. */
static int set_claim(struct store_tx *tx, struct decide *d, int claim)
{
	if (!claim)
		return store_exec(tx, "UPDATE rate_suggestions SET claim_until = NULL WHERE id = $1",
				  (struct store_val[]){sv_text(d->id)}, 1);
	return store_exec(tx,
			  "UPDATE rate_suggestions SET claim_until = $2 WHERE id = $1 AND status ="
			  " 'pending_approval' AND (claim_until IS NULL OR claim_until <= $3)",
			  (struct store_val[]){sv_text(d->id), sv_int(d->now + SUGGESTION_CLAIM_MS),
					       sv_int(d->now)},
			  3);
}

/* Governs an approval under the write lock: the ceilings, recorded in the
 * trail; when they pass, the suggestion is claimed for the push. Returns
 * 0 (claimed), 1 (out set) or < 0. */
static int approve_check(struct store_tx *tx, struct decide *d, struct suggestion_outcome *out)
{
	int rc = check_ceilings(tx, d);

	if (rc == 0)
		rc = record_checks(tx, d);
	if (rc < 0)
		return rc;
	if (json_array_size(d->failed)) {
		json_t *chk;
		size_t i;

		out->result = SUGGESTION_CEILING_EXCEEDED;
		out->body = json_array();
		json_array_foreach(d->failed, i, chk)
			json_array_append_new(out->body,
					      governance_ceiling_detail(chk, "proposed_rate"));
		return 1;
	}
	rc = set_claim(tx, d, 1);
	return rc < 0 ? rc : (rc == 1 ? 0 : STORE_ERR);
}

/* The v1 event of an outcome, its property and data (stolen) inside tx. */
static int emit(struct store_tx *tx, struct decide *d, const char *type, json_t *data)
{
	json_t *props = json_pack("[s]", d->s.property_id);
	int rc = props && data
			 ? outbox_append(tx, "v1", type, d->who->portfolio_id, props, data, NULL, 0)
			 : STORE_ERR;

	json_decref(props);
	json_decref(data);
	return rc;
}

/* Records a rejection inside tx. Returns 0 or < 0. */
static int record_rejected(struct store_tx *tx, struct decide *d)
{
	char at[CLOCK_RFC3339_LEN];
	int rc = store_exec(tx,
			    "UPDATE rate_suggestions SET status = 'rejected', decided_by = $2,"
			    " decided_at = $3, reason = $4, updated_at = $3 WHERE id = $1",
			    (struct store_val[]){sv_text(d->id), sv_text(d->user_name),
						 sv_int(d->now), sv_text(d->reason)},
			    4);

	clock_format_ms(d->now, at);
	if (rc >= 0)
		rc = append_entries(tx, d, d->actor, "rejected",
				    json_pack("{s:s, s:s, s:o}", "rejected_by", d->user_name,
					      "user_id", d->user_id, "reason",
					      d->reason ? json_string(d->reason) : json_null()));
	if (rc == 0)
		rc = emit(tx, d, "rate.rejected",
			  json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:o}", "suggestion_id", d->id,
				    "room_type_code", d->s.room, "date", d->s.date, "proposed_rate",
				    governance_money(d->s.currency, d->s.proposed), "rejected_by",
				    d->user_name, "rejected_at", at, "reason",
				    d->reason ? json_string(d->reason) : json_null()));
	return rc;
}

/* Records a successful push inside tx: the approval, the push, the floor
 * and v1 rate.approved. Returns 0 or < 0. */
static int record_approved(struct store_tx *tx, struct decide *d)
{
	char at[CLOCK_RFC3339_LEN];
	json_t *props = json_pack("[s]", d->s.property_id);
	int rc = store_exec(tx,
			    "UPDATE rate_suggestions SET status = 'approved', decided_by = $2,"
			    " decided_at = $3, booking_ref = $4, booking_at = $5, claim_until = NULL,"
			    " updated_at = $3 WHERE id = $1",
			    (struct store_val[]){sv_text(d->id), sv_text(d->user_name), sv_int(d->now),
						 sv_text(d->w.pms_ref), sv_text(d->w.at)},
			    5);

	clock_format_ms(d->now, at);
	if (rc >= 0)
		rc = append_entries(tx, d, d->actor, "approved",
				    json_pack("{s:s, s:s, s:O}", "approver_saml_subject", d->user_name,
					      "user_id", d->user_id, "roles", d->roles));
	if (rc == 0)
		rc = append_entries(tx, d, "booking_engine", "booking_push",
				    json_pack("{s:s, s:s, s:s, s:o}", "property", d->prop.id,
					      "pms_property_code", d->prop.code, "ref",
					      d->w.pms_ref, "rate",
					      governance_money(d->s.currency, d->s.proposed)));
	if (rc == 0)
		rc = floors_set(tx, props,
				&(struct floor_rate){d->id, d->s.room, d->s.date, d->s.date,
						     d->s.currency, d->s.proposed, d->now});
	if (rc == 0)
		rc = emit(tx, d, "rate.approved",
			  json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:b}", "suggestion_id", d->id,
				    "room_type_code", d->s.room, "date", d->s.date, "rate",
				    governance_money(d->s.currency, d->s.proposed), "approved_by",
				    d->user_name, "approved_at", at, "pushed_to_booking_engine", 1));
	json_decref(props);
	return rc;
}

/* Records a failed push: the trail says why, the claim is released and
 * the suggestion stays pending. */
static int record_push_failed(struct store_tx *tx, struct decide *d)
{
	int rc = set_claim(tx, d, 0);

	if (rc >= 0)
		rc = append_entries(tx, d, "booking_engine", "booking_push_failed",
				    json_pack("{s:s, s:s, s:I, s:s}", "property", d->prop.id,
					      "pms_property_code", d->prop.code, "http_status",
					      (json_int_t)d->w.http_status, "error", d->w.error));
	return rc;
}

/* Ends the record of a decision in tx, after its statements gave rc: the
 * suggestion as it now is becomes out's body when that is the answer,
 * then who adds its rows (suggestion_who.record). Returns a store status. */
static int answer(struct store_tx *tx, const struct decide *d, struct suggestion_outcome *out, int rc)
{
	if (rc >= 0 && (out->result == SUGGESTION_DONE || out->result == SUGGESTION_PUSH_FAILED)) {
		json_decref(out->body);
		out->body = NULL;
		rc = suggestion_load(tx, d->who->portfolio_id, d->id, &out->body);
		rc = rc == 1 ? 0 : rc < 0 ? rc : STORE_ERR;
	}
	return rc < 0 || !d->who->record ? rc : d->who->record(d->who->arg, tx, out);
}

/* The push to the booking engine, outside any transaction; then its
 * record, with the answer. Returns 0 or < 0 (out set for a failure). */
static int push_and_record(struct store *st, struct pms *booking, struct decide *d,
			   struct suggestion_outcome *out)
{
	struct store_tx *tx;
	int rc;

	snprintf(d->w.idempotency_key, sizeof d->w.idempotency_key, "%s:approve", d->id);
	d->w.property_code = d->prop.code;
	d->w.room_type_code = d->s.room;
	d->w.from = d->w.to = d->s.date;
	d->w.currency = d->s.currency;
	d->w.minor_units = d->s.proposed;
	if (pms_write_all(booking, &d->w, 1) < 0) {
		d->w.ok = 0;
		snprintf(d->w.error, sizeof d->w.error, "could not send the push");
	}
	d->now = clock_now_ms();
	if ((rc = store_begin(st, STORE_WRITE, &tx)) != STORE_OK)
		return rc;
	if (!d->w.ok) {
		out->result = SUGGESTION_PUSH_FAILED;
		snprintf(out->why, sizeof out->why, "%s", d->w.error);
	}
	rc = d->w.ok ? record_approved(tx, d) : record_push_failed(tx, d);
	return store_finish(tx, answer(tx, d, out, rc));
}

void suggestion_today(char out[16])
{
	clock_format_date(clock_now_ms() / 86400000, out);
}

/* Checks and, for a rejection, records it; for an approval, governs it and
 * claims the suggestion. What it found is committed: a rejection, an
 * expiry, an approval's ceiling checks (also when they failed) and its
 * claim; when that finishes the decision, with the answer. Returns 0 (go
 * on to the push), 1 (finished: out set) or < 0. */
static int decide_locked(struct store *st, struct decide *d, struct suggestion_outcome *out)
{
	char today[16];
	struct store_tx *tx;
	int rc, keep = 0;

	suggestion_today(today);
	if ((rc = store_begin(st, STORE_WRITE, &tx)) != STORE_OK)
		return rc;
	rc = check_actor(tx, d, out);
	if (rc == 0)
		rc = check_pending(d, today, out);
	if (rc == 2) {
		keep = 1;
		rc = expire_one(tx, d->id, d->now);
		rc = rc < 0 ? rc : 1;
	} else if (rc == 0 && !d->approve) {
		keep = 1;
		rc = record_rejected(tx, d);
		rc = rc < 0 ? rc : 1;
	} else if (rc == 0) {
		rc = approve_check(tx, d, out);
		keep = rc == 0 || out->result == SUGGESTION_CEILING_EXCEEDED;
	}
	if (rc < 0 || !keep) {
		store_rollback(tx);
		return rc;
	}
	return (keep = store_finish(tx, rc == 1 ? answer(tx, d, out, 0) : 0)) != STORE_OK ? keep : rc;
}

int suggestion_decide(struct store *st, struct pms *booking, const struct suggestion_who *who,
		      const char *id, int approve, const char *reason, struct suggestion_outcome *out)
{
	struct decide d = {.who = who, .id = id, .reason = reason, .approve = approve};
	int rc;

	memset(out, 0, sizeof *out);
	d.now = clock_now_ms();
	d.checks = json_array();
	d.failed = json_array();
	rc = decide_locked(st, &d, out);
	if (rc == 0)
		rc = push_and_record(st, booking, &d, out);
	json_decref(d.roles);
	json_decref(d.checks);
	json_decref(d.failed);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------ expiry */

int suggestion_expire(struct store *st, const char *today)
{
	struct store_val v = sv_text(today);
	struct store_tx *tx;
	struct store_rows *r;
	json_t *ids = json_array(), *id;
	int64_t n = 0, now = clock_now_ms();
	size_t i;
	int rc = STORE_ERR;

	/* A read first: the usual answer is none, without the write lock. */
	if (!ids || (rc = store_begin(st, STORE_READ_ONE, &tx)) != STORE_OK)
		goto out;
	rc = store_query_int(tx,
			     "SELECT COUNT(*) FROM rate_suggestions WHERE status = 'pending_approval'"
			     " AND stay_date < $1",
			     &v, 1, &n);
	store_rollback(tx);
	if (rc < 0 || n == 0 || (rc = store_begin(st, STORE_WRITE, &tx)) != STORE_OK)
		goto out;
	rc = store_query(tx,
			 "SELECT id FROM rate_suggestions WHERE status = 'pending_approval'"
			 " AND stay_date < $1 AND (claim_until IS NULL OR claim_until <= $2)",
			 (struct store_val[]){v, sv_int(now)}, 2, &r);
	if (rc == STORE_OK) {
		while ((rc = store_next(r)) == 1)
			json_array_append_new(ids, json_string(store_text(r, 0)));
		store_rows_close(r);
	}
	json_array_foreach(ids, i, id) {
		if (rc < 0)
			break;
		rc = expire_one(tx, json_string_value(id), now);
	}
	rc = store_finish(tx, rc);
	n = (int64_t)json_array_size(ids);
out:
	json_decref(ids);
	return rc < 0 ? rc : (int)n;
}
