#include "api/ratelimit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/*
 * The window. Time is cut into 100 ms buckets numbered floor(ms / 100). A
 * window keeps the counts of the newest RL_SLOTS buckets in a ring, slot
 * k mod RL_SLOTS for bucket k, plus their running sum. At a time t in bucket
 * b it counts buckets b-600 .. b, i.e. every request in [100(b-600), t],
 * which contains [t - 60000, t] (100 b <= t) and reaches at most 99 ms
 * further back. A request is admitted only while that sum is below N, so
 * any closed interval of 60 000 ms holds at most N admitted requests:
 * 601 buckets, not 600, because with 600 the part of [t - 60000, t] that
 * falls in bucket b-600 would be missed whenever t is not a multiple of
 * 100. Bucket k leaves the window when the current bucket becomes
 * k + RL_SLOTS, at time 100 (k + RL_SLOTS).
 */
#define RL_BUCKET_MS 100
#define RL_SLOTS 601
#define RL_LIMIT_MAX INT32_MAX

struct rl_window {
	int64_t last_ms; /* latest time seen; earlier times are taken as this */
	int64_t head;    /* bucket of last_ms; the ring holds head-600 .. head */
	int64_t newest;  /* newest bucket that holds a count (valid when sum > 0) */
	int64_t sum;     /* sum of the ring, <= RL_LIMIT_MAX */
	int started;     /* 0 until the first take */
	int32_t counts[RL_SLOTS];
};

static int64_t bucket_of(int64_t ms)
{
	int64_t q = ms / RL_BUCKET_MS;

	if (ms % RL_BUCKET_MS < 0)
		q--;
	return q;
}

/* Milliseconds from the start of ms's bucket to ms, 0 .. 99. */
static int64_t offset_in_bucket(int64_t ms)
{
	int64_t r = ms % RL_BUCKET_MS;

	return r < 0 ? r + RL_BUCKET_MS : r;
}

static size_t slot_of(int64_t k)
{
	int64_t r = k % RL_SLOTS;

	return (size_t)(r < 0 ? r + RL_SLOTS : r);
}

static int64_t clamp_limit(int64_t per_minute)
{
	if (per_minute < 1)
		return 1;
	if (per_minute > RL_LIMIT_MAX)
		return RL_LIMIT_MAX;
	return per_minute;
}

static int64_t ceil_seconds(int64_t ms)
{
	return ms <= 0 ? 0 : (ms + 999) / 1000;
}

/* The seconds reported in X-Service-Ratelimit-Reset and Retry-After: ms
 * rounded up, but never above RL_REPORT_MAX_S. A bucket leaves the window
 * up to 60.1 s after its requests (the window errs on the side of
 * refusing), which rounded up would read 61; the contract bounds Reset at
 * 60, the rolling minute, so the last 100 ms of slack is not reported: a
 * client that waits the 60 s reported may find the newest bucket's
 * requests still counted for at most 100 ms more. */
#define RL_REPORT_MAX_S 60
static int64_t report_seconds(int64_t ms)
{
	int64_t s = ceil_seconds(ms);

	return s > RL_REPORT_MAX_S ? RL_REPORT_MAX_S : s;
}

/* The time the window would use for a call at now_ms (never before the
 * latest time it has seen). */
static int64_t effective_now(const struct rl_window *w, int64_t now_ms)
{
	return w->started && now_ms < w->last_ms ? w->last_ms : now_ms;
}

/* The count of bucket k as seen from current bucket b (b >= w->head): zero
 * for buckets outside the window or no longer (or not yet) in the ring. */
static int64_t count_at(const struct rl_window *w, int64_t k, int64_t b)
{
	if (!w->started || k > w->head || k < w->head - (RL_SLOTS - 1) || k < b - (RL_SLOTS - 1))
		return 0;
	return w->counts[slot_of(k)];
}

/* The number of counted requests still in the window at bucket b
 * (b >= w->head), without changing w. At most RL_SLOTS steps. */
static int64_t live_sum(const struct rl_window *w, int64_t b)
{
	int64_t s, k;

	if (!w->started || b - w->head >= RL_SLOTS)
		return 0;
	s = w->sum;
	for (k = w->head - (RL_SLOTS - 1); k <= b - RL_SLOTS; k++)
		s -= w->counts[slot_of(k)];
	return s;
}

