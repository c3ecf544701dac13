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

static void h_parity_list(struct ctx *c)
{
	struct ota_alert_filter f = {http_query(c->req, "status"), http_query(c->req, "property_id"),
				     http_query(c->req, "ota"), NULL, 0};
	char after[ID_MAX] = "", scope[512];
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	int limit, rc;

	if (f.status && strcmp(f.status, "open") && strcmp(f.status, "resolved")) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL, "status must be open or resolved");
		return;
	}
	if (f.ota && (!*f.ota || strlen(f.ota) > 32)) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL, "ota must name an OTA");
		return;
	}
	if (f.property_id && (strlen(f.property_id) >= ID_MAX || !scope_reaches(c, f.property_id))) {
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "property_id names a property outside this token");
		return;
	}
	f.props = scope_props(c, &f.nprops);
	snprintf(scope, sizeof scope, "parity-alerts|%s|%s|%s|%s|%s", c->p.portfolio_id,
		 f.status ? f.status : "", f.property_id ? f.property_id : "", f.ota ? f.ota : "",
		 c->property_header ? c->property_header : "");
	if (respond_page_args(c, scope, &limit, after, sizeof after) < 0)
		return;
	if ((rc = store_begin(c->svc->store, STORE_READ_ONE, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = ota_alert_list(tx, c->p.portfolio_id, after, &f, limit + 1, &r);
	respond_rows_page(c, tx, rc, r, limit, scope, parity_row, NULL);
}

static void h_parity_get(struct ctx *c)
{
	struct store_tx *tx;
	json_t *a = NULL;
	int rc;

	if ((rc = store_begin(c->svc->store, STORE_READ_ONE, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = ota_alert_load(tx, c->p.portfolio_id, ctx_param(c, 0), &a);
	store_rollback(tx);
	if (rc < 0)
		respond_store_error(c, rc);
	else if (rc == 0)
		respond_error(c, ERR_NOT_FOUND, NULL, "no parity alert %s", ctx_param(c, 0));
	else if (rc == 2)
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the parity alert belongs to another portfolio");
	else if (!scope_reaches(c, json_string_value(json_object_get(a, "property_id"))))
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the parity alert's property is outside this token");
	else {
		respond_data(c, 200, a);
		a = NULL;
	}
	json_decref(a);
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
	struct reputation_filter f = {http_query(c->req, "status"), http_query(c->req, "brand"),
				      http_query(c->req, "property_id"), NULL, 0};
	char after[ID_MAX] = "", scope[600];
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	int limit, rc;

	if (f.status && strcmp(f.status, "open") && strcmp(f.status, "resolved")) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL, "status must be open or resolved");
		return;
	}
	if (f.brand && (!*f.brand || strlen(f.brand) > 100)) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL, "brand must name a brand");
		return;
	}
	if (f.property_id && (strlen(f.property_id) >= ID_MAX || !scope_reaches(c, f.property_id))) {
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "property_id names a property outside this token");
		return;
	}
	f.props = scope_props(c, &f.nprops);
	snprintf(scope, sizeof scope, "reputation-alerts|%s|%s|%s|%s|%s", c->p.portfolio_id,
		 f.status ? f.status : "", f.brand ? f.brand : "",
		 f.property_id ? f.property_id : "", c->property_header ? c->property_header : "");
	if (respond_page_args(c, scope, &limit, after, sizeof after) < 0)
		return;
	if ((rc = store_begin(c->svc->store, STORE_READ_ONE, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = reputation_alert_list(tx, c->p.portfolio_id, after, &f, limit + 1, &r);
	respond_rows_page(c, tx, rc, r, limit, scope, reputation_row, NULL);
}

static void h_reputation_get(struct ctx *c)
{
	struct store_tx *tx;
	json_t *a = NULL;
	const char *prop;
	int rc;

	if ((rc = store_begin(c->svc->store, STORE_READ_ONE, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = reputation_alert_load(tx, c->p.portfolio_id, ctx_param(c, 0), &a);
	store_rollback(tx);
	prop = json_string_value(json_object_get(a, "property_id"));
	if (rc < 0)
		respond_store_error(c, rc);
	else if (rc == 0)
		respond_error(c, ERR_NOT_FOUND, NULL, "no reputation alert %s", ctx_param(c, 0));
	else if (rc == 2)
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the reputation alert belongs to another portfolio");
	else if (prop ? !scope_reaches(c, prop) : scope_props(c, &rc) != NULL)
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the reputation alert concerns properties outside this token");
	else {
		respond_data(c, 200, a);
		a = NULL;
	}
	json_decref(a);
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
