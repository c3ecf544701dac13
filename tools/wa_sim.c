/* wa-sim: a simulator of Meta's WhatsApp Cloud API for the black-box tests
 * of revopsd's WhatsApp channel, as pms-sim is of a PMS (docs/wa-sim.md).
 * It takes revopsd's sends the way the Graph API does, and plays Meta's
 * webhooks back at revopsd: status callbacks after each send, and inbound
 * guest messages on demand.
 *
 *   POST /{version}/{phone_number_id}/messages
 *                          the Cloud API's send call (Bearer token, JSON)
 *   GET  /sent             every accepted send, oldest first
 *   POST /control/config   {"webhook_url", "app_secret"}: where callbacks go
 *   POST /control/inbound  posts one inbound message payload, signed,
 *                          synchronously, and answers what revopsd answered
 *   POST /control/status   the same for one status callback
 *   GET  /callbacks        every callback posted, oldest first
 *   GET  /healthz          {"status": "ok"}
 *
 * Callbacks are signed as Meta signs them (X-Hub-Signature-256: sha256=
 * lowercase hex HMAC-SHA256 of the raw body under the app secret) and
 * serialised as Meta serialises them: compact, with non-ASCII characters
 * as six-character \u escapes (\u00e9) and "/" as "\/", so a receiver that re-serialises the
 * body before checking the signature fails as it would against Meta.
 *
 * Writes (every POST) run on a pool of --threads workers while their
 * connection is parked, so --latency-ms and the synchronous callbacks of
 * the control endpoints never hold up the two listener threads, and
 * revopsd may call the send endpoint while its webhook is being called.
 * (A quarter of the workers is kept for sends: more control calls at once
 * than the rest are answered 503.) Automatic status callbacks are posted
 * by one thread of their own, in due order.
 * Signals are blocked in every thread; the main thread waits for SIGTERM or
 * SIGINT, then stops accepting, lets requests in flight finish (up to
 * 10 s), drops the status callbacks not yet due and exits 0. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/log.h"
#include "core/signals.h"
#include "core/validate.h"
#include "http/http_server.h"
#include "http/router.h"
#include "net/httpc.h"
#include "sim_common.h"

#define DRAIN_MS 10000
#define DEFAULT_THREADS 16
#define LISTEN_THREADS 2
#define MAX_THREADS 1024
#define MAX_LATENCY_MS 600000
#define DEFAULT_STATUS_DELAY_MS 100
/* Sends and callbacks kept for GET /sent and /callbacks; a send past it is
 * answered 503. */
#define MAX_RECORDS 100000
#define CALLBACK_TIMEOUT_MS 10000
#define CALLBACK_MAX_RESPONSE (64 * 1024)
#define MAX_REPEAT 100
#define MAX_EXTRA_MESSAGES 100
#define PHONE_MIN 8
#define PHONE_MAX 15
#define PNID_MAX 64      /* a phone number id given to /control/ */
#define ID_GIVEN_MAX 256 /* a wamid given to /control/ */
#define NAME_MAX_CP 256
#define INBOUND_TEXT_MAX 65536
#define SEND_TEXT_MAX 4096 /* the Cloud API's limit on text.body */
#define TEMPLATE_NAME_MAX 512
#define LANG_CODE_MAX 16
#define URL_MAX 2048
#define SECRET_MAX 512
#define MAX_STATUS_ERRORS 10
/* "wamid." and the base64 of at most 43 bytes (see wamid_new). */
#define WAMID_LEN 80
#define SIG_HEADER_LEN (sizeof "X-Hub-Signature-256: sha256=" + 2 * CRYPTO_SHA256_LEN)
#define WABA_ID "WABA-SIM"
#define OTHER_SECRET_PREFIX "wa-sim-other:"

struct opts {
	char host[256];
	int port;
	int threads;
	int latency_ms;
	int status_delay_ms;
	int fail_first;
	int auto_status;
	const char *access_token; /* NULL: any bearer token is accepted */
	const char *webhook_url;
	const char *app_secret;
	json_t *reject_to;   /* {"<digits>": true}: sends answered 400 #131026 */
	json_t *fail_status; /* {"<digits>": true}: sends whose status ends "failed" */
};

/* One automatic status callback waiting for its time. */
struct job {
	struct job *next;
	int64_t due_ms;     /* clock_mono_ms */
	char *url, *secret; /* the target when the send was accepted */
	const char *status; /* static: "sent", "delivered" or "failed" */
	char pnid[ROUTER_PARAM_MAX];
	char to[PHONE_MAX + 1];
	char wamid[WAMID_LEN];
};

struct wa_sim {
	const struct opts *o;
	pthread_mutex_t mu;  /* everything below */
	pthread_cond_t wake; /* the status thread: a job queued, or stopping */
	json_t *sent;        /* accepted sends, oldest first */
	json_t *callbacks;   /* callbacks posted, oldest first */
	int fail_left;       /* --fail-first sends still to fail */
	uint32_t seq;        /* makes every wamid unique */
	char *webhook_url;   /* NULL: no target */
	char *app_secret;    /* never NULL once started ("" when none) */
	struct job *jobs;    /* in due order */
	int stopping;
	int control_in_flight; /* /control/inbound and /control/status calls */
	int control_max;       /* at most that many at once (control_enter) */
};

enum sig_mode { SIG_GOOD, SIG_BAD, SIG_NONE, SIG_OTHER };

enum {
	ROUTE_SEND,
	ROUTE_SENT,
	ROUTE_CONFIG,
	ROUTE_INBOUND,
	ROUTE_STATUS,
	ROUTE_CALLBACKS,
	ROUTE_HEALTHZ
};

/* Only method and pattern matter here; the index is the route's identity.
 * The send route's two-segment prefix does not clash with /control/x. */
static const struct route routes[] = {
	[ROUTE_SEND] = {.method = "POST", .pattern = "/{version}/{phone_number_id}/messages"},
	[ROUTE_SENT] = {.method = "GET", .pattern = "/sent"},
	[ROUTE_CONFIG] = {.method = "POST", .pattern = "/control/config"},
	[ROUTE_INBOUND] = {.method = "POST", .pattern = "/control/inbound"},
	[ROUTE_STATUS] = {.method = "POST", .pattern = "/control/status"},
	[ROUTE_CALLBACKS] = {.method = "GET", .pattern = "/callbacks"},
	[ROUTE_HEALTHZ] = {.method = "GET", .pattern = "/healthz"},
};

