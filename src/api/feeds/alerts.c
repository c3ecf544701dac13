#include "api/feeds/alerts.h"

#include <stdio.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "api/scope.h"
#include "feeds/ota.h"
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

static const struct route routes[] = {
	ROUTE_V2("GET", "/v2/parity-alerts", h_parity_list, AUTH_SCOPE_ALERTS_READ),
	ROUTE_V2_ETAG("GET", "/v2/parity-alerts/{id}", h_parity_get, AUTH_SCOPE_ALERTS_READ),
};
const struct route_table alert_routes = ROUTE_TABLE(routes);
