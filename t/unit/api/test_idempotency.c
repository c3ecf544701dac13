/* Unit tests for the Idempotency-Key store: claim, replay, mismatch, release,
 * isolation, expiry, purge and racing claims, against a real SQLite file in
 * a temporary directory (a fresh database per test). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/idempotency.h"
#include "store/store.h"

#define T0 INT64_C(1780272000000)
#define WINDOW (INT64_C(72) * 3600 * 1000)

struct fixture {
	char dir[64];
	char db[128];
	struct store *st;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	char url[160];

	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/revops-idem-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->db, sizeof f->db, "%s/revops.db", f->dir);
	snprintf(url, sizeof url, "sqlite:%s", f->db);
	if (store_open(url, 2, &f->st) != 0) {
		rmdir(f->dir);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char p[160];
	int rc;

	store_close(f->st);
	unlink(f->db);
	snprintf(p, sizeof p, "%s-wal", f->db);
	unlink(p);
	snprintf(p, sizeof p, "%s-shm", f->db);
	unlink(p);
	rc = rmdir(f->dir); /* fails if anything else was left behind */
	free(f);
	return rc;
}

static void fp_of(const char *body, char out[65])
{
	idempotency_fingerprint("POST", "/v2/rate-decisions", NULL, body, strlen(body), out);
}

static enum idem_action begin_at(struct store *st, const char *pf, const char *who, const char *key,
				 const char *fp, int64_t now, int64_t window)
{
	struct idem_stored out;
	enum idem_action a;

	memset(&out, 0x5a, sizeof out);
	a = idempotency_begin(st, pf, who, key, fp, now, window, &out);
	if (a != IDEM_REPLAY) {
		/* nothing handed over except on replay */
		assert_null(out.headers);
		assert_null(out.body.data);
	}
	idempotency_stored_free(&out);
	return a;
}

static int64_t count_rows(struct store *st)
{
	struct store_tx *tx;
	int64_t n = -1;

	assert_int_equal(store_begin(st, 0, &tx), STORE_OK);
	assert_int_equal(store_query_int(tx, "SELECT COUNT(*) FROM idempotency_keys", NULL, 0, &n),
			 1);
	store_rollback(tx);
	return n;
}

/* Stores an answer as a keyed write's transaction would. Returns 0/-1. */
static int finish(struct store *st, const char *pf, const char *principal, const char *key,
		  int status, const json_t *headers, const void *body, size_t len)
{
	struct store_tx *tx;

	if (store_begin(st, STORE_WRITE, &tx) != STORE_OK)
		return -1;
	return store_finish(tx, idempotency_store(tx, pf, principal, key, status, headers, body,
						  len)) == STORE_OK
		       ? 0
		       : -1;
}

static void test_claim_in_progress_mismatch(void **state)
{
	struct fixture *f = *state;
	char fp[65], fp2[65];

	fp_of("{\"a\":1}", fp);
	fp_of("{\"a\":2}", fp2);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k1", fp, T0, WINDOW), IDEM_PROCEED);
	assert_int_equal(count_rows(f->st), 1);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k1", fp, T0 + 5, WINDOW),
			 IDEM_IN_PROGRESS);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k1", fp2, T0 + 6, WINDOW), IDEM_MISMATCH);
	/* still in progress for the original request; nothing was overwritten */
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k1", fp, T0 + 7, WINDOW),
			 IDEM_IN_PROGRESS);
	assert_int_equal(count_rows(f->st), 1);
}

