/* timers: the durable scheduler (issue 16; docs/operations-tasks.md,
 * "The scheduler"), the one owner of the timers table.
 *
 * A timer is a row: it fires once for (kind, subject, episode, step) at
 * or after due_at. It lives in the database, not in memory, so it
 * survives restarts; a module sets it in the transaction that starts the
 * episode (timer_set) and cancels it in the one that ends it
 * (timer_cancel), so a timer never fires for an episode that ended first.
 * Durations are the caller's, already scaled by --time-scale
 * (clock_business_ms).
 *
 * The worker role runs the scheduler (sched_start): a thread that, every
 * SCHED_POLL_MS, reads the timers due and fires each by marking it fired
 * and calling its kind's handler inside one write transaction: marked
 * and acted on together, or neither. On PostgreSQL the transaction takes
 * the writers' turn, so two worker nodes never fire one timer twice (the
 * second finds it fired and skips it). A handler that fails rolls its
 * timer back to pending, tried again SCHED_RETRY_MS later. */
#ifndef REVOPS_TIMERS_H
#define REVOPS_TIMERS_H
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"

struct store;
struct store_tx;

#define SCHED_POLL_MS 100
#define SCHED_BATCH 64       /* timers one transaction fires, at most */
#define SCHED_RETRY_MS 30000 /* a failed handler's next try */
#define TIMER_KIND_MAX 32

struct timer {
	char id[ID_MAX];
	char kind[TIMER_KIND_MAX];
	char subject_id[ID_MAX];
	int64_t episode, step;
	char portfolio_id[ID_MAX];
	int64_t due_at;
};

/* Acts on t inside tx (a write transaction in the writers' turn), where
 * t is already marked fired. A handler finds for itself whether the
 * episode still calls for it (a no-op is fine). Returns 0, or < 0 to roll
 * back (t stays pending and is tried again). */
typedef int (*timer_fn)(struct store_tx *tx, const struct timer *t, int64_t now, void *arg);

struct timer_kind {
	const char *kind;
	timer_fn fn;
	void *arg;
};

/* Sets the timer (kind, subject, episode, step) of portfolio pf due at
 * due_at (Unix ms) inside tx; setting one that exists changes nothing.
 * Returns 0 or a negative store status. */
int timer_set(struct store_tx *tx, const char *kind, const char *subject_id, int64_t episode,
	      int64_t step, const char *pf, int64_t due_at) WUR;
/* Cancels every pending timer of kind for subject inside tx. Returns how
 * many, or a negative store status. */
int timer_cancel(struct store_tx *tx, const char *kind, const char *subject_id) WUR;
/* The scheduler thread. */
struct sched;
/* Starts it on st with kinds (kept, not copied). Returns 0 or -1. */
int sched_start(struct store *st, const struct timer_kind *kinds, size_t nkinds,
		struct sched **out) WUR;
/* Stops it (NULL is ignored), waiting for the transaction in hand. */
void sched_stop(struct sched *s);
/* Appends the scheduler's metrics in Prometheus text to out (a struct
 * buf): timers fired and the lag histogram (fired_at - due_at). NULL
 * writes the same with zeros. Returns 0 or -1. */
struct buf;
int sched_metrics(struct sched *s, struct buf *out) WUR;

#endif
