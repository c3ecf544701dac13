/* guest_messages' references as the database keeps them: on SQLite by
 * foreign keys, on PostgreSQL (migration 018, which dropped the keys for
 * the inbound path's cost) by a trigger on guest_threads. Either way a
 * thread that still has messages can neither be deleted nor re-keyed,
 * and one whose messages were moved away (as a merge does) can. On SQLite,
 * and on the PostgreSQL cluster REVOPS_TEST_PG_URL names
 * (unit_message_keys_pg: a fresh one per run). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"
#include "../tmp_store.h"

static char dir[64];
static struct store *st;

static const char *const seed[] = {
	"INSERT INTO portfolios (id, name, plan, created_at) VALUES ('pf_1', 'P', 'group', 1)",
	"INSERT INTO properties (id, portfolio_id, name, brand, pms_property_code, billing_id,"
	" timezone, currency, created_at) VALUES ('prp_1', 'pf_1', 'H', 'B', 'H1', 'B1',"
	" 'Europe/Warsaw', 'PLN', 1)",
	"INSERT INTO guests (id, portfolio_id, created_at, updated_at) VALUES"
	" ('gst_1', 'pf_1', 1, 1), ('gst_2', 'pf_1', 1, 1)",
	"INSERT INTO guest_threads (id, portfolio_id, guest_id, status, created_at, updated_at)"
	" VALUES ('gt_1', 'pf_1', 'gst_1', 'open', 1, 1), ('gt_2', 'pf_1', 'gst_2', 'open', 1, 1)",
	"INSERT INTO guest_messages (id, portfolio_id, thread_id, property_id, channel, direction,"
	" external_id, text, status, at, created_at, updated_at) VALUES ('msg_1', 'pf_1', 'gt_1',"
	" 'prp_1', 'whatsapp', 'inbound', 'wamid.1', 'Hello', 'received', 1, 1, 1)",
};

static int setup(void **state)
{
	char url[512];
	struct store_tx *tx;
	int rc = 0;

	(void)state;
	if (tmp_store_url("msgkeys", dir, url, sizeof url) < 0)
		return -1;
	if (store_open(url, 2, &st) < 0 || store_begin(st, STORE_WRITE, &tx) != STORE_OK)
		return -1;
	for (size_t i = 0; rc >= 0 && i < sizeof seed / sizeof *seed; i++)
		rc = store_exec(tx, seed[i], NULL, 0);
	if (rc < 0) {
		store_rollback(tx);
		return -1;
	}
	return store_commit(tx) == STORE_OK ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return tmp_store_remove(st, dir);
}

/* Runs sql alone in a write transaction, rolled back. Returns its status. */
static int try_write(const char *sql)
{
	struct store_tx *tx;
	int rc;

	assert_int_equal(store_begin(st, STORE_WRITE, &tx), STORE_OK);
	rc = store_exec(tx, sql, NULL, 0);
	store_rollback(tx);
	return rc;
}

static void thread_with_messages_stays(void **state)
{
	(void)state;
	assert_int_equal(try_write("DELETE FROM guest_threads WHERE id = 'gt_1'"), STORE_CONSTRAINT);
	assert_int_equal(try_write("UPDATE guest_threads SET id = 'gt_9' WHERE id = 'gt_1'"),
			 STORE_CONSTRAINT);
	/* a thread's other columns change freely */
	assert_true(try_write("UPDATE guest_threads SET status = 'escalated' WHERE id = 'gt_1'") >= 0);
	/* a thread without messages goes */
	assert_true(try_write("DELETE FROM guest_threads WHERE id = 'gt_2'") >= 0);
}

static void thread_goes_once_its_messages_moved(void **state)
{
	struct store_tx *tx;
	int64_t n = -1;

	(void)state;
	assert_int_equal(store_begin(st, STORE_WRITE, &tx), STORE_OK);
	assert_true(store_exec(tx,
			       "UPDATE guest_messages SET thread_id = 'gt_2' WHERE thread_id"
			       " = 'gt_1'",
			       NULL, 0) >= 0);
	assert_true(store_exec(tx, "DELETE FROM guest_threads WHERE id = 'gt_1'", NULL, 0) >= 0);
	assert_int_equal(store_query_int(tx, "SELECT COUNT(*) FROM guest_threads", NULL, 0, &n), 1);
	assert_int_equal(n, 1);
	store_rollback(tx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(thread_with_messages_stays),
		cmocka_unit_test(thread_goes_once_its_messages_moved),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
