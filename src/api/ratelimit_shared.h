/* ratelimit_shared: the per-portfolio API rate limit ("never more than N
 * in any rolling 60 s", API-CONTRACT §3) held across every API node on a
 * shared database, by grants of quota (docs/operations.md).
 *
 * A node admits a request only from quota it has been granted: a row of
 * ratelimit_grants (key, granted_at, n), written in a write transaction
 * only while the key's grants of the last RL_SPAN_MS leave room for it, so
 * the grants made in any span of RL_SPAN_MS never sum past the limit. A
 * grant is spent within RL_GRANT_TTL_MS of being made, or what is left of
 * it is dropped. A request admitted in a rolling 60 s therefore comes from
 * a grant made in the RL_SPAN_MS (60 s + RL_GRANT_TTL_MS) before that
 * minute ended: however many nodes serve a portfolio, together they never
 * admit more than its figure in any rolling 60 s (the nodes' clocks are
 * assumed to agree within a few milliseconds: NTP).
 *
 * The price is paid in admission, never in excess: quota a node was
 * granted and did not spend in time is lost for the window, so a
 * portfolio can be refused up to one grant per node before its figure. A
 * grant starts at 1 request, doubles while grants are spent within half
 * their time to live, halves when one expires unspent, and is at most
 * limit / 20; each costs one write transaction.
 *
 * One node on its own database (SQLite) uses ratelimit.h's exact windows
 * instead. */
#ifndef REVOPS_RATELIMIT_SHARED_H
#define REVOPS_RATELIMIT_SHARED_H
#include "api/ratelimit.h"
#include "core/common.h"

struct store;

#define RL_GRANT_TTL_MS 1000
#define RL_SPAN_MS (60000 + RL_GRANT_TTL_MS)

struct rl_shared;

/* A limiter on st with room for max_keys keys (the least recently used
 * is forgotten beyond that, keeping its grants in the table). NULL on
 * out-of-memory. */
struct rl_shared *rl_shared_new(struct store *st, size_t max_keys);
void rl_shared_free(struct rl_shared *s);

/* Decides one request for key (at most RATELIMIT_KEY_MAX bytes count)
 * against per_minute, asking the database for a grant when this node has
 * none left. Returns 0 with *out filled as rl_window_take fills it, or a
 * negative store status (out then says allowed: the caller fails open, as
 * the database failure will be answered anyway). Thread-safe. */
int rl_shared_take(struct rl_shared *s, const char *key, int64_t per_minute,
		   struct rl_result *out) WUR;

/* Deletes grants older than RL_SPAN_MS (of keys no node asked for since).
 * Returns how many, or a negative store status. */
int rl_shared_purge(struct store *st, int64_t now_ms) WUR;

#endif
