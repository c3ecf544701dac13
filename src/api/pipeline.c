/* The request pipeline. Order, chosen so each refusal costs as little as
 * possible and every answer still carries the contract's headers:
 *   request id -> route match -> bearer lookup -> rate limit (portfolio, or
 *   client address when unauthenticated) -> framing errors -> 404/405 ->
 *   401 -> X-Service-Portfolio -> scope -> X-Service-Property -> body
 *   checks -> Idempotency-Key -> handler -> headers, metrics, access log. */
#include "api/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/deprecation.h"
#include "api/idempotency.h"
#include "api/metrics.h"
#include "api/negotiate.h"
#include "api/ratelimit.h"
#include "api/ratelimit_shared.h"
#include "api/respond.h"
#include "cluster/cluster.h"
#include "cluster/sealkey.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/log.h"
#include "core/trace.h"
#include "core/validate.h"
#include "http/http_server.h"
#include "portfolio/snapshot.h"
#include "sched/timers.h"
#include "store/store.h"
#include "webhooks/engine.h"

static void h_healthz(struct ctx *c)
{
	respond_raw_json(c, 200, json_pack("{s:s}", "status", "ok"));
}

static void h_readyz(struct ctx *c)
{
	if (c->svc->shutting_down)
		respond_error(c, ERR_UNAVAILABLE, NULL, "shutting down");
	else if (!c->svc->ready)
		respond_error(c, ERR_UNAVAILABLE, NULL, "starting");
	else if (store_ping(c->svc->store) < 0)
		respond_error(c, ERR_UNAVAILABLE, NULL, "database unavailable");
	else if (store_full_since())
		respond_error(c, ERR_UNAVAILABLE, NULL,
			      "the database's disk is full: writes are refused until there is room");
	else
		respond_raw_json(c, 200, json_pack("{s:s}", "status", "ready"));
}

/* This node's part: its role, the webhook lane buckets it serves and the
 * attempts it recorded (zero on an api node). */
static int node_metrics(struct ctx *c)
{
	struct cluster *cl = c->svc->cluster;
	uint64_t delivered, failed;

	engine_counts(c->svc->engine, &delivered, &failed);
	return buf_printf(&c->res->body,
			  "# HELP revops_node_info This node and its role.\n"
			  "# TYPE revops_node_info gauge\n"
			  "revops_node_info{node=\"%s\",role=\"%s\"} 1\n"
			  "# HELP revops_webhook_lane_buckets Webhook lane buckets this node serves"
			  " (of %d).\n"
			  "# TYPE revops_webhook_lane_buckets gauge\n"
			  "revops_webhook_lane_buckets %d\n"
			  "# HELP revops_webhook_attempts_total Webhook attempts this node recorded.\n"
			  "# TYPE revops_webhook_attempts_total counter\n"
			  "revops_webhook_attempts_total{outcome=\"delivered\"} %llu\n"
			  "revops_webhook_attempts_total{outcome=\"failed\"} %llu\n",
			  cl ? cluster_node_id(cl) : "",
			  cl ? cluster_role_name(cluster_role(cl)) : "all", CLUSTER_BUCKETS,
			  c->svc->engine && cl ? __builtin_popcountll(cluster_held(cl)) : 0,
			  (unsigned long long)delivered, (unsigned long long)failed);
}

static void h_metrics(struct ctx *c)
{
	buf_reset(&c->res->body);
	if (metrics_render(c->svc->metrics, &c->res->body) < 0 || node_metrics(c) < 0 ||
	    sched_metrics(c->svc->sched, &c->res->body) < 0) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		return;
	}
	c->res->status = 200;
	c->res->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

static const struct route platform[] = {
	ROUTE_PUB("GET", "/healthz", h_healthz),
	ROUTE_PUB("GET", "/readyz", h_readyz),
	ROUTE_PUB("GET", "/metrics", h_metrics),
};
const struct route_table pipeline_platform_routes = ROUTE_TABLE(platform);