static void test_finish_then_replay(void **state)
{
	static const unsigned char body[] = "{\"data\":{\"id\":\"rd_1\"}}\0tail\xff";
	struct fixture *f = *state;
	struct idem_stored out;
	json_t *h = json_pack("{s:s, s:s}", "Location", "/x", "X-Extra", "\xc5\x81");
	char fp[65], fp2[65];
	int i;

	assert_non_null(h);
	fp_of("{\"a\":1}", fp);
	fp_of("{\"a\":2}", fp2);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k1", fp, T0, WINDOW), IDEM_PROCEED);
	assert_int_equal(finish(f->st, "pf_1", "cli_1", "k1", 201, h, body, sizeof body - 1), 0);
	for (i = 0; i < 2; i++) { /* replays do not consume the stored answer */
		assert_int_equal(idempotency_begin(f->st, "pf_1", "cli_1", "k1", fp, T0 + 10 + i,
						   WINDOW, &out),
				 IDEM_REPLAY);
		assert_int_equal(out.status, 201);
		assert_non_null(out.headers);
		assert_true(json_equal(out.headers, h));
		assert_string_equal(json_string_value(json_object_get(out.headers, "Location")),
				    "/x");
		assert_int_equal(out.body.len, sizeof body - 1);
		assert_memory_equal(out.body.data, body, sizeof body - 1);
		idempotency_stored_free(&out);
		assert_null(out.headers);
	}
	/* a different request under a finished key */
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k1", fp2, T0 + 20, WINDOW), IDEM_MISMATCH);
	/* a finished key is not released */
	idempotency_release(f->st, "pf_1", "cli_1", "k1");
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k1", fp, T0 + 30, WINDOW), IDEM_REPLAY);
	json_decref(h);
}

static void test_finish_without_headers_or_body(void **state)
{
	struct fixture *f = *state;
	struct idem_stored out;
	char fp[65];

	fp_of("", fp);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "empty", fp, T0, WINDOW), IDEM_PROCEED);
	assert_int_equal(finish(f->st, "pf_1", "cli_1", "empty", 204, NULL, NULL, 0), 0);
	assert_int_equal(idempotency_begin(f->st, "pf_1", "cli_1", "empty", fp, T0 + 1, WINDOW, &out),
			 IDEM_REPLAY);
	assert_int_equal(out.status, 204);
	assert_null(out.headers);
	assert_int_equal(out.body.len, 0);
	idempotency_stored_free(&out);
}

static void test_release(void **state)
{
	struct fixture *f = *state;
	char fp[65], fp2[65];

	fp_of("{\"a\":1}", fp);
	fp_of("{\"a\":2}", fp2);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k1", fp, T0, WINDOW), IDEM_PROCEED);
	idempotency_release(f->st, "pf_1", "cli_1", "k1");
	assert_int_equal(count_rows(f->st), 0);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k1", fp, T0 + 1, WINDOW), IDEM_PROCEED);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k1", fp, T0 + 2, WINDOW),
			 IDEM_IN_PROGRESS);
	/* after a release the key is free for a different request too */
	idempotency_release(f->st, "pf_1", "cli_1", "k1");
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k1", fp2, T0 + 3, WINDOW), IDEM_PROCEED);
	/* releasing an unknown key is harmless */
	idempotency_release(f->st, "pf_1", "cli_1", "nope");
	assert_int_equal(count_rows(f->st), 1);
}

static void test_isolation(void **state)
{
	struct fixture *f = *state;
	struct idem_stored out;
	char fp[65];

	fp_of("{\"a\":1}", fp);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp, T0, WINDOW), IDEM_PROCEED);
	assert_int_equal(begin_at(f->st, "pf_2", "cli_1", "k", fp, T0, WINDOW), IDEM_PROCEED);
	assert_int_equal(begin_at(f->st, "pf_1", "usr_9", "k", fp, T0, WINDOW), IDEM_PROCEED);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "K", fp, T0, WINDOW), IDEM_PROCEED);
	assert_int_equal(count_rows(f->st), 4);
	assert_int_equal(finish(f->st, "pf_2", "cli_1", "k", 201, NULL, "pf2", 3), 0);
	/* only pf_2's row is done */
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp, T0 + 1, WINDOW), IDEM_IN_PROGRESS);
	assert_int_equal(begin_at(f->st, "pf_1", "usr_9", "k", fp, T0 + 1, WINDOW), IDEM_IN_PROGRESS);
	assert_int_equal(idempotency_begin(f->st, "pf_2", "cli_1", "k", fp, T0 + 1, WINDOW, &out),
			 IDEM_REPLAY);
	assert_int_equal(out.body.len, 3);
	assert_memory_equal(out.body.data, "pf2", 3);
	idempotency_stored_free(&out);
	/* releasing one principal's key leaves the others */
	idempotency_release(f->st, "pf_1", "usr_9", "k");
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp, T0 + 2, WINDOW), IDEM_IN_PROGRESS);
	assert_int_equal(count_rows(f->st), 3);
}

