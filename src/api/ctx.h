/* ctx: the state every handler sees, free of the pipeline that fills it
 * (pipeline.c) and of the route table that names the handlers: handlers include
 * this, never pipeline.h, so no include runs back up to the pipeline. */
#ifndef REVOPS_CTX_H
#define REVOPS_CTX_H
#include <jansson.h>
#include "api/errors.h"
#include "core/config.h"
#include "core/trace.h"
#include "http/http.h"
#include "http/http_fields.h"
#include "http/router.h"
#include "identity/auth.h"

struct store;
struct ratelimit;
struct metrics;
struct deprecation;
struct pms;
struct review_platform;
struct engine;
struct sched;
struct whatsapp;
struct cluster;
struct rl_shared;

/* The running service: the state every request shares, one per process. */
struct service {
	const struct config *cfg;
	struct store *store;
	struct ratelimit *rl_portfolio;
	struct rl_shared *rl_shared; /* on a shared database, instead of rl_portfolio */
	struct ratelimit *rl_anon;
	struct metrics *metrics;
	struct deprecation *deprecations;
	struct pms *pms;                 /* the PMS connector (--pms-url) */
	struct pms *booking;             /* the booking-engine connector (--booking-engine-url) */
	struct review_platform *reviews; /* the review-platform connector (--reviews-url) */
	struct whatsapp *whatsapp;       /* the WhatsApp Cloud API (--whatsapp-api-url) */
	struct engine *engine;           /* the webhook delivery engine; NULL on an api node */
	struct sched *sched;             /* the durable scheduler; NULL on an api node */
	struct cluster *cluster;         /* this node among those sharing the database */
	unsigned char cursor_key[32];
	unsigned char seal_key[32]; /* seals stored secrets (<data-dir>/revops.key) */
	volatile int shutting_down;
	volatile int ready;         /* start-up (demo seeding) finished */
	const struct route *routes; /* every area's, in match order (api/routes.c) */
	size_t nroutes;
	/* Paths under error_shape_prefix, and routes of ROUTE_SCIM, answer
	 * refusals with error_shape (SCIM's error body); main.c sets both. */
	const char *error_shape_prefix;
	void (*error_shape)(struct ctx *c, enum err e, const char *msg);
};

struct ctx {
	struct service *svc;
	struct request *req;
	struct response *res;
	struct route_match match;
	char request_id[HTTP_REQUEST_ID_MAX + 1]; /* the client's (checked) or req_… */
	int traced;                               /* trace holds a valid incoming traceparent */
	struct trace_ctx trace;
	int encoded; /* the handler set Content-Encoding itself (a precompressed body) */
	int authenticated;
	struct principal p;
	const char *property_header; /* X-Service-Property, checked */
	json_t *body;                /* BODY_JSON routes: the parsed object */
	enum route_body body_kind;
	const char *error_code; /* for the access log */
	int meta_sla_tier;      /* add the plan's sla_tier to meta (spec: rate decisions) */
	/* Set by the pipeline where errors take another shape than the
	 * envelope (SCIM's, RFC 7644 §3.12): respond_error hands the error to
	 * it. NULL: the envelope. */
	void (*error_shape)(struct ctx *c, enum err e, const char *msg);
	/* A write under an Idempotency-Key (key NULL: none): the principal it
	 * is kept for; own: the handler stores its answer itself
	 * (respond_key_own); stored: respond_key_store stored one. */
	struct {
		const char *key, *principal;
		int own, stored;
	} idem;
};

/* For a handler whose answer waits for work another thread does (a
 * shared transaction, store/group.h), so that no thread waits with it:
 * called before the work is handed over, after which the handler returns
 * without answering; c, its request and its response stay as they are
 * until ctx_resume. Only on a route of LANE_LOOP (public, so never under
 * an Idempotency-Key, whose rules need the answer before the handler
 * returns). */
void ctx_defer(struct ctx *c);
/* Once, from any thread, when the work of a deferred c is done:
 * then(c, rc) runs on c's event loop, answers as a handler would, and the
 * request ends there (headers, metrics, access log). c is not to be
 * touched after this call. */
void ctx_resume(struct ctx *c, void (*then)(struct ctx *c, int rc), int rc);

/* Where a write runs (route.lane): on a worker (LANE_LOCAL), on a lane
 * of workers of its own (at most HTTP_LANES) when it calls another
 * service before it answers (a PMS, the booking engine), or on the event
 * loop, as reads do, when it never waits (LANE_LOOP: it defers its answer,
 * ctx_defer; Meta's webhook, whose calls wait for a shared transaction). */
enum route_lane { LANE_LOOP = -1, LANE_LOCAL, LANE_PMS, LANE_BOOKING };

/* One area's routes, in match order (the first match wins, so literal
 * segments come before a {param} at the same place). Each area declares
 * its table next to its handlers; api/routes.c lists the areas. */
struct route_table {
	const struct route *routes;
	size_t n;
};
/* Initialiser macros, which clang-format 14 would lay out as function bodies. */
/* clang-format off */
#define ROUTE_TABLE(a) {a, ARRAY_LEN(a)}
/* Entries: public; bearer with X-Service-Portfolio (v2); the same taking a
 * JSON body checked against spec; SCIM (its own token, case-insensitive
 * static segments). */
#define ROUTE_PUB(m, p, f) {m, p, f, ROUTE_PUBLIC, 0, 0, BODY_NONE, NULL, 0, 0, 0}
#define ROUTE_PUB_LANE(m, p, f, lane) {m, p, f, ROUTE_PUBLIC, 0, 0, BODY_NONE, NULL, 0, 0, lane}
#define ROUTE_V2(m, p, f, s) {m, p, f, ROUTE_BEARER, s, 1, BODY_NONE, NULL, 0, 0, 0}
#define ROUTE_V2_JSON(m, p, f, s, spec) {m, p, f, ROUTE_BEARER, s, 1, BODY_JSON, spec, 0, 0, 0}
/* The same whose body may also be left out (c->body NULL then). */
#define ROUTE_V2_JSON_OPT(m, p, f, s, spec) {m, p, f, ROUTE_BEARER, s, 1, BODY_JSON_OPTIONAL, spec, 0, 0, 0}
#define ROUTE_SCIM_ENTRY(m, p, f, b) {m, p, f, ROUTE_SCIM, 0, 0, b, NULL, 1, 0, 0}
/* A v2 single-resource read: its 200 gets an ETag and honours
 * If-None-Match with 304 (api/negotiate.c). */
#define ROUTE_V2_ETAG(m, p, f, s) {m, p, f, ROUTE_BEARER, s, 1, BODY_NONE, NULL, 0, 1, 0}
/* A JSON write that calls another service before it answers: it runs on
 * that service's lane of workers (enum route_lane), so a service that
 * hangs holds only them. */
#define ROUTE_V2_JSON_OUT(m, p, f, s, spec, lane) {m, p, f, ROUTE_BEARER, s, 1, BODY_JSON, spec, 0, 0, lane}
#define ROUTE_V2_JSON_OPT_OUT(m, p, f, s, spec, lane) {m, p, f, ROUTE_BEARER, s, 1, BODY_JSON_OPTIONAL, spec, 0, 0, lane}
/* clang-format on */

/* The path parameter i of the matched route. */
static inline const char *ctx_param(const struct ctx *c, int i)
{
	return c->match.params[i];
}

#endif