/* Loads (or creates, once) the server's cursor-signing key. */
static int load_cursor_key(struct service *a)
{
	unsigned char fresh[32];
	struct store_tx *tx;
	struct store_rows *r = NULL;
	int rc = -1;

	if (crypto_random(fresh, sizeof fresh) < 0 || store_begin(a->store, 1, &tx) != STORE_OK)
		return -1;
	if (store_exec(tx,
		       "INSERT INTO server_keys (name, secret, created_at) VALUES ('cursor', $1, $2)"
		       " ON CONFLICT (name) DO NOTHING",
		       (struct store_val[]){sv_blob(fresh, sizeof fresh), sv_int(clock_now_ms())},
		       2) < 0 ||
	    store_query(tx, "SELECT secret FROM server_keys WHERE name = 'cursor'", NULL, 0, &r) !=
		    STORE_OK ||
	    store_next(r) != 1 || store_len(r, 0) != sizeof a->cursor_key)
		goto out;
	memcpy(a->cursor_key, store_text(r, 0), sizeof a->cursor_key);
	rc = 0;
out:
	crypto_wipe(fresh, sizeof fresh);
	store_rows_close(r);
	if (rc == 0 && store_commit(tx) == STORE_OK)
		return 0;
	if (rc < 0)
		store_rollback(tx);
	return -1;
}

int pipeline_init(struct service *a, const struct config *cfg, struct store *st,
		  const struct route *routes, size_t nroutes)
{
	memset(a, 0, sizeof *a);
	a->cfg = cfg;
	a->store = st;
	a->routes = routes;
	a->nroutes = nroutes;
	a->rl_portfolio = ratelimit_new(4096);
	/* Nodes sharing the database share each portfolio's allowance. */
	a->rl_shared = store_shared(st) ? rl_shared_new(st, 4096) : NULL;
	a->rl_anon = ratelimit_new(65536);
	a->metrics = metrics_new();
	a->deprecations = deprecation_new();
	if (!a->rl_portfolio || (store_shared(st) && !a->rl_shared) || !a->rl_anon || !a->metrics ||
	    !a->deprecations || load_cursor_key(a) < 0 ||
	    deprecation_reload(a->deprecations, st) < 0 ||
	    sealkey_load(st, cfg->data_dir, a->seal_key) < 0) {
		pipeline_free(a);
		return -1;
	}
	idempotency_set_seal_key(a->seal_key);
	return 0;
}

void pipeline_free(struct service *a)
{
	ratelimit_free(a->rl_portfolio);
	rl_shared_free(a->rl_shared);
	ratelimit_free(a->rl_anon);
	metrics_free(a->metrics);
	deprecation_free(a->deprecations);
	crypto_wipe(a->cursor_key, sizeof a->cursor_key);
	crypto_wipe(a->seal_key, sizeof a->seal_key);
	memset(a, 0, sizeof *a);
}

static int is_write(const char *method)
{
	return !strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH") ||
	       !strcmp(method, "DELETE");
}

/* Writes v (>= 0 expected; a negative value is written as 0) in decimal
 * at p; returns the end. Cheaper than snprintf on the per-request path. */
static char *put_uint(char *p, int64_t v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + (v > 0 ? v % 10 : 0));
		v /= 10;
	} while (v > 0);
	while (n)
		*p++ = tmp[--n];
	*p = '\0';
	return p;
}

static void set_int_header(struct response *res, const char *name, int64_t v)
{
	char s[24];

	put_uint(s, v);
	(void)response_header(res, name, s);
}

/* Bearer route checks after authentication: portfolio header, scope and
 * property narrowing. Returns 0 to go on, -1 after answering. */
static int check_scope(struct ctx *c)
{
	const struct route *rt = c->match.route;
	const char *pf = http_header(c->req, "X-Service-Portfolio");
	const char *prop = http_header(c->req, "X-Service-Property");
	int rc;

	if (rt->v2 && (!pf || !*pf)) {
		respond_error(c, ERR_PORTFOLIO_REQUIRED, NULL,
			      "the X-Service-Portfolio header is required on v2 calls");
		return -1;
	}
	if (pf && strcmp(pf, c->p.portfolio_id) != 0) {
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "X-Service-Portfolio names a portfolio outside this token");
		return -1;
	}
	if (rt->scope && !(c->p.scopes & rt->scope)) {
		char need[64];

		auth_scope_string(rt->scope, need, sizeof need);
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL, "this call needs the %s scope", need);
		return -1;
	}
	if (!prop)
		return 0;
	if (!auth_property_allowed(&c->p, prop) || strlen(prop) >= ID_MAX) {
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "X-Service-Property names a property outside this token");
		return -1;
	}
	rc = portfolio_known_property(c->svc->store, c->p.portfolio_id, prop);
	if (rc != 1) {
		if (rc < 0)
			respond_store_error(c, rc);
		else
			respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
				      "X-Service-Property names a property outside this token");
		return -1;
	}
	c->property_header = prop;
	return 0;
}