/* The state of key's row; *status_null = 1 when no response is stored
 * (status, headers and body all NULL). */
static void row_state(struct store *st, const char *key, char *state_out, int *status_null,
		      int64_t *expires)
{
	struct store_tx *tx;
	struct store_rows *r;

	assert_int_equal(store_begin(st, 0, &tx), STORE_OK);
	assert_int_equal(store_query(tx,
				     "SELECT state, status IS NULL AND headers IS NULL AND body IS NULL,"
				     " expires_at FROM idempotency_keys"
				     " WHERE idem_key = $1",
				     (struct store_val[]){sv_text(key)}, 1, &r),
			 STORE_OK);
	assert_int_equal(store_next(r), 1);
	strcpy(state_out, store_text(r, 0));
	*status_null = (int)store_int(r, 1);
	*expires = store_int(r, 2);
	assert_int_equal(store_next(r), 0);
	store_rows_close(r);
	store_rollback(tx);
}

static void test_expiry(void **state)
{
	struct fixture *f = *state;
	json_t *h = json_pack("{s:s}", "Location", "/x");
	char fp[65], st[16];
	int status_null;
	int64_t exp;

	fp_of("{\"a\":1}", fp);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp, T0, 1000), IDEM_PROCEED);
	assert_int_equal(finish(f->st, "pf_1", "cli_1", "k", 201, h, "old", 3), 0);
	json_decref(h);
	row_state(f->st, "k", st, &status_null, &exp);
	assert_string_equal(st, "done");
	assert_int_equal(status_null, 0);
	assert_int_equal(exp, T0 + 1000);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp, T0 + 999, 1000), IDEM_REPLAY);
	/* at the expiry instant the row is replaced by a new claim */
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp, T0 + 1000, 1000), IDEM_PROCEED);
	row_state(f->st, "k", st, &status_null, &exp);
	assert_string_equal(st, "in_flight");
	assert_int_equal(status_null, 1);
	assert_int_equal(exp, T0 + 2000);
	assert_int_equal(count_rows(f->st), 1);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp, T0 + 1001, 1000),
			 IDEM_IN_PROGRESS);
	/* an expired row does not block a different request either */
	{
		char fp2[65];

		fp_of("{\"a\":2}", fp2);
		assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp2, T0 + 2000, 1000),
				 IDEM_PROCEED);
	}
}

static void test_abandoned_lease(void **state)
{
	struct fixture *f = *state;
	char fp[65];

	fp_of("{\"a\":1}", fp);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp, T0, WINDOW), IDEM_PROCEED);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp, T0 + IDEMPOTENCY_LEASE_MS - 1,
				  WINDOW),
			 IDEM_IN_PROGRESS);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp, T0 + IDEMPOTENCY_LEASE_MS, WINDOW),
			 IDEM_PROCEED);
	/* the takeover holds a fresh lease */
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "k", fp, T0 + IDEMPOTENCY_LEASE_MS + 1,
				  WINDOW),
			 IDEM_IN_PROGRESS);
}

static void test_purge(void **state)
{
	struct fixture *f = *state;
	char fp[65];

	fp_of("{\"a\":1}", fp);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "a", fp, T0, 1000), IDEM_PROCEED);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "b", fp, T0, 2000), IDEM_PROCEED);
	assert_int_equal(finish(f->st, "pf_1", "cli_1", "b", 200, NULL, "b", 1), 0);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "c", fp, T0, 3000), IDEM_PROCEED);
	assert_int_equal(begin_at(f->st, "pf_2", "cli_2", "d", fp, T0, 5000), IDEM_PROCEED);
	assert_int_equal(count_rows(f->st), 4);
	assert_int_equal(idempotency_purge(f->st, T0 + 999), 0);
	assert_int_equal(idempotency_purge(f->st, T0 + 2000), 2); /* a and b: expires_at <= now */
	assert_int_equal(count_rows(f->st), 2);
	assert_int_equal(idempotency_purge(f->st, T0 + 2000), 0);
	/* the survivors are untouched */
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "c", fp, T0 + 2001, 3000),
			 IDEM_IN_PROGRESS);
	assert_int_equal(idempotency_purge(f->st, T0 + 10000), 2);
	assert_int_equal(count_rows(f->st), 0);
}

