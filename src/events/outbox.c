#include "events/outbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonw.h"
#include "core/clock.h"
#include "core/id.h"
#include "core/trace.h"
#include "store/store.h"

static const char *const v1_events[] = {
	"rate.suggested",    "rate.approved",
	"rate.rejected",     "review.drafted",
	"review.published",  "whatsapp.received",
	"whatsapp.sent",     "invoice.issued",
	"invoice.corrected", "connection.d_edge.failed",
};
static const char *const v2_events[] = {
	"rate.decision.published",   "rate.decision.reverted", "guest.thread.escalated",
	"reputation.score.dropped",  "parity.breach.detected", "fiscal.batch.approved",
	"operations.task.escalated", "sso.user.provisioned",   "sso.user.deprovisioned",
};

/* The columns every read selects, in struct outbox_event's order. */
#define EVENT_COLS \
	"seq, id, surface, type, portfolio_id, property_ids, data, created_at, traceparent"

int outbox_event_known(const char *surface, const char *type)
{
	const char *const *list = strcmp(surface, "v1") ? v2_events : v1_events;
	size_t i, n = strcmp(surface, "v1") ? ARRAY_LEN(v2_events) : ARRAY_LEN(v1_events);

	for (i = 0; i < n; i++)
		if (!strcmp(list[i], type))
			return 1;
	return 0;
}

/* One event made ready for its insert: id, texts and trace context. */
struct ready {
	char id[ID_MAX];
	char surface[4];
	char type[48];
	char portfolio_id[ID_MAX];
	char *props, *body;
	int has_tp;
	char tp[TRACE_PARENT_LEN];
};

static void ready_free(struct ready *e)
{
	free(e->props);
	free(e->body);
	e->props = e->body = NULL;
}

/* Fills e for its insert, taking props and body (JSON texts, malloc'd,
 * NULL when their making failed; freed here on failure). Returns 0 or
 * STORE_ERR (bad arguments or no memory; nothing to free then). */
static int ready_take(struct ready *e, const char *surface, const char *type,
		      const char *portfolio_id, char *props, char *body)
{
	const struct trace_ctx *t = trace_current();

	memset(e, 0, sizeof *e);
	e->props = props;
	e->body = body;
	if ((strcmp(surface, "v1") && strcmp(surface, "v2")) || !props || !body ||
	    strlen(type) >= sizeof e->type || strlen(portfolio_id) >= sizeof e->portfolio_id ||
	    id_new("evt_", e->id, sizeof e->id) < 0) {
		ready_free(e);
		return STORE_ERR;
	}
	memcpy(e->surface, surface, 3);
	memcpy(e->type, type, strlen(type) + 1);
	memcpy(e->portfolio_id, portfolio_id, strlen(portfolio_id) + 1);
	if ((e->has_tp = t != NULL))
		trace_format(t, t->span_id, e->tp);
	return 0;
}

/* Checks and serialises an event (outbox_append's arguments) into e. */
static int ready_make(struct ready *e, const char *surface, const char *type,
		      const char *portfolio_id, const json_t *property_ids, const json_t *data)
{
	if (!json_is_array(property_ids) || !json_is_object(data)) {
		memset(e, 0, sizeof *e);
		return STORE_ERR;
	}
	return ready_take(e, surface, type, portfolio_id, json_dumps(property_ids, JSON_COMPACT),
			  json_dumps(data, JSONW_DUMP));
}

/* Inserts e inside tx, in the writers' turn: events commit in the order
 * of their numbers (the fan-out reads past the last one it saw). Several
 * events of one transaction go in multi-row statements. */
static int ready_insert(struct store_tx *tx, const struct ready *e)
{
	int rc = store_turn(tx);

	if (rc < 0)
		return rc;
	rc = store_send_row(tx,
			    "INSERT INTO events (id, surface, type, portfolio_id, property_ids, data,"
			    " created_at, traceparent)",
			    "", 8,
			    (struct store_val[]){sv_text(e->id), sv_text(e->surface), sv_text(e->type),
						 sv_text(e->portfolio_id), sv_text(e->props),
						 sv_text(e->body), sv_int(clock_now_ms()),
						 sv_text(e->has_tp ? e->tp : NULL)});
	if (rc < 0 || (rc = store_notify(tx, STORE_CH_OUTBOX)) < 0)
		return rc;
	return 0;
}

int outbox_append(struct store_tx *tx, const char *surface, const char *type,
		  const char *portfolio_id, const json_t *property_ids, const json_t *data,
		  char *id_out, size_t id_cap)
{
	struct ready e;
	int rc = ready_make(&e, surface, type, portfolio_id, property_ids, data);

	if (rc < 0)
		return rc;
	rc = ready_insert(tx, &e);
	if (rc == 0 && id_out)
		snprintf(id_out, id_cap, "%s", e.id);
	ready_free(&e);
	return rc;
}

int outbox_append_text(struct store_tx *tx, const char *surface, const char *type,
		       const char *portfolio_id, const char *property_ids, const char *data)
{
	struct ready e;
	int rc = ready_take(&e, surface, type, portfolio_id, strdup(property_ids), strdup(data));

	if (rc < 0)
		return rc;
	rc = ready_insert(tx, &e);
	ready_free(&e);
	return rc;
}

struct outbox_later {
	struct ready *e;
	size_t n, cap;
};