/* For BODY_JSON routes: media type, size, syntax, then fields. Returns 0 to
 * go on, -1 after answering. */
static int check_json_body(struct ctx *c)
{
	const char *ct = http_header(c->req, "Content-Type");
	struct buf err;
	json_t *details;
	int rc;

	if (!ct || strncasecmp(ct, "application/json", 16) != 0 ||
	    (ct[16] && ct[16] != ';' && ct[16] != ' ')) {
		respond_error(c, ERR_UNSUPPORTED_MEDIA_TYPE, NULL,
			      "Content-Type must be application/json");
		return -1;
	}
	buf_init(&err, 512);
	rc = validate_parse_body(c->req->body.data, c->req->body.len, &c->body, &err);
	if (rc < 0) {
		if (rc == -1)
			respond_error(c, ERR_REQUEST_MALFORMED, NULL, "%s",
				      err.data ? err.data : "malformed JSON");
		else
			respond_error(c, ERR_INTERNAL, NULL, "internal error");
		buf_free(&err);
		return -1;
	}
	buf_free(&err);
	details = json_array();
	if (validate_object(c->body, c->match.route->spec, "", details) > 0) {
		respond_error(c, ERR_VALIDATION_FAILED, details, "the request body is not valid");
		return -1;
	}
	json_decref(details);
	return 0;
}

/* For BODY_SCIM routes: SCIM or plain JSON media type, a JSON object within
 * the depth and duplicate-key limits; attributes are checked by scim.c,
 * which tolerates what identity providers really send. */
static int check_scim_body(struct ctx *c)
{
	const char *ct = http_header(c->req, "Content-Type");
	struct buf err;
	int rc;

	if (!ct || !((!strncasecmp(ct, "application/scim+json", 21) &&
		      (!ct[21] || ct[21] == ';' || ct[21] == ' ')) ||
		     (!strncasecmp(ct, "application/json", 16) &&
		      (!ct[16] || ct[16] == ';' || ct[16] == ' ')))) {
		respond_error(c, ERR_UNSUPPORTED_MEDIA_TYPE, NULL,
			      "Content-Type must be application/scim+json");
		return -1;
	}
	buf_init(&err, 512);
	rc = validate_parse_body(c->req->body.data, c->req->body.len, &c->body, &err);
	/* A SCIM route: respond_error writes SCIM's error body (error_shape). */
	if (rc == -1)
		respond_error(c, ERR_REQUEST_MALFORMED, NULL, "%s",
			      err.data ? err.data : "malformed");
	else if (rc < 0)
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
	buf_free(&err);
	return rc < 0 ? -1 : 0;
}

/* Answers with the response stored for a repeated Idempotency-Key (body,
 * status, the handler's headers, Idempotent-Replayed) and frees stored;
 * a 500 when the body cannot be copied. */
static void replay_stored(struct ctx *c, struct idem_stored *stored)
{
	const char *body = stored->body.data ? stored->body.data : "";
	const char *name;
	json_t *v;

	buf_reset(&c->res->body);
	if (buf_append(&c->res->body, body, stored->body.len) < 0) {
		idempotency_stored_free(stored);
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		return;
	}
	c->res->status = stored->status;
	c->res->content_type = "application/json";
	json_object_foreach(stored->headers, name, v)
		(void)response_header(c->res, name, json_string_value(v));
	(void)response_header(c->res, "Idempotent-Replayed", "true");
	idempotency_stored_free(stored);
}

/* Acts on idempotency_begin's verdict: answers a replay from stored, or the
 * refusal of a reused key, one in progress or a store failure. Returns 0
 * when the handler is to run (IDEM_PROCEED), -1 after answering. */
