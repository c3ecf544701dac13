/* Unit tests for ratelimit: the window core against an exact oracle, and the
 * keyed registry (independence, LRU eviction, threads). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ratelimit.h"

static struct rl_window *new_window(void)
{
	struct rl_window *w = rl_window_new();

	assert_non_null(w);
	return w;
}

/* A reported 60 s may be up to 100 ms short of the truth (ratelimit.c,
 * report_seconds): the window's slack, never reported. */
static int64_t slack(int64_t reported_s)
{
	return reported_s == 60 ? 100 : 0;
}

static void take(struct rl_window *w, int64_t n, int64_t t, struct rl_result *r)
{
	memset(r, 0x5a, sizeof *r);
	rl_window_take(w, n, t, r);
}

/* N allowed at once with remaining counting down, then the N+1th refused
 * with retry_after = 60.05 s, reported as 60 (never above 60). */
static void test_burst_then_refused(void **state)
{
	struct rl_window *w = new_window();
	struct rl_result r;
	int64_t i;

	(void)state;
	for (i = 0; i < 5; i++) {
		take(w, 5, 1000, &r);
		assert_int_equal(r.allowed, 1);
		assert_int_equal(r.limit, 5);
		assert_int_equal(r.remaining, 4 - i);
		assert_int_equal(r.retry_after_s, 0);
		assert_int_equal(r.reset_s, 60); /* 60.1 s, reported as 60 */
	}
	take(w, 5, 1050, &r);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.remaining, 0);
	assert_int_equal(r.retry_after_s, 60); /* 60 050 ms */
	assert_int_equal(r.reset_s, 60);       /* 60.1 s, reported as 60 */
	take(w, 5, 61099, &r);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.retry_after_s, 1);
	take(w, 5, 61100, &r);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.remaining, 4);
	rl_window_free(w);
}

/* retry_after points at the oldest bucket whose expiry frees a slot. */
static void test_retry_after_staggered(void **state)
{
	struct rl_window *w = new_window();
	struct rl_result r;

	(void)state;
	take(w, 3, 0, &r);
	take(w, 3, 20000, &r);
	take(w, 3, 40000, &r);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.remaining, 0);
	take(w, 3, 50000, &r);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.retry_after_s, 11); /* bucket 0 leaves at 60 100 */
	assert_int_equal(r.reset_s, 51);       /* bucket 400 leaves at 100 100 */
	take(w, 3, 60100, &r);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.remaining, 0);
	assert_int_equal(r.reset_s, 60); /* 60.1 s, reported as 60 */
	take(w, 3, 60100, &r);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.retry_after_s, 20); /* bucket 200 leaves at 80 100 */
	rl_window_free(w);
}

/* Refused requests leave no trace: hammering while full does not push the
 * recovery time out. */
static void test_refused_not_counted(void **state)
{
	struct rl_window *w = new_window();
	struct rl_result r;
	int64_t t;

	(void)state;
	take(w, 3, 0, &r);
	take(w, 3, 0, &r);
	take(w, 3, 0, &r);
	for (t = 0; t < 60100; t += 37) {
		take(w, 3, t, &r);
		assert_int_equal(r.allowed, 0);
		assert_int_equal(r.remaining, 0);
		assert_true(r.retry_after_s >= 1);
	}
	rl_window_peek(w, 3, 60100, &r);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.remaining, 3);
	assert_int_equal(r.reset_s, 0);
	rl_window_free(w);
}

/* reset_s: 0 on a full allowance; after 60.1 s everything is back. */
static void test_reset_semantics(void **state)
{
	struct rl_window *w = new_window();
	struct rl_result r;

	(void)state;
	rl_window_peek(w, 10, 5000, &r);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.remaining, 10);
	assert_int_equal(r.reset_s, 0);
	assert_int_equal(r.retry_after_s, 0);
	take(w, 10, 5000, &r);
	assert_int_equal(r.remaining, 9);
	assert_int_equal(r.reset_s, 60); /* 60.1 s, reported as 60 */
	take(w, 10, 35000, &r);
	assert_int_equal(r.remaining, 8);
	assert_int_equal(r.reset_s, 60); /* 60.1 s, reported as 60 */
	rl_window_peek(w, 10, 65099, &r);
	assert_int_equal(r.remaining, 8);
	rl_window_peek(w, 10, 65100, &r);
	assert_int_equal(r.remaining, 9);
	assert_int_equal(r.reset_s, 30); /* bucket 350 leaves at 95 100 */
	rl_window_peek(w, 10, 95099, &r);
	assert_int_equal(r.remaining, 9);
	assert_int_equal(r.reset_s, 1);
	rl_window_peek(w, 10, 95100, &r);
	assert_int_equal(r.remaining, 10);
	assert_int_equal(r.reset_s, 0);
	/* peek changed nothing: a take still sees both. */
	take(w, 10, 40000, &r);
	assert_int_equal(r.remaining, 7);
	rl_window_free(w);
}

