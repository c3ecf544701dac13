#include "feeds/ota.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/jsonw.h"
#include "events/outbox.h"
#include "rates/floors.h"
#include "rates/governance.h"
#include "store/store.h"

const char *ota_parity_name(enum ota_parity p)
{
	static const char *const names[] = {
		[OTA_NO_FLOOR] = "no_floor",
		[OTA_AT_OR_ABOVE] = "at_or_above_floor",
		[OTA_BREACH_OPENED] = "breach_opened",
		[OTA_BREACH_CONTINUES] = "breach_continues",
		[OTA_BREACH_RESOLVED] = "breach_resolved",
		[OTA_STALE] = "stale",
		[OTA_FLOOR_OTHER_MONEY] = "floor_in_other_currency",
	};

	return names[p];
}

/* An observation staged by ota_batch_add, its key's state and, after
 * ota_batch_end, its outcome. */
struct staged {
	struct ota_new o;
	char property_id[ID_MAX], currency[4];
	size_t key; /* index into the batch's keys */
	struct ota_outcome out;
};

/* What the batch knows of one key (property, room type, date, OTA): read
 * from the database once, then carried from item to item. */
struct key_state {
	size_t first;         /* the first staged item of the key */
	int has_latest;       /* an observation of the key is recorded */
	int64_t latest;       /* the latest observed_at recorded */
	char open_id[ID_MAX]; /* its open alert, "" when none */
	int has_floor;
	struct floor floor;
};

struct ota_batch {
	struct staged *items;
	size_t n, cap;
	struct key_state *keys;
	size_t nkeys;
	json_t *key_index; /* "property\x1froom\x1fdate\x1fota": key index */
};

int ota_batch_begin(struct ota_batch **out)
{
	struct ota_batch *b = calloc(1, sizeof *b);

	if (!b || !(b->key_index = json_object())) {
		free(b);
		*out = NULL;
		return STORE_ERR;
	}
	*out = b;
	return 0;
}

void ota_batch_free(struct ota_batch *b)
{
	if (!b)
		return;
	free(b->items);
	free(b->keys);
	json_decref(b->key_index);
	free(b);
}

/* The index of o's key in b->keys, added when new (item: o's index). */
static int key_of(struct ota_batch *b, const struct ota_new *o, size_t item, size_t *out)
{
	char name[256];
	json_t *k;

	snprintf(name, sizeof name, "%s\x1f%s\x1f%s\x1f%s", o->property_id, o->room_type_code,
		 o->date, o->ota);
	if ((k = json_object_get(b->key_index, name)) != NULL) {
		*out = (size_t)json_integer_value(k);
		return 0;
	}
	if (json_object_set_new(b->key_index, name, json_integer((json_int_t)b->nkeys)))
		return STORE_ERR;
	memset(&b->keys[b->nkeys], 0, sizeof b->keys[b->nkeys]);
	b->keys[b->nkeys].first = item;
	*out = b->nkeys++;
	return 0;
}

int ota_batch_add(struct ota_batch *b, const struct ota_new *o)
{
	struct staged *s;
	struct key_state *k;
	size_t cap;

	if (b->n == b->cap) {
		cap = b->cap ? b->cap * 2 : 64;
		if (!(s = realloc(b->items, cap * sizeof *s)))
			return STORE_ERR;
		b->items = s;
		if (!(k = realloc(b->keys, cap * sizeof *k)))
			return STORE_ERR;
		b->keys = k;
		b->cap = cap;
	}
	s = &b->items[b->n];
	memset(s, 0, sizeof *s);
	s->o = *o;
	snprintf(s->property_id, sizeof s->property_id, "%s", o->property_id);
	snprintf(s->currency, sizeof s->currency, "%s", o->currency);
	s->o.property_id = s->property_id; /* set again by ota_batch_end: items move */
	s->o.currency = s->currency;
	if (key_of(b, &s->o, b->n, &s->key) < 0)
		return STORE_ERR;
	return (int)b->n++;
}

