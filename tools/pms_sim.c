/* pms-sim: a property-management-platform simulator speaking the PMS
 * connector protocol (API-CONTRACT §7) over HTTP, with fault injection, for
 * the demo and the tests. The state lives in pms_sim_core; this file is the
 * HTTP face and the process around it.
 *
 *   POST /properties/{code}/rates  one rate write (application/json)
 *   GET  /written                  every write accepted, oldest first
 *   POST /booking-engine/properties/{code}/rates
 *   GET  /booking-engine/written   the same for a booking engine
 *                                  (docs/booking-engine.md), a separate
 *                                  simulator: revopsd's
 *                                  --booking-engine-url is
 *                                  http://HOST:PORT/booking-engine
 *   PUT  /v4/accounts/{a}/locations/{l}/reviews/{r}/reply
 *                                  a review reply, as Google Business
 *                                  Profile takes it ({"comment"} -> 200
 *                                  {"comment", "updateTime"}): revopsd's
 *                                  --reviews-url is http://HOST:PORT
 *   GET  /reviews/replies          every reply accepted, oldest first
 *   GET  /healthz                  {"status": "ok"}
 *
 * --reviews-fail-first N answers the first N reply calls 503 (a platform
 * that is briefly down).
 * --latency-ms sleeps before answering a write. The write then runs on a
 * pool of --threads workers while its connection is suspended, so the
 * listener threads never sleep and a burst of delayed writes all wait
 * together (sleeping on the listener threads held up every other connection
 * a thread had accepted: 24 parallel writes took up to 3 latencies). Without
 * latency, writes are answered on the listener threads directly.
 * Signals are blocked in every thread; the main thread waits for SIGTERM or
 * SIGINT, then stops accepting, lets requests in flight finish (up to 10 s)
 * and exits 0. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/signals.h"
#include "core/validate.h"
#include "http/http_server.h"
#include "http/router.h"
#include "pms/pms_sim_core.h"
#include "sim_common.h"

#define DRAIN_MS 10000
#define DEFAULT_THREADS 64
/* Listener threads when delayed writes go to the worker pool. */
#define LISTEN_THREADS_DELAYED 2
#define MAX_THREADS 1024
#define MAX_LATENCY_MS 600000
#define MAX_CAPACITY 10000000

struct opts {
	char host[256];
	int port;
	const char *fail_codes;
	const char *be_fail_codes;
	int latency_ms;
	int threads;
	int capacity; /* 0: pms_sim_core's default */
	int reviews_fail_first;
};

struct sim_server {
	struct pms_sim *sim;
	struct pms_sim *be; /* the booking engine */
	int latency_ms;
	pthread_mutex_t mu; /* the review replies below */
	json_t *replies;
	int fail_left;
};

enum {
	ROUTE_WRITE,
	ROUTE_WRITTEN,
	ROUTE_BE_WRITE,
	ROUTE_BE_WRITTEN,
	ROUTE_REPLY,
	ROUTE_REPLIES,
	ROUTE_HEALTHZ
};

/* Only method and pattern matter here; the index is the route's identity. */
static const struct route routes[] = {
	[ROUTE_WRITE] = {.method = "POST", .pattern = "/properties/{code}/rates"},
	[ROUTE_WRITTEN] = {.method = "GET", .pattern = "/written"},
	[ROUTE_BE_WRITE] = {.method = "POST", .pattern = "/booking-engine/properties/{code}/rates"},
	[ROUTE_BE_WRITTEN] = {.method = "GET", .pattern = "/booking-engine/written"},
	[ROUTE_REPLY] = {.method = "PUT",
			 .pattern = "/v4/accounts/{a}/locations/{l}/reviews/{r}/reply"},
	[ROUTE_REPLIES] = {.method = "GET", .pattern = "/reviews/replies"},
	[ROUTE_HEALTHZ] = {.method = "GET", .pattern = "/healthz"},
};

static void usage(FILE *f)
{
	fputs("usage: pms-sim [--listen HOST:PORT] [--fail-codes CODE,...] [--latency-ms N]\n"
	      "               [--threads N] [--capacity N] [--booking-engine-fail-codes CODE,...]\n"
	      "  --listen HOST:PORT     where to listen (127.0.0.1:8090; port 0 = any free port)\n"
	      "  --fail-codes CODE,...  answer 500 for writes to these property codes\n"
	      "  --booking-engine-fail-codes CODE,...\n"
	      "                         the same for the booking engine under /booking-engine\n"
	      "  --reviews-fail-first N answer the first N review-reply calls 503 (0)\n"
	      "  --latency-ms N         wait N ms before answering each write (0)\n"
	      "  --threads N            HTTP threads; with --latency-ms, delayed writes in flight at once (64)\n"
	      "  --capacity N           accepted writes kept; past it a write is 503 (100000)\n",
	      f);
}