/* The per-minute figure may change between calls (operator override). */
static void test_per_minute_change(void **state)
{
	struct rl_window *w = new_window();
	struct rl_result r;
	int i;

	(void)state;
	for (i = 0; i < 10; i++)
		take(w, 10, 0, &r);
	take(w, 10, 0, &r);
	assert_int_equal(r.allowed, 0);
	for (i = 0; i < 10; i++) {
		take(w, 20, 30000, &r);
		assert_int_equal(r.allowed, 1);
		assert_int_equal(r.limit, 20);
		assert_int_equal(r.remaining, 9 - i);
	}
	take(w, 20, 30000, &r);
	assert_int_equal(r.allowed, 0);
	take(w, 15, 40000, &r);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.limit, 15);
	assert_int_equal(r.remaining, 0);
	assert_int_equal(r.retry_after_s, 21); /* 6 must leave: bucket 0 at 60 100 */
	take(w, 5, 40000, &r);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.retry_after_s, 51); /* 16 must leave: bucket 300 at 90 100 */
	take(w, 15, 60100, &r);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.remaining, 4);
	take(w, 0, 60100, &r);
	assert_int_equal(r.limit, 1);
	assert_int_equal(r.allowed, 0);
	rl_window_free(w);
}

/* Ten million in one bucket: no overflow, no memory that grows with N;
 * figures above INT32_MAX are clamped. */
static void test_large_limit(void **state)
{
	const int64_t n = 10000000;
	struct rl_window *w = new_window();
	struct rl_result r;
	int64_t i, ok = 0;

	(void)state;
	for (i = 0; i < n; i++) {
		rl_window_take(w, n, 7000, &r);
		ok += r.allowed;
	}
	assert_int_equal(ok, n);
	assert_int_equal(r.remaining, 0);
	take(w, n, 7000, &r);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.retry_after_s, 60);
	take(w, n, 67100, &r);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.remaining, n - 1);
	take(w, INT64_MAX, 67100, &r);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.limit, INT32_MAX);
	assert_int_equal(r.remaining, (int64_t)INT32_MAX - 2);
	rl_window_free(w);
}

/* Time going backwards is taken as the latest time seen; negative times
 * are ordinary times. */
static void test_time_backwards(void **state)
{
	struct rl_window *w = new_window();
	struct rl_result r;

	(void)state;
	take(w, 3, 10000, &r);
	take(w, 3, 5000, &r);
	assert_int_equal(r.allowed, 1);
	assert_int_equal(r.remaining, 1);
	take(w, 3, 10000, &r);
	assert_int_equal(r.remaining, 0);
	take(w, 3, 0, &r);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.retry_after_s, 60);
	take(w, 3, 70100, &r);
	assert_int_equal(r.allowed, 1);
	take(w, 3, 1000000, &r);
	assert_int_equal(r.remaining, 2);
	take(w, 3, 0, &r);
	assert_int_equal(r.remaining, 1);
	rl_window_peek(w, 3, 0, &r);
	assert_int_equal(r.remaining, 1);
	assert_int_equal(r.reset_s, 60); /* 60.1 s, reported as 60 */
	rl_window_free(w);

	w = new_window();
	take(w, 1, -30000, &r);
	assert_int_equal(r.allowed, 1);
	take(w, 1, 30000, &r);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(r.retry_after_s, 1); /* bucket -300 leaves at 30 100 */
	take(w, 1, 30100, &r);
	assert_int_equal(r.allowed, 1);
	rl_window_free(w);
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Index of the first accepted time >= lo, moving *p forward only. */
static size_t first_at_or_after(const int64_t *acc, size_t nacc, size_t *p, int64_t lo)
{
	while (*p < nacc && acc[*p] < lo)
		(*p)++;
	return *p;
}

/* Random arrivals (uniform load plus bursts) over 5 minutes. Checks, against
 * the list of accepted times: no closed 60 000 ms interval holds more than
 * N; remaining is exactly N minus the accepted requests in the window's span
 * [100 floor(t/100) - 60000, t]; every refusal had N accepted within the last
 * 60 099 ms; retry_after_s and reset_s are the exact rounded-up times (by
 * peeking just before and at them); and the limiter is not starved. */
