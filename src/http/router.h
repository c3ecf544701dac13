/* router: maps method + path to a route, capturing {name} segments. */
#ifndef REVOPS_ROUTER_H
#define REVOPS_ROUTER_H
#include <stddef.h>
#include "core/buf.h"
#include "core/common.h"

#define ROUTER_MAX_PARAMS 4
#define ROUTER_PARAM_MAX 128

struct ctx;

enum route_auth {
	ROUTE_PUBLIC, /* no credentials */
	ROUTE_BEARER, /* OAuth access token */
	ROUTE_SCIM,   /* SCIM bearer token */
};

enum route_body {
	BODY_NONE,          /* any body is ignored */
	BODY_JSON,          /* application/json object, validated against spec */
	BODY_JSON_OPTIONAL, /* an empty body (whatever its Content-Type), or as BODY_JSON */
	BODY_FORM,          /* application/x-www-form-urlencoded */
	BODY_SCIM,          /* application/scim+json or application/json object, lenient */
};

struct vfield;

struct route {
	const char *method;
	const char *pattern; /* "/v2/portfolios/{id}/properties" */
	void (*fn)(struct ctx *c);
	enum route_auth auth;
	unsigned scope; /* AUTH_SCOPE_* bit required, 0 = none */
	int v2;         /* needs X-Service-Portfolio */
	enum route_body body;
	const struct vfield *spec; /* BODY_JSON: fields allowed */
	int ci;                    /* static segments match case-insensitively (SCIM) */
	int etag;                  /* a single-resource read: ETag and 304 (GET, HEAD) */
	int lane;                  /* 0, or a write that waits on another service before it answers:
		   * the lane of that service (http_server_opts.lane_of) */
};

struct route_match {
	const struct route *route;
	int nparams;
	char params[ROUTER_MAX_PARAMS][ROUTER_PARAM_MAX];
};

/* Finds the route for method and path in table[0..n); one trailing slash
 * on the path is ignored ("/v2/portfolios/" is "/v2/portfolios"). HEAD
 * takes the GET route of the path (RFC 9110 §9.3.2: the server answers it
 * as GET, without the body). Returns 200 with *m filled, 404 when no
 * pattern matches the path, or 405 when patterns match but none for this
 * method (allow then lists the methods, comma-separated, HEAD after GET). */
int router_match(const struct route *table, size_t n, const char *method, const char *path,
		 struct route_match *m, struct buf *allow);

#endif
