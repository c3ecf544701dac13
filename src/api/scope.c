#include "api/scope.h"

#include <string.h>

#include "api/ctx.h"

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