static void usage(FILE *f)
{
	fputs("usage: wa-sim [--listen HOST:PORT] [--threads N] [--access-token T]\n"
	      "              [--webhook-url URL] [--app-secret S] [--status-delay-ms N]\n"
	      "              [--no-auto-status] [--fail-first N] [--reject-to DIGITS,...]\n"
	      "              [--fail-status-to DIGITS,...] [--latency-ms N]\n"
	      "  --listen HOST:PORT      where to listen (127.0.0.1:0; port 0 = any free port)\n"
	      "  --threads N             threads running POSTs; 3/4 of them at most for\n"
	      "                          /control/inbound and /control/status at once (16)\n"
	      "  --access-token T        the only bearer token sends accept (any non-empty one)\n"
	      "  --webhook-url URL       where callbacks go (or POST /control/config)\n"
	      "  --app-secret S          the secret callbacks are signed with (\"\")\n"
	      "  --status-delay-ms N     \"sent\" N ms after a send, the final status N ms later (100)\n"
	      "  --no-auto-status        post no status callbacks after sends\n"
	      "  --fail-first N          answer the first N sends 503, transient (0)\n"
	      "  --reject-to DIGITS,...  answer sends to these numbers 400 #131026 (repeatable)\n"
	      "  --fail-status-to DIGITS,...\n"
	      "                          end sends to these numbers \"failed\" #131047 (repeatable)\n"
	      "  --latency-ms N          wait N ms before answering each send (0)\n",
	      f);
}

/* 1 when s is a WhatsApp number as the Cloud API takes it here: 8 to 15
 * ASCII digits and nothing else. */
static int is_phone(const char *s)
{
	size_t n;

	for (n = 0; s[n]; n++) {
		if (s[n] < '0' || s[n] > '9' || n >= PHONE_MAX)
			return 0;
	}
	return n >= PHONE_MIN;
}

/* Adds the comma-separated numbers of v to the set. Returns 0, or -1 when
 * one is not a number (is_phone) or memory ran out. */
static int add_numbers(json_t *set, const char *v)
{
	char num[PHONE_MAX + 1];
	const char *p = v, *comma;
	size_t n;

	for (;;) {
		comma = strchr(p, ',');
		n = comma ? (size_t)(comma - p) : strlen(p);
		if (n >= sizeof num)
			return -1;
		memcpy(num, p, n);
		num[n] = '\0';
		if (!is_phone(num) || json_object_set_new(set, num, json_true()) < 0)
			return -1;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* Fills o from argv; "--name value" and "--name=value" both work. o's two
 * sets must exist. Returns 0, 1 after --help, or -1 after printing why the
 * arguments are wrong. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	static const char *const valued[] = {
		"--listen",     "--threads",        "--latency-ms",   "--status-delay-ms",
		"--fail-first", "--reject-to",      "--access-token", "--webhook-url",
		"--app-secret", "--fail-status-to",
	};
	const char *name, *v, *eq;
	char key[32];
	size_t kl, k;
	int i, bad;

	snprintf(o->host, sizeof o->host, "127.0.0.1");
	o->port = 0;
	o->threads = DEFAULT_THREADS;
	o->latency_ms = 0;
	o->status_delay_ms = DEFAULT_STATUS_DELAY_MS;
	o->fail_first = 0;
	o->auto_status = 1;
	o->access_token = NULL;
	o->webhook_url = NULL;
	o->app_secret = NULL;
	for (i = 1; i < argc; i++) {
		name = argv[i];
		if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
			usage(stdout);
			return 1;
		}
		if (!strcmp(name, "--no-auto-status")) {
			o->auto_status = 0;
			continue;
		}
		if (strncmp(name, "--", 2) != 0)
			goto unknown;
		eq = strchr(name, '=');
		kl = eq ? (size_t)(eq - name) : strlen(name);
		if (kl >= sizeof key)
			goto unknown;
		memcpy(key, name, kl);
		key[kl] = '\0';
		for (k = 0; k < ARRAY_LEN(valued) && strcmp(key, valued[k]); k++)
			;
		if (k == ARRAY_LEN(valued))
			goto unknown;
		if (eq) {
			v = eq + 1;
		} else if (i + 1 < argc) {
			v = argv[++i];
		} else {
			fprintf(stderr, "wa-sim: %s needs a value\n", key);
			return -1;
		}
		bad = 0;
		if (!strcmp(key, "--listen"))
			bad = sim_parse_listen(v, o->host, sizeof o->host, &o->port) < 0;
		else if (!strcmp(key, "--threads"))
			bad = sim_parse_int(v, 1, MAX_THREADS, &o->threads) < 0;
		else if (!strcmp(key, "--latency-ms"))
			bad = sim_parse_int(v, 0, MAX_LATENCY_MS, &o->latency_ms) < 0;
		else if (!strcmp(key, "--status-delay-ms"))
			bad = sim_parse_int(v, 0, MAX_LATENCY_MS, &o->status_delay_ms) < 0;
		else if (!strcmp(key, "--fail-first"))
			bad = sim_parse_int(v, 0, MAX_RECORDS, &o->fail_first) < 0;
		else if (!strcmp(key, "--reject-to"))
			bad = add_numbers(o->reject_to, v) < 0;
		else if (!strcmp(key, "--fail-status-to"))
			bad = add_numbers(o->fail_status, v) < 0;
		else if (!strcmp(key, "--access-token"))
			bad = !*v || strlen(v) > SECRET_MAX;
		else if (!strcmp(key, "--webhook-url"))
			bad = strlen(v) > URL_MAX ||
			      (strncmp(v, "http://", 7) && strncmp(v, "https://", 8));
		else
			bad = strlen(v) > SECRET_MAX;
		if (bad) {
			fprintf(stderr, "wa-sim: invalid value for %s: \"%s\"\n", key, v);
			return -1;
		}
		if (!strcmp(key, "--access-token"))
			o->access_token = v;
		else if (!strcmp(key, "--webhook-url"))
			o->webhook_url = v;
		else if (!strcmp(key, "--app-secret"))
			o->app_secret = v;
	}
	return 0;
unknown:
	fprintf(stderr, "wa-sim: unknown argument \"%s\"\n", name);
	usage(stderr);
	return -1;
}

/* A Graph API error, as the send call answers one:
 * {"error": {"message", "type": "OAuthException", "code"[, "is_transient"]}}. */
static void reply_graph(struct response *res, int status, const char *msg, int code, int transient)
{
	json_t *e =
		json_pack("{s:s, s:s, s:i}", "message", msg, "type", "OAuthException", "code", code);

	if (e && transient && json_object_set_new(e, "is_transient", json_true()) < 0) {
		json_decref(e);
		e = NULL;
	}
	sim_reply(res, status, e ? json_pack("{s:o}", "error", e) : NULL);
}

/* 1 when s is a Graph API version: "v", digits, ".", digits. */
static int is_version(const char *s)
{
	size_t i = 1, d;

	if (s[0] != 'v')
		return 0;
	for (d = 0; s[i] >= '0' && s[i] <= '9'; i++)
		d++;
	if (!d || d > 3 || s[i++] != '.')
		return 0;
	for (d = 0; s[i] >= '0' && s[i] <= '9'; i++)
		d++;
	return d && d <= 3 && !s[i];
}

