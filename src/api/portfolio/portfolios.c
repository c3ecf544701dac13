#include "api/portfolio/portfolios.h"

#include <stdio.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "core/buf.h"
#include "http/http.h"
#include "portfolio/portfolio.h"
#include "portfolio/snapshot.h"
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

/* Whether the list leaves property id out: at or before the cursor,
 * another than X-Service-Property names, or outside the token. */
static int property_skipped(const struct ctx *c, const char *id, const char *after)
{
	return strcmp(id, after) <= 0 ||
	       (c->property_header && strcmp(id, c->property_header) != 0) ||
	       !auth_property_allowed(&c->p, id);
}

/* The page of the properties list from this node's snapshot of them
 * (portfolio/snapshot.h), in the same id order as the database's. */
static void properties_page(struct ctx *c, const struct portfolio_snapshot *s, const char *after,
			    int limit, const char *scope)
{
	struct buf items;
	const char *last = NULL;
	int n = 0, more = 0;
	size_t i;

	buf_init(&items, HTTP_BODY_MAX * 4);
	if (buf_putc(&items, '[') < 0)
		goto fail;
	for (i = 0; i < s->n; i++) {
		if (property_skipped(c, s->props[i].p.id, after))
			continue;
		if (n == limit) {
			more = 1;
			break;
		}
		if ((n && buf_putc(&items, ',') < 0) ||
		    buf_append(&items, s->props[i].json, s->props[i].json_len) < 0)
			goto fail;
		last = s->props[i].p.id;
		n++;
	}
	if (buf_putc(&items, ']') < 0)
		goto fail;
	respond_page_items(c, &items, scope, more ? last : NULL);
	buf_free(&items);
	return;
fail:
	buf_free(&items);
	respond_store_error(c, STORE_ERR);
}

/* Lists properties in id order after the cursor, limited to those the
 * token (and X-Service-Property) allow: from this node's snapshot, or from
 * the database for a portfolio too large to keep one. */
void portfolio_h_properties(struct ctx *c)
{
	char after[ID_MAX], scope[192];
	const struct portfolio_snapshot *s;
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	int limit, rc;

	if (!own_portfolio(c))
		return;
	snprintf(scope, sizeof scope, "properties|%s|%s", c->p.portfolio_id,
		 c->property_header ? c->property_header : "");
	if (respond_page_args(c, scope, &limit, after, sizeof after) < 0)
		return;
	rc = portfolio_snapshot_get(c->svc->store, c->p.portfolio_id, &s);
	/* X-Service-Property was found (check_scope), perhaps in the database
	 * before this node heard of it: then the database answers too. */
	if (rc == 1 && (!c->property_header || portfolio_snapshot_find(s, c->property_header))) {
		properties_page(c, s, after, limit, scope);
		portfolio_snapshot_put(s);
		return;
	}
	portfolio_snapshot_put(s);
	if (rc < 0 || (rc = store_begin(c->svc->store, STORE_READ_ONE, &tx)) != STORE_OK) {
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