static void simulate(int64_t n, uint64_t seed)
{
	const int64_t span = 300000;
	size_t narr = (size_t)(n * 25 + 200), nburst = 20, per_burst = (size_t)(n / 2 + 1);
	size_t total = narr + nburst * per_burst, i, j, nacc = 0, p_span = 0, p_ref = 0, p_chk = 0;
	int64_t *arr = malloc(total * sizeof *arr), *acc = malloc(total * sizeof *acc), t, bt;
	struct rl_window *w = new_window();
	struct rl_result r, q;
	uint64_t s = seed;
	unsigned sample = 0;

	assert_non_null(arr);
	assert_non_null(acc);
	for (i = 0; i < narr; i++)
		arr[i] = (int64_t)(rng_next(&s) % (uint64_t)span);
	for (i = 0; i < nburst; i++) {
		bt = (int64_t)(rng_next(&s) % (uint64_t)span);
		for (j = 0; j < per_burst; j++)
			arr[narr + i * per_burst + j] = bt + (int64_t)(rng_next(&s) % 50);
	}
	qsort(arr, total, sizeof *arr, cmp_i64);

	for (i = 0; i < total; i++) {
		t = arr[i];
		rl_window_take(w, n, t, &r);
		if (r.allowed)
			acc[nacc++] = t;
		/* the window's exact span, including this request if counted */
		j = first_at_or_after(acc, nacc, &p_span, (t / 100) * 100 - 60000);
		assert_int_equal(r.remaining,
				 n - (int64_t)(nacc - j) > 0 ? n - (int64_t)(nacc - j) : 0);
		if (!r.allowed) {
			j = first_at_or_after(acc, nacc, &p_ref, t - 60099);
			assert_true((int64_t)(nacc - j) >= n);
			assert_true(r.retry_after_s >= 1);
		}
		if (++sample % 61 == 0) {
			if (!r.allowed) {
				assert_true(r.retry_after_s <= 60);
				rl_window_peek(w, n,
					       t + r.retry_after_s * 1000 + slack(r.retry_after_s),
					       &q);
				assert_int_equal(q.allowed, 1);
				if (r.retry_after_s > 1) {
					rl_window_peek(w, n, t + (r.retry_after_s - 1) * 1000, &q);
					assert_int_equal(q.allowed, 0);
				}
			}
			assert_true(r.reset_s <= 60);
			rl_window_peek(w, n, t + r.reset_s * 1000 + slack(r.reset_s), &q);
			assert_int_equal(q.remaining, n);
			assert_int_equal(q.reset_s, 0);
			if (r.reset_s > 1) {
				rl_window_peek(w, n, t + (r.reset_s - 1) * 1000, &q);
				assert_true(q.remaining < n);
			}
		}
	}
	/* acc is sorted: for each accepted time, those in [t - 60000, t] */
	for (i = 0; i < nacc; i++) {
		first_at_or_after(acc, nacc, &p_chk, acc[i] - 60000);
		assert_true((int64_t)(i + 1 - p_chk) <= n);
	}
	assert_true((int64_t)nacc >= 4 * n);
	free(arr);
	free(acc);
	rl_window_free(w);
}

static void test_rolling_window_random(void **state)
{
	(void)state;
	simulate(10, 0x1234567887654321ULL);
	simulate(10, 0x0badc0ffee15deadULL);
	simulate(100, 0x9e3779b97f4a7c15ULL);
	simulate(5000, 0xfeedfacecafebeefULL);
}

static struct ratelimit *new_registry(size_t max_keys)
{
	struct ratelimit *rl = ratelimit_new(max_keys);

	assert_non_null(rl);
	return rl;
}

static int reg_take(struct ratelimit *rl, const char *key, int64_t n, int64_t t)
{
	struct rl_result r;

	assert_int_equal(ratelimit_take(rl, key, n, t, &r), 0);
	return r.allowed;
}

/* Distinct keys are independent; keys are cut at RATELIMIT_KEY_MAX bytes. */
static void test_registry_independent(void **state)
{
	struct ratelimit *rl = new_registry(1000);
	char k1[300], k2[300];

	(void)state;
	assert_int_equal(reg_take(rl, "a", 2, 0), 1);
	assert_int_equal(reg_take(rl, "a", 2, 0), 1);
	assert_int_equal(reg_take(rl, "a", 2, 0), 0);
	assert_int_equal(reg_take(rl, "b", 2, 0), 1);
	assert_int_equal(reg_take(rl, "", 2, 0), 1);
	assert_int_equal(reg_take(rl, "b", 2, 0), 1);
	assert_int_equal(reg_take(rl, "b", 2, 0), 0);
	memset(k1, 'x', sizeof k1 - 1);
	k1[sizeof k1 - 1] = '\0';
	memcpy(k2, k1, sizeof k2);
	k2[RATELIMIT_KEY_MAX] = 'y';
	assert_int_equal(reg_take(rl, k1, 1, 0), 1);
	assert_int_equal(reg_take(rl, k2, 1, 0), 0);
	k2[RATELIMIT_KEY_MAX - 1] = 'y';
	assert_int_equal(reg_take(rl, k2, 1, 0), 1);
	ratelimit_free(rl);
}