/* A new wamid for a message to or from phone, shaped like Meta's: "wamid."
 * and the standard base64 of 0x1c 0x18 <len> <phone> 0x15 0x02 0x00 0x11
 * 0x18 0x12, 18 uppercase hex digits (a sequence number and random bits)
 * and 0x00; the base64 may hold "+", "/" and "=" as Meta's do. Unique
 * within the process while seq does not wrap. Returns 0 or -1 (no
 * randomness). */
static int wamid_new(uint32_t seq, const char *phone, char out[WAMID_LEN])
{
	unsigned char raw[2 + 1 + PHONE_MAX + 6 + 18 + 1], rnd[5];
	size_t n = strlen(phone), at = 0;
	char hex[19];

	if (n > PHONE_MAX || crypto_random(rnd, sizeof rnd) < 0)
		return -1;
	snprintf(hex, sizeof hex, "%08X%02X%02X%02X%02X%02X", (unsigned)seq, rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4]);
	raw[at++] = 0x1c;
	raw[at++] = 0x18;
	raw[at++] = (unsigned char)n;
	memcpy(raw + at, phone, n);
	at += n;
	memcpy(raw + at, "\x15\x02\x00\x11\x18\x12", 6);
	at += 6;
	memcpy(raw + at, hex, 18);
	at += 18;
	raw[at++] = 0x00;
	memcpy(out, "wamid.", 6);
	crypto_b64_encode(raw, at, out + 6);
	return 0;
}

/* The next wamid of ws for phone (see wamid_new). */
static int wamid_next(struct wa_sim *ws, const char *phone, char out[WAMID_LEN])
{
	uint32_t seq;

	pthread_mutex_lock(&ws->mu);
	seq = ++ws->seq;
	pthread_mutex_unlock(&ws->mu);
	return wamid_new(seq, phone, out);
}

/* Serialises a callback payload the way Meta does: compact, non-ASCII as
 * six-character \u escapes (\u00e9), "/" as "\/". Consumes v. Returns malloc'ed text or NULL. */
static char *dump_meta(json_t *v)
{
	char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ESCAPE_SLASH) : NULL;

	json_decref(v);
	return s;
}

/* Meta's webhook envelope around one change of field "messages" whose value
 * is {"messaging_product", "metadata"} followed by the keys of rest
 * (consumed). NULL when out of memory. */
static json_t *envelope(const char *pnid, json_t *rest)
{
	json_t *value = json_pack("{s:s, s:{s:s, s:s}}", "messaging_product", "whatsapp",
				  "metadata", "display_phone_number", pnid, "phone_number_id", pnid);

	if (!value || !rest || json_object_update(value, rest) < 0) {
		json_decref(value);
		json_decref(rest);
		return NULL;
	}
	json_decref(rest);
	return json_pack("{s:s, s:[{s:s, s:[{s:s, s:o}]}]}", "object", "whatsapp_business_account",
			 "entry", "id", WABA_ID, "changes", "field", "messages", "value", value);
}

/* A status callback's payload: one status of wamid (sent to `to`) at
 * Unix time secs, with errors (borrowed, may be NULL) as its "errors". */
static char *status_payload(const char *pnid, const char *wamid, const char *to, const char *status,
			    long long secs, json_t *errors)
{
	char ts[24];
	json_t *st;

	snprintf(ts, sizeof ts, "%lld", secs);
	st = json_pack("{s:s, s:s, s:s, s:s}", "id", wamid, "status", status, "timestamp", ts,
		       "recipient_id", to);
	if (st && errors && json_object_set(st, "errors", errors) < 0) {
		json_decref(st);
		st = NULL;
	}
	return dump_meta(envelope(pnid, st ? json_pack("{s:[o]}", "statuses", st) : NULL));
}

/* The errors of a "failed" status for a --fail-status-to number (the
 * 24-hour window closed), a new reference. */
static json_t *reengagement_errors(void)
{
	return json_pack("[{s:i, s:s, s:s, s:{s:s}}]", "code", 131047, "title",
			 "Re-engagement message", "message", "Re-engagement message", "error_data",
			 "details",
			 "Message failed to send because more than 24 hours have passed since the "
			 "customer last replied to this number.");
}

/* The value of X-Hub-Signature-256 for body as mode asks: under secret
 * (SIG_GOOD), a well-formed but wrong one (SIG_BAD: one bit flipped), or
 * under another secret (SIG_OTHER). Fills header with the whole header
 * line. */
static void sign(enum sig_mode mode, const char *secret, const char *body, size_t len,
		 char header[SIG_HEADER_LEN])
{
	unsigned char mac[CRYPTO_SHA256_LEN];
	char hex[2 * CRYPTO_SHA256_LEN + 1];
	char *other = NULL;

	if (mode == SIG_OTHER && asprintf(&other, "%s%s", OTHER_SECRET_PREFIX, secret) < 0)
		other = NULL;
	if (mode == SIG_OTHER)
		crypto_hmac_sha256(other ? other : OTHER_SECRET_PREFIX,
				   strlen(other ? other : OTHER_SECRET_PREFIX), body, len, mac);
	else
		crypto_hmac_sha256(secret, strlen(secret), body, len, mac);
	if (mode == SIG_BAD)
		mac[0] ^= 0x80;
	crypto_hex(mac, sizeof mac, hex);
	snprintf(header, SIG_HEADER_LEN, "X-Hub-Signature-256: sha256=%s", hex);
	free(other);
}

/* POSTs body to url as Meta posts a webhook (JSON, signed per mode, user
 * agent facebookexternalua) and waits for the answer. Returns the HTTP
 * status, or 0 when none came (why in errmsg). */
static long post_callback(const char *url, const char *secret, enum sig_mode mode, const char *body,
			  char errmsg[160])
{
	char sig[SIG_HEADER_LEN];
	const char *hdrs[4] = {"Content-Type: application/json", "User-Agent: facebookexternalua",
			       NULL, NULL};
	struct httpc_request r;
	long status = 0;

	memset(&r, 0, sizeof r);
	if (mode != SIG_NONE) {
		sign(mode, secret, body, strlen(body), sig);
		hdrs[2] = sig;
	}
	r.method = "POST";
	r.url = url;
	r.body = body;
	r.body_len = strlen(body);
	r.headers = hdrs;
	r.timeout_ms = CALLBACK_TIMEOUT_MS;
	r.max_response = CALLBACK_MAX_RESPONSE;
	errmsg[0] = '\0';
	if (httpc_perform(&r, 1) < 0 || r.error != HTTPC_OK)
		snprintf(errmsg, 160, "%s", r.errmsg[0] ? r.errmsg : "request failed");
	else
		status = r.status;
	buf_free(&r.response);
	return status;
}

