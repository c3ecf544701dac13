/* audit_trail: the documented hash formula (a vector computed independently
 * with Python's hashlib and json.dumps(sort_keys, compact, ensure_ascii)),
 * appends and reads against a real store, tamper detection, and the
 * database's refusal to update or delete an entry or to delete a decision
 * that has entries. On SQLite, and on the PostgreSQL cluster
 * REVOPS_TEST_PG_URL names (unit_audit_trail_pg: a fresh one per run). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "rates/audit_trail.h"
#include "store/store.h"
#include "../tmp_store.h"

static char dir[64];
static struct store *st;

static int setup(void **state)
{
	char url[512];
	struct store_tx *tx;
	int rc;

	(void)state;
	if (tmp_store_url("audit", dir, url, sizeof url) < 0)
		return -1;
	if (store_open(url, 2, &st) < 0 || store_begin(st, 1, &tx) != STORE_OK)
		return -1;
	rc = store_exec(
		tx,
		"INSERT INTO portfolios (id, name, plan, created_at) VALUES ('pf_1', 'P', 'group', 1)",
		NULL, 0);
	rc |= store_exec(tx,
			 "INSERT INTO rate_decisions (id, portfolio_id, status, room_type_code, date_from,"
			 " date_to, currency, minor_units, brand_ceiling_id, approver_saml_subject,"
			 " justification, proposer, properties, created_at, updated_at) VALUES"
			 " ('rd_1', 'pf_1', 'pending', 'DBL', '2026-12-01', '2026-12-02', 'PLN', 100,"
			 " 'bc_1', 'a@x', 'j', 'client:cli_1', '[]', 1, 1)",
			 NULL, 0);
	if (rc < 0)
		return -1;
	return store_commit(tx) == STORE_OK ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return tmp_store_remove(st, dir);
}

static void hash_vector(void **state)
{
	json_t *details = json_pack("{s:[i, s], s:b}", "b", 1, "\xc3\xa9", "a", 1);
	char out[65];

	(void)state;
	audit_entry_hash(AUDIT_GENESIS, 1, "2026-11-22T08:00:00.123Z", "proposed", "client:cli_1",
			 details, out);
	assert_string_equal(out, "2fb526781c1e42ebd1dacfa41eae9924d52dd103557fa39c04cbeea900b5dc2e");
	json_decref(details);
}

static void append_load_verify(void **state)
{
	struct store_tx *tx;
	struct audit_chain ch;
	json_t *trail = NULL, *entries, *d;
	int i;

	(void)state;
	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_int_equal(audit_open(tx, "rd_1", &ch), 0);
	assert_int_equal(ch.seq, 0);
	assert_string_equal(ch.head, AUDIT_GENESIS);
	for (i = 0; i < 4; i++) {
		d = json_pack("{s:i, s:s}", "n", i, "text", "z\xc5\xbc\xc3\xb3\xc5\x82w"); /* żółw */
		assert_int_equal(audit_append(tx, &ch, i ? "ceiling_check" : "proposed", "revops",
					      d, 1795334400123LL + i),
				 0);
		json_decref(d);
	}
	assert_int_equal(store_commit(tx), STORE_OK);
	/* a later transaction continues the same chain */
	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_int_equal(audit_open(tx, "rd_1", &ch), 0);
	assert_int_equal(ch.seq, 4);
	d = json_object();
	assert_int_equal(audit_append(tx, &ch, "published", "revops", d, 1795334401000LL), 0);
	json_decref(d);
	assert_int_equal(store_commit(tx), STORE_OK);

	assert_int_equal(store_begin(st, 0, &tx), STORE_OK);
	assert_int_equal(audit_load(tx, "rd_1", &trail), 1);
	assert_int_equal(audit_load(tx, "rd_none", &d), 0);
	store_rollback(tx);
	entries = json_object_get(trail, "entries");
	assert_int_equal(json_array_size(entries), 5);
	assert_true(json_is_true(json_object_get(trail, "chain_valid")));
	assert_string_equal(json_string_value(json_object_get(trail, "head_hash")), ch.head);
	assert_string_equal(json_string_value(
				    json_object_get(json_array_get(entries, 0), "prev_hash")),
			    AUDIT_GENESIS);
	assert_string_equal(json_string_value(json_object_get(json_array_get(entries, 0), "at")),
			    "2026-11-22T08:00:00.123Z");

	/* tampering with any part of any entry breaks the chain */
	json_object_set_new(json_object_get(json_array_get(entries, 2), "details"), "n",
			    json_integer(9));
	assert_int_equal(audit_entries_valid(entries), 0);
	json_object_set_new(json_object_get(json_array_get(entries, 2), "details"), "n",
			    json_integer(2));
	assert_int_equal(audit_entries_valid(entries), 1);
	json_object_set_new(json_array_get(entries, 3), "actor", json_string("someone"));
	assert_int_equal(audit_entries_valid(entries), 0);
	json_object_set_new(json_array_get(entries, 3), "actor", json_string("revops"));
	json_array_remove(entries, 1); /* a removed entry breaks the links */
	assert_int_equal(audit_entries_valid(entries), 0);
	json_decref(trail);
}

static void database_refuses_changes(void **state)
{
	struct store_tx *tx;

	(void)state;
	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "UPDATE audit_entries SET actor = 'x'", NULL, 0),
			 STORE_CONSTRAINT);
	store_rollback(tx);
	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "DELETE FROM audit_entries", NULL, 0), STORE_CONSTRAINT);
	store_rollback(tx);
	/* an entry must name a decision, and a decision with entries stays */
	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "DELETE FROM rate_decisions WHERE id = 'rd_1'", NULL, 0),
			 STORE_CONSTRAINT);
	store_rollback(tx);
	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "UPDATE rate_decisions SET id = 'rd_2' WHERE id = 'rd_1'",
				    NULL, 0),
			 STORE_CONSTRAINT);
	store_rollback(tx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hash_vector),
		cmocka_unit_test(append_load_verify),
		cmocka_unit_test(database_refuses_changes),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
