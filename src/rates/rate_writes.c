#include "rates/rate_writes.h"

#include <stdio.h>
#include <string.h>

#include "events/outbox.h"
#include "rates/audit_trail.h"
#include "rates/governance.h"
#include "store/store.h"

void rate_batch_add(struct rate_batch *b, const struct portfolio_property *t, const char *room,
		    const char *from, const char *to, const char *currency, int64_t minor,
		    const char *decision_id, const char *purpose)
{
	struct pms_write *w = &b->w[b->n];

	if (&b->t[b->n] != t)
		b->t[b->n] = *t;
	memset(w, 0, sizeof *w);
	w->property_code = b->t[b->n].code;
	w->room_type_code = room;
	w->from = from;
	w->to = to;
	w->currency = currency;
	w->minor_units = minor;
	snprintf(w->idempotency_key, sizeof w->idempotency_key, "%.60s:%.60s:%s", decision_id,
		 t->id, purpose);
	b->n++;
}

/* Prepares the compensation of every write that succeeded into b->cw;
 * returns how many. */
static size_t plan_compensation(struct rate_batch *b)
{
	size_t i, k = 0;

	for (i = 0; i < b->n; i++) {
		b->comp[i] = 0;
		if (!b->w[i].ok)
			continue;
		if (!b->w[i].has_previous) {
			b->comp[i] = 2;
			continue;
		}
		b->cw[k] = b->w[i];
		snprintf(b->cw[k].idempotency_key, sizeof b->cw[k].idempotency_key,
			 "%.140s:compensate", b->w[i].idempotency_key);
		b->cw[k].currency = b->w[i].prev_currency;
		b->cw[k].minor_units = b->w[i].prev_minor_units;
		b->cw[k].ok = 0;
		k++;
	}
	return k;
}

#define UNSENT                                                                              \
	"not sent: this server could not open a connection to the PMS (a local fault, such" \
	" as too many open files)"

/* Fails writes w[0..n) as not sent. */
static void fail_unsent(struct pms_write *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		w[i].ok = 0;
		w[i].http_status = 0;
		snprintf(w[i].error, sizeof w[i].error, "%s", UNSENT);
	}
}

int rate_batch_run(struct pms *pms, struct rate_batch *b)
{
	size_t i;
	int failed = 0;

	b->unsent = 0;
	if (pms_write_all(pms, b->w, b->n) < 0) {
		fail_unsent(b->w, b->n);
		b->unsent = 1;
		return 1; /* nothing was written: nothing to compensate */
	}
	for (i = 0; i < b->n; i++)
		failed |= !b->w[i].ok;
	if (!failed)
		return 0;
	rate_batch_undo(pms, b);
	return 1;
}

void rate_batch_undo(struct pms *pms, struct rate_batch *b)
{
	size_t i, k = plan_compensation(b);

	if (k && pms_write_all(pms, b->cw, k) < 0)
		fail_unsent(b->cw, k); /* the rates stay: recorded as failed restores */
	for (i = 0, k = 0; i < b->n; i++) {
		if (!b->w[i].ok || b->comp[i] == 2)
			continue;
		b->comp[i] = b->cw[k].ok ? 1 : 3;
		k++;
	}
}

json_t *rate_batch_entry(const struct rate_batch *b, size_t i, const char *purpose)
{
	const struct pms_write *w = &b->w[i];

	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:s}", "property", b->t[i].id,
			 "pms_property_code", b->t[i].code, "purpose", purpose, "pms_ref",
			 w->pms_ref, "at", w->at, "rate",
			 governance_money(w->currency, w->minor_units), "previous_rate",
			 w->has_previous ? governance_money(w->prev_currency, w->prev_minor_units)
					 : json_null(),
			 "idempotency_key", w->idempotency_key);
}

/* The pms_compensation details of write i, whose compensating write (when
 * there is one) is cw. */
static json_t *compensation_entry(const struct rate_batch *b, size_t i, const struct pms_write *cw)
{
	const struct pms_write *w = &b->w[i];

	if (b->comp[i] == 2)
		return json_pack("{s:s, s:s, s:s}", "property", b->t[i].id, "result",
				 "nothing to restore: the PMS had no previous rate", "of_pms_ref",
				 w->pms_ref);
	return json_pack("{s:s, s:s, s:s, s:o, s:s?, s:s}", "property", b->t[i].id, "result",
			 b->comp[i] == 1 ? "restored" : "restore failed", "of_pms_ref", w->pms_ref,
			 "restored_rate", governance_money(w->prev_currency, w->prev_minor_units),
			 "pms_ref", b->comp[i] == 1 ? cw->pms_ref : NULL, "error",
			 b->comp[i] == 1 ? "" : cw->error);
}

/* The audit entries of the writes made and of their compensations. */
static int record_writes(struct store_tx *tx, struct audit_chain *ch, const struct rate_batch *b,
			 const char *purpose, int64_t now)
{
	size_t i, k = 0;
	json_t *d;
	int rc = 0;

	for (i = 0; i < b->n && rc == 0; i++) {
		if (!b->w[i].ok)
			continue;
		d = rate_batch_entry(b, i, purpose);
		rc = audit_append(tx, ch, "pms_write", "pms", d, now);
		json_decref(d);
	}
	for (i = 0; i < b->n && rc == 0; i++) {
		if (!b->w[i].ok || !b->comp[i])
			continue;
		d = compensation_entry(b, i, &b->cw[k]);
		if (b->comp[i] != 2)
			k++;
		rc = audit_append(tx, ch, "pms_compensation", "pms", d, now);
		json_decref(d);
	}
	return rc;
}

/* The failed writes as a list, each also announced in the outbox. */
static int record_failed(struct store_tx *tx, const char *pf, const char *decision_id,
			 const struct rate_batch *b, json_t *failed)
{
	json_t *props, *data;
	size_t i;
	int rc = 0;

	for (i = 0; i < b->n && rc == 0; i++) {
		const struct pms_write *w = &b->w[i];

		if (w->ok)
			continue;
		json_array_append_new(failed,
				      json_pack("{s:s, s:s, s:I, s:s}", "property", b->t[i].id,
						"pms_property_code", b->t[i].code, "http_status",
						(json_int_t)w->http_status, "error", w->error));
		props = json_pack("[s]", b->t[i].id);
		data = json_pack("{s:s, s:s, s:s, s:I, s:s}", "decision_id", decision_id,
				 "property_id", b->t[i].id, "pms_property_code", b->t[i].code,
				 "http_status", (json_int_t)w->http_status, "error", w->error);
		rc = outbox_append(tx, "v1", "connection.d_edge.failed", pf, props, data, NULL, 0);
		json_decref(props);
		json_decref(data);
	}
	return rc;
}

json_t *rate_batch_record_failure(struct store_tx *tx, struct audit_chain *ch,
				  const char *portfolio_id, const char *decision_id,
				  const struct rate_batch *b, const char *purpose, int64_t now,
				  int *rc)
{
	json_t *failed = json_array(), *failure;

	*rc = record_writes(tx, ch, b, purpose, now);
	if (*rc == 0)
		*rc = record_failed(tx, portfolio_id, decision_id, b, failed);
	if (*rc < 0) {
		json_decref(failed);
		return NULL;
	}
	failure = json_pack("{s:s, s:o, s:s*}", "stage", purpose, "failed_writes", failed, "reason",
			    b->why);
	*rc = audit_append(tx, ch, "failed", "revops", failure, now);
	if (*rc < 0) {
		json_decref(failure);
		return NULL;
	}
	return failure;
}