/* Appends one callback to GET /callbacks (while there is room). */
static void record_callback(struct wa_sim *ws, const char *kind, const char *wamid,
			    const char *status, enum sig_mode mode, long http_status,
			    const char *errmsg)
{
	static const char *const sig_names[] = {"good", "bad", "none", "other-secret"};
	char at[CLOCK_RFC3339_LEN];
	json_t *rec;

	clock_format_ms(clock_now_ms(), at);
	rec = json_pack("{s:s, s:s, s:s*, s:s, s:i, s:s*, s:s}", "kind", kind, "wamid", wamid,
			"status", status, "signature", sig_names[mode], "http_status",
			(int)http_status, "error", errmsg && *errmsg ? errmsg : NULL, "at", at);
	pthread_mutex_lock(&ws->mu);
	if (rec && json_array_size(ws->callbacks) < MAX_RECORDS)
		json_array_append(ws->callbacks, rec);
	pthread_mutex_unlock(&ws->mu);
	json_decref(rec);
	if (http_status)
		log_msg(LOG_INFO, "callback", "%s %s %s: HTTP %ld", kind, status ? status : "",
			wamid, http_status);
	else
		log_msg(LOG_WARN, "callback", "%s %s %s: no answer: %s", kind, status ? status : "",
			wamid, errmsg ? errmsg : "");
}

/* Copies the webhook target. Returns 0 with *url and *secret (free()), 1
 * when none is configured, -1 when out of memory. */
static int target_get(struct wa_sim *ws, char **url, char **secret)
{
	int rc = 1;

	*url = *secret = NULL;
	pthread_mutex_lock(&ws->mu);
	if (ws->webhook_url) {
		*url = strdup(ws->webhook_url);
		*secret = strdup(ws->app_secret);
		rc = *url && *secret ? 0 : -1;
	}
	pthread_mutex_unlock(&ws->mu);
	if (rc < 0) {
		free(*url);
		free(*secret);
		*url = *secret = NULL;
	}
	return rc;
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	free(j->url);
	free(j->secret);
	free(j);
}

/* Queues one status callback due at due_ms, after every job due no later,
 * and wakes the status thread. Caller holds ws->mu; url and secret are
 * the target (copied). Returns 0 or -1 (out of memory). */
static int job_queue(struct wa_sim *ws, int64_t due_ms, const char *status, const char *pnid,
		     const char *to, const char *wamid)
{
	struct job *j = calloc(1, sizeof *j), **p;

	if (!j)
		return -1;
	j->url = strdup(ws->webhook_url);
	j->secret = strdup(ws->app_secret);
	if (!j->url || !j->secret) {
		job_free(j);
		return -1;
	}
	j->due_ms = due_ms;
	j->status = status;
	snprintf(j->pnid, sizeof j->pnid, "%s", pnid);
	snprintf(j->to, sizeof j->to, "%s", to);
	snprintf(j->wamid, sizeof j->wamid, "%s", wamid);
	for (p = &ws->jobs; *p && (*p)->due_ms <= due_ms; p = &(*p)->next)
		;
	j->next = *p;
	*p = j;
	pthread_cond_signal(&ws->wake);
	return 0;
}

/* Posts one automatic status callback. */
static void job_run(struct wa_sim *ws, struct job *j)
{
	json_t *errors = !strcmp(j->status, "failed") ? reengagement_errors() : NULL;
	char *body =
		status_payload(j->pnid, j->wamid, j->to, j->status, clock_now_ms() / 1000, errors);
	char errmsg[160];
	long st;

	json_decref(errors);
	if (!body) {
		log_msg(LOG_ERROR, "callback", "status %s %s: out of memory", j->status, j->wamid);
		return;
	}
	st = post_callback(j->url, j->secret, SIG_GOOD, body, errmsg);
	record_callback(ws, "status", j->wamid, j->status, SIG_GOOD, st, errmsg);
	free(body);
}

/* The status thread: posts queued jobs when they fall due, one at a time
 * (so a send's "sent" always precedes its final status), until stopping;
 * jobs still queued then are dropped. */
static void *status_main(void *arg)
{
	struct wa_sim *ws = arg;
	struct timespec ts;
	struct job *j;
	int64_t wait_ms;
	int dropped = 0;

	pthread_mutex_lock(&ws->mu);
	while (!ws->stopping) {
		j = ws->jobs;
		if (!j) {
			pthread_cond_wait(&ws->wake, &ws->mu);
			continue;
		}
		wait_ms = j->due_ms - clock_mono_ms();
		if (wait_ms > 0) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)(wait_ms / 1000);
			ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&ws->wake, &ws->mu, &ts);
			continue;
		}
		ws->jobs = j->next;
		pthread_mutex_unlock(&ws->mu);
		job_run(ws, j);
		job_free(j);
		pthread_mutex_lock(&ws->mu);
	}
	while ((j = ws->jobs)) {
		ws->jobs = j->next;
		job_free(j);
		dropped++;
	}
	pthread_mutex_unlock(&ws->mu);
	if (dropped)
		log_msg(LOG_INFO, "shutdown", "dropped %d status callbacks not yet due", dropped);
	return NULL;
}

/* 1 when the request carries the bearer token sends need: any non-empty
 * one, or exactly --access-token when given. */
static int bearer_ok(struct wa_sim *ws, struct request *req)
{
	const char *h = http_header(req, "Authorization"), *tok;
	size_t n;

	if (!h || strncasecmp(h, "Bearer ", 7))
		return 0;
	for (tok = h + 7; *tok == ' '; tok++)
		;
	n = strlen(tok);
	while (n && tok[n - 1] == ' ')
		n--;
	if (!n)
		return 0;
	if (!ws->o->access_token)
		return 1;
	return n == strlen(ws->o->access_token) && crypto_equal(tok, ws->o->access_token, n);
}

/* 1 when s is a non-empty string of at most max code points. */
static int short_string(json_t *s, size_t max)
{
	size_t cp;

	return json_is_string(s) && json_string_length(s) &&
	       validate_utf8_len(json_string_value(s), &cp) == 0 && cp <= max;
}

/* Checks a send's body as the Cloud API would (the parts revopsd uses).
 * Returns NULL when it is acceptable, else the Graph error message. */