/* Fills o from argv; "--name value" and "--name=value" both work. Returns
 * 0, 1 after --help, or -1 after printing why the arguments are wrong. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	const char *name, *v, *eq;
	char key[32];
	size_t kl;
	int i, bad;

	snprintf(o->host, sizeof o->host, "127.0.0.1");
	o->port = 8090;
	o->fail_codes = NULL;
	o->be_fail_codes = NULL;
	o->latency_ms = 0;
	o->threads = DEFAULT_THREADS;
	o->capacity = 0;
	o->reviews_fail_first = 0;
	for (i = 1; i < argc; i++) {
		name = argv[i];
		if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
			usage(stdout);
			return 1;
		}
		if (strncmp(name, "--", 2) != 0)
			goto unknown;
		eq = strchr(name, '=');
		kl = eq ? (size_t)(eq - name) : strlen(name);
		if (kl >= sizeof key)
			goto unknown;
		memcpy(key, name, kl);
		key[kl] = '\0';
		if (strcmp(key, "--listen") && strcmp(key, "--fail-codes") &&
		    strcmp(key, "--latency-ms") && strcmp(key, "--threads") &&
		    strcmp(key, "--capacity") && strcmp(key, "--booking-engine-fail-codes") &&
		    strcmp(key, "--reviews-fail-first"))
			goto unknown;
		if (eq) {
			v = eq + 1;
		} else if (i + 1 < argc) {
			v = argv[++i];
		} else {
			fprintf(stderr, "pms-sim: %s needs a value\n", key);
			return -1;
		}
		bad = 0;
		if (!strcmp(key, "--listen"))
			bad = sim_parse_listen(v, o->host, sizeof o->host, &o->port) < 0;
		else if (!strcmp(key, "--fail-codes"))
			o->fail_codes = v;
		else if (!strcmp(key, "--booking-engine-fail-codes"))
			o->be_fail_codes = v;
		else if (!strcmp(key, "--latency-ms"))
			bad = sim_parse_int(v, 0, MAX_LATENCY_MS, &o->latency_ms) < 0;
		else if (!strcmp(key, "--capacity"))
			bad = sim_parse_int(v, 1, MAX_CAPACITY, &o->capacity) < 0;
		else if (!strcmp(key, "--reviews-fail-first"))
			bad = sim_parse_int(v, 0, MAX_CAPACITY, &o->reviews_fail_first) < 0;
		else
			bad = sim_parse_int(v, 1, MAX_THREADS, &o->threads) < 0;
		if (bad) {
			fprintf(stderr, "pms-sim: invalid value for %s: \"%s\"\n", key, v);
			return -1;
		}
	}
	return 0;
unknown:
	fprintf(stderr, "pms-sim: unknown argument \"%s\"\n", name);
	usage(stderr);
	return -1;
}

static void handle_write(struct sim_server *ss, struct pms_sim *sim, struct request *req,
			 struct response *res, const char *code)
{
	struct buf err;
	json_t *body = NULL, *out = NULL;
	int rc, status;

	buf_init(&err, 512);
	if (ss->latency_ms > 0)
		sim_sleep_ms(ss->latency_ms);
	if (!sim_is_json(http_header(req, "Content-Type"))) {
		sim_reply_error(res, 415, "Content-Type must be application/json");
		goto out;
	}
	rc = validate_parse_body(req->body.data, req->body.len, &body, &err);
	if (rc < 0) {
		sim_reply_error(res, rc == -1 ? 400 : 500,
				rc == -1 && err.data ? err.data : "out of memory");
		goto out;
	}
	status = pms_sim_write(sim, code, body, &out);
	sim_reply(res, status, out);
out:
	json_decref(body);
	buf_free(&err);
}

/* A review reply: {"comment": text} and nothing else. The first
 * --reviews-fail-first calls fail with 503. */
static void handle_reply(struct sim_server *ss, struct request *req, struct response *res,
			 const struct route_match *m)
{
	struct buf err;
	json_t *body = NULL, *comment;
	char at[CLOCK_RFC3339_LEN];
	int fail;

	buf_init(&err, 512);
	if (!sim_is_json(http_header(req, "Content-Type"))) {
		sim_reply_error(res, 415, "Content-Type must be application/json");
		goto out;
	}
	if (validate_parse_body(req->body.data, req->body.len, &body, &err) < 0) {
		sim_reply_error(res, 400, err.data ? err.data : "malformed JSON");
		goto out;
	}
	comment = json_object_get(body, "comment");
	if (!json_is_string(comment) || json_object_size(body) != 1) {
		sim_reply_error(res, 400, "the body must be {\"comment\": string}");
		goto out;
	}
	clock_format_ms(clock_now_ms(), at);
	pthread_mutex_lock(&ss->mu);
	fail = ss->fail_left > 0;
	if (fail)
		ss->fail_left--;
	else
		json_array_append_new(ss->replies, json_pack("{s:s, s:s, s:s, s:O, s:s}", "account",
							     m->params[0], "location", m->params[1],
							     "review", m->params[2], "comment",
							     comment, "updateTime", at));
	pthread_mutex_unlock(&ss->mu);
	if (fail)
		sim_reply_error(res, 503, "the review platform is briefly unavailable");
	else
		sim_reply(res, 200, json_pack("{s:O, s:s}", "comment", comment, "updateTime", at));
out:
	json_decref(body);
	buf_free(&err);
}

