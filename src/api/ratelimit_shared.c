#include "api/ratelimit_shared.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "store/store.h"

#define PROBES 16

/* One key's grant. key and last_used change under the limiter's mu; the
 * rest under the entry's own mu, which is held during a grant's database
 * round trip, so that only requests of this key wait for it. */
struct entry {
	pthread_mutex_t mu;
	char key[RATELIMIT_KEY_MAX + 1];
	int64_t last_used;
	int64_t tokens;     /* left of the current grant */
	int64_t expires;    /* wall ms after which they are void; 0: none yet */
	int64_t granted_at; /* wall ms */
	int64_t chunk;      /* the size of the next grant */
	int64_t used;       /* the key's grants in the span, at the last grant */
	int64_t oldest;     /* the earliest of them (wall ms) */
	/* Refused: no quota comes back before the oldest grant leaves the
	 * span, so until then refusals at the same limit (an override may
	 * raise it) need no database (wall ms). */
	int64_t blocked_until, blocked_limit;
};

struct rl_shared {
	struct store *st;
	pthread_mutex_t mu;
	struct entry *e;
	size_t n; /* a power of two */
};

struct rl_shared *rl_shared_new(struct store *st, size_t max_keys)
{
	struct rl_shared *s = calloc(1, sizeof *s);

	if (!s)
		return NULL;
	for (s->n = 64; s->n < 2 * max_keys; s->n *= 2)
		;
	if (!(s->e = calloc(s->n, sizeof *s->e))) {
		free(s);
		return NULL;
	}
	for (size_t i = 0; i < s->n; i++)
		pthread_mutex_init(&s->e[i].mu, NULL);
	pthread_mutex_init(&s->mu, NULL);
	s->st = st;
	return s;
}

void rl_shared_free(struct rl_shared *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		pthread_mutex_destroy(&s->e[i].mu);
	pthread_mutex_destroy(&s->mu);
	free(s->e);
	free(s);
}

static size_t key_hash(const char *key)
{
	size_t h = 14695981039346656037u;

	for (; *key; key++)
		h = (h ^ (unsigned char)*key) * 1099511628211u;
	return h;
}

/* The entry of key, made (in an empty slot, else the least recently used
 * of the probed ones that nobody holds) when missing; returned locked, or
 * NULL when every probed slot is busy. */
static struct entry *entry_lock(struct rl_shared *s, const char *key, int64_t now)
{
	size_t h = key_hash(key), i;
	struct entry *e, *victim = NULL;

	pthread_mutex_lock(&s->mu);
	for (i = 0; i < PROBES; i++) {
		e = &s->e[(h + i) & (s->n - 1)];
		if (!strcmp(e->key, key))
			goto found;
		if (!victim || (victim->key[0] && (!e->key[0] || e->last_used < victim->last_used)))
			victim = e;
	}
	e = victim;
	if (pthread_mutex_trylock(&e->mu) != 0) {
		pthread_mutex_unlock(&s->mu);
		return NULL;
	}
	memset(&e->key, 0, sizeof *e - offsetof(struct entry, key));
	snprintf(e->key, sizeof e->key, "%s", key);
	e->chunk = 1;
	pthread_mutex_unlock(&e->mu);
found:
	e->last_used = now;
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_lock(&e->mu);
	if (strcmp(e->key, key) != 0) { /* taken for another key meanwhile */
		pthread_mutex_unlock(&e->mu);
		return NULL;
	}
	return e;
}

/* Asks the database for up to e->chunk requests of quota at limit, in one
 * write transaction: the key's grants older than the span go, the rest
 * are summed, and a grant of what fits is recorded. Sets e's grant (0
 * requests when none fit). Returns 0 or a negative store status. */