static const char *send_problem(json_t *body)
{
	json_t *to = json_object_get(body, "to"), *type = json_object_get(body, "type");
	json_t *rt = json_object_get(body, "recipient_type"), *t, *lang;
	const char *ty;

	if (!json_is_string(json_object_get(body, "messaging_product")) ||
	    strcmp(json_string_value(json_object_get(body, "messaging_product")), "whatsapp"))
		return "(#100) The parameter messaging_product is required and must be \"whatsapp\".";
	if (rt && (!json_is_string(rt) || strcmp(json_string_value(rt), "individual")))
		return "(#100) Param recipient_type must be \"individual\".";
	if (!json_is_string(to) || !is_phone(json_string_value(to)))
		return "(#100) Param to must be a phone number of 8 to 15 digits.";
	if (!json_is_string(type))
		return "(#100) The parameter type is required.";
	ty = json_string_value(type);
	if (!strcmp(ty, "text")) {
		t = json_object_get(body, "text");
		if (!json_is_object(t) || !short_string(json_object_get(t, "body"), SEND_TEXT_MAX))
			return "(#100) Param text['body'] must be a non-empty string of at most "
			       "4096 characters.";
		return NULL;
	}
	if (!strcmp(ty, "template")) {
		t = json_object_get(body, "template");
		if (!json_is_object(t) ||
		    !short_string(json_object_get(t, "name"), TEMPLATE_NAME_MAX))
			return "(#100) Param template['name'] is required.";
		lang = json_object_get(t, "language");
		if (!json_is_object(lang) ||
		    !short_string(json_object_get(lang, "code"), LANG_CODE_MAX))
			return "(#100) Param template['language']['code'] is required.";
		if (json_object_get(t, "components") &&
		    !json_is_array(json_object_get(t, "components")))
			return "(#100) Param template['components'] must be an array.";
		return NULL;
	}
	return "(#100) Param type must be one of {TEXT, TEMPLATE}.";
}

/* The send call. In order: --latency-ms, the bearer token (401 #190),
 * the version, the body (400 #100), --fail-first (503 #2, transient),
 * --reject-to (400 #131026), room for the record (503); then the send is
 * recorded, its status callbacks queued and 200 answered. */
static void handle_send(struct wa_sim *ws, struct request *req, struct response *res,
			const struct route_match *m)
{
	const char *pnid = m->params[1], *to, *problem;
	char wamid[WAMID_LEN], at[CLOCK_RFC3339_LEN];
	json_t *body = NULL, *rec = NULL;
	int64_t now;
	struct buf err;
	int fail, rc;

	buf_init(&err, 512);
	if (ws->o->latency_ms > 0)
		sim_sleep_ms(ws->o->latency_ms);
	if (!bearer_ok(ws, req)) {
		reply_graph(res, 401, "Invalid OAuth access token.", 190, 0);
		goto out;
	}
	if (!is_version(m->params[0])) {
		reply_graph(res, 400, "Unknown path components: the version must be like v21.0",
			    100, 0);
		goto out;
	}
	if (!sim_is_json(http_header(req, "Content-Type"))) {
		reply_graph(res, 400, "(#100) The request body must be application/json.", 100, 0);
		goto out;
	}
	rc = validate_parse_body(req->body.data, req->body.len, &body, &err);
	if (rc < 0) {
		reply_graph(res, rc == -1 ? 400 : 500,
			    rc == -1 && err.data ? err.data : "out of memory", 100, 0);
		goto out;
	}
	problem = send_problem(body);
	if (problem) {
		reply_graph(res, 400, problem, 100, 0);
		goto out;
	}
	to = json_string_value(json_object_get(body, "to"));
	if (wamid_next(ws, to, wamid) < 0) {
		reply_graph(res, 500, "no randomness for a message id", 1, 0);
		goto out;
	}
	now = clock_now_ms();
	clock_format_ms(now, at);
	rec = json_pack("{s:s, s:s, s:O, s:s, s:s}", "phone_number_id", pnid, "to", to, "body",
			body, "wamid", wamid, "at", at);
	if (!rec) {
		reply_graph(res, 500, "out of memory", 1, 0);
		goto out;
	}
	pthread_mutex_lock(&ws->mu);
	fail = ws->fail_left > 0 ? 503 : json_object_get(ws->o->reject_to, to) ? 400 : 0;
	if (fail == 503)
		ws->fail_left--;
	else if (!fail &&
		 (json_array_size(ws->sent) >= MAX_RECORDS || json_array_append(ws->sent, rec) < 0))
		fail = 1; /* no room left */
	if (!fail && ws->webhook_url && ws->o->auto_status) {
		int64_t due = clock_mono_ms() + ws->o->status_delay_ms;

		if (job_queue(ws, due, "sent", pnid, to, wamid) < 0 ||
		    job_queue(ws, due + ws->o->status_delay_ms,
			      json_object_get(ws->o->fail_status, to) ? "failed" : "delivered",
			      pnid, to, wamid) < 0)
			log_msg(LOG_ERROR, "callback", "out of memory queueing statuses of %s",
				wamid);
	}
	pthread_mutex_unlock(&ws->mu);
	if (fail == 503)
		reply_graph(res, 503, "Service temporarily unavailable", 2, 1);
	else if (fail == 400)
		reply_graph(res, 400, "(#131026) Message undeliverable", 131026, 0);
	else if (fail)
		reply_graph(res, 503, "wa-sim: the record of sends is full", 2, 0);
	else
		sim_reply(res, 200,
			  json_pack("{s:s, s:[{s:s, s:s}], s:[{s:s}]}", "messaging_product",
				    "whatsapp", "contacts", "input", to, "wa_id", to, "messages",
				    "id", wamid));
out:
	json_decref(rec);
	json_decref(body);
	buf_free(&err);
}

/* Parses a control body and checks it against spec. Returns the object,
 * or NULL after answering 400 (the first problem as the message, every
 * one in "details") or 500. */
static json_t *control_body(struct request *req, struct response *res, const struct vfield *spec)
{
	json_t *body = NULL, *details = NULL, *d;
	struct buf err, msg;
	int rc;

	buf_init(&err, 512);
	buf_init(&msg, 1024);
	rc = validate_parse_body(req->body.data, req->body.len, &body, &err);
	if (rc < 0) {
		sim_reply_error(res, rc == -1 ? 400 : 500,
				rc == -1 && err.data ? err.data : "out of memory");
		goto out;
	}
	details = json_array();
	if (!details) {
		sim_reply_error(res, 500, "out of memory");
		goto fail;
	}
	if (validate_object(body, spec, "", details) == 0)
		goto out;
	d = json_array_get(details, 0);
	if (buf_printf(&msg, "%s %s", d ? json_string_value(json_object_get(d, "field")) : "body",
		       d ? json_string_value(json_object_get(d, "issue")) : "is invalid") < 0)
		sim_reply_error(res, 400, "invalid body");
	else
		sim_reply(res, 400, json_pack("{s:s, s:O}", "error", msg.data, "details", details));
fail:
	json_decref(body);
	body = NULL;
out:
	json_decref(details);
	buf_free(&err);
	buf_free(&msg);
	return body;
}

