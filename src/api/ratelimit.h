/* ratelimit: per-key API rate limiting, "never more than N in any rolling
 * 60 s" (API contract §3). Each key has a sliding window of 100 ms buckets
 * that covers the last 60 s plus at most one bucket, so the limiter errs on
 * the side of refusing; memory per key does not depend on N. Time is a
 * monotonic millisecond count passed in by the caller; the module never reads
 * a clock. */
#ifndef REVOPS_RATELIMIT_H
#define REVOPS_RATELIMIT_H
#include <stdint.h>
#include <stddef.h>
#include "core/common.h"

/* Longest key in bytes; longer keys are cut to this many bytes. */
#define RATELIMIT_KEY_MAX 255

struct rl_result {
	int allowed;       /* 1 = counted and allowed, 0 = refused (not counted) */
	int64_t limit;     /* the per-minute figure used */
	int64_t remaining; /* requests allowed right now after this one (>= 0) */
	/* whole seconds (rounded up, at most 60) until the full allowance is
	 * back; 0 if already full. The window's 100 ms buckets may hold the
	 * newest requests up to 100 ms past a reported 60 (ratelimit.c). */
	int64_t reset_s;
	/* when refused: whole seconds (rounded up, 1 to 60) until at least one
	 * request is allowed, with the same slack; 0 when allowed */
	int64_t retry_after_s;
};

/* One key's window; opaque outside ratelimit.c except for tests via the
 * functions below. About 2.4 KiB whatever the limit. Not thread-safe. */
struct rl_window;

/* A new, empty window (full allowance), or NULL on OOM. */
struct rl_window *rl_window_new(void);
void rl_window_free(struct rl_window *w);

/* The pure core: decides one request at now_ms and counts it if allowed.
 * per_minute may change from call to call (it is clamped to
 * [1, INT32_MAX]; out->limit is the clamped figure). A now_ms earlier than
 * the latest time this window has seen is taken as that latest time. */
void rl_window_take(struct rl_window *w, int64_t per_minute, int64_t now_ms, struct rl_result *out);

/* Read-only peek: counts nothing and does not change w. out->allowed says
 * whether one more request would pass at now_ms, out->remaining how many
 * would pass (no request is deducted), reset_s and retry_after_s as for
 * rl_window_take. */
void rl_window_peek(struct rl_window *w, int64_t per_minute, int64_t now_ms, struct rl_result *out);

/* A thread-safe registry of windows keyed by string. */
struct ratelimit;

/* max_keys (0 is taken as 1) bounds memory: when the registry is full, the
 * least recently used key is evicted and starts again empty if it comes back.
 * Keys live in up to 16 lock stripes chosen by a keyed hash, each holding
 * max_keys / stripes keys; under 128 keys there is one stripe and eviction is
 * exact LRU, otherwise the victim is the key idle longest in its own stripe.
 * Either way the victim has been idle longer than every other key sharing its
 * stripe, so size max_keys well above the keys active in any 60 s and only
 * long-idle keys are ever forgotten. Returns NULL on OOM. */
struct ratelimit *ratelimit_new(size_t max_keys);
void ratelimit_free(struct ratelimit *rl);

/* Takes one request for key (NUL-terminated; only the first
 * RATELIMIT_KEY_MAX bytes count) at now_ms, as rl_window_take does, under the
 * key's stripe lock. Returns 0, or -1 when a new key's window cannot be
 * allocated: out is then filled as allowed with a full allowance minus one
 * (the limiter fails open rather than refusing traffic on OOM). */
int ratelimit_take(struct ratelimit *rl, const char *key, int64_t per_minute, int64_t now_ms,
		   struct rl_result *out) WUR;

#endif
