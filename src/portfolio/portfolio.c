#include "portfolio/portfolio.h"

#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/jsonw.h"
#include "identity/auth.h"
#include "store/store.h"

#define PROPERTY_COLS                                                                       \
	"id, portfolio_id, name, brand, pms_property_code, billing_id, timezone, currency," \
	" vat_entity_nip, created_at"

int portfolio_exists(struct store_tx *tx, const char *id)
{
	int64_t one;

	return store_query_int(tx, "SELECT 1 FROM portfolios WHERE id = $1",
			       (struct store_val[]){sv_text(id)}, 1, &one);
}

int portfolio_sla_tier(struct store_tx *tx, const char *id, const char **tier)
{
	struct store_rows *r;
	int rc = store_query(tx, "SELECT plan FROM portfolios WHERE id = $1",
			     (struct store_val[]){sv_text(id)}, 1, &r);

	*tier = "standard";
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1)
		*tier = auth_plan_sla_tier(store_text(r, 0));
	store_rows_close(r);
	return rc;
}

int portfolio_has_property(struct store_tx *tx, const char *portfolio_id, const char *property_id)
{
	int64_t one;

	return store_query_int(tx, "SELECT 1 FROM properties WHERE id = $1 AND portfolio_id = $2",
			       (struct store_val[]){sv_text(property_id), sv_text(portfolio_id)}, 2,
			       &one);
}

int portfolio_count(struct store_tx *tx, int64_t *n)
{
	return store_query_int(tx, "SELECT COUNT(*) FROM portfolios", NULL, 0, n);
}

/* Reads one "id, pms_property_code, brand, currency, name, timezone" row of sql (two text
 * parameters) into *out. Returns 1, 0 or a negative store status. */
static int property_row(struct store_tx *tx, const char *sql, const char *a, const char *b,
			struct portfolio_property *out)
{
	struct store_rows *r;
	int rc = store_query(tx, sql, (struct store_val[]){sv_text(a), sv_text(b)}, 2, &r);

	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		snprintf(out->id, sizeof out->id, "%s", store_text(r, 0));
		snprintf(out->code, sizeof out->code, "%s", store_text(r, 1));
		snprintf(out->brand, sizeof out->brand, "%s", store_text(r, 2));
		snprintf(out->currency, sizeof out->currency, "%s", store_text(r, 3));
		snprintf(out->name, sizeof out->name, "%s", store_text(r, 4));
		snprintf(out->timezone, sizeof out->timezone, "%s", store_text(r, 5));
	}
	store_rows_close(r);
	return rc;
}

int portfolio_property_get(struct store_tx *tx, const char *portfolio_id, const char *id,
			   struct portfolio_property *out)
{
	return property_row(tx,
			    "SELECT id, pms_property_code, brand, currency, name, timezone FROM properties"
			    " WHERE portfolio_id = $1 AND id = $2",
			    portfolio_id, id, out);
}

int portfolio_property_by_code(struct store_tx *tx, const char *portfolio_id, const char *code,
			       struct portfolio_property *out)
{
	return property_row(tx,
			    "SELECT id, pms_property_code, brand, currency, name, timezone FROM properties"
			    " WHERE portfolio_id = $1 AND pms_property_code = $2",
			    portfolio_id, code, out);
}

int portfolio_each_property(struct store_tx *tx, const char *portfolio_id,
			    void (*fn)(void *arg, const char *id, const char *code), void *arg)
{
	struct store_rows *r;
	int rc = store_query(tx,
			     "SELECT id, pms_property_code FROM properties WHERE portfolio_id = $1"
			     " ORDER BY id",
			     (struct store_val[]){sv_text(portfolio_id)}, 1, &r);

	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1)
		fn(arg, store_text(r, 0), store_text(r, 1));
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

int portfolio_rate_limit(struct store_tx *tx, const char *id, int64_t *per_minute)
{
	return store_query_int(tx,
			       "SELECT COALESCE(rate_limit_per_minute, 0) FROM portfolios WHERE id = $1",
			       (struct store_val[]){sv_text(id)}, 1, per_minute);
}

#define CEILING_COLUMNS                                                                      \
	"SELECT id, brand, currency, max_minor_units, room_type_codes, valid_from, valid_to" \
	" FROM brand_ceilings WHERE portfolio_id = $1"