/* Parses the "signature" field (absent: good). Returns 0 or -1. */
static int sig_mode_of(json_t *v, enum sig_mode *mode)
{
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;

	*mode = SIG_GOOD;
	if (!v || (s && !strcmp(s, "good")))
		return 0;
	if (!s)
		return -1;
	if (!strcmp(s, "bad"))
		*mode = SIG_BAD;
	else if (!strcmp(s, "none"))
		*mode = SIG_NONE;
	else if (!strcmp(s, "other-secret"))
		*mode = SIG_OTHER;
	else
		return -1;
	return 0;
}

/* Parses "repeat" (absent: 1) into 1..MAX_REPEAT. Returns 0 or -1. */
static int repeat_of(json_t *v, int *n)
{
	*n = 1;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > MAX_REPEAT)
		return -1;
	*n = (int)json_integer_value(v);
	return 0;
}

/* Parses "timestamp" (absent: now): Unix seconds as an integer or a
 * string of digits. Returns 0 or -1. */
static int timestamp_of(json_t *v, long long *secs)
{
	const char *s;
	size_t i;

	*secs = clock_now_ms() / 1000;
	if (!v)
		return 0;
	if (json_is_integer(v)) {
		*secs = json_integer_value(v);
		return *secs >= 0 && *secs < 100000000000LL ? 0 : -1;
	}
	if (!json_is_string(v))
		return -1;
	s = json_string_value(v);
	for (i = 0; s[i]; i++) {
		if (s[i] < '0' || s[i] > '9' || i >= 11)
			return -1;
	}
	if (!i)
		return -1;
	*secs = strtoll(s, NULL, 10);
	return 0;
}

/* POSTs body to the target `repeat` times in a row (as Meta retries),
 * recording each. Returns the array of HTTP statuses (0: no answer), or
 * NULL when out of memory. */
static json_t *post_repeated(struct wa_sim *ws, const char *url, const char *secret,
			     enum sig_mode mode, const char *body, int repeat, const char *kind,
			     const char *wamid, const char *status)
{
	json_t *statuses = json_array();
	char errmsg[160];
	long st;
	int i;

	for (i = 0; statuses && i < repeat; i++) {
		st = post_callback(url, secret, mode, body, errmsg);
		record_callback(ws, kind, wamid, status, mode, st, errmsg);
		if (json_array_append_new(statuses, json_integer(st)) < 0) {
			json_decref(statuses);
			statuses = NULL;
		}
	}
	return statuses;
}

static const struct vfield config_spec[] = {
	{.name = "webhook_url", .type = V_STRING, .nullable = 1, .max = URL_MAX},
	{.name = "app_secret", .type = V_STRING, .nullable = 1, .max = SECRET_MAX},
	{0},
};

/* POST /control/config: each key given replaces its setting; a null or
 * empty webhook_url removes the target, a null app_secret means "". */
static void handle_config(struct wa_sim *ws, struct request *req, struct response *res)
{
	json_t *body = control_body(req, res, config_spec), *u, *s;
	char *url = NULL, *secret = NULL;
	const char *uv;

	if (!body)
		return;
	u = json_object_get(body, "webhook_url");
	s = json_object_get(body, "app_secret");
	uv = json_is_string(u) ? json_string_value(u) : "";
	if (*uv && strncmp(uv, "http://", 7) && strncmp(uv, "https://", 8)) {
		sim_reply_error(res, 400, "webhook_url must be an http:// or https:// URL");
		goto out;
	}
	if ((u && *uv && !(url = strdup(uv))) ||
	    (s && !(secret = strdup(json_is_string(s) ? json_string_value(s) : "")))) {
		sim_reply_error(res, 500, "out of memory");
		goto out;
	}
	pthread_mutex_lock(&ws->mu);
	if (u) {
		free(ws->webhook_url);
		ws->webhook_url = url;
		url = NULL;
	}
	if (s) {
		free(ws->app_secret);
		ws->app_secret = secret;
		secret = NULL;
	}
	pthread_mutex_unlock(&ws->mu);
	log_msg(LOG_INFO, "config", "webhook target %s%s", u ? (*uv ? uv : "removed") : "unchanged",
		s ? ", app secret set" : "");
	sim_reply(res, 200, json_object());
out:
	free(url);
	free(secret);
	json_decref(body);
}

static const struct vfield extra_spec[] = {
	{.name = "from", .type = V_STRING, .required = 1, .max = PHONE_MAX},
	{.name = "text", .type = V_STRING, .required = 1, .max = INBOUND_TEXT_MAX},
	{.name = "id", .type = V_STRING, .max = ID_GIVEN_MAX},
	{.name = "name", .type = V_STRING, .nullable = 1, .max = NAME_MAX_CP},
	{0},
};

static const struct vfield inbound_spec[] = {
	{.name = "phone_number_id", .type = V_STRING, .required = 1, .max = PNID_MAX},
	{.name = "from", .type = V_STRING, .required = 1, .max = PHONE_MAX},
	{.name = "name", .type = V_STRING, .nullable = 1, .max = NAME_MAX_CP},
	{.name = "text", .type = V_STRING, .required = 1, .max = INBOUND_TEXT_MAX},
	{.name = "id", .type = V_STRING, .max = ID_GIVEN_MAX},
	{.name = "timestamp", .type = V_ANY},
	{.name = "signature", .type = V_STRING, .max = 16},
	{.name = "repeat", .type = V_INT},
	{.name = "extra_messages",
	 .type = V_ARRAY,
	 .max = MAX_EXTRA_MESSAGES,
	 .items = V_OBJECT,
	 .item_fields = extra_spec},
	{0},
};

/* Adds one message (and its sender to contacts, once per number) to an
 * inbound payload. m holds "from", "text" and optionally "name" and "id";
 * a missing id is made. The wamid used is appended to ids. Returns 0, or
 * -1 when out of memory. */
static int inbound_add(struct wa_sim *ws, json_t *contacts, json_t *messages, json_t *ids,
		       json_t *m, const char *ts)
{
	const char *from = json_string_value(json_object_get(m, "from"));
	json_t *id = json_object_get(m, "id"), *name = json_object_get(m, "name"), *c;
	char made[WAMID_LEN];
	const char *wamid = made;
	size_t i;
	int known = 0;

	if (id)
		wamid = json_string_value(id);
	else if (wamid_next(ws, from, made) < 0)
		return -1;
	json_array_foreach(contacts, i, c) {
		known |= !strcmp(json_string_value(json_object_get(c, "wa_id")), from);
	}
	if (!known) {
		/* profile first, as Meta writes it; none without a name */
		c = json_is_string(name)
			    ? json_pack("{s:{s:O}, s:s}", "profile", "name", name, "wa_id", from)
			    : json_pack("{s:s}", "wa_id", from);
		if (json_array_append_new(contacts, c) < 0)
			return -1;
	}
	if (json_array_append_new(messages, json_pack("{s:s, s:s, s:s, s:s, s:{s:O}}", "from", from,
						      "id", wamid, "timestamp", ts, "type", "text",
						      "text", "body", json_object_get(m, "text"))) < 0)
		return -1;
	return json_array_append_new(ids, json_string(wamid));
}

