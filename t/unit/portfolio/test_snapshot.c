/* portfolio/snapshot against a real SQLite store: what a snapshot holds
 * and renders, that another process's addition (a second store on the
 * file, as revopsctl is) is seen on the next get, that a lookup of a
 * property the snapshot lacks reads the database, that brand ceilings are
 * kept and a new one is seen on the next get, and that a portfolio past
 * PORTFOLIO_SNAPSHOT_MAX properties is not kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "portfolio/portfolio.h"
#include "portfolio/snapshot.h"
#include "store/store.h"
#include "../tmp_store.h"

static char dir[64], url[128];
static struct store *st;

/* Adds n properties p<from>..p<from+n-1> to portfolio pf through store s,
 * as revopsctl does (portfolio_property_add announces each). */
static void add_properties(struct store *s, const char *pf, int from, int n)
{
	struct store_tx *tx;
	char id[32], code[32];
	int i;

	assert_int_equal(store_begin(s, STORE_WRITE, &tx), STORE_OK);
	for (i = from; i < from + n; i++) {
		snprintf(id, sizeof id, "prop_%s_%04d", pf, i);
		snprintf(code, sizeof code, "C%04d", i);
		assert_int_equal(portfolio_property_add(tx,
							&(struct portfolio_property_new){
								id, pf, "Hotel", "Aurora", code,
								"B", "Europe/Warsaw", "PLN", NULL}),
				 0);
	}
	assert_int_equal(store_commit(tx), STORE_OK);
}

static int setup(void **state)
{
	struct store_tx *tx;

	(void)state;
	if (tmp_store_dir("snapshot", dir, url, sizeof url) < 0)
		return -1;
	if (store_open(url, 2, &st) < 0 || store_begin(st, STORE_WRITE, &tx) != STORE_OK)
		return -1;
	if (portfolio_create(tx, "pf_a", "A", "group") < 0 ||
	    portfolio_create(tx, "pf_big", "Big", "enterprise") < 0)
		return -1;
	return store_commit(tx) == STORE_OK ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return tmp_store_remove(st, dir);
}

static void holds_renders_and_sees_additions(void **state)
{
	const struct portfolio_snapshot *s;
	const struct portfolio_snap_prop *p;
	struct store *other;

	(void)state;
	add_properties(st, "pf_a", 0, 2);
	assert_int_equal(portfolio_snapshot_get(st, "pf_a", &s), 1);
	assert_int_equal(s->n, 2);
	p = portfolio_snapshot_find(s, "prop_pf_a_0001");
	assert_non_null(p);
	assert_string_equal(p->p.code, "C0001");
	assert_string_equal(p->p.brand, "Aurora");
	assert_string_equal(p->p.currency, "PLN");
	assert_true(p->json_len > 0 && p->json[0] == '{' && p->json[p->json_len - 1] == '}');
	assert_non_null(memmem(p->json, p->json_len, "\"id\":\"prop_pf_a_0001\"", 20));
	assert_null(portfolio_snapshot_find(s, "prop_pf_a_0002"));
	portfolio_snapshot_put(s);

	/* another process adds one: the next get has it */
	assert_int_equal(store_open(url, 1, &other), 0);
	add_properties(other, "pf_a", 2, 1);
	assert_int_equal(portfolio_known_property(st, "pf_a", "prop_pf_a_0002"), 1);
	assert_int_equal(portfolio_snapshot_get(st, "pf_a", &s), 1);
	assert_int_equal(s->n, 3);
	assert_non_null(portfolio_snapshot_find(s, "prop_pf_a_0002"));
	portfolio_snapshot_put(s);
	store_close(other);
	assert_int_equal(portfolio_known_property(st, "pf_a", "prop_pf_a_9999"), 0);
	assert_int_equal(portfolio_known_property(st, "pf_big", "prop_pf_a_0000"), 0);
}

/* Adds brand ceiling id to pf through store s, as revopsctl does. */
static void add_ceiling(struct store *s, const char *pf, const char *id, int64_t max)
{
	struct store_tx *tx;

	assert_int_equal(store_begin(s, STORE_WRITE, &tx), STORE_OK);
	assert_int_equal(portfolio_ceiling_add(tx, &(struct portfolio_ceiling_new){id, pf, "Aurora",
										   "PLN", "[\"DBL\"]",
										   "2026-01-01",
										   NULL, max}),
			 0);
	assert_int_equal(store_commit(tx), STORE_OK);
}

static void keeps_ceilings_and_sees_new_ones(void **state)
{
	const struct portfolio_snapshot *s;
	const struct portfolio_ceiling *ce;
	struct store *other;

	(void)state;
	add_ceiling(st, "pf_a", "bc_one", 50000);
	assert_int_equal(portfolio_snapshot_get(st, "pf_a", &s), 1);
	ce = portfolio_snapshot_ceiling(s, "bc_one");
	assert_non_null(ce);
	assert_true(ce->found);
	assert_int_equal(ce->max, 50000);
	assert_string_equal(ce->brand, "Aurora");
	assert_string_equal(ce->currency, "PLN");
	assert_string_equal(json_string_value(json_array_get(ce->room_types, 0)), "DBL");
	assert_false(ce->has_to);
	assert_null(portfolio_snapshot_ceiling(s, "bc_two"));
	portfolio_snapshot_put(s);

	/* another process adds one: the next get has it */
	assert_int_equal(store_open(url, 1, &other), 0);
	add_ceiling(other, "pf_a", "bc_two", 70000);
	store_close(other);
	assert_int_equal(portfolio_snapshot_get(st, "pf_a", &s), 1);
	ce = portfolio_snapshot_ceiling(s, "bc_two");
	assert_non_null(ce);
	assert_int_equal(ce->max, 70000);
	assert_non_null(portfolio_snapshot_ceiling(s, "bc_one"));
	portfolio_snapshot_put(s);
}

static void a_large_portfolio_is_not_kept(void **state)
{
	const struct portfolio_snapshot *s = (const void *)1;

	(void)state;
	add_properties(st, "pf_big", 0, PORTFOLIO_SNAPSHOT_MAX + 1);
	assert_int_equal(portfolio_snapshot_get(st, "pf_big", &s), 0);
	assert_null(s);
	/* its properties are still known, from the database */
	assert_int_equal(portfolio_known_property(st, "pf_big", "prop_pf_big_0256"), 1);
	assert_int_equal(portfolio_known_property(st, "pf_big", "prop_pf_big_0257"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(holds_renders_and_sees_additions),
		cmocka_unit_test(keeps_ceilings_and_sees_new_ones),
		cmocka_unit_test(a_large_portfolio_is_not_kept),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
