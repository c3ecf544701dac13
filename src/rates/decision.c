#include "rates/decision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "events/outbox.h"
#include "identity/directory.h"
#include "portfolio/portfolio.h"
#include "portfolio/snapshot.h"
#include "rates/audit_trail.h"
#include "rates/floors.h"
#include "rates/governance.h"
#include "rates/rate_writes.h"
#include "store/store.h"

/* ------------------------------------------------------ the table */

#define DECISION_COLS                                                                    \
	"id, status, room_type_code, date_from, date_to, currency, minor_units,"         \
	" brand_ceiling_id, approver_saml_subject, justification, proposer, created_at," \
	" properties, receipts, failure, revert_reason, revert_approver, reverted_at,"   \
	" updated_at"

/* The receipts of a row as the API shows them: {property, pms_ref, at}. */
static json_t *short_receipts(const json_t *receipts)
{
	json_t *out = json_array(), *rec;
	size_t i;

	json_array_foreach(receipts, i, rec)
		json_array_append_new(out, json_pack("{s:O, s:O, s:O}", "property",
						     json_object_get(rec, "property"), "pms_ref",
						     json_object_get(rec, "pms_ref"), "at",
						     json_object_get(rec, "at")));
	return out;
}

static json_t *audit_url(const char *id)
{
	char url[128];

	snprintf(url, sizeof url, "/rate-decisions/%s/audit-trail", id);
	return json_string(url);
}

json_t *decision_from_row(struct store_rows *r)
{
	json_t *props = json_loads(store_text(r, 12), 0, NULL);
	json_t *receipts = json_loads(store_text(r, 13), 0, NULL), *written = json_array(), *rec;
	json_t *failure = store_is_null(r, 14) ? json_null() : json_loads(store_text(r, 14), 0, NULL);
	json_t *revert = json_null();
	size_t i;

	/* After a revert or a failure, nothing of the decision stays written. */
	if (strcmp(store_text(r, 1), "reverted") && strcmp(store_text(r, 1), "failed"))
		json_array_foreach(receipts, i, rec)
			json_array_append(written, json_object_get(rec, "property"));
	if (!store_is_null(r, 17))
		revert = json_pack("{s:s, s:s, s:o}", "reason", store_text(r, 15),
				   "approver_saml_subject", store_text(r, 16), "reverted_at",
				   jsonw_time(store_int(r, 17)));
	rec = short_receipts(receipts);
	json_decref(receipts);
	return json_pack("{s:s, s:s, s:o, s:s, s:{s:s, s:s}, s:o, s:{s:s, s:s, s:s}, s:s, s:o,"
			 " s:o, s:o, s:o, s:o, s:o, s:o}",
			 "id", store_text(r, 0), "status", store_text(r, 1), "properties",
			 props ? props : json_array(), "room_type_code", store_text(r, 2),
			 "date_range", "from", store_text(r, 3), "to", store_text(r, 4),
			 "proposed_rate", governance_money(store_text(r, 5), store_int(r, 6)),
			 "governance", "brand_ceiling_id", store_text(r, 7), "approver_saml_subject",
			 store_text(r, 8), "justification", store_text(r, 9), "proposed_by",
			 store_text(r, 10), "properties_written", written, "pms_write_receipts",
			 rec, "audit_trail_url", audit_url(store_text(r, 0)), "failure",
			 failure ? failure : json_null(), "revert", revert, "created_at",
			 jsonw_time(store_int(r, 11)), "updated_at", jsonw_time(store_int(r, 18)));
}

const char *decision_row_id(struct store_rows *r)
{
	return store_text(r, 0);
}

static void *decision_row(struct store_rows *r)
{
	return decision_from_row(r);
}

int decision_load(struct store_tx *tx, const char *pf, const char *id, json_t **out)
{
	void *v;
	int rc = store_get_owned(tx,
				 "SELECT " DECISION_COLS
				 ", portfolio_id FROM rate_decisions WHERE id = $1",
				 id, 19, pf, decision_row, &v);

	*out = v;
	return rc;
}

int decision_reached(const struct decision_who *who, const json_t *d)
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(d, "properties"), i, v)
		if (!who->reaches(who->arg, json_string_value(v)))
			return 0;
	return 1;
}

int decision_list(struct store_tx *tx, const char *pf, const char *after, const char *status,
		  struct store_rows **rows)
{
	return store_query(tx,
			   "SELECT " DECISION_COLS " FROM rate_decisions WHERE portfolio_id = $1"
			   " AND id > $2 AND ($3 = '' OR status = $3) ORDER BY id",
			   (struct store_val[]){sv_text(pf), sv_text(after),
						sv_text(status ? status : "")},
			   3, rows);
}

