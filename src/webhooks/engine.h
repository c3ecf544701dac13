/* engine: the webhook delivery engine (API-CONTRACT §5).
 *
 * The fan-out thread reads the outbox (events) after its cursor and, in one
 * transaction per batch, creates one delivery per matching subscription
 * plus one per mirror, each with the exact body every attempt will send,
 * and advances the cursor. Each sender thread (--webhook-senders) keeps
 * many HTTPS POSTs in flight on its own asynchronous libcurl client and,
 * once per turn, in one write transaction, records the attempts that
 * finished (state, schedule, attempt log) and claims the next due
 * deliveries. A lane belongs to one sender (by a hash of its key).
 *
 * Deliveries are grouped in lanes: a v1 subscription, or a v2 portfolio's
 * primary URL, or its mirror URL. A lane has a throughput cap (v1 20/s,
 * v2 by plan; evenly spaced sends, the excess waits in the table) and at
 * most ENGINE_LANE_CONCURRENCY attempts in flight; lanes are served round
 * robin, so a slow receiver holds only its own lane.
 *
 * Crash safety: the transaction that claims deliveries also writes a claim
 * row naming them (webhook_claims); their own rows stay as they are, still
 * due, and the sender skips them while they are in flight. The outcome of
 * the claim's last delivery deletes the row. A process killed mid-attempt
 * leaves its claim rows; the next start counts the deliveries they name
 * that are still outstanding (those may arrive twice: at-least-once),
 * deletes the rows and sends everything due. */
#ifndef REVOPS_ENGINE_H
#define REVOPS_ENGINE_H
#include <jansson.h>
#include <stdint.h>
#include "core/common.h"
#include "events/outbox.h"

struct store;
struct store_tx;
struct store_rows;
struct engine;

#define ENGINE_LANE_CONCURRENCY 8
#define ENGINE_MAX_SENDERS 16

struct cluster;

struct engine_opts {
	int uncapped;                  /* --webhook-uncapped (benchmarks) */
	int allow_private;             /* --allow-private-targets */
	const unsigned char *seal_key; /* 32 bytes, opens the stored secrets */
	int senders;                   /* sender threads (--webhook-senders), 1-16 */
	struct cluster *cluster;       /* serves only the lanes whose lease it holds */
};

/* The attempts this process recorded since it started: delivered (2xx)
 * and failed (anything else). 0 and 0 for NULL. */
void engine_counts(struct engine *d, uint64_t *delivered, uint64_t *failed);

/* The key of a lane in the due index (webhook_deliveries.lane_hash). */
int64_t engine_lane_hash(const char *lane);

/* Recovers claims left by a crash, starts the threads and takes the lane
 * leases of o->cluster. Returns 0 or -1 (logged). */
int engine_start(struct store *st, const struct engine_opts *o, struct engine **out) WUR;

/* Stops claiming, waits up to drain_ms for attempts in flight (recording
 * them), stops both threads and frees d. Attempts still running after that
 * keep their claim and are sent again at the next start. NULL is ignored. */
void engine_stop(struct engine *d, int drain_ms);

/* Lanes that got new due deliveries in a transaction, to pass to
 * engine_notify after it commits. */
struct engine_touched {
	char lanes[128][300];
	int rates[128];
	int n;
	int overflow; /* more lanes than fit: rescan all */
};

/* After the transaction committed: the lanes in touched have deliveries
 * due now. Thread-safe; d may be NULL (no engine: the tool). */
void engine_notify(struct engine *d, const struct engine_touched *touched);

/* Adds lane (with its rate) to touched. */
void engine_touch(struct engine_touched *touched, const char *lane, int rate);

/* The delivery schedule of a surface: offsets in ms from the first attempt;
 * returns how many (v1 9, v2 7). */
int engine_schedule(const char *surface, const int64_t **offsets);

/* ------------------------------------------------- the delivery API's side
 * Reads and manual writes of deliveries for api/webhooks/delivery (which
 * answers HTTP and holds no SQL). */

/* Outcomes beside the negative store statuses. */
enum engine_outcome {
	ENGINE_NONE = 0,    /* no such delivery or subscription (for the surface asked) */
	ENGINE_MINE = 1,    /* done; the caller's portfolio's */
	ENGINE_OTHER = 2,   /* another portfolio's */
	ENGINE_STATE = 3,   /* redelivery refused: the delivery's state */
	ENGINE_EXPIRED = 4, /* redelivery refused: the event is older than the window */
};

