#include "api/scope.h"

#include <stdio.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "portfolio/snapshot.h"
#include "store/store.h"

int scope_reaches(void *arg, const char *property_id)
{
	struct ctx *c = arg;

	return auth_property_allowed(&c->p, property_id) &&
	       (!c->property_header || !strcmp(c->property_header, property_id));
}

const char *const *scope_props(struct ctx *c, int *n)
{
	static __thread const char *list[AUTH_MAX_PROPS];
	int i, k = 0;

	if (c->property_header) {
		*n = scope_reaches(c, c->property_header) ? 1 : 0;
		list[0] = c->property_header;
		return list;
	}
	if (c->p.all_properties) {
		*n = 0;
		return NULL;
	}
	for (i = 0; i < c->p.nprops && i < AUTH_MAX_PROPS; i++)
		list[k++] = c->p.props[i];
	*n = k;
	return list;
}

int scope_visible(struct ctx *c, int rc, const json_t *obj, const char *noun)
{
	const json_t *prop = json_object_get(obj, "property_id");
	int n;

	if (rc < 0)
		respond_store_error(c, rc);
	else if (rc == 0)
		respond_error(c, ERR_NOT_FOUND, NULL, "no %s %s", noun, ctx_param(c, 0));
	else if (rc == 2)
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL, "the %s belongs to another portfolio",
			      noun);
	else if (json_is_string(prop) ? !scope_reaches(c, json_string_value(prop))
				      : scope_props(c, &n) != NULL)
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "the %s concerns a property outside this token", noun);
	else
		return 1;
	return 0;
}

void scope_get(struct ctx *c,
	       int (*load)(struct store_tx *tx, const char *portfolio_id, const char *id,
			   json_t **out),
	       const char *noun)
{
	struct store_tx *tx;
	json_t *obj = NULL;
	int rc;

	if ((rc = store_begin(c->svc->store, STORE_READ_ONE, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = load(tx, c->p.portfolio_id, ctx_param(c, 0), &obj);
	store_rollback(tx);
	if (scope_visible(c, rc, obj, noun)) {
		respond_data(c, 200, obj);
		obj = NULL;
	}
	json_decref(obj);
}

int scope_query_enum(struct ctx *c, const char *name, const char *const *allowed, size_t n,
		     const char **out)
{
	char list[300] = "";
	size_t i;

	*out = http_query(c->req, name);
	for (i = 0; *out && i < n; i++)
		if (!strcmp(*out, allowed[i]))
			return 0;
	if (!*out)
		return 0;
	for (i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
			 i ? (i + 1 == n ? " or " : ", ") : "", allowed[i]);
	respond_error(c, ERR_REQUEST_MALFORMED, NULL, "%s must be %s", name, list);
	return -1;
}

int scope_list_begin(struct ctx *c, const char *name, const char *const *values, size_t n,
		     struct scope_page *pg)
{
	const char *prop = http_query(c->req, "property_id");
	size_t i, len;
	int rc = 1;

	memset(pg, 0, sizeof *pg);
	if (prop && (strlen(prop) >= ID_MAX || !scope_reaches(c, prop) ||
		     (rc = portfolio_known_property(c->svc->store, c->p.portfolio_id, prop)) != 1)) {
		if (prop && strlen(prop) < ID_MAX && rc < 0)
			respond_store_error(c, rc);
		else
			respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
				      "property_id names a property outside this token");
		return -1;
	}
	pg->props = scope_props(c, &pg->nprops);
	len = (size_t)snprintf(pg->scope, sizeof pg->scope, "%s|%s|%s|%s", name, c->p.portfolio_id,
			       prop ? prop : "", c->property_header ? c->property_header : "");
	for (i = 0; i < n && len < sizeof pg->scope; i++)
		len += (size_t)snprintf(pg->scope + len, sizeof pg->scope - len, "|%s",
					values[i] ? values[i] : "");
	if (respond_page_args(c, pg->scope, &pg->limit, pg->after, sizeof pg->after) < 0)
		return -1;
	if ((rc = store_begin(c->svc->store, STORE_READ_ONE, &pg->tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return -1;
	}
	return 0;
}

void scope_actor(const struct ctx *c, char *out, size_t cap)
{
	if (c->p.user_id[0])
		snprintf(out, cap, "user:%s", c->p.user_id);
	else
		snprintf(out, cap, "client:%s", c->p.client_id);
}