static int set_status(struct store_tx *tx, const char *id, const char *status,
		      const json_t *receipts, const json_t *failure)
{
	char *rs = receipts ? json_dumps(receipts, JSON_COMPACT) : NULL;
	char *fs = failure ? json_dumps(failure, JSON_COMPACT) : NULL;
	int rc;

	rc = store_send(tx,
			"UPDATE rate_decisions SET status = $2, receipts = COALESCE($3, receipts),"
			" failure = $4, updated_at = $5 WHERE id = $1",
			(struct store_val[]){sv_text(id), sv_text(status), sv_text(rs), sv_text(fs),
					     sv_int(clock_now_ms())},
			5);
	free(rs);
	free(fs);
	return rc < 0 ? rc : 0;
}

static int insert_decision(struct store_tx *tx, const char *id, const char *pf, const char *status,
			   const struct decision_proposal *p, const char *actor, const char *node,
			   int64_t now)
{
	char *props = json_dumps(p->properties, JSON_COMPACT);
	int rc = props ? 0 : STORE_ERR;

	if (rc == 0)
		rc = store_send(tx,
				"INSERT INTO rate_decisions (id, portfolio_id, status, room_type_code,"
				" date_from, date_to, currency, minor_units, brand_ceiling_id,"
				" approver_saml_subject, justification, proposer, properties, created_at,"
				" updated_at, node) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,"
				" $12, $13, $14, $14, $15)",
				(struct store_val[]){sv_text(id), sv_text(pf), sv_text(status),
						     sv_text(p->room_type_code), sv_text(p->from),
						     sv_text(p->to), sv_text(p->currency),
						     sv_int(p->minor_units), sv_text(p->ceiling_id),
						     sv_text(p->approver),
						     sv_text(p->justification), sv_text(actor),
						     sv_text(props), sv_int(now), sv_text(node)},
				15);
	free(props);
	return rc < 0 ? rc : 0;
}

static int mark_reverted(struct store_tx *tx, const char *id, const char *reason,
			 const char *approver, int64_t now)
{
	int rc = store_send(tx,
			    "UPDATE rate_decisions SET status = 'reverted', revert_reason = $2,"
			    " revert_approver = $3, reverted_at = $4, updated_at = $4 WHERE id = $1",
			    (struct store_val[]){sv_text(id), sv_text(reason), sv_text(approver),
						 sv_int(now)},
			    4);

	return rc < 0 ? rc : 0;
}

/* 1 while decision id is published, 0 when not, or a negative status. */
static int still_published(struct store_tx *tx, const char *id)
{
	int64_t one;

	return store_query_int(tx,
			       "SELECT 1 FROM rate_decisions WHERE id = $1 AND status = 'published'",
			       (struct store_val[]){sv_text(id)}, 1, &one);
}

/* The receipts and the rate of a published decision. Returns 1, 0 (no
 * such decision) or a negative status. */
static int load_receipts(struct store_tx *tx, const char *id, json_t **receipts, json_t **row)
{
	struct store_rows *r;
	int rc;

	*receipts = *row = NULL;
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
				 store_text(r, 2), "to", store_text(r, 3), "currency",
				 store_text(r, 4), "minor", (json_int_t)store_int(r, 5));
	}
	store_rows_close(r);
	if (rc == 1 && (!json_is_array(*receipts) || !*row ||
			json_array_size(*receipts) > DECISION_MAX_PROPERTIES))
		return STORE_ERR;
	return rc;
}

/* "client:cli_…" or "user:<userName>": who proposed (or asked for) a change. */
static int actor_of(struct store_tx *tx, const struct decision_who *who, char *out, size_t cap)
{
	char name[300] = "";
	int rc;

	if (!who->user_id[0]) {
		snprintf(out, cap, "client:%s", who->client_id);
		return 0;
	}
	rc = directory_user_name(tx, who->portfolio_id, who->user_id, name, sizeof name);
	if (rc < 0)
		return rc;
	snprintf(out, cap, "user:%s", name[0] ? name : who->user_id);
	return 0;
}

/* Takes the write lock again after PMS writes and reads the tip of the
 * decision's chain. Returns 0 with *tx open, or a negative status. */
static int reopen_chain(struct store *st, const char *id, struct store_tx **tx, struct audit_chain *ch)
{
	int rc = store_begin(st, 1, tx);

	if (rc != STORE_OK) {
		*tx = NULL;
		return rc;
	}
	rc = audit_open(*tx, id, ch);
	if (rc < 0) {
		store_rollback(*tx);
		*tx = NULL;
	}
	return rc;
}

/* Lets who add its rows to tx, the record of outcome o, after the
 * record's own statements gave rc (decision_who.record). */
static int with_answer(const struct decision_who *who, struct store_tx *tx, int rc,
		       const struct decision_outcome *o)
{
	return rc < 0 || !who->record ? rc : who->record(who->arg, tx, o);
}