static int answer_begin(struct ctx *c, enum idem_action act, struct idem_stored *stored)
{
	switch (act) {
	case IDEM_REPLAY:
		replay_stored(c, stored);
		return -1;
	case IDEM_MISMATCH:
		respond_error(c, ERR_IDEMPOTENCY_KEY_REUSED, NULL,
			      "this Idempotency-Key was used with a different request");
		return -1;
	case IDEM_IN_PROGRESS:
		respond_error(c, ERR_IDEMPOTENCY_IN_PROGRESS, NULL,
			      "a request with this Idempotency-Key is still in progress");
		return -1;
	case IDEM_ERROR:
		if (stored->error == STORE_ERR)
			respond_error(c, ERR_UNAVAILABLE, NULL, "database unavailable");
		else
			respond_store_error(c, stored->error); /* busy, full: its own words */
		return -1;
	case IDEM_PROCEED:
		break;
	}
	return 0;
}

/* Drops the headers a handler added after the first n (its answer gave
 * way to an error). */
static void drop_headers(struct response *res, int n)
{
	while (res->nheaders > n) {
		res->nheaders--;
		free(res->hname[res->nheaders]);
		free(res->hvalue[res->nheaders]);
	}
}

/* After the handler ran under an Idempotency-Key: stores its answer in
 * held, its last write (store_scope_close), and commits the two together;
 * when it committed no write (held NULL) and stored nothing itself
 * (respond_key_own), in a transaction of its own. A 500 or 503 is not
 * stored, and what held wrote is rolled back: the key is released so a
 * retry runs again. When held does not commit, the handler's answer
 * becomes the store error. nheaders: the response's headers before the
 * handler ran. */
static void finish_keyed(struct ctx *c, struct store_tx *held, int nheaders)
{
	struct response *res = c->res;
	struct store_tx *tx;
	int rc;

	if (held && (res->status == 500 || res->status == 503)) {
		store_rollback(held);
	} else if (held && (rc = store_finish(held, respond_key_store(c, held))) != STORE_OK) {
		log_msg(LOG_WARN, "idempotency", "a keyed write did not commit (request %s)",
			c->request_id);
		drop_headers(res, nheaders);
		c->idem.stored = 0;
		respond_store_error(c, rc);
	}
	if (res->status == 500 || res->status == 503) {
		idempotency_release(c->svc->store, c->p.portfolio_id, c->idem.principal, c->idem.key);
		return;
	}
	if (c->idem.stored)
		return;
	if ((rc = store_begin(c->svc->store, STORE_WRITE_OWN, &tx)) == STORE_OK)
		rc = store_finish(tx, respond_key_store(c, tx));
	if (rc != STORE_OK)
		log_msg(LOG_WARN, "idempotency", "could not store a response (request %s)",
			c->request_id);
}

/* Runs the handler under the Idempotency-Key rules when the call is a
 * write that carries one; otherwise runs it plainly. */
static void run_handler(struct ctx *c)
{
	const char *key = http_header(c->req, "Idempotency-Key");
	struct idem_stored stored;
	enum idem_action act;
	char fp[65];
	int64_t window;
	int nheaders;

	if (!key || !c->authenticated || !is_write(c->req->method)) {
		c->match.route->fn(c);
		return;
	}
	if (!idempotency_key_valid(key)) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL,
			      "Idempotency-Key must be 1-255 printable ASCII characters");
		return;
	}
	c->idem.principal = c->p.user_id[0] ? c->p.user_id : c->p.client_id;
	idempotency_fingerprint(c->req->method, c->req->path, NULL, c->req->body.data,
				c->req->body.len, fp);
	window = clock_business_ms(auth_plan_idempotency_ms(c->p.plan));
	act = idempotency_begin(c->svc->store, c->p.portfolio_id, c->idem.principal, key, fp,
				clock_now_ms(), window, &stored);
	if (answer_begin(c, act, &stored) < 0)
		return;
	c->idem.key = key;
	nheaders = c->res->nheaders;
	store_scope_open(c->svc->store);
	c->match.route->fn(c);
	finish_keyed(c, c->idem.own ? NULL : store_scope_close(), nheaders);
}