/* POST /control/inbound: builds Meta's inbound payload of one text
 * message (and the extra_messages), posts it signed as asked `repeat`
 * times and answers {"wamid", "wamids", "statuses", "body"}; 409 without
 * a target. */
static void handle_inbound(struct wa_sim *ws, struct request *req, struct response *res)
{
	json_t *body = control_body(req, res, inbound_spec), *contacts = NULL, *messages = NULL;
	json_t *ids = NULL, *statuses = NULL, *extra, *m;
	char *url = NULL, *secret = NULL, *payload = NULL, ts[24];
	const char *pnid;
	enum sig_mode mode;
	long long secs;
	size_t i;
	int repeat, rc;

	if (!body)
		return;
	pnid = json_string_value(json_object_get(body, "phone_number_id"));
	extra = json_object_get(body, "extra_messages");
	if (!*pnid) {
		sim_reply_error(res, 400, "phone_number_id must not be empty");
		goto out;
	}
	if (!is_phone(json_string_value(json_object_get(body, "from")))) {
		sim_reply_error(res, 400, "from must be 8 to 15 digits");
		goto out;
	}
	json_array_foreach(extra, i, m) {
		if (!is_phone(json_string_value(json_object_get(m, "from")))) {
			sim_reply_error(res, 400, "extra_messages[].from must be 8 to 15 digits");
			goto out;
		}
	}
	if (sig_mode_of(json_object_get(body, "signature"), &mode) < 0) {
		sim_reply_error(res, 400, "signature must be good, bad, none or other-secret");
		goto out;
	}
	if (repeat_of(json_object_get(body, "repeat"), &repeat) < 0) {
		sim_reply_error(res, 400, "repeat must be an integer from 1 to 100");
		goto out;
	}
	if (timestamp_of(json_object_get(body, "timestamp"), &secs) < 0) {
		sim_reply_error(res, 400, "timestamp must be Unix seconds (an integer or digits)");
		goto out;
	}
	snprintf(ts, sizeof ts, "%lld", secs);
	rc = target_get(ws, &url, &secret);
	if (rc) {
		sim_reply_error(res, rc > 0 ? 409 : 500,
				rc > 0 ? "no webhook target: POST /control/config first"
				       : "out of memory");
		goto out;
	}
	contacts = json_array();
	messages = json_array();
	ids = json_array();
	if (!contacts || !messages || !ids || inbound_add(ws, contacts, messages, ids, body, ts) < 0)
		goto oom;
	json_array_foreach(extra, i, m) {
		if (inbound_add(ws, contacts, messages, ids, m, ts) < 0)
			goto oom;
	}
	payload = dump_meta(
		envelope(pnid, json_pack("{s:O, s:O}", "contacts", contacts, "messages", messages)));
	if (!payload)
		goto oom;
	statuses = post_repeated(ws, url, secret, mode, payload, repeat, "inbound",
				 json_string_value(json_array_get(ids, 0)), NULL);
	if (!statuses)
		goto oom;
	sim_reply(res, 200,
		  json_pack("{s:O, s:O, s:O, s:s}", "wamid", json_array_get(ids, 0), "wamids", ids,
			    "statuses", statuses, "body", payload));
	goto out;
oom:
	sim_reply_error(res, 500, "out of memory");
out:
	free(url);
	free(secret);
	free(payload);
	json_decref(statuses);
	json_decref(ids);
	json_decref(messages);
	json_decref(contacts);
	json_decref(body);
}

static const struct vfield status_spec[] = {
	{.name = "phone_number_id", .type = V_STRING, .required = 1, .max = PNID_MAX},
	{.name = "wamid", .type = V_STRING, .required = 1, .max = ID_GIVEN_MAX},
	{.name = "to", .type = V_STRING, .required = 1, .max = PHONE_MAX},
	{.name = "status", .type = V_STRING, .required = 1, .max = 16},
	{.name = "signature", .type = V_STRING, .max = 16},
	{.name = "errors", .type = V_ARRAY, .max = MAX_STATUS_ERRORS, .items = V_OBJECT},
	{.name = "timestamp", .type = V_ANY},
	{.name = "repeat", .type = V_INT},
	{0},
};

/* POST /control/status: posts one status callback (with the errors
 * given, if any) signed as asked `repeat` times and answers {"statuses",
 * "body"}; 409 without a target. */
static void handle_status(struct wa_sim *ws, struct request *req, struct response *res)
{
	static const char *const known[] = {"sent", "delivered", "read", "failed"};
	json_t *body = control_body(req, res, status_spec), *statuses = NULL;
	char *url = NULL, *secret = NULL, *payload = NULL;
	const char *pnid, *status;
	enum sig_mode mode;
	long long secs;
	size_t k;
	int repeat, rc;

	if (!body)
		return;
	pnid = json_string_value(json_object_get(body, "phone_number_id"));
	status = json_string_value(json_object_get(body, "status"));
	for (k = 0; k < ARRAY_LEN(known) && strcmp(status, known[k]); k++)
		;
	if (k == ARRAY_LEN(known)) {
		sim_reply_error(res, 400, "status must be sent, delivered, read or failed");
		goto out;
	}
	status = known[k];
	if (!*pnid || !json_string_length(json_object_get(body, "wamid"))) {
		sim_reply_error(res, 400, "phone_number_id and wamid must not be empty");
		goto out;
	}
	if (!is_phone(json_string_value(json_object_get(body, "to")))) {
		sim_reply_error(res, 400, "to must be 8 to 15 digits");
		goto out;
	}
	if (sig_mode_of(json_object_get(body, "signature"), &mode) < 0) {
		sim_reply_error(res, 400, "signature must be good, bad, none or other-secret");
		goto out;
	}
	if (repeat_of(json_object_get(body, "repeat"), &repeat) < 0) {
		sim_reply_error(res, 400, "repeat must be an integer from 1 to 100");
		goto out;
	}
	if (timestamp_of(json_object_get(body, "timestamp"), &secs) < 0) {
		sim_reply_error(res, 400, "timestamp must be Unix seconds (an integer or digits)");
		goto out;
	}
	rc = target_get(ws, &url, &secret);
	if (rc) {
		sim_reply_error(res, rc > 0 ? 409 : 500,
				rc > 0 ? "no webhook target: POST /control/config first"
				       : "out of memory");
		goto out;
	}
	payload = status_payload(pnid, json_string_value(json_object_get(body, "wamid")),
				 json_string_value(json_object_get(body, "to")), status, secs,
				 json_object_get(body, "errors"));
	statuses = payload ? post_repeated(ws, url, secret, mode, payload, repeat, "status",
					   json_string_value(json_object_get(body, "wamid")), status)
			   : NULL;
	if (!statuses)
		sim_reply_error(res, 500, "out of memory");
	else
		sim_reply(res, 200, json_pack("{s:O, s:s}", "statuses", statuses, "body", payload));
out:
	free(url);
	free(secret);
	free(payload);
	json_decref(statuses);
	json_decref(body);
}

