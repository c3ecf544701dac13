/* outbox_append writes inside the caller's transaction: a rollback leaves
 * no event, a commit leaves exactly one with every field as given (its
 * texts too, with outbox_append_text); the events of outbox_later arrive
 * when appended, in order; outbox_skip_after passes over exactly the
 * events outbox_each_after reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/id.h"
#include "events/outbox.h"
#include "store/store.h"
#include "../tmp_store.h"

static char dir[64];
static struct store *st;

static int setup(void **state)
{
	char url[512];

	(void)state;
	if (tmp_store_url("outbox", dir, url, sizeof url) < 0)
		return -1;
	return store_open(url, 2, &st);
}

static int teardown(void **state)
{
	(void)state;
	return tmp_store_remove(st, dir);
}

static int64_t count_events(void)
{
	struct store_tx *tx;
	int64_t n = -1;

	assert_int_equal(store_begin(st, 0, &tx), STORE_OK);
	assert_int_equal(store_query_int(tx, "SELECT COUNT(*) FROM events", NULL, 0, &n), 1);
	store_rollback(tx);
	return n;
}

static void rollback_leaves_nothing(void **state)
{
	struct store_tx *tx;
	json_t *props = json_pack("[s]", "prop_x"), *data = json_pack("{s:i}", "a", 1);

	(void)state;
	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_int_equal(outbox_append(tx, "v2", "t.x", "pf_x", props, data, NULL, 0), 0);
	store_rollback(tx);
	assert_int_equal(count_events(), 0);
	json_decref(props);
	json_decref(data);
}

static void commit_keeps_event(void **state)
{
	struct store_tx *tx;
	struct store_rows *r;
	char id[ID_MAX];
	json_t *props = json_pack("[s,s]", "prop_a", "prop_b");
	json_t *data = json_pack("{s:s, s:i}", "decision_id", "rd_1", "n", 7);

	(void)state;
	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_int_equal(outbox_append(tx, "v1", "rate.suggested", "pf_1", props, data, id, sizeof id),
			 0);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_true(id_valid("evt_", id));
	assert_int_equal(count_events(), 1);
	assert_int_equal(store_begin(st, 0, &tx), STORE_OK);
	assert_int_equal(store_query(tx,
				     "SELECT surface, type, portfolio_id, property_ids, data, created_at"
				     " FROM events WHERE id = $1",
				     (struct store_val[]){sv_text(id)}, 1, &r),
			 STORE_OK);
	assert_int_equal(store_next(r), 1);
	assert_string_equal(store_text(r, 0), "v1");
	assert_string_equal(store_text(r, 1), "rate.suggested");
	assert_string_equal(store_text(r, 2), "pf_1");
	assert_string_equal(store_text(r, 3), "[\"prop_a\",\"prop_b\"]");
	assert_string_equal(store_text(r, 4), "{\"decision_id\":\"rd_1\",\"n\":7}");
	assert_true(store_int(r, 5) > 1700000000000LL);
	store_rows_close(r);
	store_rollback(tx);
	json_decref(props);
	json_decref(data);
}

static void bad_input_refused(void **state)
{
	struct store_tx *tx;
	json_t *props = json_array(), *data = json_object(), *notarr = json_object();

	(void)state;
	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_true(outbox_append(tx, "v3", "t", "pf", props, data, NULL, 0) < 0);
	assert_true(outbox_append(tx, "v2", "t", "pf", notarr, data, NULL, 0) < 0);
	assert_true(outbox_append(tx, "v2", "t", "pf", props, props, NULL, 0) < 0);
	store_rollback(tx);
	json_decref(props);
	json_decref(data);
	json_decref(notarr);
}

/* outbox_later: events made ready now reach the table only when appended,
 * in the order added (their numbers), with the ids given out when added;
 * a list never appended, or NULL, writes nothing. */