/* Records a failed batch of writes of decision id (publish: the decision
 * becomes failed; revert: it stays published) and sets out to
 * DECISION_PMS_FAILED (DECISION_UNSENT when nothing was sent, and
 * DECISION_UNRECORDED when undone: the writes were undone because their
 * record failed). Returns 0 or a negative status. */
static int record_batch_failure(struct store *st, const struct decision_who *who, const char *id,
				const struct rate_batch *b, const char *purpose, int undone,
				struct decision_outcome *out)
{
	struct store_tx *tx;
	struct audit_chain ch;
	int rc = reopen_chain(st, id, &tx, &ch);

	if (rc < 0)
		return rc;
	out->result = undone      ? DECISION_UNRECORDED
		      : b->unsent ? DECISION_UNSENT
				  : DECISION_PMS_FAILED;
	json_decref(out->body);
	out->body = rate_batch_record_failure(tx, &ch, who->portfolio_id, id, b, purpose,
					      clock_now_ms(), &rc);
	if (out->body && !strcmp(purpose, "publish"))
		rc = set_status(tx, id, "failed", NULL, out->body);
	rc = store_finish(tx, with_answer(who, tx, rc, out));
	if (rc != STORE_OK) {
		json_decref(out->body);
		out->body = NULL;
	}
	return rc;
}

/* ------------------------------------------------------ publish */

/* One publication under way. */
struct publish {
	const struct decision_who *who;
	const struct decision_proposal *p;
	struct governance_rate rate;
	struct portfolio_ceiling own_ce; /* read when the snapshot lacks it */
	struct rate_batch *batch;        /* t[]: the targets, in request order */
	char actor[300];
	char approver_id[ID_MAX];
	json_t *checks, *details, *roles, *final;
	const char *why;
	struct audit_chain ch;
	struct audit_entry ent[DECISION_MAX_PROPERTIES + 3];
	int nent;
	int64_t now;
};

/* Loads every target property into pub->batch->t (not yet as writes):
 * from this node's snapshot of the portfolio (snap, may be NULL), and
 * through tx for one the snapshot lacks (added since it was made:
 * properties never change once added, so what it has is exact). With tx
 * NULL, only the snapshot is asked. Returns 0, 1 (out: properties[index]
 * is not of the portfolio), 2 (tx NULL and the snapshot lacks one) or < 0. */
static int load_targets(struct store_tx *tx, const struct portfolio_snapshot *snap,
			struct publish *pub, struct decision_outcome *out)
{
	size_t i, n = json_array_size(pub->p->properties);
	const struct portfolio_snap_prop *sp;
	const char *id;
	int rc;

	for (i = 0; i < n; i++) {
		id = json_string_value(json_array_get(pub->p->properties, i));
		sp = snap ? portfolio_snapshot_find(snap, id) : NULL;
		if (sp) {
			pub->batch->t[i] = sp->p;
			continue;
		}
		if (!tx)
			return 2;
		rc = portfolio_property_get(tx, pub->who->portfolio_id, id, &pub->batch->t[i]);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			out->result = DECISION_NOT_IN_PORTFOLIO;
			out->index = i;
			return 1;
		}
	}
	return 0;
}

/* Governance without the write lock: targets and ceiling (from this
 * node's snapshot, else the database), ceiling checks (pub->checks,
 * failures in pub->details), and, when every check passed, the approver
 * (pub->why when refused). When the snapshot has all it needs and the
 * proposer is a client, the approver is the one statement read. Returns
 * 0, 1 (out set) or a negative status. */
static int govern(struct store *st, struct publish *pub, struct decision_outcome *out)
{
	const struct portfolio_snapshot *snap;
	const struct portfolio_ceiling *ce = NULL;
	struct store_tx *tx = NULL;
	size_t i, n = json_array_size(pub->p->properties);
	int rc = portfolio_snapshot_get(st, pub->who->portfolio_id, &snap), lacks;

	if (rc < 0)
		return rc;
	if (snap)
		ce = portfolio_snapshot_ceiling(snap, pub->p->ceiling_id);
	lacks = !ce || load_targets(NULL, snap, pub, out) != 0;
	if ((rc = store_begin(st, lacks || pub->who->user_id[0] ? STORE_READ : STORE_READ_ONE, &tx)) !=
	    STORE_OK)
		goto out;
	if ((lacks && (rc = load_targets(tx, snap, pub, out)) != 0) ||
	    (rc = actor_of(tx, pub->who, pub->actor, sizeof pub->actor)) < 0)
		goto out;
	if (!ce) {
		rc = portfolio_ceiling_get(tx, pub->who->portfolio_id, pub->p->ceiling_id,
					   &pub->own_ce);
		if (rc < 0)
			goto out;
		ce = &pub->own_ce;
	}
	for (i = 0; i < n; i++) {
		json_t *chk = governance_ceiling_check(&pub->batch->t[i], ce, &pub->rate);
		char field[48];

		snprintf(field, sizeof field, "properties[%zu]", i);
		if (!json_is_true(json_object_get(chk, "passed")))
			json_array_append_new(pub->details, governance_ceiling_detail(chk, field));
		json_array_append_new(pub->checks, chk);
	}
	if (!json_array_size(pub->details))
		rc = governance_check_approver(tx, pub->who->portfolio_id, pub->p->approver,
					       pub->who->user_id, pub->approver_id, &pub->roles,
					       &pub->why);
	rc = rc < 0 ? rc : 0;
out:
	store_rollback(tx);
	portfolio_snapshot_put(snap);
	return rc;
}