static void add_deprecation(struct ctx *c)
{
	char v[40];
	int64_t at;
	const char *plan = c->authenticated ? c->p.plan : "enterprise";

	if (!c->match.route || !deprecation_lookup(c->svc->deprecations, c->match.route->method,
						   c->match.route->pattern, &at))
		return;
	(void)response_header(c->res, "X-Service-Deprecated", "true");
	snprintf(v, sizeof v, "@%lld", (long long)(at / 1000));
	(void)response_header(c->res, "Deprecation", v);
	clock_format_http_date(deprecation_sunset_ms(at, plan), v);
	(void)response_header(c->res, "Sunset", v);
}

/* Reads the bearer token (any route but a public one) and looks it up:
 * SCIM routes take the portfolio's SCIM token, the others an access token.
 * *tok is auth_bearer's result, *lookup the lookup's (AUTH_NONE when none
 * was made). */
static void authenticate(struct ctx *c, const struct route *rt, int *tok, int *lookup)
{
	char token[AUTH_TOKEN_MAX];

	*tok = *lookup = AUTH_NONE;
	if (rt && rt->auth == ROUTE_PUBLIC)
		return;
	*tok = auth_bearer(http_header(c->req, "Authorization"), token, sizeof token);
	if (*tok != AUTH_OK)
		return;
	*lookup = rt && rt->auth == ROUTE_SCIM
			  ? auth_lookup_scim_token(c->svc->store, token, &c->p)
			  : auth_lookup_token(c->svc->store, token, clock_now_ms(), &c->p);
	c->authenticated = *lookup == AUTH_OK;
	crypto_wipe(token, sizeof token);
}

/* Takes one request from the caller's bucket: the portfolio's (SCIM calls
 * a bucket of their own, so an identity provider's bulk provisioning does
 * not starve the portfolio's API calls) or, unauthenticated, the client
 * address's. Returns 0, or -1 after answering 429. On out-of-memory the
 * limiter fails open (rl says allowed). */
static int take_rate_limit(struct ctx *c, const struct route *rt, struct rl_result *rl)
{
	struct service *a = c->svc;
	char key[ID_MAX + 8];
	int rc;

	if (c->authenticated) {
		snprintf(key, sizeof key, "%s%s", rt && rt->auth == ROUTE_SCIM ? "scim:" : "",
			 c->p.portfolio_id);
		rc = a->rl_shared ? rl_shared_take(a->rl_shared, key, c->p.rate_limit, rl)
				  : ratelimit_take(a->rl_portfolio, key, c->p.rate_limit,
						   clock_mono_ms(), rl);
	} else {
		rc = ratelimit_take(a->rl_anon, c->req->client, a->cfg->anon_per_minute,
				    clock_mono_ms(), rl);
	}
	if (rc < 0)
		log_msg(LOG_WARN, "ratelimit", "no allowance could be counted; request allowed");
	if (rl->allowed)
		return 0;
	set_int_header(c->res, "Retry-After", rl->retry_after_s);
	respond_error(c, ERR_RATE_LIMITED, NULL,
		      "rate limit of %lld requests per minute exceeded; retry in %lld s",
		      (long long)rl->limit, (long long)rl->retry_after_s);
	return -1;
}

/* The refusals of a request before its route: framing, query, no route or
 * method, and an unavailable token store. Returns 0, or -1 after answering. */
static int check_request(struct ctx *c, int m, const struct buf *allow, int lookup)
{
	struct request *req = c->req;

	if (req->framing_status) {
		respond_error(c,
			      req->framing_status == 413   ? ERR_PAYLOAD_TOO_LARGE
			      : req->framing_status == 503 ? ERR_UNAVAILABLE /* shutting down */
							   : ERR_REQUEST_MALFORMED,
			      NULL, "%s", req->framing_msg);
		c->res->close = 1;
	} else if (http_query_malformed(req)) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL,
			      "the query string has a malformed %%-escape, an encoded NUL, or more "
			      "than 31 parameters");
	} else if (m == 404) {
		respond_error(c, ERR_NOT_FOUND, NULL, "no route for %s", req->path);
	} else if (m == 405) {
		(void)response_header(c->res, "Allow", allow->data);
		respond_error(c, ERR_METHOD_NOT_ALLOWED, NULL,
			      "%s is not allowed here (allowed: %s)", req->method, allow->data);
	} else if (lookup == AUTH_ERROR) {
		respond_error(c, ERR_UNAVAILABLE, NULL, "database unavailable");
	} else {
		return 0;
	}
	return -1;
}