static int grant(struct rl_shared *s, struct entry *e, int64_t limit, int64_t now)
{
	struct store_tx *tx;
	struct store_rows *r;
	int64_t used = 0, oldest = 0, n;
	int rc;

	if ((rc = store_begin(s->st, 1, &tx)) != STORE_OK)
		return rc;
	rc = store_exec(tx, "DELETE FROM ratelimit_grants WHERE key = $1 AND granted_at <= $2",
			(struct store_val[]){sv_text(e->key), sv_int(now - RL_SPAN_MS)}, 2);
	if (rc >= 0)
		rc = store_query(tx,
				 "SELECT COALESCE(SUM(n), 0), COALESCE(MIN(granted_at), 0)"
				 " FROM ratelimit_grants WHERE key = $1",
				 (struct store_val[]){sv_text(e->key)}, 1, &r);
	if (rc >= 0) {
		if ((rc = store_next(r)) == 1) {
			used = store_int(r, 0);
			oldest = store_int(r, 1);
		}
		store_rows_close(r);
	}
	n = limit - used < e->chunk ? limit - used : e->chunk;
	if (rc >= 0 && n > 0)
		rc = store_exec(tx,
				"INSERT INTO ratelimit_grants (key, granted_at, n) VALUES ($1, $2, $3)",
				(struct store_val[]){sv_text(e->key), sv_int(now), sv_int(n)}, 3);
	if ((rc = store_finish(tx, rc)) != STORE_OK)
		return rc;
	e->tokens = n > 0 ? n : 0;
	e->granted_at = now;
	e->expires = now + RL_GRANT_TTL_MS;
	e->used = used + e->tokens;
	e->oldest = oldest ? oldest : now;
	e->blocked_until = n > 0 ? 0 : e->oldest + RL_SPAN_MS;
	e->blocked_limit = limit;
	return 0;
}

/* The next grant's size: halved after one expired unspent, doubled after
 * one spent within half its time to live; 1 to limit / 20. */
static void adapt_chunk(struct entry *e, int64_t limit, int64_t now)
{
	int64_t cap = limit / 20 > 1 ? limit / 20 : 1;

	if (e->expires && e->tokens > 0)
		e->chunk /= 2;
	else if (e->expires && now - e->granted_at < RL_GRANT_TTL_MS / 2)
		e->chunk *= 2;
	e->chunk = e->chunk < 1 ? 1 : e->chunk > cap ? cap : e->chunk;
}

/* Fills out from e after a request was decided. */
static void result(const struct entry *e, int64_t limit, int allowed, int64_t now,
		   struct rl_result *out)
{
	int64_t back = e->oldest + RL_SPAN_MS - now, s = (back + 999) / 1000;

	s = s < 1 ? 1 : s > 60 ? 60 : s;
	out->allowed = allowed;
	out->limit = limit;
	out->remaining = limit - e->used + e->tokens;
	out->remaining = out->remaining < 0 ? 0 : out->remaining;
	out->reset_s = out->remaining >= limit ? 0 : s;
	out->retry_after_s = allowed ? 0 : s;
}

int rl_shared_take(struct rl_shared *s, const char *key, int64_t per_minute, struct rl_result *out)
{
	char k[RATELIMIT_KEY_MAX + 1];
	int64_t now = clock_now_ms(), limit = per_minute < 1 ? 1 : per_minute;
	struct entry *e;
	int rc = 0;

	snprintf(k, sizeof k, "%s", key);
	*out = (struct rl_result){1, limit, limit - 1, 0, 0};
	for (int tries = 0; !(e = entry_lock(s, k, now)); tries++)
		if (tries == 3)
			return STORE_ERR; /* every slot busy: fail open */
	if ((e->tokens <= 0 || now >= e->expires) &&
	    (now >= e->blocked_until || limit != e->blocked_limit)) {
		adapt_chunk(e, limit, now);
		rc = grant(s, e, limit, now);
	}
	if (rc == 0) {
		if (e->tokens > 0 && now < e->expires)
			e->tokens--;
		else
			out->allowed = 0;
		result(e, limit, out->allowed, now, out);
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int rl_shared_purge(struct store *st, int64_t now_ms)
{
	struct store_tx *tx;
	int rc;

	if ((rc = store_begin(st, 1, &tx)) != STORE_OK)
		return rc;
	rc = store_exec(tx, "DELETE FROM ratelimit_grants WHERE granted_at <= $1",
			(struct store_val[]){sv_int(now_ms - RL_SPAN_MS)}, 1);
	return store_finish(tx, rc) == STORE_OK ? rc : STORE_ERR;
}