#define RACERS 8
#define ROUNDS 100

struct racer {
	struct store *st;
	pthread_barrier_t *go;
	const char *key;
	const char *fp;
	enum idem_action result;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	struct idem_stored out;

	pthread_barrier_wait(r->go);
	r->result = idempotency_begin(r->st, "pf_1", "cli_1", r->key, r->fp, T0, WINDOW, &out);
	idempotency_stored_free(&out);
	return NULL;
}

static void test_concurrent_claims(void **state)
{
	struct fixture *f = *state;
	struct racer r[RACERS];
	pthread_t th[RACERS];
	pthread_barrier_t go;
	char fp[65], key[32];
	int round, i, proceed, busy;

	fp_of("{\"a\":1}", fp);
	for (round = 0; round < ROUNDS; round++) {
		snprintf(key, sizeof key, "race-%d", round);
		assert_int_equal(pthread_barrier_init(&go, NULL, RACERS), 0);
		for (i = 0; i < RACERS; i++) {
			r[i] = (struct racer){
				.st = f->st, .go = &go, .key = key, .fp = fp, .result = IDEM_ERROR};
			assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
		}
		proceed = busy = 0;
		for (i = 0; i < RACERS; i++) {
			assert_int_equal(pthread_join(th[i], NULL), 0);
			proceed += r[i].result == IDEM_PROCEED;
			busy += r[i].result == IDEM_IN_PROGRESS;
		}
		pthread_barrier_destroy(&go);
		assert_int_equal(proceed, 1);
		assert_int_equal(busy, RACERS - 1);
	}
	assert_int_equal(count_rows(f->st), ROUNDS);
}

/* With a seal key set, a stored body is sealed (no plaintext in the
 * table), replays give the original bytes back, and a sealed row copied
 * under another key cannot be opened (bound to its portfolio/principal/key). */
static void test_sealed_bodies(void **state)
{
	struct fixture *f = *state;
	static const unsigned char key[32] = {7, 7, 7};
	const char *body = "{\"data\":{\"signing_secret\":\"whsec_TOPSECRET\"}}";
	struct idem_stored out;
	struct store_tx *tx;
	struct store_rows *r;
	char fp[65];

	idempotency_set_seal_key(key);
	fp_of(body, fp);
	assert_int_equal(begin_at(f->st, "pf_1", "cli_1", "sealed", fp, T0, WINDOW), IDEM_PROCEED);
	assert_int_equal(finish(f->st, "pf_1", "cli_1", "sealed", 201, NULL, body, strlen(body)), 0);
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_int_equal(store_query(tx, "SELECT body FROM idempotency_keys WHERE idem_key = 'sealed'",
				     NULL, 0, &r),
			 STORE_OK);
	assert_int_equal(store_next(r), 1);
	assert_null(strstr(store_text(r, 0), "whsec_"));
	assert_int_equal(strncmp(store_text(r, 0), "v1:", 3), 0);
	store_rows_close(r);
	store_rollback(tx);
	assert_int_equal(idempotency_begin(f->st, "pf_1", "cli_1", "sealed", fp, T0 + 1, WINDOW, &out),
			 IDEM_REPLAY);
	assert_int_equal(out.body.len, strlen(body));
	assert_memory_equal(out.body.data, body, strlen(body));
	idempotency_stored_free(&out);
	/* moved to another key: it does not open, and nothing is replayed */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx,
				    "UPDATE idempotency_keys SET idem_key = 'moved'"
				    " WHERE idem_key = 'sealed'",
				    NULL, 0),
			 1);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(idempotency_begin(f->st, "pf_1", "cli_1", "moved", fp, T0 + 2, WINDOW, &out),
			 IDEM_ERROR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_claim_in_progress_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_finish_then_replay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_finish_without_headers_or_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_isolation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abandoned_lease, setup, teardown),
		cmocka_unit_test_setup_teardown(test_purge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_claims, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sealed_bodies, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