/* What the route asks of the caller and the body: its kind of token, the
 * scope, a JSON or SCIM body. Returns 0, or -1 after answering. */
static int check_route(struct ctx *c, const struct route *rt, int tok)
{
	if (rt->auth == ROUTE_SCIM && !c->authenticated) {
		(void)response_header(c->res, "WWW-Authenticate", "Bearer realm=\"revops-scim\"");
		respond_error(c, ERR_UNAUTHENTICATED, NULL, "a valid SCIM bearer token is required");
		return -1;
	}
	if (rt->auth == ROUTE_BEARER && !c->authenticated) {
		(void)response_header(c->res, "WWW-Authenticate",
				      tok == AUTH_NONE
					      ? "Bearer realm=\"revops\""
					      : "Bearer realm=\"revops\", error=\"invalid_token\"");
		respond_error(c, ERR_UNAUTHENTICATED, NULL,
			      tok == AUTH_NONE ? "a bearer token is required"
					       : "the bearer token is invalid, expired or revoked");
		return -1;
	}
	if (rt->auth == ROUTE_BEARER && check_scope(c) < 0)
		return -1;
	if ((rt->body == BODY_JSON || (rt->body == BODY_JSON_OPTIONAL && c->req->body.len)) &&
	    check_json_body(c) < 0)
		return -1;
	if (rt->body == BODY_SCIM && check_scim_body(c) < 0)
		return -1;
	return 0;
}

/* The contract's X-Service-Ratelimit-* and, beside them, the IETF draft's
 * RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers-11:
 * a quota q per window w seconds; r remaining, t seconds to reset), the
 * policy named for the bucket the request was counted in. */
static void add_ratelimit_headers(struct ctx *c, const struct route *rt, const struct rl_result *rl)
{
	const char *policy = !c->authenticated              ? "client"
			     : rt && rt->auth == ROUTE_SCIM ? "scim"
							    : "portfolio";
	char v[96];

	set_int_header(c->res, "X-Service-Ratelimit-Remaining", rl->remaining);
	set_int_header(c->res, "X-Service-Ratelimit-Reset", rl->reset_s);
	size_t pl = strlen(policy);
	char *p;

	v[0] = '"';
	memcpy(v + 1, policy, pl);
	memcpy(v + 1 + pl, "\";q=", 4);
	p = put_uint(v + pl + 5, rl->limit);
	memcpy(p, ";w=60", 6);
	(void)response_header(c->res, "RateLimit-Policy", v);
	memcpy(v + 1 + pl, "\";r=", 4);
	p = put_uint(v + pl + 5, rl->remaining);
	memcpy(p, ";t=", 3);
	put_uint(p + 3, rl->reset_s);
	(void)response_header(c->res, "RateLimit", v);
}

/* The answer's representation and common headers, the metrics and the
 * access log line. */
static void finish(struct ctx *c, const struct route *rt, int m, const struct rl_result *rl)
{
	struct request *req = c->req;
	struct response *res = c->res;
	double secs = (double)(clock_mono_us() - req->start_us) / 1e6;
	struct log_access la;

	negotiate_answer(c);
	add_deprecation(c);
	(void)response_header(res, "X-Request-Id", c->request_id);
	add_ratelimit_headers(c, rt, rl);
	metrics_observe(c->svc->metrics, rt ? rt->pattern : (m == 405 ? "(method)" : "(unmatched)"),
			req->method, res->status, secs);
	memset(&la, 0, sizeof la);
	la.request_id = c->request_id;
	la.method = req->method;
	la.path = req->path;
	la.route = rt ? rt->pattern : NULL;
	la.status = res->status;
	la.duration_ms = secs * 1000;
	la.client = req->client;
	la.portfolio = c->authenticated ? c->p.portfolio_id : NULL;
	la.principal = c->authenticated ? (c->p.user_id[0] ? c->p.user_id : c->p.client_id) : NULL;
	la.error_code = c->error_code;
	la.bytes = res->body.len;
	if (c->traced) {
		la.trace_id = c->trace.trace_id;
		la.span_id = c->trace.span_id;
		la.parent_span_id = c->trace.parent_id;
	}
	log_access(&la);
}

/* The request id (the client's X-Request-Id when http_request_id_ok says
 * so, else a new req_…) and the trace context: a valid traceparent gets a
 * span of this request and becomes the thread's current context until
 * pipeline_handle ends; an invalid or absent one starts no trace. */