/* Prepares the next entry of pub's chain (details stolen). Returns 0 or -1. */
static int prepare_next(struct publish *pub, const char *kind, const char *actor, json_t *details)
{
	int rc = details ? audit_prepare(&pub->ch, kind, actor, details, pub->now,
					 &pub->ent[pub->nent])
			 : -1;

	json_decref(details);
	if (rc == 0)
		pub->nent++;
	return rc;
}

/* The entries of the proposal and its governance outcome, computed before
 * the write lock is taken. A new decision's chain starts at genesis. */
static int prepare_proposal(struct publish *pub, const char *id)
{
	const struct decision_proposal *p = pub->p;
	size_t i;
	int rc;

	memset(&pub->ch, 0, sizeof pub->ch);
	snprintf(pub->ch.decision_id, sizeof pub->ch.decision_id, "%s", id);
	snprintf(pub->ch.head, sizeof pub->ch.head, "%s", AUDIT_GENESIS);
	rc = prepare_next(pub, "proposed", pub->actor,
			  json_pack("{s:O, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:s}", "properties",
				    p->properties, "room_type_code", p->room_type_code,
				    "date_range", "from", p->from, "to", p->to, "proposed_rate",
				    governance_money(p->currency, p->minor_units),
				    "brand_ceiling_id", p->ceiling_id, "approver_saml_subject",
				    p->approver, "justification", p->justification));
	for (i = 0; i < json_array_size(pub->checks) && rc == 0; i++)
		rc = prepare_next(pub, "ceiling_check", "revops",
				  json_incref(json_array_get(pub->checks, i)));
	if (rc == 0 && json_array_size(pub->details)) {
		pub->final = json_pack("{s:s, s:O}", "code", "SVC-RATE-CEILING-EXCEEDED",
				       "failed_checks", pub->details);
		rc = prepare_next(pub, "rejected", "revops", json_incref(pub->final));
	} else if (rc == 0 && pub->why) {
		pub->final = json_pack("{s:s, s:s}", "code", "SVC-GOVERNANCE-REJECTED", "reason",
				       pub->why);
		rc = prepare_next(pub, "rejected", "revops", json_incref(pub->final));
	} else if (rc == 0) {
		rc = prepare_next(pub, "approved", p->approver,
				  json_pack("{s:s, s:s, s:O}", "approver_saml_subject", p->approver,
					    "user_id", pub->approver_id, "roles", pub->roles));
	}
	return rc;
}

/* Inserts pub's prepared entries of decision id inside tx; they are kept
 * (a transaction that fails is tried again with them) until entries_done. */
static int insert_entries(struct store_tx *tx, struct publish *pub, const char *id)
{
	int rc = audit_insert(tx, id, pub->ent, (size_t)pub->nent);

	return rc < 0 ? rc : 0;
}

/* pub's entries are committed: frees them. */
static void entries_done(struct publish *pub)
{
	for (int i = 0; i < pub->nent; i++)
		audit_entry_free(&pub->ent[i]);
	pub->nent = 0;
}

/* Records the decision and the governance outcome before any PMS call
 * (out: the outcome when governance refused it, which this record ends).
 * It only inserts rows no one else knows yet, so it does not wait for the
 * writers' turn (STORE_WRITE_OWN). */
static int record_proposal(struct store *st, struct publish *pub, const char *id,
			   const struct decision_outcome *out)
{
	struct store_tx *tx;
	int rc;

	if (prepare_proposal(pub, id) < 0)
		return STORE_ERR;
	if ((rc = store_begin(st, STORE_WRITE_OWN, &tx)) != STORE_OK)
		return rc;
	rc = insert_decision(tx, id, pub->who->portfolio_id, pub->final ? "rejected" : "pending",
			     pub->p, pub->actor, pub->who->node, pub->now);
	if (rc == 0)
		rc = insert_entries(tx, pub, id);
	if (rc == 0 && pub->final)
		rc = with_answer(pub->who, tx, set_status(tx, id, "rejected", NULL, pub->final), out);
	if ((rc = store_finish(tx, rc)) == STORE_OK)
		entries_done(pub);
	return rc;
}