#define ENGINE_SLA_TARGET 0.9995       /* the delivered ratio promised a month */
#define ENGINE_SLA_CREDIT_BELOW 0.9990 /* a month below this earns a credit */

/* 1 when state is a delivery state (pending, retry_scheduled, delivered,
 * dead_lettered), else 0. */
int engine_delivery_state_known(const char *state);

/* A page of the portfolio's deliveries to subscription_id, in state when
 * not NULL (engine_delivery_state_known), newest first: seq below before
 * (INT64_MAX for the first page), limit + 1 rows so the caller knows
 * whether more follow. Begins a read snapshot in *tx and runs the query in
 * *rows; both are the caller's to close (respond_rows_page closes them),
 * also on failure (*tx NULL when the snapshot did not begin, *rows NULL
 * when the query failed). Returns STORE_OK or a negative store status.
 * Rows go to engine_delivery_item. */
int engine_deliveries_page(struct store *st, const char *portfolio_id, const char *subscription_id,
			   const char *state, int64_t before, int limit, struct store_tx **tx,
			   struct store_rows **rows) WUR;
/* The same for the portfolio's dead letters, of subscription_id only when
 * it is not NULL. */
int engine_dead_letters_page(struct store *st, const char *portfolio_id,
			     const char *subscription_id, int64_t before, int limit,
			     struct store_tx **tx, struct store_rows **rows) WUR;
/* The delivery JSON (with its attempt log: one query) of the current row
 * of a page query, its seq (the page key) in key. The shape of a
 * respond_row_fn. */
json_t *engine_delivery_item(struct store_tx *tx, struct store_rows *r, void *arg, char *key,
			     size_t keycap);

/* Delivery id with its attempt log as JSON in *out (owned by the caller)
 * when it is portfolio_id's. Returns ENGINE_MINE, ENGINE_NONE or
 * ENGINE_OTHER (*out NULL), or a negative store status. */
int engine_delivery_get(struct store *st, const char *portfolio_id, const char *id, json_t **out) WUR;

/* What engine_redeliver reports. */
struct engine_redelivery {
	json_t *delivery; /* ENGINE_MINE: the delivery, requeued (owned by the caller) */
	char state[24];   /* ENGINE_STATE: the state that refused it */
	int window_days;  /* ENGINE_EXPIRED: the window it is out of */
};

/* Manual recovery, one new attempt now: a v1 retry (surface "v1") takes a
 * dead-lettered delivery only, within 30 days of the original event; a v2
 * replay ("v2") a delivered or dead-lettered one within 90 days (both
 * scaled by clock_business_ms). A delivery of the other surface is not
 * found. Requeues it in one write transaction, then tells d (may be NULL).
 * Returns ENGINE_MINE, _NONE, _OTHER, _STATE, _EXPIRED (out says more) or
 * a negative store status. */
int engine_redeliver(struct engine *d, struct store *st, const char *portfolio_id, const char *id,
		     const char *surface, struct engine_redelivery *out) WUR;

/* Pings the enabled subscription subscription_id of surface: a
 * webhook.ping outbox event (kept like any other) and its deliveries to
 * that subscription only, in one write transaction, then tells d (may be
 * NULL). *out (owned by the caller) is {event_id, subscription_id,
 * deliveries: [{id, target}]}. Returns ENGINE_MINE, ENGINE_NONE,
 * ENGINE_OTHER or a negative store status. */
int engine_ping(struct engine *d, struct store *st, const char *surface, const char *portfolio_id,
		const char *subscription_id, json_t **out) WUR;

/* The delivery SLA of a month [start, end) (ms): the portfolio's primary v2
 * deliveries of real events (not pings) created for events in it, and how
 * many were delivered. */
struct engine_sla {
	int64_t events, delivered;
	double ratio;   /* delivered / events, 1 when there were none */
	double target;  /* ENGINE_SLA_TARGET */
	int credit_due; /* ratio below ENGINE_SLA_CREDIT_BELOW */
};
int engine_sla(struct store *st, const char *portfolio_id, int64_t start, int64_t end,
	       struct engine_sla *out) WUR;

#endif