/* The current row of a CEILING_COLUMNS query into *ce. */
static void ceiling_from_row(struct store_rows *r, struct portfolio_ceiling *ce)
{
	memset(ce, 0, sizeof *ce);
	ce->found = 1;
	snprintf(ce->id, sizeof ce->id, "%s", store_text(r, 0));
	snprintf(ce->brand, sizeof ce->brand, "%s", store_text(r, 1));
	snprintf(ce->currency, sizeof ce->currency, "%s", store_text(r, 2));
	ce->max = store_int(r, 3);
	ce->room_types = json_loads(store_text(r, 4), 0, NULL);
	if (clock_parse_date(store_text(r, 5), &ce->from_days) < 0)
		ce->from_days = INT64_MAX; /* unreadable: nothing is inside */
	ce->has_to = !store_is_null(r, 6);
	if (ce->has_to && clock_parse_date(store_text(r, 6), &ce->to_days) < 0)
		ce->to_days = INT64_MIN;
}

int portfolio_ceiling_get(struct store_tx *tx, const char *portfolio_id, const char *id,
			  struct portfolio_ceiling *ce)
{
	struct store_rows *r;
	int rc;

	memset(ce, 0, sizeof *ce);
	rc = store_query(tx, CEILING_COLUMNS " AND id = $2",
			 (struct store_val[]){sv_text(portfolio_id), sv_text(id)}, 2, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1)
		ceiling_from_row(r, ce);
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

int portfolio_each_ceiling(struct store_tx *tx, const char *portfolio_id,
			   int (*fn)(void *arg, struct portfolio_ceiling *ce), void *arg)
{
	struct portfolio_ceiling ce;
	struct store_rows *r;
	int rc;

	rc = store_query(tx, CEILING_COLUMNS " ORDER BY id",
			 (struct store_val[]){sv_text(portfolio_id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1) {
		ceiling_from_row(r, &ce);
		if (fn(arg, &ce) < 0) {
			rc = STORE_ERR;
			break;
		}
	}
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

void portfolio_ceiling_free(struct portfolio_ceiling *c)
{
	json_decref(c->room_types);
	c->room_types = NULL;
}

static json_t *text_or_null(struct store_rows *r, int col)
{
	return store_is_null(r, col) ? json_null() : json_string(store_text(r, col));
}

int portfolio_property_write(struct buf *b, struct store_rows *r)
{
	static const char *const keys[] = {"id",       "portfolio_id",      "name",
					   "brand",    "pms_property_code", "billing_id",
					   "timezone", "currency",          "vat_entity_nip"};
	char ts[CLOCK_RFC3339_LEN];
	size_t i;

	if (buf_putc(b, '{') < 0)
		return -1;
	for (i = 0; i < ARRAY_LEN(keys); i++)
		if (jsonw_key(b, keys[i], i == 0) < 0 ||
		    jsonw_str(b, store_is_null(r, (int)i) ? NULL : store_text(r, (int)i)) < 0)
			return -1;
	clock_format_ms(store_int(r, 9), ts);
	if (jsonw_key(b, "created_at", 0) < 0 || jsonw_str(b, ts) < 0)
		return -1;
	return buf_putc(b, '}');
}

/* The tree form of portfolio_property_write's text. */
static json_t *property_json(struct store_rows *r)
{
	struct buf b;
	json_t *o = NULL;

	buf_init(&b, 0);
	if (portfolio_property_write(&b, r) == 0)
		o = json_loadb(b.data, b.len, 0, NULL);
	buf_free(&b);
	return o ? o : json_null();
}

static int load_ceilings(struct store_tx *tx, const char *portfolio_id, json_t *arr)
{
	struct store_rows *r;
	json_t *codes;
	int rc;

	rc = store_query(tx, CEILING_COLUMNS " ORDER BY id",
			 (struct store_val[]){sv_text(portfolio_id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1) {
		codes = json_loads(store_text(r, 4), 0, NULL);
		json_array_append_new(arr,
				      json_pack("{s:s, s:s, s:s, s:I, s:o, s:s, s:o}", "id",
						store_text(r, 0), "brand", store_text(r, 1),
						"currency", store_text(r, 2), "max_minor_units",
						(json_int_t)store_int(r, 3), "room_type_codes",
						codes ? codes : json_array(), "valid_from",
						store_text(r, 5), "valid_to", text_or_null(r, 6)));
	}
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

int portfolio_load(struct store_tx *tx, const char *id, json_t **out)
{
	struct store_rows *r;
	json_t *p = NULL, *target, *ceilings;
	const char *plan;
	int rc;

	*out = NULL;
	rc = store_query(tx,
			 "SELECT id, name, plan, audit_stream_target, created_at FROM portfolios"
			 " WHERE id = $1",
			 (struct store_val[]){sv_text(id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		plan = store_text(r, 2);
		target = store_is_null(r, 3) ? NULL : json_loads(store_text(r, 3), 0, NULL);
		if (json_is_object(target)) /* secrets are never echoed */
			json_object_del(target, "secret");
		p = json_pack("{s:s, s:s, s:s, s:s, s:[], s:o, s:o}", "id", store_text(r, 0), "name",
			      store_text(r, 1), "plan", plan, "sla_tier", auth_plan_sla_tier(plan),
			      "brand_ceilings", "audit_stream_target", target ? target : json_null(),
			      "created_at", jsonw_time(store_int(r, 4)));
	}
	store_rows_close(r);
	if (rc <= 0)
		return rc;
	ceilings = json_object_get(p, "brand_ceilings");
	rc = load_ceilings(tx, id, ceilings);
	if (rc < 0) {
		json_decref(p);
		return rc;
	}
	*out = p;
	return 1;
}

int portfolio_properties(struct store_tx *tx, const char *portfolio_id, json_t **out)
{
	struct store_rows *r;
	int rc;

	*out = json_array();
	rc = portfolio_properties_after(tx, portfolio_id, "", NULL, &r);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1)
		json_array_append_new(*out, property_json(r));
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

int portfolio_properties_after(struct store_tx *tx, const char *portfolio_id, const char *after,
			       const char *only, struct store_rows **rows)
{
	return store_query(tx,
			   "SELECT " PROPERTY_COLS " FROM properties WHERE portfolio_id = $1"
			   " AND id > $2 AND ($3 = '' OR id = $3) ORDER BY id",
			   (struct store_val[]){sv_text(portfolio_id), sv_text(after),
						sv_text(only ? only : "")},
			   3, rows);
}

int portfolio_create(struct store_tx *tx, const char *id, const char *name, const char *plan)
{
	int rc = store_exec(tx,
			    "INSERT INTO portfolios (id, name, plan, created_at) VALUES ($1, $2, $3, $4)",
			    (struct store_val[]){sv_text(id), sv_text(name), sv_text(plan),
						 sv_int(clock_now_ms())},
			    4);

	return rc < 0 ? rc : 0;
}

int portfolio_set_rate_limit(struct store_tx *tx, const char *id, int64_t per_minute)
{
	return store_exec(tx, "UPDATE portfolios SET rate_limit_per_minute = $2 WHERE id = $1",
			  (struct store_val[]){sv_text(id),
					       per_minute ? sv_int(per_minute) : sv_null()},
			  2);
}

int portfolio_property_add(struct store_tx *tx, const struct portfolio_property_new *p)
{
	int rc = store_exec(tx,
			    "INSERT INTO properties (id, portfolio_id, name, brand, pms_property_code,"
			    " billing_id, timezone, currency, vat_entity_nip, created_at)"
			    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
			    (struct store_val[]){sv_text(p->id), sv_text(p->portfolio_id),
						 sv_text(p->name), sv_text(p->brand),
						 sv_text(p->code), sv_text(p->billing_id),
						 sv_text(p->timezone), sv_text(p->currency),
						 sv_text(p->nip), sv_int(clock_now_ms())},
			    10);

	if (rc >= 0) /* every node's snapshot (portfolio/snapshot.h) reloads */
		rc = store_notify(tx, STORE_CH_PROPERTIES);
	return rc < 0 ? rc : 0;
}

int portfolio_ceiling_add(struct store_tx *tx, const struct portfolio_ceiling_new *c)
{
	int rc = store_exec(tx,
			    "INSERT INTO brand_ceilings (id, portfolio_id, brand, currency,"
			    " max_minor_units, room_type_codes, valid_from, valid_to, created_at)"
			    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
			    (struct store_val[]){sv_text(c->id), sv_text(c->portfolio_id),
						 sv_text(c->brand), sv_text(c->currency),
						 sv_int(c->max_minor_units), sv_text(c->room_types),
						 sv_text(c->valid_from), sv_text(c->valid_to),
						 sv_int(clock_now_ms())},
			    9);

	if (rc >= 0) /* every node's snapshot (portfolio/snapshot.h) reloads */
		rc = store_notify(tx, STORE_CH_PROPERTIES);
	return rc < 0 ? rc : 0;
}