/* The receipts the row keeps: {property, pms_property_code, pms_ref, at,
 * previous_rate} per write. */
static json_t *batch_receipts(const struct rate_batch *b)
{
	json_t *receipts = json_array();
	size_t i;

	for (i = 0; i < b->n; i++) {
		const struct pms_write *w = &b->w[i];

		json_array_append_new(receipts,
				      json_pack("{s:s, s:s, s:s, s:s, s:o}", "property", b->t[i].id,
						"pms_property_code", b->t[i].code, "pms_ref",
						w->pms_ref, "at", w->at, "previous_rate",
						w->has_previous ? governance_money(w->prev_currency,
										   w->prev_minor_units)
								: json_null()));
	}
	return receipts;
}

/* The record of a publication whose writes all succeeded (entries
 * prepared): its trail, status, receipts, floors and event, in one
 * transaction that takes the writers' turn only for the event. */
static int write_published(struct store *st, struct publish *pub, const char *id, json_t *receipts,
			   const json_t *data, const struct decision_outcome *out)
{
	const struct decision_proposal *p = pub->p;
	struct store_tx *tx;
	int rc = store_begin(st, STORE_WRITE_OWN, &tx);

	if (rc != STORE_OK)
		return rc;
	if ((rc = insert_entries(tx, pub, id)) == 0 &&
	    (rc = set_status(tx, id, "published", receipts, NULL)) == 0 &&
	    (rc = floors_set(tx, p->properties,
			     &(struct floor_rate){id, p->room_type_code, p->from, p->to,
						  p->currency, p->minor_units, pub->now})) == 0)
		rc = outbox_append(tx, "v2", "rate.decision.published", pub->who->portfolio_id,
				   p->properties, data, NULL, 0);
	return store_finish(tx, with_answer(pub->who, tx, rc, out));
}

/* How long the record of PMS writes already made is tried again when the
 * database refuses it (busy, full, gone), before they are undone: the
 * rates must never stay live behind a decision that says pending. */
#define RECORD_RETRY_MS 20000
#define RECORD_RETRY_GAP_MS 500

/* Runs fn(st, arg) until it commits, a constraint refuses it, or
 * RECORD_RETRY_MS passed. Returns its last status. */
static int with_retries(struct store *st, int (*fn)(struct store *, void *), void *arg, const char *id)
{
	int64_t until = clock_mono_ms() + RECORD_RETRY_MS;
	int rc = fn(st, arg), tries = 1;

	while (rc < 0 && rc != STORE_CONSTRAINT && clock_mono_ms() < until) {
		nanosleep(&(struct timespec){0, RECORD_RETRY_GAP_MS * 1000000L}, NULL);
		rc = fn(st, arg);
		tries++;
	}
	if (tries > 1)
		log_msg(rc < 0 ? LOG_ERROR : LOG_WARN, "rate_decisions",
			"decision %s: recording its PMS writes took %d tries (%s)", id, tries,
			rc < 0 ? "gave up" : "recorded");
	return rc;
}

struct published_try {
	struct publish *pub;
	const char *id;
	json_t *receipts, *data;
	const struct decision_outcome *out;
};

static int try_published(struct store *st, void *arg)
{
	struct published_try *t = arg;

	return write_published(st, t->pub, t->id, t->receipts, t->data, t->out);
}

/* Success: the chain's tip is still the one computed before (no one else
 * appends to a pending decision), so these entries too are prepared before
 * the write lock. Its record is tried again while the database refuses it
 * (with_retries). Sets out to the spec's answer: id, status,
 * properties_written, audit_trail_url, pms_write_receipts. */
static int record_published(struct store *st, struct publish *pub, const char *id,
			    struct decision_outcome *out)
{
	const struct decision_proposal *p = pub->p;
	json_t *receipts = batch_receipts(pub->batch), *data;
	size_t i;
	int rc = 0;

	for (i = 0; i < pub->batch->n && rc == 0; i++)
		rc = prepare_next(pub, "pms_write", "pms",
				  rate_batch_entry(pub->batch, i, "publish"));
	if (rc == 0)
		rc = prepare_next(pub, "published", "revops",
				  json_pack("{s:O}", "properties_written", p->properties));
	data = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:s}", "decision_id", id, "room_type_code",
			 p->room_type_code, "date_range", "from", p->from, "to", p->to,
			 "approver_saml_subject", p->approver, "brand_ceiling_id", p->ceiling_id);
	out->result = DECISION_DONE;
	out->body = json_pack("{s:s, s:s, s:O, s:o, s:o}", "id", id, "status", "published",
			      "properties_written", p->properties, "audit_trail_url", audit_url(id),
			      "pms_write_receipts", short_receipts(receipts));
	rc = rc < 0 || !data || !out->body
		     ? STORE_ERR
		     : with_retries(st, try_published,
				    &(struct published_try){pub, id, receipts, data, out}, id);
	json_decref(data);
	if (rc == STORE_OK)
		entries_done(pub);
	json_decref(receipts);
	return rc;
}