/* One stripe below 128 keys: exact LRU eviction at max_keys. */
static void test_registry_lru(void **state)
{
	struct ratelimit *rl = new_registry(3);

	(void)state;
	assert_int_equal(reg_take(rl, "a", 1, 0), 1);
	assert_int_equal(reg_take(rl, "b", 1, 0), 1);
	assert_int_equal(reg_take(rl, "c", 1, 0), 1);
	assert_int_equal(reg_take(rl, "a", 1, 0), 0); /* a most recent */
	assert_int_equal(reg_take(rl, "d", 1, 0), 1); /* evicts b */
	assert_int_equal(reg_take(rl, "a", 1, 0), 0);
	assert_int_equal(reg_take(rl, "c", 1, 0), 0);
	assert_int_equal(reg_take(rl, "d", 1, 0), 0);
	assert_int_equal(reg_take(rl, "b", 1, 0), 1); /* back empty; evicts a */
	assert_int_equal(reg_take(rl, "c", 1, 0), 0);
	assert_int_equal(reg_take(rl, "a", 1, 0), 1);
	ratelimit_free(rl);
}

/* Striped registry: a key in use survives any number of new keys, a key
 * left alone is eventually evicted, and memory stays bounded. */
static void test_registry_striped_eviction(void **state)
{
	struct ratelimit *rl = new_registry(1024);
	char key[32];
	int i;

	(void)state;
	assert_int_equal(reg_take(rl, "cold", 1, 1000), 1);
	assert_int_equal(reg_take(rl, "hot", 1, 1000), 1);
	for (i = 0; i < 20000; i++) {
		snprintf(key, sizeof key, "k%d", i);
		assert_int_equal(reg_take(rl, key, 1, 1000), 1);
		if (i % 10 == 0)
			assert_int_equal(reg_take(rl, "hot", 1, 1000), 0);
	}
	assert_int_equal(reg_take(rl, "hot", 1, 1000), 0);
	assert_int_equal(reg_take(rl, "cold", 1, 1000), 1);
	ratelimit_free(rl);
}

#define THREADS 4
#define PER_THREAD 5000
#define SHARED_N 10000

struct worker {
	pthread_t tid;
	struct ratelimit *rl, *small;
	int id;
	int64_t shared_ok, own_ok;
};

/* Alternates the shared key and a private key in a registry that never
 * fills, and a fresh key in a small one (evictions under contention), with
 * its own slightly skewed clock. */
static void *worker_run(void *arg)
{
	struct worker *wk = arg;
	struct rl_result r;
	char own[16], fresh[32];
	int i;

	snprintf(own, sizeof own, "own%d", wk->id);
	for (i = 0; i < PER_THREAD; i++) {
		int64_t t = 1000 + i * 5 + wk->id * 7;

		if (ratelimit_take(wk->rl, "shared", SHARED_N, t, &r) == 0)
			wk->shared_ok += r.allowed;
		if (ratelimit_take(wk->rl, own, 100, t, &r) == 0)
			wk->own_ok += r.allowed;
		snprintf(fresh, sizeof fresh, "f%d-%d", wk->id, i);
		if (ratelimit_take(wk->small, fresh, 1, t, &r) != 0 || !r.allowed)
			wk->shared_ok = -1000000;
	}
	return NULL;
}

/* Four threads hammer one key: exactly N accepted in total; private keys
 * get exactly their own N. */
static void test_registry_threads(void **state)
{
	struct ratelimit *rl = new_registry(1024), *small = new_registry(256);
	struct worker wk[THREADS];
	int64_t total = 0;
	int i;

	(void)state;
	for (i = 0; i < THREADS; i++) {
		memset(&wk[i], 0, sizeof wk[i]);
		wk[i].rl = rl;
		wk[i].small = small;
		wk[i].id = i;
		assert_int_equal(pthread_create(&wk[i].tid, NULL, worker_run, &wk[i]), 0);
	}
	for (i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(wk[i].tid, NULL), 0);
		total += wk[i].shared_ok;
		assert_int_equal(wk[i].own_ok, 100);
	}
	assert_int_equal(total, SHARED_N);
	ratelimit_free(rl);
	ratelimit_free(small);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_refused),
		cmocka_unit_test(test_retry_after_staggered),
		cmocka_unit_test(test_refused_not_counted),
		cmocka_unit_test(test_reset_semantics),
		cmocka_unit_test(test_per_minute_change),
		cmocka_unit_test(test_large_limit),
		cmocka_unit_test(test_time_backwards),
		cmocka_unit_test(test_rolling_window_random),
		cmocka_unit_test(test_registry_independent),
		cmocka_unit_test(test_registry_lru),
		cmocka_unit_test(test_registry_striped_eviction),
		cmocka_unit_test(test_registry_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