static void later_appends_in_order(void **state)
{
	struct outbox_later *l = NULL;
	struct store_tx *tx;
	struct store_rows *r;
	char ids[40][ID_MAX];
	json_t *props = json_pack("[s]", "prop_l"), *data;
	int64_t before = count_events();
	int i;

	(void)state;
	assert_int_equal(outbox_later_append(NULL, NULL), 0);
	for (i = 0; i < 40; i++) { /* more than the list's first allocation */
		data = json_pack("{s:i}", "i", i);
		assert_int_equal(outbox_later_add(&l, "v1", "rate.suggested", "pf_l", props, data,
						  ids[i], sizeof ids[i]),
				 0);
		json_decref(data);
	}
	assert_true(outbox_later_add(&l, "v9", "t", "pf_l", props, props, NULL, 0) < 0);
	assert_int_equal(count_events(), before);
	assert_int_equal(store_begin(st, STORE_WRITE_OWN, &tx), STORE_OK);
	assert_int_equal(outbox_later_append(tx, l), 0);
	assert_int_equal(store_commit(tx), STORE_OK);
	outbox_later_free(l);
	assert_int_equal(store_begin(st, 0, &tx), STORE_OK);
	assert_int_equal(store_query(tx,
				     "SELECT id, data FROM events WHERE portfolio_id = 'pf_l'"
				     " ORDER BY seq",
				     NULL, 0, &r),
			 STORE_OK);
	for (i = 0; store_next(r) == 1; i++) {
		char want[32];

		snprintf(want, sizeof want, "{\"i\":%d}", i);
		assert_true(i < 40);
		assert_string_equal(store_text(r, 0), ids[i]);
		assert_string_equal(store_text(r, 1), want);
	}
	assert_int_equal(i, 40);
	store_rows_close(r);
	store_rollback(tx);
	outbox_later_free(NULL);
	json_decref(props);
}

static void append_text_keeps_texts(void **state)
{
	struct store_tx *tx;
	struct store_rows *r;

	(void)state;
	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_true(outbox_append_text(tx, "v3", "t", "pf_t", "[]", "{}") < 0);
	assert_int_equal(outbox_append_text(tx, "v1", "whatsapp.received", "pf_t", "[\"prop_t\"]",
					    "{\"text\":\"h\\u00e9\"}"),
			 0);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(store_begin(st, 0, &tx), STORE_OK);
	assert_int_equal(store_query(tx,
				     "SELECT id, surface, type, property_ids, data FROM events"
				     " WHERE portfolio_id = 'pf_t'",
				     NULL, 0, &r),
			 STORE_OK);
	assert_int_equal(store_next(r), 1);
	assert_true(id_valid("evt_", store_text(r, 0)));
	assert_string_equal(store_text(r, 1), "v1");
	assert_string_equal(store_text(r, 2), "whatsapp.received");
	assert_string_equal(store_text(r, 3), "[\"prop_t\"]");
	assert_string_equal(store_text(r, 4), "{\"text\":\"h\\u00e9\"}");
	assert_int_equal(store_next(r), 0);
	store_rows_close(r);
	store_rollback(tx);
}

/* outbox_each_after's fn: counts the events and keeps the last seq. */
static int seen(const struct outbox_event *ev, void *arg)
{
	int64_t *s = arg;

	s[0]++;
	s[1] = ev->seq;
	return 0;
}

static void skip_passes_what_each_reads(void **state)
{
	struct store_tx *tx;
	json_t *props = json_pack("[s]", "prop_s"), *data = json_object();
	int64_t first, last, s[2];

	(void)state;
	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	for (int i = 0; i < 5; i++)
		assert_int_equal(outbox_append(tx, "v2", "t.s", "pf_s", props, data, NULL, 0), 0);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(store_begin(st, 0, &tx), STORE_OK);
	assert_int_equal(outbox_first_after(tx, 0, &first), 1);
	for (int64_t limit = 1; limit <= 1000; limit *= 10) {
		for (int64_t after = first - 1; after < first + 1000; after += 1 + after % 7) {
			int n = outbox_skip_after(tx, after, limit, &last);

			s[0] = 0;
			s[1] = after;
			assert_int_equal(outbox_each_after(tx, after, limit, seen, s), 0);
			assert_int_equal(n, s[0]);
			assert_int_equal(last, s[1]);
		}
	}
	assert_int_equal(outbox_skip_after(tx, 1LL << 60, 10, &last), 0);
	assert_int_equal(last, 1LL << 60);
	store_rollback(tx);
	json_decref(props);
	json_decref(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rollback_leaves_nothing),
		cmocka_unit_test(commit_keeps_event),
		cmocka_unit_test(bad_input_refused),
		cmocka_unit_test(later_appends_in_order),
		cmocka_unit_test(append_text_keeps_texts),
		cmocka_unit_test(skip_passes_what_each_reads),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
