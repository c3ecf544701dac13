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
struct engine;

#define ENGINE_LANE_CONCURRENCY 8
#define ENGINE_MAX_SENDERS 16

struct engine_opts {
	int uncapped;                  /* --webhook-uncapped (benchmarks) */
	int allow_private;             /* --allow-private-targets */
	const unsigned char *seal_key; /* 32 bytes, opens the stored secrets */
	int senders;                   /* sender threads (--webhook-senders), 1-16 */
};

/* The key of a lane in the due index (webhook_deliveries.lane_hash). */
int64_t engine_lane_hash(const char *lane);

/* Recovers claims left by a crash, then starts both threads. Returns 0 or
 * -1 (logged). */
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

/* Inside tx: creates the deliveries of ev for subscription only_sub (a ping)
 * or, when only_sub is NULL, for every enabled subscription of the event's
 * portfolio and surface that lists its type and existed when it happened.
 * Appends {"id", "target"} of each delivery to created when not NULL and
 * records the lanes in touched. Returns the number created or a negative
 * store status. */
int engine_fan_out(struct store_tx *tx, const struct outbox_event *ev, const char *only_sub,
		     json_t *created, struct engine_touched *touched) WUR;

/* After the transaction committed: the lanes in touched have deliveries
 * due now. Thread-safe; d may be NULL (no engine: the tool). */
void engine_notify(struct engine *d, const struct engine_touched *touched);

/* Adds lane (with its rate) to touched. */
void engine_touch(struct engine_touched *touched, const char *lane, int rate);

/* The delivery schedule of a surface: offsets in ms from the first attempt;
 * returns how many (v1 9, v2 7). */
int engine_schedule(const char *surface, const int64_t **offsets);

#endif