int outbox_later_add(struct outbox_later **l, const char *surface, const char *type,
		     const char *portfolio_id, const json_t *property_ids, const json_t *data,
		     char *id_out, size_t id_cap)
{
	struct ready *e;
	size_t cap;

	if (!*l && !(*l = calloc(1, sizeof **l)))
		return STORE_ERR;
	if ((*l)->n == (*l)->cap) {
		cap = (*l)->cap ? (*l)->cap * 2 : 32;
		if (!(e = realloc((*l)->e, cap * sizeof *e)))
			return STORE_ERR;
		(*l)->e = e;
		(*l)->cap = cap;
	}
	e = &(*l)->e[(*l)->n];
	if (ready_make(e, surface, type, portfolio_id, property_ids, data) < 0)
		return STORE_ERR;
	(*l)->n++;
	if (id_out)
		snprintf(id_out, id_cap, "%s", e->id);
	return 0;
}

int outbox_later_append(struct store_tx *tx, struct outbox_later *l)
{
	int rc = 0;

	for (size_t i = 0; l && rc == 0 && i < l->n; i++)
		rc = ready_insert(tx, &l->e[i]);
	return rc;
}

void outbox_later_free(struct outbox_later *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		ready_free(&l->e[i]);
	free(l->e);
	free(l);
}

int outbox_first_after(struct store_tx *tx, int64_t after, int64_t *seq)
{
	return store_query_int(tx, "SELECT seq FROM events WHERE seq > $1 ORDER BY seq LIMIT 1",
			       (struct store_val[]){sv_int(after)}, 1, seq);
}

int outbox_skip_after(struct store_tx *tx, int64_t after, int64_t limit, int64_t *last)
{
	struct store_rows *r;
	int rc, n = 0;

	*last = after;
	rc = store_query(tx,
			 "SELECT count(*), coalesce(max(seq), $1) FROM (SELECT seq FROM events"
			 " WHERE seq > $1 ORDER BY seq LIMIT $2) w",
			 (struct store_val[]){sv_int(after), sv_int(limit)}, 2, &r);
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1) {
		n = (int)store_int(r, 0);
		*last = store_int(r, 1);
	}
	store_rows_close(r);
	return rc < 0 ? rc : n;
}

/* Passes each row of r (EVENT_COLS) to fn until the rows end or fn stops.
 * Returns the number of rows passed, or a negative store status (a failed
 * read or fn's own). Closes r. */
static int each_row(struct store_rows *r, outbox_event_fn fn, void *arg)
{
	int rc, n = 0;

	while ((rc = store_next(r)) == 1) {
		struct outbox_event ev = {store_int(r, 0),
					  store_text(r, 1),
					  store_text(r, 2),
					  store_text(r, 3),
					  store_text(r, 4),
					  store_text(r, 5),
					  store_text(r, 6),
					  store_int(r, 7),
					  store_is_null(r, 8) ? NULL : store_text(r, 8)};

		n++;
		rc = fn(&ev, arg);
		if (rc != 0)
			break;
	}
	store_rows_close(r);
	if (rc < 0)
		return rc;
	return n;
}

int outbox_each_after(struct store_tx *tx, int64_t after, int64_t limit, outbox_event_fn fn, void *arg)
{
	struct store_rows *r;
	int rc;

	rc = store_query(tx, "SELECT " EVENT_COLS " FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
			 (struct store_val[]){sv_int(after), sv_int(limit)}, 2, &r);
	if (rc != STORE_OK)
		return rc;
	rc = each_row(r, fn, arg);
	return rc < 0 ? rc : 0;
}

int outbox_get(struct store_tx *tx, const char *id, outbox_event_fn fn, void *arg)
{
	struct store_rows *r;
	int rc;

	rc = store_query(tx, "SELECT " EVENT_COLS " FROM events WHERE id = $1",
			 (struct store_val[]){sv_text(id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	return each_row(r, fn, arg);
}

/* outbox_list_json's fn: appends ev to the array arg. */
static int append_json(const struct outbox_event *ev, void *arg)
{
	json_t *props = json_loads(ev->property_ids, 0, NULL);
	json_t *data = json_loads(ev->data, 0, NULL);
	char ts[CLOCK_RFC3339_LEN];

	clock_format_ms(ev->created_at, ts);
	json_array_append_new(arg, json_pack("{s:I, s:s, s:s, s:s, s:o, s:o, s:s}", "seq",
					     (json_int_t)ev->seq, "id", ev->id, "surface",
					     ev->surface, "type", ev->type, "properties",
					     props ? props : json_array(), "data",
					     data ? data : json_object(), "created_at", ts));
	return 0;
}

int outbox_list_json(struct store_tx *tx, const char *portfolio_id, int64_t after, int64_t limit,
		     json_t **out)
{
	struct store_rows *r;
	int rc;

	*out = NULL;
	rc = store_query(tx,
			 "SELECT " EVENT_COLS " FROM events WHERE portfolio_id = $1 AND seq > $2"
			 " ORDER BY seq LIMIT $3",
			 (struct store_val[]){sv_text(portfolio_id), sv_int(after), sv_int(limit)},
			 3, &r);
	if (rc != STORE_OK)
		return rc;
	*out = json_array();
	rc = each_row(r, append_json, *out);
	if (rc < 0) {
		json_decref(*out);
		*out = NULL;
		return rc;
	}
	return 0;
}