/* Moves w to now_ms (already effective, so >= last_ms): expires the buckets
 * that left the window, subtracting them from the sum. Returns the current
 * bucket. At most RL_SLOTS steps. */
static int64_t window_advance(struct rl_window *w, int64_t now_ms)
{
	int64_t b = bucket_of(now_ms), k;
	size_t i;

	if (!w->started) {
		w->started = 1;
	} else if (b - w->head >= RL_SLOTS) {
		memset(w->counts, 0, sizeof w->counts);
		w->sum = 0;
	} else {
		for (k = w->head + 1; k <= b; k++) {
			i = slot_of(k);
			w->sum -= w->counts[i];
			w->counts[i] = 0;
		}
	}
	w->head = b;
	w->last_ms = now_ms;
	return b;
}

/* Fills out's figures from the live sum at now_ms (bucket b >= w->head);
 * out->allowed must already be set. retry_after_s is the time until the
 * oldest buckets have expired enough for live to drop below limit. */
static void fill_result(const struct rl_window *w, int64_t b, int64_t now_ms, int64_t limit,
			int64_t live, struct rl_result *out)
{
	int64_t off = offset_in_bucket(now_ms), need, acc, k, ms;

	out->limit = limit;
	out->remaining = live < limit ? limit - live : 0;
	out->reset_s = 0;
	out->retry_after_s = 0;
	if (live > 0)
		out->reset_s = report_seconds((w->newest + RL_SLOTS - b) * RL_BUCKET_MS - off);
	if (out->allowed)
		return;
	need = live - limit + 1;
	ms = (int64_t)RL_SLOTS * RL_BUCKET_MS - off;
	acc = 0;
	for (k = b - (RL_SLOTS - 1); k <= w->head; k++) {
		acc += count_at(w, k, b);
		if (acc >= need) {
			ms = (k + RL_SLOTS - b) * RL_BUCKET_MS - off;
			break;
		}
	}
	out->retry_after_s = report_seconds(ms);
	if (out->retry_after_s < 1)
		out->retry_after_s = 1;
}

struct rl_window *rl_window_new(void)
{
	return calloc(1, sizeof(struct rl_window));
}

void rl_window_free(struct rl_window *w)
{
	free(w);
}

/* Expires old buckets, then admits and counts the request when fewer than
 * the (clamped) limit are in the window. Refused requests change nothing
 * but the window's notion of now. Constant time except for the expiry walk
 * (at most RL_SLOTS steps, only when time moved) and, on refusal, the
 * retry_after walk (at most RL_SLOTS steps). */
void rl_window_take(struct rl_window *w, int64_t per_minute, int64_t now_ms, struct rl_result *out)
{
	int64_t limit = clamp_limit(per_minute), b;

	now_ms = effective_now(w, now_ms);
	b = window_advance(w, now_ms);
	out->allowed = w->sum < limit;
	if (out->allowed) {
		w->counts[slot_of(b)]++;
		w->sum++;
		w->newest = b;
	}
	fill_result(w, b, now_ms, limit, w->sum, out);
}

/* As rl_window_take without counting or changing w: the expiry is computed,
 * not applied. */
void rl_window_peek(struct rl_window *w, int64_t per_minute, int64_t now_ms, struct rl_result *out)
{
	const struct rl_window *cw = w;
	int64_t limit = clamp_limit(per_minute), b, live;

	now_ms = effective_now(cw, now_ms);
	b = bucket_of(now_ms);
	live = live_sum(cw, b);
	out->allowed = live < limit;
	fill_result(cw, b, now_ms, limit, live, out);
}

/*
 * The registry: up to RL_STRIPES_MAX stripes, each a mutex, a chained hash
 * table and an LRU list of its own entries, with its own share of max_keys.
 * A key's stripe comes from the top bits of a SipHash-1-3 keyed with random
 * bytes, so clients cannot aim many keys at one chain or one stripe.
 */
#define RL_STRIPES_MAX 16
#define RL_KEYS_PER_STRIPE_MIN 64
#define RL_TABLE_INITIAL 16

