#include "api/feeds/review.h"

#include <stdio.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "api/scope.h"
#include "core/clock.h"
#include "core/validate.h"
#include "feeds/reviews.h"
#include "store/store.h"

static const struct vfield reply_spec[] = {
	{"text", V_STRING, 1, 0, REVIEW_REPLY_MAX, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};
static const struct vfield publish_spec[] = {
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static json_t *row(struct store_tx *tx, struct store_rows *r, void *arg, char *key, size_t keycap)
{
	(void)tx;
	(void)arg;
	snprintf(key, keycap, "%s", review_row_id(r));
	return review_from_row(r);
}

static void h_list(struct ctx *c)
{
	static const char *const statuses[] = {"none", "drafted", "publishing", "published",
					       "failed"};
	struct review_filter f = {http_query(c->req, "property_id"),
				  http_query(c->req, "source"),
				  NULL,
				  http_query(c->req, "language"),
				  NULL,
				  0};
	struct scope_page pg;
	struct store_rows *r = NULL;
	int rc;

	if (scope_query_enum(c, "reply_status", statuses, ARRAY_LEN(statuses), &f.reply_status) < 0 ||
	    scope_list_begin(c, "reviews", (const char *[]){f.source, f.reply_status, f.language},
			     3, &pg) < 0)
		return;
	f.props = pg.props;
	f.nprops = pg.nprops;
	rc = review_list(pg.tx, c->p.portfolio_id, pg.after, &f, pg.limit + 1, &r);
	respond_rows_page(c, pg.tx, rc, r, pg.limit, pg.scope, row, NULL);
}

static void h_get(struct ctx *c)
{
	scope_get(c, review_load, "review");
}

/* Changes the reply of the review of the path with fn inside one write
 * transaction, then answers status with the review. */
static void change(struct ctx *c, int (*fn)(struct ctx *c, struct store_tx *tx), int status,
		   const char *conflict)
{
	struct store_tx *tx;
	json_t *rv = NULL;
	int rc;

	if ((rc = store_begin(c->svc->store, STORE_WRITE, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	if (!scope_visible(c, review_load(tx, c->p.portfolio_id, ctx_param(c, 0), &rv), rv, "review")) {
		json_decref(rv);
		store_rollback(tx);
		return;
	}
	json_decref(rv);
	rv = NULL;
	rc = fn(c, tx);
	if (rc == 1 && (rc = review_load(tx, c->p.portfolio_id, ctx_param(c, 0), &rv)) != 1)
		rc = rc < 0 ? rc : STORE_ERR;
	if (rc == 0) {
		store_rollback(tx);
		respond_error(c, ERR_CONFLICT, NULL, "%s", conflict);
	} else if ((rc = store_finish(tx, rc)) != STORE_OK) {
		respond_store_error(c, rc);
	} else {
		respond_data(c, status, rv);
		rv = NULL;
	}
	json_decref(rv);
}

static int set_text(struct ctx *c, struct store_tx *tx)
{
	const char *text = json_string_value(json_object_get(c->body, "text"));

	return review_reply_set(tx, ctx_param(c, 0), text, clock_now_ms());
}

static int queue(struct ctx *c, struct store_tx *tx)
{
	return review_reply_publish(tx, ctx_param(c, 0), clock_now_ms());
}

static void h_reply(struct ctx *c)
{
	if (validate_blank(json_string_value(json_object_get(c->body, "text")))) {
		respond_error(c, ERR_VALIDATION_FAILED,
			      json_pack("[{s:s, s:s}]", "field", "text", "issue", "must not be empty"),
			      "the reply is not valid");
		return;
	}
	change(c, set_text, 200,
	       "the reply is being published or was published; it can no longer change");
}

static void h_publish(struct ctx *c)
{
	change(c, queue, 202,
	       "only a drafted reply (or one whose publication failed) can be published");
}

static const struct route routes[] = {
	ROUTE_V2("GET", "/v2/reviews", h_list, AUTH_SCOPE_REVIEWS_READ),
	ROUTE_V2_ETAG("GET", "/v2/reviews/{id}", h_get, AUTH_SCOPE_REVIEWS_READ),
	ROUTE_V2_JSON("PUT", "/v2/reviews/{id}/reply", h_reply, AUTH_SCOPE_REVIEWS_WRITE, reply_spec),
	ROUTE_V2_JSON_OPT("POST", "/v2/reviews/{id}/reply/publish", h_publish,
			  AUTH_SCOPE_REVIEWS_WRITE, publish_spec),
};
const struct route_table review_routes = ROUTE_TABLE(routes);
