/* app: the request pipeline (request id, auth, rate limit, portfolio scope,
 * body checks, idempotency, dispatch, metrics, access log) and the route
 * table. The state it hands every handler is in ctx.h. */
#ifndef REVOPS_APP_H
#define REVOPS_APP_H
#include "api/ctx.h"

/* The route table (app.c). */
extern const struct route app_routes[];
extern const size_t app_nroutes;

/* Prepares shared state after the store is open. Returns 0 or -1. */
int app_init(struct app *a, const struct config *cfg, struct store *st) WUR;
void app_free(struct app *a);
/* The http_server handler. */
void app_handle(void *arg, struct request *req, struct response *res);

#endif
