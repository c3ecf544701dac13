/* scope: which properties a request reaches (API-CONTRACT §2): those of
 * its token, narrowed further by X-Service-Property. The one place the
 * handlers ask it, and the reads of one resource or one list page that
 * follow from it. */
#ifndef REVOPS_API_SCOPE_H
#define REVOPS_API_SCOPE_H
#include <jansson.h>
#include <stddef.h>
#include "core/common.h"
#include "core/id.h"

struct ctx;
struct store_tx;

/* 1 when the request (a struct ctx *, as void * for the domain modules'
 * callbacks) reaches property_id, else 0. */
int scope_reaches(void *c, const char *property_id);

/* The properties a list is narrowed to: NULL when the request reaches
 * every property of its portfolio, else an array of *n ids (borrowed from
 * c, valid during the request). */
const char *const *scope_props(struct ctx *c, int *n);

/* Who the request is, for a record: "user:usr_..." or "client:cli_...". */
void scope_actor(const struct ctx *c, char *out, size_t cap);

/* Answers for a resource of the path that load found (rc 1, obj) or not:
 * a store error, 404 "no <noun> <id>" (rc 0), 403 when it is another
 * portfolio's (rc 2) or concerns a property outside the request (its
 * "property_id"; a resource with "property_id" null concerns them all).
 * Returns 1 (visible: nothing answered) or 0. */
int scope_visible(struct ctx *c, int rc, const json_t *obj, const char *noun);

/* Reads one resource (the path's first parameter) of the portfolio with
 * load (1/0/2 as store_get_owned) and answers it, or why not. */
void scope_get(struct ctx *c,
	       int (*load)(struct store_tx *tx, const char *portfolio_id, const char *id,
			   json_t **out),
	       const char *noun);

/* ?name: absent (*out NULL), or one of allowed[0..n). Returns 0, or -1
 * after answering 400 with the values allowed. */
int scope_query_enum(struct ctx *c, const char *name, const char *const *allowed, size_t n,
		     const char **out) WUR;

/* One page of a v2 list, begun by scope_list_begin. */
struct scope_page {
	int limit;
	char after[ID_MAX];
	char scope[640];          /* the cursor's scope */
	const char *const *props; /* the request's properties, NULL: all */
	int nprops;
	struct store_tx *tx; /* a STORE_READ_ONE transaction */
};
/* Begins list name's page: ?property_id (if given) must be reached; the
 * cursor scope is name, the portfolio, the filter values[0..n) and
 * X-Service-Property; ?limit and ?cursor are read. Returns 0, or -1
 * after answering. The caller queries with pg->tx, asking for limit + 1
 * rows, and answers with respond_rows_page. */
int scope_list_begin(struct ctx *c, const char *name, const char *const *values, size_t n,
		     struct scope_page *pg) WUR;

#endif
