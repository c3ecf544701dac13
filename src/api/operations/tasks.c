#include "api/operations/tasks.h"

#include <stdio.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "api/scope.h"
#include "core/clock.h"
#include "core/validate.h"
#include "identity/auth.h"
#include "operations/sla.h"
#include "operations/tasks.h"
#include "portfolio/portfolio.h"
#include "store/store.h"

static const char *const priorities[] = {"low", "normal", "high", "urgent"};
static const char *const tiers[] = {"standard", "gold", "platinum"};
static const char *const statuses[] = {"open", "acknowledged", "resolved"};

static const struct vfield create_spec[] = {
	{"property_id", V_STRING, 1, 0, 64, NULL, 0, NULL},
	{"title", V_STRING, 1, 0, 200, NULL, 0, NULL},
	{"category", V_STRING, 1, 0, 40, NULL, 0, NULL},
	{"priority", V_STRING, 1, 0, 10, NULL, 0, NULL},
	{"sla_tier", V_STRING, 0, 1, 10, NULL, 0, NULL},
	{"due_at", V_STRING, 0, 1, 40, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};
static const struct vfield ack_spec[] = {
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};
static const struct vfield resolve_spec[] = {
	{"resolution", V_STRING, 0, 1, 2000, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static const char *field(const struct ctx *c, const char *k)
{
	return json_string_value(json_object_get(c->body, k));
}

static int one_of(const char *v, const char *const *list, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		if (!strcmp(v, list[i]))
			return 1;
	return 0;
}

/* The meaning of a create body (its shape was checked), into t and
 * details. */
static void check_create(const struct ctx *c, struct task_new *t, json_t *details)
{
	const char *due = field(c, "due_at");

	*t = (struct task_new){field(c, "property_id"), field(c, "title"),    field(c, "category"),
			       field(c, "priority"),    field(c, "sla_tier"), 0};
	if (validate_blank(t->title))
		validate_add_detail(details, "title", "must not be empty");
	if (!validate_code(t->category))
		validate_add_detail(details, "category",
				    "must be a code of letters, digits, '-', '_' or '.' such as "
				    "maintenance");
	if (!one_of(t->priority, priorities, ARRAY_LEN(priorities)))
		validate_add_detail(details, "priority", "must be low, normal, high or urgent");
	if (t->sla_tier && !sla_tier_valid(t->sla_tier))
		validate_add_detail(details, "sla_tier", "must be standard, gold or platinum");
	if (due && clock_parse_time(due, &t->due_at) < 0)
		validate_add_detail(details, "due_at",
				    "must be an RFC 3339 date-time such as 2026-11-22T08:00:00Z");
}

/* 1 when the task's property is the portfolio's and the request reaches
 * it; else 0 after answering (or a store error). */
static int property_ok(struct ctx *c, struct store_tx *tx, const char *prop)
{
	int rc = scope_reaches(c, prop) ? portfolio_has_property(tx, c->p.portfolio_id, prop) : 2;

	if (rc == 1)
		return 1;
	if (rc < 0)
		respond_store_error(c, rc);
	else
		respond_error(c, rc == 2 ? ERR_INSUFFICIENT_ROLE : ERR_VALIDATION_FAILED,
			      json_pack("[{s:s, s:s}]", "field", "property_id", "issue",
					rc == 2 ? "is outside this token"
						: "is not a property of this portfolio"),
			      "property_id %s",
			      rc == 2 ? "is outside this token"
				      : "is not a property of this portfolio");
	return 0;
}

static void h_create(struct ctx *c)
{
	json_t *details = json_array(), *task = NULL;
	struct store_tx *tx = NULL;
	struct task_new t;
	char actor[ID_MAX + 8];
	int rc;

	check_create(c, &t, details);
	if (json_array_size(details)) {
		respond_error(c, ERR_VALIDATION_FAILED, details, "the task is not valid");
		return;
	}
	json_decref(details);
	if ((rc = store_begin(c->svc->store, STORE_WRITE, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	if (!property_ok(c, tx, t.property_id)) {
		store_rollback(tx);
		return;
	}
	scope_actor(c, actor, sizeof actor);
	rc = task_create(tx, c->p.portfolio_id, auth_plan_sla_tier(c->p.plan), &t, actor,
			 clock_now_ms(), &task);
	if ((rc = store_finish(tx, rc)) != STORE_OK) {
		json_decref(task);
		respond_store_error(c, rc);
		return;
	}
	respond_data(c, 201, task);
}

static void h_get(struct ctx *c)
{
	scope_get(c, task_load, "operations task");
}

static json_t *row(struct store_tx *tx, struct store_rows *r, void *arg, char *key, size_t keycap)
{
	(void)tx;
	(void)arg;
	snprintf(key, keycap, "%s", task_row_id(r));
	return task_from_row(r);
}

static void h_list(struct ctx *c)
{
	static const char *const booleans[] = {"true", "false"};
	struct task_filter f = {NULL, http_query(c->req, "property_id"), NULL, NULL, NULL, 0};
	struct scope_page pg;
	struct store_rows *r = NULL;
	int rc;

	if (scope_query_enum(c, "status", statuses, ARRAY_LEN(statuses), &f.status) < 0 ||
	    scope_query_enum(c, "sla_tier", tiers, ARRAY_LEN(tiers), &f.sla_tier) < 0 ||
	    scope_query_enum(c, "escalated", booleans, 2, &f.escalated) < 0 ||
	    scope_list_begin(c, "operations-tasks",
			     (const char *[]){f.status, f.sla_tier, f.escalated}, 3, &pg) < 0)
		return;
	f.props = pg.props;
	f.nprops = pg.nprops;
	rc = task_list(pg.tx, c->p.portfolio_id, pg.after, &f, pg.limit + 1, &r);
	respond_rows_page(c, pg.tx, rc, r, pg.limit, pg.scope, row, NULL);
}

/* Acknowledges (resolve 0) or resolves the task of the path. */
static void act(struct ctx *c, int resolve)
{
	const char *note = json_string_value(json_object_get(c->body, "resolution"));
	struct task_who who = {c->p.portfolio_id, c->p.user_id, scope_reaches, c};
	struct task_outcome o;
	int rc = task_act(c->svc->store, &who, ctx_param(c, 0), resolve,
			  validate_blank(note) ? NULL : note, &o);

	if (rc < 0) {
		respond_store_error(c, rc);
		return;
	}
	switch (o.result) {
	case TASK_DONE:
		respond_data(c, 200, o.body);
		return;
	case TASK_NOT_FOUND:
	case TASK_OTHER_PORTFOLIO:
	case TASK_OUT_OF_REACH:
		scope_visible(c,
			      o.result == TASK_NOT_FOUND         ? 0
			      : o.result == TASK_OTHER_PORTFOLIO ? 2
								 : 1,
			      o.body, "operations task");
		break;
	case TASK_NOT_OPS_MANAGER:
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL, "%s", o.why);
		break;
	case TASK_CONFLICT:
		respond_error(c, ERR_CONFLICT, NULL, "%s", o.why);
		break;
	}
	json_decref(o.body);
}

static void h_acknowledge(struct ctx *c)
{
	act(c, 0);
}

static void h_resolve(struct ctx *c)
{
	act(c, 1);
}

static const struct route routes[] = {
	ROUTE_V2_JSON("POST", "/v2/operations-tasks", h_create, AUTH_SCOPE_TASKS_WRITE, create_spec),
	ROUTE_V2("GET", "/v2/operations-tasks", h_list, AUTH_SCOPE_TASKS_READ),
	ROUTE_V2_ETAG("GET", "/v2/operations-tasks/{id}", h_get, AUTH_SCOPE_TASKS_READ),
	ROUTE_V2_JSON_OPT("POST", "/v2/operations-tasks/{id}/acknowledge", h_acknowledge,
			  AUTH_SCOPE_TASKS_WRITE, ack_spec),
	ROUTE_V2_JSON_OPT("POST", "/v2/operations-tasks/{id}/resolve", h_resolve,
			  AUTH_SCOPE_TASKS_WRITE, resolve_spec),
};
const struct route_table task_routes = ROUTE_TABLE(routes);