struct failure_try {
	const struct decision_who *who;
	const char *id;
	const struct rate_batch *b;
	struct decision_outcome *out;
};

static int try_failure(struct store *st, void *arg)
{
	struct failure_try *t = arg;

	return record_batch_failure(st, t->who, t->id, t->b, "publish", 1, t->out);
}

/* The writes were made but their record would not commit: they are undone
 * (the previous rates written back), then the failure is recorded, tried
 * again as the record was. Sets out (503 to the client either way). */
static int undo_unrecorded(struct store *st, struct pms *pms, struct publish *pub,
			   struct decision_outcome *out)
{
	int rc;

	log_msg(LOG_ERROR, "rate_decisions",
		"decision %s: its PMS writes could not be recorded; undoing them", out->id);
	pub->batch->why = "the decision's record could not be written (the database refused it:"
			  " busy, full or unreachable), so its PMS writes were undone";
	rate_batch_undo(pms, pub->batch);
	rc = with_retries(st, try_failure,
			  &(struct failure_try){pub->who, out->id, pub->batch, out}, out->id);
	if (rc < 0)
		log_msg(LOG_ERROR, "rate_decisions",
			"decision %s stays pending: its writes were undone, but not recorded; the"
			" next start marks it failed",
			out->id);
	out->result = DECISION_UNRECORDED;
	return 0;
}

/* The PMS writes, outside any transaction, then their record. */
static int publish_writes(struct store *st, struct pms *pms, struct publish *pub,
			  struct decision_outcome *out)
{
	const struct decision_proposal *p = pub->p;
	struct rate_batch *b = pub->batch;
	size_t i, n = json_array_size(p->properties);
	int rc;

	b->n = 0;
	for (i = 0; i < n; i++)
		rate_batch_add(b, &b->t[i], p->room_type_code, p->from, p->to, p->currency,
			       p->minor_units, out->id, "publish");
	rc = rate_batch_run(pms, b);
	pub->now = clock_now_ms();
	if (rc == 1)
		return record_batch_failure(st, pub->who, out->id, b, "publish", 0, out);
	rc = record_published(st, pub, out->id, out);
	return rc < 0 && rc != STORE_CONSTRAINT ? undo_unrecorded(st, pms, pub, out) : rc;
}

static void publish_free(struct publish *pub)
{
	int i;

	json_decref(pub->checks);
	json_decref(pub->details);
	json_decref(pub->roles);
	json_decref(pub->final);
	portfolio_ceiling_free(&pub->own_ce);
	for (i = 0; i < pub->nent; i++)
		audit_entry_free(&pub->ent[i]);
	free(pub->batch);
}