const struct ota_outcome *ota_batch_outcome(const struct ota_batch *b, int i)
{
	return i >= 0 && (size_t)i < b->n ? &b->items[i].out : NULL;
}

/* Keys one read carries, at most (4 values each); a read of fewer is
 * padded to a power of two, so a few prepared statements serve all. */
#define READ_KEYS 32

/* The read of n keys: a row per key (k.column1, its index in the read),
 * correlated on its values k.column2..5 (property, room type, date, OTA):
 * the latest observation, the open alert and the floor in force as
 * "source_id currency minor_units". */
static char *read_sql(size_t n)
{
	static const char head[] =
		"SELECT k.column1, (SELECT max(observed_at) FROM ota_observations x WHERE"
		" x.property_id = k.column2 AND x.room_type_code = k.column3 AND x.stay_date ="
		" k.column4 AND x.ota = k.column5), (SELECT id FROM parity_alerts a WHERE"
		" a.property_id = k.column2 AND a.room_type_code = k.column3 AND a.stay_date ="
		" k.column4 AND a.ota = k.column5 AND a.status = 'open'), (SELECT source_id || ' '"
		" || currency || ' ' || minor_units FROM (" FLOORS_IN_FORCE(
			"k.column2", "k.column3", "k.column4") ") f) FROM (VALUES ";

	return store_sql_values(head, n, 4, 1, ") k");
}

/* Fills k from its row of the read. */
static void read_row(struct store_rows *r, struct key_state *k)
{
	const char *floor = store_text(r, 3);
	long long minor;

	if ((k->has_latest = !store_is_null(r, 1)))
		k->latest = store_int(r, 1);
	if (!store_is_null(r, 2))
		snprintf(k->open_id, sizeof k->open_id, "%s", store_text(r, 2));
	k->has_floor = floor && sscanf(floor, "%39s %3s %lld", k->floor.source_id,
				       k->floor.currency, &minor) == 3;
	k->floor.minor_units = k->has_floor ? (int64_t)minor : 0;
}

/* Reads the recorded state of b->keys[from, from + n), n <= READ_KEYS. */
static int read_keys(struct store_tx *tx, struct ota_batch *b, size_t from, size_t n)
{
	struct store_val v[READ_KEYS * 4];
	struct store_rows *r;
	size_t padded = 1, i, at;
	char *sql;
	int rc;

	while (padded < n)
		padded *= 2;
	for (i = 0; i < padded; i++) {
		const struct ota_new *o = &b->items[b->keys[from + (i < n ? i : n - 1)].first].o;

		v[4 * i] = sv_text(o->property_id);
		v[4 * i + 1] = sv_text(o->room_type_code);
		v[4 * i + 2] = sv_text(o->date);
		v[4 * i + 3] = sv_text(o->ota);
	}
	if (!(sql = read_sql(padded)))
		return STORE_ERR;
	rc = store_query(tx, sql, v, (int)padded * 4, &r);
	free(sql);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1)
		if ((at = (size_t)store_int(r, 0)) < n)
			read_row(r, &b->keys[from + at]);
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

static int insert_observation(struct store_tx *tx, const char *pf, const struct ota_new *o,
			      int64_t now)
{
	int rc = store_send_row(tx,
				"INSERT INTO ota_observations (portfolio_id, property_id, ota,"
				" room_type_code, stay_date, currency, minor_units, observed_at,"
				" received_at)",
				"", 9,
				(struct store_val[]){sv_text(pf), sv_text(o->property_id),
						     sv_text(o->ota), sv_text(o->room_type_code),
						     sv_text(o->date), sv_text(o->currency),
						     sv_int(o->minor_units), sv_int(o->observed_at),
						     sv_int(now)});

	return rc < 0 ? rc : 0;
}