static void start_ids(struct ctx *c)
{
	const char *rid = http_header(c->req, "X-Request-Id");
	const char *tp;

	if (http_request_id_ok(rid))
		snprintf(c->request_id, sizeof c->request_id, "%s", rid);
	else if (id_new("req_", c->request_id, sizeof c->request_id) < 0)
		snprintf(c->request_id, sizeof c->request_id, "req_unavailable");
	tp = http_header(c->req, "traceparent");
	if (tp && trace_parse(tp, &c->trace) == 0 && trace_new_span(c->trace.span_id) == 0) {
		c->traced = 1;
		trace_set(&c->trace);
	}
}

_Static_assert(LANE_BOOKING <= HTTP_LANES, "a lane the HTTP server does not have");
_Static_assert(LANE_LOOP == HTTP_LANE_LOOP, "the loop's lane is the HTTP server's");

int pipeline_lane(void *arg, const struct request *req)
{
	struct service *a = arg;
	struct route_match m;
	struct buf allow;
	int rc;

	buf_init(&allow, 0);
	rc = router_match(a->routes, a->nroutes, req->method, req->path, &m, &allow);
	buf_free(&allow);
	return rc == 200 ? m.route->lane : 0;
}

/* A request's ctx with what the pipeline needs to end it, also when its
 * handler deferred the answer (ctx_defer). */
struct pctx {
	struct ctx c;
	struct rl_result rl;
	void (*then)(struct ctx *c, int rc); /* ctx_resume's */
	int rc;
};

/* Ends c's request: the answer's headers, metrics and access log. */
static void end_request(struct pctx *p, const struct route *rt, int m)
{
	finish(&p->c, rt, m, &p->rl);
	trace_set(NULL);
	json_decref(p->c.body);
	free(p);
}

/* Set by ctx_defer on the thread that runs the handler; pipeline_handle
 * reads and clears it once the handler returns (it must not read c then:
 * c may already be resumed's, on another thread). */
static _Thread_local int deferred_here;

void ctx_defer(struct ctx *c)
{
	deferred_here = 1;
	http_defer(c->req);
}

/* http_resume's then, on the loop: the handler's continuation, then the
 * rest of pipeline_handle. */
static void resumed(void *arg)
{
	struct pctx *p = arg;

	if (p->c.traced)
		trace_set(&p->c.trace);
	p->then(&p->c, p->rc);
	end_request(p, p->c.match.route, 200);
}

void ctx_resume(struct ctx *c, void (*then)(struct ctx *c, int rc), int rc)
{
	struct pctx *p = (struct pctx *)c; /* c is p's first member */

	p->then = then;
	p->rc = rc;
	http_resume(c->req, resumed, p);
}

void pipeline_handle(void *arg, struct request *req, struct response *res)
{
	struct service *a = arg;
	struct pctx *p = calloc(1, sizeof *p);
	struct ctx *c = &p->c;
	struct buf allow;
	int m, tok, lookup;
	const struct route *rt;

	if (!p) {
		res->status = 503;
		return;
	}
	buf_init(&allow, 256);
	c->svc = a;
	c->req = req;
	c->res = res;
	start_ids(c);
	m = router_match(a->routes, a->nroutes, req->method, req->path, &c->match, &allow);
	rt = m == 200 ? c->match.route : NULL;
	/* SCIM routes answer every refusal in SCIM's error shape, and so do
	 * unmatched paths under its prefix (a SCIM client reads those too). */
	if ((rt && rt->auth == ROUTE_SCIM) ||
	    (a->error_shape_prefix &&
	     !strncmp(req->path, a->error_shape_prefix, strlen(a->error_shape_prefix))))
		c->error_shape = a->error_shape;
	authenticate(c, rt, &tok, &lookup);
	if (take_rate_limit(c, rt, &p->rl) == 0 && check_request(c, m, &allow, lookup) == 0 &&
	    check_route(c, rt, tok) == 0)
		run_handler(c);
	buf_free(&allow);
	if (deferred_here) {
		deferred_here = 0;
		trace_set(NULL); /* c and the request are resumed's now */
	} else {
		end_request(p, rt, m);
	}
}