int decision_publish(struct store *st, struct pms *pms, const struct decision_who *who,
		     const struct decision_proposal *p, struct decision_outcome *out)
{
	struct publish *pub = calloc(1, sizeof *pub);
	int rc = STORE_ERR;

	memset(out, 0, sizeof *out);
	if (!pub)
		return STORE_ERR;
	pub->who = who;
	pub->p = p;
	pub->now = clock_now_ms();
	pub->checks = json_array();
	pub->details = json_array();
	pub->batch = calloc(1, sizeof *pub->batch);
	pub->rate = (struct governance_rate){p->ceiling_id, p->room_type_code, 0, 0,
					     p->currency,   p->minor_units};
	if (!pub->batch || json_array_size(p->properties) > DECISION_MAX_PROPERTIES ||
	    clock_parse_date(p->from, &pub->rate.from_days) < 0 ||
	    clock_parse_date(p->to, &pub->rate.to_days) < 0)
		goto out;
	if ((rc = govern(st, pub, out)) != 0)
		goto out;
	if (json_array_size(pub->details)) {
		out->result = DECISION_CEILING_EXCEEDED;
		out->body = json_incref(pub->details);
	} else if (pub->why) {
		out->result = DECISION_GOVERNANCE_REJECTED;
		out->why = pub->why;
	}
	rc = id_new("rd_", out->id, sizeof out->id) < 0 ? STORE_ERR
							: record_proposal(st, pub, out->id, out);
	if (rc == STORE_OK && !pub->final)
		rc = publish_writes(st, pms, pub, out);
out:
	publish_free(pub);
	free(pub);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------ revert */

/* One revert under way. */
struct revert {
	const struct decision_who *who;
	const char *id, *reason, *approver;
	json_t *decision, *receipts, *row, *roles, *restored, *skipped;
	char actor[300];
	char approver_id[ID_MAX];
	struct rate_batch *batch;
};

/* Checks decision r->id can be reverted by r->who with r->approver, under
 * the write lock, and loads what it wrote. Returns 0, 1 (out set) or < 0. */
static int revert_check(struct store_tx *tx, struct revert *r, struct decision_outcome *out)
{
	const char *why = NULL, *status;
	int rc = decision_load(tx, r->who->portfolio_id, r->id, &r->decision);

	if (rc <= 0 || rc == 2) {
		out->result = rc == 0 ? DECISION_NOT_FOUND : DECISION_OTHER_PORTFOLIO;
		return rc < 0 ? rc : 1;
	}
	out->result = DECISION_OUT_OF_REACH;
	if (!decision_reached(r->who, r->decision))
		return 1;
	status = json_string_value(json_object_get(r->decision, "status"));
	out->result = DECISION_NOT_PUBLISHED;
	snprintf(out->status, sizeof out->status, "%s", status);
	if (strcmp(status, "published"))
		return 1;
	if ((rc = actor_of(tx, r->who, r->actor, sizeof r->actor)) < 0 ||
	    (rc = governance_check_approver(tx, r->who->portfolio_id, r->approver, r->who->user_id,
					    r->approver_id, &r->roles, &why)) < 0)
		return rc;
	out->result = DECISION_GOVERNANCE_REJECTED;
	out->why = why;
	if (why)
		return 1;
	rc = load_receipts(tx, r->id, &r->receipts, &r->row);
	return rc == 1 ? 0 : (rc < 0 ? rc : STORE_ERR);
}

/* The writes of the revert: each property's previous rate; properties
 * that had none are left as the decision wrote them and listed in skipped. */
static void revert_batch(struct revert *r)
{
	const char *room = json_string_value(json_object_get(r->row, "room"));
	const char *from = json_string_value(json_object_get(r->row, "from"));
	const char *to = json_string_value(json_object_get(r->row, "to"));
	json_t *rec, *prev;
	size_t i;

	json_array_foreach(r->receipts, i, rec) {
		struct portfolio_property t = {0};

		prev = json_object_get(rec, "previous_rate");
		snprintf(t.id, sizeof t.id, "%s",
			 json_string_value(json_object_get(rec, "property")));
		snprintf(t.code, sizeof t.code, "%s",
			 json_string_value(json_object_get(rec, "pms_property_code")));
		if (!json_is_object(prev)) {
			json_array_append_new(r->skipped, json_string(t.id));
			continue;
		}
		json_array_append_new(r->restored, json_string(t.id));
		rate_batch_add(r->batch, &t, room, from, to,
			       json_string_value(json_object_get(prev, "currency")),
			       json_integer_value(json_object_get(prev, "minor_units")), r->id,
			       "revert");
	}
}

/* Records a successful revert inside tx: its writes, the reverted entry,
 * the row, and v2 rate.decision.reverted. Returns 0, 1 (another revert
 * won: out set) or < 0. */
static int record_reverted(struct store_tx *tx, struct audit_chain *ch, struct revert *r,
			   struct decision_outcome *out)
{
	int64_t now = clock_now_ms();
	char at[CLOCK_RFC3339_LEN];
	json_t *e, *data;
	size_t i;
	int rc = still_published(tx, r->id);

	if (rc == 0)
		out->result = DECISION_REVERTED_MEANWHILE;
	if (rc <= 0)
		return rc < 0 ? rc : 1;
	for (i = 0, rc = 0; i < r->batch->n && rc == 0; i++) {
		e = rate_batch_entry(r->batch, i, "revert");
		rc = audit_append(tx, ch, "pms_write", "pms", e, now);
		json_decref(e);
	}
	e = json_pack("{s:s, s:s, s:s, s:O, s:O, s:O}", "reason", r->reason, "approver_saml_subject",
		      r->approver, "requested_by", r->actor, "restored", r->restored,
		      "not_restored_no_previous_rate", r->skipped, "approver_roles", r->roles);
	if (rc == 0)
		rc = audit_append(tx, ch, "reverted", r->approver, e, now);
	json_decref(e);
	if (rc == 0)
		rc = mark_reverted(tx, r->id, r->reason, r->approver, now);
	if (rc == 0)
		rc = floors_withdraw(tx, r->id, now);
	clock_format_ms(now, at);
	data = json_pack("{s:s, s:s, s:s, s:s}", "decision_id", r->id, "reason", r->reason,
			 "approver_saml_subject", r->approver, "reverted_at", at);
	if (rc == 0)
		rc = outbox_append(tx, "v2", "rate.decision.reverted", r->who->portfolio_id,
				   json_object_get(r->decision, "properties"), data, NULL, 0);
	json_decref(data);
	return rc < 0 ? rc : 0;
}

/* After the writes: records the failure or the revert, with the
 * decision read back inside the record for the answer. */
static int revert_record(struct store *st, struct revert *r, int written, struct decision_outcome *out)
{
	struct store_tx *tx;
	struct audit_chain ch;
	int rc;

	if (written == 1)
		return record_batch_failure(st, r->who, r->id, r->batch, "revert", 0, out);
	if ((rc = reopen_chain(st, r->id, &tx, &ch)) < 0)
		return rc;
	rc = record_reverted(tx, &ch, r, out);
	if (rc == 1) {
		store_rollback(tx);
		return 0;
	}
	if (rc == 0 && (rc = decision_load(tx, r->who->portfolio_id, r->id, &out->body)) == 1) {
		out->result = DECISION_DONE;
		rc = with_answer(r->who, tx, 0, out);
	} else if (rc >= 0) {
		rc = STORE_ERR; /* the decision vanished under the write lock */
	}
	if ((rc = store_finish(tx, rc)) != STORE_OK) {
		json_decref(out->body);
		out->body = NULL;
	}
	return rc;
}

int decision_revert(struct store *st, struct pms *pms, const struct decision_who *who, const char *id,
		    const char *reason, const char *approver, struct decision_outcome *out)
{
	struct revert r = {who,  id,   reason, approver, NULL, NULL, NULL,
			   NULL, NULL, NULL,   "",       "",   NULL};
	struct store_tx *tx;
	int rc;

	memset(out, 0, sizeof *out);
	snprintf(out->id, sizeof out->id, "%s", id);
	r.restored = json_array();
	r.skipped = json_array();
	r.batch = calloc(1, sizeof *r.batch);
	rc = r.batch ? store_begin(st, 1, &tx) : STORE_ERR;
	if (rc != STORE_OK)
		goto out;
	rc = revert_check(tx, &r, out);
	store_rollback(tx);
	if (rc != 0)
		goto out;
	revert_batch(&r);
	rc = revert_record(st, &r, rate_batch_run(pms, r.batch), out);
out:
	json_decref(r.decision);
	json_decref(r.receipts);
	json_decref(r.row);
	json_decref(r.roles);
	json_decref(r.restored);
	json_decref(r.skipped);
	free(r.batch);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------ recovery */

/* Pending decisions of nodes that are gone (or of no recorded node). */
#define ORPHANED                                                                   \
	"rate_decisions WHERE status = 'pending' AND (node IS NULL OR node NOT IN" \
	" (SELECT id FROM nodes WHERE heartbeat_at > $1))"

/* Marks the orphaned decisions listed in ids failed, in tx. */
static int fail_orphans(struct store_tx *tx, const json_t *ids)
{
	struct audit_chain ch;
	json_t *d, *v;
	size_t i;
	int rc = 0;

	d = json_pack("{s:s, s:s}", "stage", "publish", "reason",
		      "interrupted: the server stopped during the PMS writes; their outcome is "
		      "unknown and nothing was compensated");
	json_array_foreach(ids, i, v) {
		rc = audit_open(tx, json_string_value(v), &ch);
		if (rc == 0)
			rc = audit_append(tx, &ch, "failed", "revops", d, clock_now_ms());
		if (rc == 0)
			rc = set_status(tx, json_string_value(v), "failed", NULL, d);
		if (rc < 0)
			break;
	}
	json_decref(d);
	return rc;
}

int decision_recover(struct store *st, int64_t alive_after)
{
	struct store_val v = sv_int(alive_after);
	struct store_tx *tx;
	struct store_rows *r;
	json_t *ids = json_array();
	int64_t n = 0;
	int rc;

	/* A read first: the usual answer is none, without the write lock. */
	if (!ids || store_begin(st, 0, &tx) != STORE_OK)
		goto fail;
	rc = store_query_int(tx, "SELECT COUNT(*) FROM " ORPHANED, &v, 1, &n);
	store_rollback(tx);
	if (rc < 0 || n == 0) {
		json_decref(ids);
		return rc < 0 ? -1 : 0;
	}
	if (store_begin(st, 1, &tx) != STORE_OK)
		goto fail;
	if ((rc = store_query(tx, "SELECT id FROM " ORPHANED, &v, 1, &r)) == STORE_OK) {
		while ((rc = store_next(r)) == 1)
			json_array_append_new(ids, json_string(store_text(r, 0)));
		store_rows_close(r);
	}
	if (rc >= 0)
		rc = fail_orphans(tx, ids);
	if (store_finish(tx, rc) != STORE_OK)
		goto fail;
	rc = (int)json_array_size(ids);
	json_decref(ids);
	return rc;
fail:
	json_decref(ids);
	return -1;
}