/* Opens an alert for o below floor f, with its event. */
static int open_breach(struct store_tx *tx, const char *pf, const struct ota_new *o,
		       const struct floor *f, int64_t now, char *id)
{
	json_t *data, *props;
	int rc;

	if (id_new("pa_", id, ID_MAX) < 0)
		return STORE_ERR;
	rc = store_send(
		tx,
		"INSERT INTO parity_alerts (id, portfolio_id, property_id, ota, room_type_code,"
		" stay_date, status, currency, ota_minor, floor_minor, floor_source, opened_at,"
		" observed_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 'open', $7, $8, $9,"
		" $10, $11, $12, $11)",
		(struct store_val[]){sv_text(id), sv_text(pf), sv_text(o->property_id),
				     sv_text(o->ota), sv_text(o->room_type_code), sv_text(o->date),
				     sv_text(o->currency), sv_int(o->minor_units),
				     sv_int(f->minor_units), sv_text(f->source_id), sv_int(now),
				     sv_int(o->observed_at)},
		12);
	if (rc < 0)
		return rc;
	data = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o}", "alert_id", id, "property_id",
			 o->property_id, "room_type_code", o->room_type_code, "date", o->date,
			 "ota", o->ota, "ota_rate", governance_money(o->currency, o->minor_units),
			 "approved_floor", governance_money(f->currency, f->minor_units));
	props = json_pack("[s]", o->property_id);
	rc = data && props
		     ? outbox_append(tx, "v2", "parity.breach.detected", pf, props, data, NULL, 0)
		     : STORE_ERR;
	json_decref(data);
	json_decref(props);
	return rc;
}

/* Updates the open alert id: still below floor f (f set), or resolved. */
static int update_alert(struct store_tx *tx, const char *id, const struct ota_new *o,
			const struct floor *f, int64_t now)
{
	int rc;

	if (f)
		rc = store_send(tx,
				"UPDATE parity_alerts SET ota_minor = $2, floor_minor = $3,"
				" floor_source = $4, observed_at = $5, updated_at = $6 WHERE id = $1",
				(struct store_val[]){sv_text(id), sv_int(o->minor_units),
						     sv_int(f->minor_units), sv_text(f->source_id),
						     sv_int(o->observed_at), sv_int(now)},
				6);
	else
		rc = store_send(tx,
				"UPDATE parity_alerts SET status = 'resolved', resolved_at = $2,"
				" resolved_minor = $3, observed_at = $4, updated_at = $2 WHERE id = $1",
				(struct store_val[]){sv_text(id), sv_int(now),
						     sv_int(o->minor_units), sv_int(o->observed_at)},
				4);
	return rc < 0 ? rc : 0;
}

/* Records staged s (its key's state k, carried on for the next item of
 * the key) and acts on parity. */
static int record(struct store_tx *tx, const char *pf, struct staged *s, struct key_state *k,
		  int64_t now)
{
	const struct ota_new *o = &s->o;
	struct ota_outcome *out = &s->out;
	int newer = k->has_latest && k->latest > o->observed_at, below, rc;

	if ((rc = insert_observation(tx, pf, o, now)) < 0)
		return rc;
	if (!k->has_latest || o->observed_at > k->latest)
		k->latest = o->observed_at;
	k->has_latest = 1;
	if (newer) {
		out->parity = OTA_STALE;
		return 0;
	}
	snprintf(out->alert_id, sizeof out->alert_id, "%s", k->open_id);
	if (k->has_floor && strcmp(k->floor.currency, o->currency)) {
		out->parity = OTA_FLOOR_OTHER_MONEY;
		return 0;
	}
	below = k->has_floor && o->minor_units < k->floor.minor_units;
	if (k->open_id[0]) {
		out->parity = below ? OTA_BREACH_CONTINUES : OTA_BREACH_RESOLVED;
		if (!below)
			k->open_id[0] = '\0';
		return update_alert(tx, out->alert_id, o, below ? &k->floor : NULL, now);
	}
	out->parity = below ? OTA_BREACH_OPENED : k->has_floor ? OTA_AT_OR_ABOVE : OTA_NO_FLOOR;
	if (!below)
		return 0;
	rc = open_breach(tx, pf, o, &k->floor, now, out->alert_id);
	snprintf(k->open_id, sizeof k->open_id, "%s", out->alert_id);
	return rc;
}