/* A copy of one of ws's record arrays, taken under its lock. */
static json_t *records_copy(struct wa_sim *ws, json_t *records)
{
	json_t *copy;

	pthread_mutex_lock(&ws->mu);
	copy = json_deep_copy(records);
	pthread_mutex_unlock(&ws->mu);
	return copy;
}

/* Admits one control call that posts a callback synchronously, holding
 * its worker until revopsd answers. A quarter of the workers (at least
 * one, when there are two or more) is kept from them for sends: a
 * receiver that calls the send endpoint before answering its webhook
 * would otherwise find every worker waiting on itself. Returns 0 (call
 * control_leave after), or -1 when the cap is reached. */
static int control_enter(struct wa_sim *ws)
{
	int ok;

	pthread_mutex_lock(&ws->mu);
	ok = ws->control_in_flight < ws->control_max;
	if (ok)
		ws->control_in_flight++;
	pthread_mutex_unlock(&ws->mu);
	return ok ? 0 : -1;
}

static void control_leave(struct wa_sim *ws)
{
	pthread_mutex_lock(&ws->mu);
	ws->control_in_flight--;
	pthread_mutex_unlock(&ws->mu);
}

/* The http_server handler: routes, then answers (always JSON). */
static void handle(void *arg, struct request *req, struct response *res)
{
	struct wa_sim *ws = arg;
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
	case ROUTE_SEND:
		handle_send(ws, req, res, &m);
		break;
	case ROUTE_SENT:
		sim_reply(res, 200, records_copy(ws, ws->sent));
		break;
	case ROUTE_CONFIG:
		handle_config(ws, req, res);
		break;
	case ROUTE_INBOUND:
	case ROUTE_STATUS:
		if (control_enter(ws) < 0) {
			sim_reply_error(res, 503,
					"too many control calls in flight: raise --threads");
			break;
		}
		if (m.route - routes == ROUTE_INBOUND)
			handle_inbound(ws, req, res);
		else
			handle_status(ws, req, res);
		control_leave(ws);
		break;
	case ROUTE_CALLBACKS:
		sim_reply(res, 200, records_copy(ws, ws->callbacks));
		break;
	default:
		sim_reply(res, 200, json_pack("{s:s}", "status", "ok"));
		break;
	}
out:
	buf_free(&allow);
}

/* Asks the status thread to stop and waits for it. */
static void status_stop(struct wa_sim *ws, pthread_t t)
{
	pthread_mutex_lock(&ws->mu);
	ws->stopping = 1;
	pthread_cond_signal(&ws->wake);
	pthread_mutex_unlock(&ws->mu);
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct wa_sim ws;
	struct http_server *srv = NULL;
	struct http_server_opts ho;
	pthread_condattr_t ca;
	pthread_t status_thread;
	sigset_t sigs;
	int rc, sig, httpc_ready = 0, thread_ready = 0, exit_code = 1;

	memset(&ws, 0, sizeof ws);
	o.reject_to = json_object();
	o.fail_status = json_object();
	if (!o.reject_to || !o.fail_status) {
		fputs("wa-sim: out of memory\n", stderr);
		rc = -1;
	} else {
		rc = parse_args(argc, argv, &o);
	}
	if (rc != 0) {
		json_decref(o.reject_to);
		json_decref(o.fail_status);
		return rc > 0 ? 0 : 2;
	}
	log_init(1);
	signals_block(&sigs);

	ws.o = &o;
	ws.fail_left = o.fail_first;
	ws.control_max = o.threads > 1 ? o.threads - (o.threads / 4 > 1 ? o.threads / 4 : 1) : 1;
	pthread_mutex_init(&ws.mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ws.wake, &ca);
	pthread_condattr_destroy(&ca);
	ws.sent = json_array();
	ws.callbacks = json_array();
	ws.app_secret = strdup(o.app_secret ? o.app_secret : "");
	ws.webhook_url = o.webhook_url ? strdup(o.webhook_url) : NULL;
	if (!ws.sent || !ws.callbacks || !ws.app_secret || (o.webhook_url && !ws.webhook_url)) {
		log_msg(LOG_ERROR, "start", "out of memory");
		goto out;
	}
	if (httpc_global_init() < 0) {
		log_msg(LOG_ERROR, "start", "the HTTP client did not initialise");
		goto out;
	}
	httpc_ready = 1;
	if (pthread_create(&status_thread, NULL, status_main, &ws) != 0) {
		log_msg(LOG_ERROR, "start", "cannot start the status thread");
		goto out;
	}
	thread_ready = 1;
	ho = (struct http_server_opts){o.host, o.port,    LISTEN_THREADS, 4096,
				       30,     o.threads, NULL,           {0}};
	if (http_server_start(&ho, handle, &ws, &srv) < 0)
		goto out;
	sim_log_listening(srv, o.host);
	if (ws.webhook_url)
		log_msg(LOG_INFO, "config", "webhook target %s", ws.webhook_url);
	if (o.fail_first || json_object_size(o.reject_to) || json_object_size(o.fail_status) ||
	    o.latency_ms || !o.auto_status)
		log_msg(LOG_INFO, "config",
			"fail first %d, %zu rejected numbers, %zu failing numbers, latency %d ms, "
			"auto status %s",
			o.fail_first, json_object_size(o.reject_to),
			json_object_size(o.fail_status), o.latency_ms, o.auto_status ? "on" : "off");

	sig = signals_wait(&sigs, NULL, NULL);
	log_msg(LOG_INFO, "shutdown", "%s: draining %d requests in flight",
		sig > 0 ? "signal received" : "signal wait failed", http_server_in_flight(srv));
	http_server_drain(srv, DRAIN_MS);
	exit_code = 0;
out:
	http_server_stop(srv);
	if (thread_ready)
		status_stop(&ws, status_thread);
	if (httpc_ready)
		httpc_global_cleanup();
	json_decref(ws.sent);
	json_decref(ws.callbacks);
	free(ws.webhook_url);
	free(ws.app_secret);
	json_decref(o.reject_to);
	json_decref(o.fail_status);
	pthread_cond_destroy(&ws.wake);
	pthread_mutex_destroy(&ws.mu);
	if (exit_code == 0)
		log_msg(LOG_INFO, "shutdown", "stopped cleanly");
	return exit_code;
}
