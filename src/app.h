/* app: the request pipeline (request id, auth, rate limit, portfolio scope,
 * body checks, idempotency, dispatch, metrics, access log) and the state
 * shared by every handler. */
#ifndef REVOPS_APP_H
#define REVOPS_APP_H
#include <jansson.h>
#include <pthread.h>
#include "auth.h"
#include "config.h"
#include "http.h"
#include "router.h"

struct store;
struct ratelimit;
struct metrics;
struct deprecation;
struct pms;
struct dispatch;

struct app {
	const struct config *cfg;
	struct store *store;
	struct ratelimit *rl_portfolio;
	struct ratelimit *rl_anon;
	struct metrics *metrics;
	struct deprecation *deprecations;
	struct pms *pms;               /* the PMS connector (--pms-url) */
	struct dispatch *dispatch;     /* the webhook delivery engine */
	unsigned char cursor_key[32];
	unsigned char seal_key[32];    /* seals stored secrets (<data-dir>/revops.key) */
	volatile int shutting_down;
	volatile int ready;           /* start-up (demo seeding) finished */
};

struct ctx {
	struct app *app;
	struct request *req;
	struct response *res;
	struct route_match match;
	char request_id[ID_MAX];
	int authenticated;
	struct principal p;
	const char *property_header;  /* X-Service-Property, checked */
	json_t *body;                 /* BODY_JSON routes: the parsed object */
	enum route_body body_kind;
	const char *error_code;       /* for the access log */
	int meta_sla_tier;            /* add the plan's sla_tier to meta (spec: rate decisions) */
};

/* The path parameter i of the matched route. */
static inline const char *ctx_param(const struct ctx *c, int i)
{
	return c->match.params[i];
}

/* The route table (app.c). */
extern const struct route app_routes[];
extern const size_t app_nroutes;

/* Prepares shared state after the store is open. Returns 0 or -1. */
int app_init(struct app *a, const struct config *cfg, struct store *st) WUR;
void app_free(struct app *a);
/* The http_server handler. */
void app_handle(void *arg, struct request *req, struct response *res);

#endif
