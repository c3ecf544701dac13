/* webhooks/due_sql against a real store (SQLite, or PostgreSQL when
 * REVOPS_TEST_PG_URL names one: unit_due_plans_pg): after an ANALYZE that
 * found no delivery due, as one in a quiet hour does, a burst of due rows
 * arrives; the statements still find them, and their plans do not follow
 * the stale statistics (the due rows of a claim by their keys, the first
 * lane hash by a LIMIT, not an aggregate over the due index). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "webhooks/due_sql.h"
#include "../tmp_store.h"

#define ROWS 2000
#define LANES 8

static char dir[64], url[256];
static struct store *st;
static int pg;

/* ROWS delivered deliveries over LANES lanes (lane "l<k>", hash k + 1). */
static void insert_delivered(void)
{
	struct store_tx *tx;
	char id[32], lane[16];
	int i;

	assert_int_equal(store_begin(st, STORE_WRITE, &tx), STORE_OK);
	for (i = 0; i < ROWS; i++) {
		snprintf(id, sizeof id, "dlv_%05d", i);
		snprintf(lane, sizeof lane, "l%d", i % LANES);
		assert_int_equal(
			store_exec(tx,
				   "INSERT INTO webhook_deliveries (id, portfolio_id, subscription_id,"
				   " surface, target, event_id, event_type, event_created_at, url,"
				   " lane, lane_hash, rate_per_s, body, state, created_at)"
				   " VALUES ($1, 'pf', 'sub', 'v2', 'primary', 'evt', 't', 1, 'u', $2,"
				   " $3, 5, $4, 'delivered', 1)",
				   (struct store_val[]){sv_text(id), sv_text(lane),
							sv_int(i % LANES + 1), sv_blob("{}", 2)},
				   4),
			1);
	}
	assert_int_equal(store_commit(tx), STORE_OK);
}

static void exec_one(const char *sql)
{
	struct store_tx *tx;

	assert_int_equal(store_begin(st, STORE_WRITE, &tx), STORE_OK);
	assert_true(store_exec(tx, sql, NULL, 0) >= 0);
	assert_int_equal(store_commit(tx), STORE_OK);
}

static int setup(void **state)
{
	(void)state;
	if ((pg = tmp_store_url("due-plans", dir, url, sizeof url)) < 0)
		return -1;
	if (store_open(url, 2, &st) < 0)
		return -1;
	insert_delivered();
	/* The statistics of a quiet hour: nothing due. */
	exec_one(pg ? "ANALYZE webhook_deliveries" : "ANALYZE");
	/* Then a burst: half the rows due again, the statistics not redone. */
	exec_one("UPDATE webhook_deliveries SET next_attempt_at = seq, state = 'pending'"
		 " WHERE seq % 2 = 0");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tmp_store_remove(st, dir);
}

/* The plan of sql with params, one line per row, into out. */
static void plan_of(const char *sql, const struct store_val *v, int n, char *out, size_t cap)
{
	char explain[2048];
	struct store_tx *tx;
	struct store_rows *r;
	size_t len = 0;

	snprintf(explain, sizeof explain, "%s %s", pg ? "EXPLAIN" : "EXPLAIN QUERY PLAN", sql);
	out[0] = '\0';
	assert_int_equal(store_begin(st, STORE_READ, &tx), STORE_OK);
	assert_int_equal(store_query(tx, explain, v, n, &r), STORE_OK);
	while (store_next(r) == 1 && len + 1 < cap)
		len += (size_t)snprintf(out + len, cap - len, "%s\n", store_text(r, pg ? 0 : 3));
	store_rows_close(r);
	store_rollback(tx);
}

static void lanes_are_found_without_an_aggregate(void **state)
{
	struct store_tx *tx;
	struct store_rows *r;
	char plan[16384];
	int n = 0;

	(void)state;
	assert_int_equal(store_begin(st, STORE_READ, &tx), STORE_OK);
	assert_int_equal(store_query(tx, LANES_SQL, NULL, 0, &r), STORE_OK);
	while (store_next(r) == 1) {
		assert_false(store_is_null(r, 0));
		n++;
	}
	store_rows_close(r);
	store_rollback(tx);
	/* the even seqs are due: rows 1, 3, 5, ..., the odd lanes */
	assert_int_equal(n, LANES / 2);
	plan_of(LANES_SQL, NULL, 0, plan, sizeof plan);
	if (pg && strstr(plan, "Aggregate"))
		fail_msg("the lane scan aggregates over the due index:\n%s", plan);
}

static void due_rows_are_read_by_their_keys(void **state)
{
	struct store_val v[STORE_IDS + 1];
	struct store_tx *tx;
	struct store_rows *r;
	char plan[8192];
	int i, n = 0;

	(void)state;
	/* seqs 2, 4, ..., 32 are due, all of lane l1 (row seq-1 is dlv_<seq-1>) */
	for (i = 0; i < STORE_IDS; i++)
		v[i] = sv_int(2 * (i + 1));
	v[STORE_IDS] = sv_text("l1");
	assert_int_equal(store_begin(st, STORE_READ, &tx), STORE_OK);
	assert_int_equal(store_query(tx, DUE_ROWS_SQL, v, STORE_IDS + 1, &r), STORE_OK);
	while (store_next(r) == 1)
		n++;
	store_rows_close(r);
	store_rollback(tx);
	/* of seqs 2..32 (rows 1, 3, ..., 31), lane l1 holds rows 1, 9, 17, 25 */
	assert_int_equal(n, 4);
	plan_of(DUE_ROWS_SQL, v, STORE_IDS + 1, plan, sizeof plan);
	if (strstr(plan, "webhook_deliveries_due"))
		fail_msg("the due rows of a claim are read through the due index:\n%s", plan);
	if (pg ? !strstr(plan, "webhook_deliveries_pkey") : !strstr(plan, "PRIMARY KEY"))
		fail_msg("the due rows of a claim are not read by their keys:\n%s", plan);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lanes_are_found_without_an_aggregate),
		cmocka_unit_test(due_rows_are_read_by_their_keys),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