int ota_batch_end(struct store_tx *tx, const char *pf, struct ota_batch *b, int64_t now)
{
	size_t i, n;
	int rc = 0;

	for (i = 0; i < b->n; i++) {
		b->items[i].o.property_id = b->items[i].property_id;
		b->items[i].o.currency = b->items[i].currency;
	}
	for (i = 0; rc == 0 && i < b->nkeys; i += n) {
		n = b->nkeys - i < READ_KEYS ? b->nkeys - i : READ_KEYS;
		rc = read_keys(tx, b, i, n);
	}
	for (i = 0; rc >= 0 && i < b->n; i++)
		rc = record(tx, pf, &b->items[i], &b->keys[b->items[i].key], now);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------------ the list */

#define ALERT_COLS                                                                         \
	"id, status, property_id, ota, room_type_code, stay_date, currency, ota_minor,"    \
	" floor_minor, floor_source, opened_at, observed_at, resolved_at, resolved_minor," \
	" updated_at, portfolio_id"

/* gap as a percentage of floor, rounded half away from zero to two
 * decimals. */
static double percent_of(int64_t gap, int64_t floor)
{
	int64_t basis;

	if (floor <= 0)
		return 0.0;
	basis = (gap * 10000 + (gap < 0 ? -floor / 2 : floor / 2)) / floor;
	return (double)basis / 100.0;
}

json_t *ota_alert_from_row(struct store_rows *r)
{
	const char *cur = store_text(r, 6), *src = store_text(r, 9);
	int64_t ota = store_int(r, 7), floor = store_int(r, 8), gap = floor - ota;

	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:{s:I, s:f}, s:{s:s, s:s},"
			 " s:o, s:o, s:o, s:o, s:o}",
			 "id", store_text(r, 0), "status", store_text(r, 1), "property_id",
			 store_text(r, 2), "ota", store_text(r, 3), "room_type_code",
			 store_text(r, 4), "date", store_text(r, 5), "observed_rate",
			 governance_money(cur, ota), "approved_rate", governance_money(cur, floor),
			 "gap", "minor_units", (json_int_t)gap, "percent", percent_of(gap, floor),
			 "floor_source", "kind",
			 strncmp(src, "rs_", 3) ? "rate_decision" : "rate_suggestion", "id", src,
			 "opened_at", jsonw_time(store_int(r, 10)), "last_observed_at",
			 jsonw_time(store_int(r, 11)), "resolved_at",
			 store_is_null(r, 12) ? json_null() : jsonw_time(store_int(r, 12)),
			 "resolved_by_rate",
			 store_is_null(r, 13) ? json_null() : governance_money(cur, store_int(r, 13)),
			 "updated_at", jsonw_time(store_int(r, 14)));
}

const char *ota_alert_row_id(struct store_rows *r)
{
	return store_text(r, 0);
}

int ota_alert_list(struct store_tx *tx, const char *pf, const char *after,
		   const struct ota_alert_filter *f, int limit, struct store_rows **rows)
{
	struct store_sql q = {.len = 0};

	store_sql_page(&q, "SELECT " ALERT_COLS " FROM parity_alerts", pf, after);
	store_sql_eq(&q, "status", f->status);
	store_sql_eq(&q, "property_id", f->property_id);
	store_sql_eq(&q, "ota", f->ota);
	return store_sql_page_end(tx, &q, f->props, f->nprops, limit, rows);
}

static void *alert_row(struct store_rows *r)
{
	return ota_alert_from_row(r);
}

int ota_alert_load(struct store_tx *tx, const char *pf, const char *id, json_t **out)
{
	void *v;
	int rc = store_get_owned(tx, "SELECT " ALERT_COLS " FROM parity_alerts WHERE id = $1", id,
				 15, pf, alert_row, &v);

	*out = v;
	return rc;
}
