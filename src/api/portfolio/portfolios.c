#include "api/portfolio/portfolios.h"

#include <stdio.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "portfolio/portfolio.h"
#include "store/store.h"

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
	if ((rc = store_begin(c->svc->store, STORE_READ, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = after[0] ? 0 : portfolio_load(tx, c->p.portfolio_id, &p);
	store_rollback(tx);
	if (rc < 0) {
		respond_store_error(c, rc);
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
	if ((rc = store_begin(c->svc->store, STORE_READ, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = portfolio_load(tx, c->p.portfolio_id, &p);
	store_rollback(tx);
	if (rc < 0)
		respond_store_error(c, rc);
	else if (rc == 0)
		respond_error(c, ERR_NOT_FOUND, NULL, "no such portfolio");
	else
		respond_data(c, 200, p);
}

/* A page row: the property, unless the token does not reach it. */
static int property_row(struct buf *b, struct store_tx *tx, struct store_rows *r, void *arg,
			char *key, size_t keycap)
{
	struct ctx *c = arg;

	(void)tx;
	if (!auth_property_allowed(&c->p, store_text(r, 0)))
		return 0;
	str_copy(key, keycap, store_text(r, 0));
	return portfolio_property_write(b, r) < 0 ? -1 : 1;
}

/* Lists properties in id order after the cursor, limited to those the
 * token (and X-Service-Property) allow. */
void portfolio_h_properties(struct ctx *c)
{
	char after[ID_MAX], scope[192];
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	int limit, rc;

	if (!own_portfolio(c))
		return;
	snprintf(scope, sizeof scope, "properties|%s|%s", c->p.portfolio_id,
		 c->property_header ? c->property_header : "");
	if (respond_page_args(c, scope, &limit, after, sizeof after) < 0)
		return;
	if ((rc = store_begin(c->svc->store, STORE_READ_ONE, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = portfolio_properties_after(tx, c->p.portfolio_id, after, c->property_header, &r);
	respond_rows_page_text(c, tx, rc, r, limit, scope, property_row, c);
}

static const struct route routes[] = {
	ROUTE_V2("GET", "/v2/portfolios", portfolio_h_list, AUTH_SCOPE_PORTFOLIOS_READ),
	ROUTE_V2_ETAG("GET", "/v2/portfolios/{id}", portfolio_h_get, AUTH_SCOPE_PORTFOLIOS_READ),
	ROUTE_V2("GET", "/v2/portfolios/{id}/properties", portfolio_h_properties,
		 AUTH_SCOPE_PORTFOLIOS_READ),
};
const struct route_table portfolio_routes = ROUTE_TABLE(routes);
