#include "api/feeds/alerts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "api/scope.h"
#include "core/clock.h"
#include "feeds/ota.h"
#include "feeds/reputation.h"
#include "portfolio/snapshot.h"
#include "store/store.h"

static json_t *parity_row(struct store_tx *tx, struct store_rows *r, void *arg, char *key,
			  size_t keycap)
{
	(void)tx;
	(void)arg;
	snprintf(key, keycap, "%s", ota_alert_row_id(r));
	return ota_alert_from_row(r);
}

static const char *const open_resolved[] = {"open", "resolved"};

static void h_parity_list(struct ctx *c)
{
	struct ota_alert_filter f = {NULL, http_query(c->req, "property_id"),
				     http_query(c->req, "ota"), NULL, 0};
	struct scope_page pg;
	struct store_rows *r = NULL;
	int rc;

	if (f.ota && (!*f.ota || strlen(f.ota) > 32)) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL,
			      "ota must name an OTA (1-32 characters)");
		return;
	}
	if (scope_query_enum(c, "status", open_resolved, 2, &f.status) < 0 ||
	    scope_list_begin(c, "parity-alerts", (const char *[]){f.status, f.ota}, 2, &pg) < 0)
		return;
	f.props = pg.props;
	f.nprops = pg.nprops;
	rc = ota_alert_list(pg.tx, c->p.portfolio_id, pg.after, &f, pg.limit + 1, &r);
	respond_rows_page(c, pg.tx, rc, r, pg.limit, pg.scope, parity_row, NULL);
}

static void h_parity_get(struct ctx *c)
{
	scope_get(c, ota_alert_load, "parity alert");
}

/* ---------------------------------------------------------- reputation */

static json_t *reputation_row(struct store_tx *tx, struct store_rows *r, void *arg, char *key,
			      size_t keycap)
{
	(void)tx;
	(void)arg;
	snprintf(key, keycap, "%s", reputation_alert_row_id(r));
	return reputation_alert_from_row(r);
}

static void h_reputation_list(struct ctx *c)
{
	struct reputation_filter f = {NULL, http_query(c->req, "brand"),
				      http_query(c->req, "property_id"), NULL, 0};
	struct scope_page pg;
	struct store_rows *r = NULL;
	int rc;

	if (scope_query_enum(c, "status", open_resolved, 2, &f.status) < 0 ||
	    scope_list_begin(c, "reputation-alerts", (const char *[]){f.status, f.brand}, 2, &pg) < 0)
		return;
	f.props = pg.props;
	f.nprops = pg.nprops;
	rc = reputation_alert_list(pg.tx, c->p.portfolio_id, pg.after, &f, pg.limit + 1, &r);
	respond_rows_page(c, pg.tx, rc, r, pg.limit, pg.scope, reputation_row, NULL);
}

static void h_reputation_get(struct ctx *c)
{
	scope_get(c, reputation_alert_load, "reputation alert");
}

/* The scores now: of the properties the request reaches, and, for a
 * request that reaches them all, of each brand and the portfolio. */
static void h_reputation(struct ctx *c)
{
	const struct portfolio_snapshot *snap = NULL;
	struct portfolio_property *props;
	struct store_tx *tx;
	json_t *out = NULL;
	size_t i, n = 0;
	int rc = portfolio_snapshot_get(c->svc->store, c->p.portfolio_id, &snap), narrowed;

	if (rc <= 0) {
		if (rc == 0)
			respond_error(c, ERR_UNAVAILABLE, NULL,
				      "this portfolio has more properties than scores are kept for");
		else
			respond_store_error(c, rc);
		return;
	}
	narrowed = scope_props(c, &rc) != NULL;
	props = calloc(snap->n ? snap->n : 1, sizeof *props);
	for (i = 0; props && i < snap->n; i++)
		if (scope_reaches(c, snap->props[i].p.id))
			props[n++] = snap->props[i].p;
	portfolio_snapshot_put(snap);
	rc = props ? store_begin(c->svc->store, STORE_READ, &tx) : STORE_ERR;
	if (rc == STORE_OK) {
		rc = reputation_scores_json(tx, c->p.portfolio_id, props, n, narrowed,
					    clock_now_ms(), &out);
		store_rollback(tx);
	}
	free(props);
	if (rc < 0)
		respond_store_error(c, rc);
	else
		respond_data(c, 200, out);
}

static const struct route routes[] = {
	ROUTE_V2("GET", "/v2/parity-alerts", h_parity_list, AUTH_SCOPE_ALERTS_READ),
	ROUTE_V2_ETAG("GET", "/v2/parity-alerts/{id}", h_parity_get, AUTH_SCOPE_ALERTS_READ),
	ROUTE_V2("GET", "/v2/reputation-alerts", h_reputation_list, AUTH_SCOPE_ALERTS_READ),
	ROUTE_V2_ETAG("GET", "/v2/reputation-alerts/{id}", h_reputation_get, AUTH_SCOPE_ALERTS_READ),
	ROUTE_V2("GET", "/v2/reputation", h_reputation, AUTH_SCOPE_ALERTS_READ),
};
const struct route_table alert_routes = ROUTE_TABLE(routes);