static json_t *replies_copy(struct sim_server *ss)
{
	json_t *copy;

	pthread_mutex_lock(&ss->mu);
	copy = json_deep_copy(ss->replies);
	pthread_mutex_unlock(&ss->mu);
	return copy;
}

/* The http_server handler: routes, then answers (always JSON). */
static void handle(void *arg, struct request *req, struct response *res)
{
	struct sim_server *ss = arg;
	struct route_match m;
	struct buf allow;
	int rc;

	buf_init(&allow, 256);
	if (req->framing_status) {
		sim_reply_error(res, req->framing_status,
				req->framing_msg ? req->framing_msg : "malformed request");
		res->close = 1;
		goto out;
	}
	rc = router_match(routes, ARRAY_LEN(routes), req->method, req->path, &m, &allow);
	if (rc == 404) {
		sim_reply_error(res, 404, "no such resource");
		goto out;
	}
	if (rc == 405) {
		sim_reply_error(res, 405, "method not allowed");
		if (allow.data && response_header(res, "Allow", allow.data) < 0)
			res->close = 1;
		goto out;
	}
	switch (m.route - routes) {
	case ROUTE_WRITE:
	case ROUTE_BE_WRITE:
		handle_write(ss, m.route - routes == ROUTE_WRITE ? ss->sim : ss->be, req, res,
			     m.params[0]);
		break;
	case ROUTE_WRITTEN:
		sim_reply(res, 200, pms_sim_written(ss->sim));
		break;
	case ROUTE_BE_WRITTEN:
		sim_reply(res, 200, pms_sim_written(ss->be));
		break;
	case ROUTE_REPLY:
		handle_reply(ss, req, res, &m);
		break;
	case ROUTE_REPLIES:
		sim_reply(res, 200, replies_copy(ss));
		break;
	default:
		sim_reply(res, 200, json_pack("{s:s}", "status", "ok"));
		break;
	}
out:
	buf_free(&allow);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct sim_server ss = {NULL, NULL, 0, PTHREAD_MUTEX_INITIALIZER, NULL, 0};
	struct http_server *srv = NULL;
	struct http_server_opts ho;
	sigset_t sigs;
	int rc, sig, exit_code = 1;

	rc = parse_args(argc, argv, &o);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	log_init(1);
	signals_block(&sigs);

	ss.sim = pms_sim_new(o.fail_codes);
	ss.be = pms_sim_new(o.be_fail_codes);
	ss.replies = json_array();
	ss.fail_left = o.reviews_fail_first;
	if (!ss.sim || !ss.be || !ss.replies) {
		log_msg(LOG_ERROR, "start", "out of memory");
		goto out;
	}
	pms_sim_set_capacity(ss.sim, (size_t)o.capacity);
	pms_sim_set_capacity(ss.be, (size_t)o.capacity);
	ss.latency_ms = o.latency_ms;
	ho = (struct http_server_opts){
		o.host, o.port, o.latency_ms ? LISTEN_THREADS_DELAYED : o.threads,
		4096,   30,     o.latency_ms ? o.threads : 0,
		NULL,   {0}};
	if (http_server_start(&ho, handle, &ss, &srv) < 0)
		goto out;
	sim_log_listening(srv, o.host);
	if (o.fail_codes && *o.fail_codes)
		log_msg(LOG_INFO, "config", "failing property codes: %s", o.fail_codes);
	if (o.latency_ms)
		log_msg(LOG_INFO, "config", "latency %d ms per write, %d threads", o.latency_ms,
			o.threads);

	sig = signals_wait(&sigs, NULL, NULL);
	log_msg(LOG_INFO, "shutdown", "%s: draining %d requests in flight",
		sig > 0 ? "signal received" : "signal wait failed", http_server_in_flight(srv));
	http_server_drain(srv, DRAIN_MS);
	exit_code = 0;
out:
	http_server_stop(srv);
	pms_sim_free(ss.sim);
	pms_sim_free(ss.be);
	json_decref(ss.replies);
	if (exit_code == 0)
		log_msg(LOG_INFO, "shutdown", "stopped cleanly");
	return exit_code;
}