struct rl_entry {
	struct rl_entry *hnext;         /* hash chain */
	struct rl_entry *newer, *older; /* LRU list */
	uint64_t hash;
	size_t keylen;
	char key[RATELIMIT_KEY_MAX + 1];
	struct rl_window win;
};

struct rl_stripe {
	_Alignas(64) pthread_mutex_t mu;
	struct rl_entry **table;
	size_t nbuckets; /* power of two */
	size_t count, cap;
	struct rl_entry *mru, *lru;
};

struct ratelimit {
	uint64_t k0, k1; /* hash key */
	size_t nstripes; /* power of two */
	struct rl_stripe stripes[RL_STRIPES_MAX];
};

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
/* One SipHash round, four steps to a line. */
/* clang-format off */
#define SIPROUND                                                             \
	do {                                                                 \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);     \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                        \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                        \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);     \
	} while (0)
/* clang-format on */

/* SipHash-1-3 of n bytes at p under key (k0, k1). */
static uint64_t siphash13(uint64_t k0, uint64_t k1, const unsigned char *p, size_t n)
{
	uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
	uint64_t m, b = (uint64_t)n << 56;
	size_t i, j;

	for (i = 0; i + 8 <= n; i += 8) {
		m = 0;
		for (j = 0; j < 8; j++)
			m |= (uint64_t)p[i + j] << (8 * j);
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	for (j = 0; i + j < n; j++)
		b |= (uint64_t)p[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

static void lru_unlink(struct rl_stripe *s, struct rl_entry *e)
{
	if (e->newer)
		e->newer->older = e->older;
	else
		s->mru = e->older;
	if (e->older)
		e->older->newer = e->newer;
	else
		s->lru = e->newer;
	e->newer = e->older = NULL;
}

static void lru_push(struct rl_stripe *s, struct rl_entry *e)
{
	e->newer = NULL;
	e->older = s->mru;
	if (s->mru)
		s->mru->newer = e;
	else
		s->lru = e;
	s->mru = e;
}

static struct rl_entry *stripe_find(struct rl_stripe *s, uint64_t h, const char *key, size_t len)
{
	struct rl_entry *e;

	for (e = s->table[h & (s->nbuckets - 1)]; e; e = e->hnext)
		if (e->hash == h && e->keylen == len && memcmp(e->key, key, len) == 0)
			return e;
	return NULL;
}

static void table_insert(struct rl_stripe *s, struct rl_entry *e)
{
	struct rl_entry **head = &s->table[e->hash & (s->nbuckets - 1)];

	e->hnext = *head;
	*head = e;
}

static void table_remove(struct rl_stripe *s, struct rl_entry *e)
{
	struct rl_entry **pp = &s->table[e->hash & (s->nbuckets - 1)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
}

/* Doubles the stripe's table while it has more entries than chains and is
 * smaller than its cap needs. A failed allocation keeps the old table
 * (longer chains, still correct). */
static void stripe_grow(struct rl_stripe *s)
{
	struct rl_entry **nt, *e, *next;
	size_t n, i;

	if (s->count < s->nbuckets || s->nbuckets >= s->cap)
		return;
	n = s->nbuckets * 2;
	nt = calloc(n, sizeof *nt);
	if (!nt)
		return;
	for (i = 0; i < s->nbuckets; i++) {
		for (e = s->table[i]; e; e = next) {
			next = e->hnext;
			e->hnext = nt[e->hash & (n - 1)];
			nt[e->hash & (n - 1)] = e;
		}
	}
	free(s->table);
	s->table = nt;
	s->nbuckets = n;
}

/* Returns the entry for a key not yet in the stripe, inserted as most
 * recently used with an empty window: a new allocation while the stripe is
 * below its cap, else the least recently used entry, recycled. NULL on OOM.
 * Called with s->mu held. */
static struct rl_entry *stripe_add(struct rl_stripe *s, uint64_t h, const char *key, size_t len)
{
	struct rl_entry *e;

	if (s->count >= s->cap) {
		e = s->lru;
		lru_unlink(s, e);
		table_remove(s, e);
		memset(&e->win, 0, sizeof e->win);
	} else {
		e = calloc(1, sizeof *e);
		if (!e)
			return NULL;
		s->count++;
		stripe_grow(s);
	}
	e->hash = h;
	e->keylen = len;
	memcpy(e->key, key, len);
	e->key[len] = '\0';
	table_insert(s, e);
	lru_push(s, e);
	return e;
}

static void stripe_destroy(struct rl_stripe *s)
{
	struct rl_entry *e, *next;

	for (e = s->mru; e; e = next) {
		next = e->older;
		free(e);
	}
	free(s->table);
	pthread_mutex_destroy(&s->mu);
}

/* Seeds the hash from the kernel; if that fails, from addresses, which
 * still vary from run to run under ASLR. */
static void ratelimit_seed(struct ratelimit *rl)
{
	uint64_t k[2];

	if (getrandom(k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
		k[0] = (uint64_t)(uintptr_t)rl ^ 0x9e3779b97f4a7c15ULL;
		k[1] = (uint64_t)(uintptr_t)&k ^ (uint64_t)(uintptr_t)&ratelimit_seed;
	}
	rl->k0 = k[0];
	rl->k1 = k[1];
}

/* Builds an empty registry: stripes are halved from RL_STRIPES_MAX until
 * each gets at least RL_KEYS_PER_STRIPE_MIN keys (or one stripe is left),
 * and each stripe's cap is max_keys / nstripes, so the total never exceeds
 * max_keys. Returns NULL on OOM; the caller frees with ratelimit_free. */
struct ratelimit *ratelimit_new(size_t max_keys)
{
	struct ratelimit *rl;
	size_t n, i, inited = 0;

	if (max_keys == 0)
		max_keys = 1;
	rl = aligned_alloc(_Alignof(struct ratelimit), sizeof *rl);
	if (!rl)
		return NULL;
	memset(rl, 0, sizeof *rl);
	ratelimit_seed(rl);
	for (n = RL_STRIPES_MAX; n > 1 && max_keys / n < RL_KEYS_PER_STRIPE_MIN; n /= 2)
		;
	rl->nstripes = n;
	for (i = 0; i < n; i++) {
		struct rl_stripe *s = &rl->stripes[i];

		if (pthread_mutex_init(&s->mu, NULL) != 0)
			goto fail;
		inited++;
		s->cap = max_keys / n;
		s->nbuckets = RL_TABLE_INITIAL;
		s->table = calloc(s->nbuckets, sizeof *s->table);
		if (!s->table)
			goto fail;
	}
	return rl;
fail:
	for (i = 0; i < inited; i++)
		stripe_destroy(&rl->stripes[i]);
	free(rl);
	return NULL;
}

void ratelimit_free(struct ratelimit *rl)
{
	size_t i;

	if (!rl)
		return;
	for (i = 0; i < rl->nstripes; i++)
		stripe_destroy(&rl->stripes[i]);
	free(rl);
}

/* What a take on an empty window would report; used to fail open. */
static void fill_open(int64_t per_minute, int64_t now_ms, struct rl_result *out)
{
	out->allowed = 1;
	out->limit = clamp_limit(per_minute);
	out->remaining = out->limit - 1;
	out->reset_s = report_seconds((int64_t)RL_SLOTS * RL_BUCKET_MS - offset_in_bucket(now_ms));
	out->retry_after_s = 0;
}

/* Finds or adds the key's entry in its stripe and takes from its window,
 * all under that stripe's lock; only allocation of a new entry (or a table
 * doubling) happens beyond the constant-time path. */
int ratelimit_take(struct ratelimit *rl, const char *key, int64_t per_minute, int64_t now_ms,
		   struct rl_result *out)
{
	size_t len = strnlen(key, RATELIMIT_KEY_MAX);
	uint64_t h = siphash13(rl->k0, rl->k1, (const unsigned char *)key, len);
	struct rl_stripe *s = &rl->stripes[(h >> 56) & (rl->nstripes - 1)];
	struct rl_entry *e;
	int ret = 0;

	pthread_mutex_lock(&s->mu);
	e = stripe_find(s, h, key, len);
	if (e) {
		lru_unlink(s, e);
		lru_push(s, e);
	} else {
		e = stripe_add(s, h, key, len);
		if (!e) {
			fill_open(per_minute, now_ms, out);
			ret = -1;
			goto out;
		}
	}
	rl_window_take(&e->win, per_minute, now_ms, out);
out:
	pthread_mutex_unlock(&s->mu);
	return ret;
}
