/* pipeline: the request pipeline (request id, auth, rate limit, portfolio scope,
 * body checks, idempotency, dispatch, metrics, access log) and the route
 * table. The state it hands every handler is in ctx.h. */
#ifndef REVOPS_PIPELINE_H
#define REVOPS_PIPELINE_H
#include "api/ctx.h"

/* The pipeline's own routes: /healthz, /readyz, /metrics. */
extern const struct route_table pipeline_platform_routes;

/* Prepares shared state after the store is open; routes (nroutes of them,
 * in match order, kept by the caller) are what the pipeline serves.
 * Returns 0 or -1. */
int pipeline_init(struct service *a, const struct config *cfg, struct store *st,
		  const struct route *routes, size_t nroutes) WUR;
void pipeline_free(struct service *a);
/* http_server_opts.lane_of: the lane of the route a request names (a
 * write that calls a PMS runs on the PMS's workers). */
int pipeline_lane(void *arg, const struct request *req);
/* The http_server handler. */
void pipeline_handle(void *arg, struct request *req, struct response *res);

#endif
