/* outbox: the transactional outbox, the one module that names the events
 * table. Every state change appends the events it causes inside its own
 * transaction, so an event exists if and only if the change committed;
 * delivery workers and the operator tool read it afterwards through the
 * functions below. */
#ifndef REVOPS_OUTBOX_H
#define REVOPS_OUTBOX_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"

struct store_tx;

/* One stored event. Strings are borrowed from the read that produced it
 * and valid only during the callback that receives it. */
struct outbox_event {
	int64_t seq;
	const char *id, *surface, *type, *portfolio_id;
	const char *property_ids; /* JSON array text */
	const char *data;         /* JSON object text */
	int64_t created_at;
	const char *traceparent; /* of the request that caused it, or NULL */
};

/* Called once per event read, in seq order. Returns 0 to go on, 1 to stop
 * reading (not an error), or a negative store status to abort the read. */
typedef int (*outbox_event_fn)(const struct outbox_event *ev, void *arg);

/* 1 when type is an event type of the surface's table (spec "Events"; "v1"
 * or anything else for v2), else 0. webhook.ping is not one: it is emitted
 * only by a ping, for the pinged subscription. */
int outbox_event_known(const char *surface, const char *type);

/* Appends one event inside tx. surface is "v1" or "v2"; property_ids is a
 * JSON array of prop_ ids and data a JSON object (both borrowed). The
 * calling thread's trace context (core/trace.h), if any, is stored with
 * it as the traceparent its deliveries descend from. The new
 * event id ("evt_…") is written to id_out when it is not NULL. Returns 0 or
 * a negative store status. */
int outbox_append(struct store_tx *tx, const char *surface, const char *type,
		  const char *portfolio_id, const json_t *property_ids, const json_t *data,
		  char *id_out, size_t id_cap) WUR;

/* As outbox_append, the array and the object given as their JSON texts
 * (borrowed), which the caller vouches for: compact JSON written with
 * core/jsonw on a hot path, with no jansson tree (equal in value to what
 * outbox_append stores; jsonw escapes some characters as \u00XX where
 * jansson writes \n). Returns 0 or a negative store status. */
int outbox_append_text(struct store_tx *tx, const char *surface, const char *type,
		       const char *portfolio_id, const char *property_ids, const char *data) WUR;

/* Events made ready now (ids, texts, the trace context) and appended
 * later, in order, in one writers' turn: for a STORE_WRITE_OWN writer
 * that does its other writes first, beside the other writers, and takes
 * the turn only for its events. */
struct outbox_later;
/* As outbox_append, into *l (made on first use; NULL to begin). */
int outbox_later_add(struct outbox_later **l, const char *surface, const char *type,
		     const char *portfolio_id, const json_t *property_ids, const json_t *data,
		     char *id_out, size_t id_cap) WUR;
/* Appends l's events inside tx (NULL: none), taking the writers' turn.
 * Returns 0 or a negative store status. */
int outbox_later_append(struct store_tx *tx, struct outbox_later *l) WUR;
void outbox_later_free(struct outbox_later *l);

/* Inside tx: the seq of the first event after seq after, in *seq. One
 * index lookup, for polling. Returns 1 (found), 0 (none) or a negative
 * store status. */
int outbox_first_after(struct store_tx *tx, int64_t after, int64_t *seq) WUR;

/* Inside tx: passes the events after seq after (every portfolio), oldest
 * first, at most limit, to fn, with one query. Returns 0 when fn saw every
 * event read or stopped the read, or a negative store status (fn's own
 * included). */
int outbox_each_after(struct store_tx *tx, int64_t after, int64_t limit, outbox_event_fn fn,
		      void *arg) WUR;

/* Inside tx: how many events follow seq after, at most limit, and the
 * seq of the last of them in *last (after when none). Reads their numbers
 * only (the primary key's index): for a fan-out that has no subscription
 * to read them for. Returns the count or a negative store status. */
int outbox_skip_after(struct store_tx *tx, int64_t after, int64_t limit, int64_t *last) WUR;

/* Inside tx: passes event id to fn. Returns 1 (found, fn's status was
 * not negative), 0 (no such event) or a negative store status. */
int outbox_get(struct store_tx *tx, const char *id, outbox_event_fn fn, void *arg) WUR;

/* Inside tx: the portfolio's events after seq after, oldest first, at most
 * limit, as a new JSON array (owned by the caller) of {seq, id, surface,
 * type, properties, data, created_at}. Returns 0, or a negative store
 * status with *out NULL. */
int outbox_list_json(struct store_tx *tx, const char *portfolio_id, int64_t after, int64_t limit,
		     json_t **out) WUR;

#endif
