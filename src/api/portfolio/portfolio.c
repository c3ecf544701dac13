#include "api/portfolio/portfolio.h"

#include <stdio.h>
#include <string.h>

#include "api/ctx.h"
#include "api/pagination.h"
#include "api/respond.h"
#include "core/clock.h"
#include "core/jsonw.h"
#include "store/store.h"

#define PROPERTY_COLS                                                                   \
	"id, portfolio_id, name, brand, pms_property_code, billing_id, timezone, currency," \
	" vat_entity_nip, created_at"

static json_t *text_or_null(struct store_rows *r, int col)
{
	return store_is_null(r, col) ? json_null() : json_string(store_text(r, col));
}

/* Writes one property (a PROPERTY_COLS row) as JSON text: the one place a
 * property is rendered. The list endpoint writes these straight into the
 * response; property_json parses the same text where a tree is needed. */
static int property_write(struct buf *b, struct store_rows *r)
{
	static const char *const keys[] = {"id", "portfolio_id", "name", "brand",
					   "pms_property_code", "billing_id", "timezone",
					   "currency", "vat_entity_nip"};
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

static json_t *property_json(struct store_rows *r)
{
	struct buf b;
	json_t *o = NULL;

	buf_init(&b, 0);
	if (property_write(&b, r) == 0)
		o = json_loadb(b.data, b.len, 0, NULL);
	buf_free(&b);
	return o ? o : json_null();
}

static int load_ceilings(struct store_tx *tx, const char *portfolio_id, json_t *arr)
{
	struct store_rows *r;
	json_t *codes;
	int rc;

	rc = store_query(tx,
			 "SELECT id, brand, currency, max_minor_units, room_type_codes, valid_from,"
			 " valid_to FROM brand_ceilings WHERE portfolio_id = $1 ORDER BY id",
			 (struct store_val[]){sv_text(portfolio_id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1) {
		codes = json_loads(store_text(r, 4), 0, NULL);
		json_array_append_new(
			arr, json_pack("{s:s, s:s, s:s, s:I, s:o, s:s, s:o}", "id", store_text(r, 0),
				       "brand", store_text(r, 1), "currency", store_text(r, 2),
				       "max_minor_units", (json_int_t)store_int(r, 3),
				       "room_type_codes", codes ? codes : json_array(), "valid_from",
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
		p = json_pack("{s:s, s:s, s:s, s:s, s:[], s:o, s:o}", "id", store_text(r, 0),
			      "name", store_text(r, 1), "plan", plan, "sla_tier",
			      auth_plan_sla_tier(plan), "brand_ceilings", "audit_stream_target",
			      target ? target : json_null(), "created_at",
			      jsonw_time(store_int(r, 4)));
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
	rc = store_query(tx,
			 "SELECT " PROPERTY_COLS " FROM properties WHERE portfolio_id = $1 ORDER BY id",
			 (struct store_val[]){sv_text(portfolio_id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1)
		json_array_append_new(*out, property_json(r));
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

int portfolio_has_property(struct store_tx *tx, const char *portfolio_id,
			   const char *property_id)
{
	int64_t one;
	int rc = store_query_int(tx,
				 "SELECT 1 FROM properties WHERE id = $1 AND portfolio_id = $2",
				 (struct store_val[]){sv_text(property_id), sv_text(portfolio_id)}, 2,
				 &one);
	return rc;
}

/* The one-portfolio list: a token belongs to exactly one portfolio. */
void portfolio_h_list(struct ctx *c)
{
	char after[ID_MAX], scope[128];
	struct store_tx *tx;
	json_t *p = NULL, *items;
	int limit, rc;

	snprintf(scope, sizeof scope, "portfolios|%s", c->p.portfolio_id);
	if (respond_page_args(c, scope, &limit, after, sizeof after) < 0)
		return;
	if (store_begin(c->svc->store, 0, &tx) != STORE_OK) {
		respond_error(c, ERR_UNAVAILABLE, NULL, "database unavailable");
		return;
	}
	rc = after[0] ? 0 : portfolio_load(tx, c->p.portfolio_id, &p);
	store_rollback(tx);
	if (rc < 0) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		return;
	}
	items = json_array();
	if (p)
		json_array_append_new(items, p);
	respond_list(c, items, NULL);
}

/* Checks the {id} path parameter names the token's portfolio; answers 403
 * otherwise (another portfolio and no portfolio look the same). */
static int own_portfolio(struct ctx *c)
{
	if (strcmp(ctx_param(c, 0), c->p.portfolio_id) != 0) {
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the path names a portfolio outside this token");
		return 0;
	}
	return 1;
}

void portfolio_h_get(struct ctx *c)
{
	struct store_tx *tx;
	json_t *p = NULL;
	int rc;

	if (!own_portfolio(c))
		return;
	if (store_begin(c->svc->store, 0, &tx) != STORE_OK) {
		respond_error(c, ERR_UNAVAILABLE, NULL, "database unavailable");
		return;
	}
	rc = portfolio_load(tx, c->p.portfolio_id, &p);
	store_rollback(tx);
	if (rc < 0)
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
	else if (rc == 0)
		respond_error(c, ERR_NOT_FOUND, NULL, "no such portfolio");
	else
		respond_data(c, 200, p);
}

/* Lists properties in id order after the cursor, limited to those the
 * token (and X-Service-Property) allow; fetches one extra row to know
 * whether another page exists. */
void portfolio_h_properties(struct ctx *c)
{
	char after[ID_MAX], scope[192], next[PAGINATION_CURSOR_MAX + 1], last[ID_MAX] = "";
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	struct buf items = {NULL, 0, 0, 0};
	int limit, rc, n = 0, more = 0;

	if (!own_portfolio(c))
		return;
	snprintf(scope, sizeof scope, "properties|%s|%s", c->p.portfolio_id,
		 c->property_header ? c->property_header : "");
	if (respond_page_args(c, scope, &limit, after, sizeof after) < 0)
		return;
	if (store_begin(c->svc->store, 0, &tx) != STORE_OK) {
		respond_error(c, ERR_UNAVAILABLE, NULL, "database unavailable");
		return;
	}
	rc = store_query(tx,
			 "SELECT " PROPERTY_COLS " FROM properties WHERE portfolio_id = $1"
			 " AND id > $2 AND ($3 = '' OR id = $3) ORDER BY id",
			 (struct store_val[]){sv_text(c->p.portfolio_id), sv_text(after),
					      sv_text(c->property_header ? c->property_header : "")},
			 3, &r);
	if (rc != STORE_OK)
		goto fail;
	buf_init(&items, HTTP_BODY_MAX * 4);
	if (buf_putc(&items, '[') < 0)
		goto fail;
	while ((rc = store_next(r)) == 1) {
		if (!auth_property_allowed(&c->p, store_text(r, 0)))
			continue;
		if (n == limit) {
			more = 1;
			break;
		}
		if ((n && buf_putc(&items, ',') < 0) || property_write(&items, r) < 0)
			goto fail;
		snprintf(last, sizeof last, "%s", store_text(r, 0));
		n++;
	}
	if (rc < 0 || buf_putc(&items, ']') < 0)
		goto fail;
	store_rows_close(r);
	store_rollback(tx);
	if (more && pagination_cursor_encode(c->svc->cursor_key, scope, last, next, sizeof next) < 0)
		more = 0;
	respond_list_text(c, &items, more ? next : NULL);
	buf_free(&items);
	return;
fail:
	buf_free(&items);
	store_rows_close(r);
	store_rollback(tx);
	respond_error(c, ERR_INTERNAL, NULL, "internal error");
}

static const struct route routes[] = {
	ROUTE_V2("GET", "/v2/portfolios", portfolio_h_list, AUTH_SCOPE_PORTFOLIOS_READ),
	ROUTE_V2("GET", "/v2/portfolios/{id}", portfolio_h_get, AUTH_SCOPE_PORTFOLIOS_READ),
	ROUTE_V2("GET", "/v2/portfolios/{id}/properties", portfolio_h_properties,
		 AUTH_SCOPE_PORTFOLIOS_READ),
};
const struct route_table portfolio_routes = ROUTE_TABLE(routes);
