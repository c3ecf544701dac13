#include "feeds/ota.h"

#include <stdio.h>
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

/* The key of an observation: property, room type, date and OTA. */
#define KEY_WHERE "property_id = $1 AND room_type_code = $2 AND stay_date = $3 AND ota = $4"
#define KEY_VALS(o)                                                                  \
	sv_text((o)->property_id), sv_text((o)->room_type_code), sv_text((o)->date), \
		sv_text((o)->ota)

/* What one statement reads for an observation: whether a newer one of
 * its key is recorded, the key's open alert, and the floor in force. */
struct seen {
	int newer;
	char open_id[ID_MAX]; /* "" when none */
	int has_floor;
	struct floor floor;
};

/* Reads s for o in one round trip. Returns 0 or < 0. */
static int read_seen(struct store_tx *tx, const struct ota_new *o, struct seen *s)
{
	struct store_rows *r;
	int rc = store_query(tx,
			     "SELECT (SELECT 1 FROM ota_observations WHERE " KEY_WHERE
			     " AND observed_at > $5 LIMIT 1), (SELECT id FROM parity_alerts WHERE " KEY_WHERE
			     " AND status = 'open'), f.source_id, f.currency, f.minor_units"
			     " FROM (SELECT 1 AS one) o LEFT JOIN (" FLOORS_IN_FORCE_SQL
			     ") f ON 1 = 1",
			     (struct store_val[]){KEY_VALS(o), sv_int(o->observed_at)}, 5, &r);

	memset(s, 0, sizeof *s);
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1) {
		s->newer = !store_is_null(r, 0);
		if (!store_is_null(r, 1))
			snprintf(s->open_id, sizeof s->open_id, "%s", store_text(r, 1));
		s->has_floor = !store_is_null(r, 2);
		if (s->has_floor) {
			snprintf(s->floor.source_id, sizeof s->floor.source_id, "%s",
				 store_text(r, 2));
			snprintf(s->floor.currency, sizeof s->floor.currency, "%s", store_text(r, 3));
			s->floor.minor_units = store_int(r, 4);
		}
	}
	store_rows_close(r);
	return rc == 1 ? 0 : (rc < 0 ? rc : STORE_ERR);
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

int ota_record(struct store_tx *tx, const char *pf, const struct ota_new *o, int64_t now,
	       struct ota_outcome *out)
{
	struct seen s;
	int rc, below;

	memset(out, 0, sizeof *out);
	if ((rc = read_seen(tx, o, &s)) < 0 || (rc = insert_observation(tx, pf, o, now)) < 0)
		return rc;
	if (s.newer) {
		out->parity = OTA_STALE;
		return 0;
	}
	snprintf(out->alert_id, sizeof out->alert_id, "%s", s.open_id);
	if (s.has_floor && strcmp(s.floor.currency, o->currency)) {
		out->parity = OTA_FLOOR_OTHER_MONEY;
		return 0;
	}
	below = s.has_floor && o->minor_units < s.floor.minor_units;
	if (s.open_id[0]) {
		out->parity = below ? OTA_BREACH_CONTINUES : OTA_BREACH_RESOLVED;
		return update_alert(tx, out->alert_id, o, below ? &s.floor : NULL, now);
	}
	out->parity = below ? OTA_BREACH_OPENED : s.has_floor ? OTA_AT_OR_ABOVE : OTA_NO_FLOOR;
	return below ? open_breach(tx, pf, o, &s.floor, now, out->alert_id) : 0;
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
