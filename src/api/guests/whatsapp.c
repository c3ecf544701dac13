#include "api/guests/whatsapp.h"

#include <ctype.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "core/clock.h"
#include "core/log.h"
#include "guests/whatsapp.h"
#include "store/store.h"

#define CHALLENGE_MAX 256

/* 1 when s is a challenge we echo: 1 to CHALLENGE_MAX printable ASCII
 * characters (Meta sends digits). */
static int challenge_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	for (size_t i = 0; i < n; i++)
		if (!isgraph((unsigned char)s[i]))
			return 0;
	return n >= 1 && n <= CHALLENGE_MAX;
}

/* GET: hub.mode=subscribe, hub.verify_token, hub.challenge -> 200 with the
 * challenge as text when the token is a channel's; 403 otherwise. */
static void h_verify(struct ctx *c)
{
	const char *mode = http_query(c->req, "hub.mode"),
		   *token = http_query(c->req, "hub.verify_token");
	const char *challenge = http_query(c->req, "hub.challenge");
	struct store_tx *tx;
	int rc;

	if (!mode || strcmp(mode, "subscribe") || !token || !challenge_ok(challenge)) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL,
			      "expected hub.mode=subscribe, hub.verify_token and hub.challenge");
		return;
	}
	if ((rc = store_begin(c->svc->store, STORE_READ_ONE, &tx)) == STORE_OK) {
		rc = whatsapp_verify_token(tx, token);
		store_rollback(tx);
	}
	if (rc < 0) {
		respond_store_error(c, rc);
		return;
	}
	if (rc == 0) {
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      "hub.verify_token is not the verify token of a WhatsApp channel");
		return;
	}
	buf_reset(&c->res->body);
	if (buf_puts(&c->res->body, challenge) < 0) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		return;
	}
	c->res->status = 200;
	c->res->content_type = "text/plain; charset=utf-8";
}

/* ctx_resume's then: the answer once the call's transaction ended with
 * store status rc. */
static void answer_recorded(struct ctx *c, int rc)
{
	if (rc != STORE_OK)
		respond_store_error(c, rc);
	else
		respond_raw_json(c, 200, json_object());
}

/* whatsapp_record's done, on the recording thread: hands c back. */
static void recorded(void *arg, int rc)
{
	ctx_resume(arg, answer_recorded, rc);
}

/* POST: a notification, answered 200 once recorded (Meta retries
 * anything else), 401 when its signature does not verify (nothing is
 * recorded), 400 when it is not Meta's shape. It runs on the event loop
 * (LANE_LOOP): checked there, then recorded by the group's thread in a
 * transaction shared with the calls beside it, with no thread waiting. */
static void h_notify(struct ctx *c)
{
	const char *sig = http_header(c->req, "X-Hub-Signature-256");
	const struct buf *b = &c->req->body;
	enum whatsapp_result res;
	struct whatsapp_call *call;
	char why[200] = "";
	json_t *doc = json_loadb(b->data ? b->data : "", b->len, JSON_REJECT_DUPLICATES, NULL);
	int rc;

	if (!json_is_object(doc)) {
		json_decref(doc);
		respond_error(c, ERR_REQUEST_MALFORMED, NULL, "the body is not a JSON object");
		return;
	}
	/* The request keeps the tree until it ends, on this loop: the call
	 * holds parts of it, and the group's thread then only drops its
	 * references, so freeing the tree is not on the transaction's path. */
	c->body = doc;
	rc = whatsapp_check(c->svc->whatsapp, c->svc->seal_key, doc, b->data ? b->data : "", b->len,
			    sig, &call, &res, why, sizeof why);
	if (rc != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	if (res == WHATSAPP_BAD_BODY)
		respond_error(c, ERR_VALIDATION_FAILED, NULL, "%s", why);
	else if (res == WHATSAPP_UNSIGNED) {
		log_msg(LOG_WARN, "whatsapp", "webhook call refused from %s: %s", c->req->client,
			why);
		respond_error(c, ERR_UNAUTHENTICATED, NULL, "%s", why);
	} else {
		ctx_defer(c);
		if (whatsapp_record(c->svc->whatsapp, call, recorded, c) < 0)
			recorded(c, STORE_ERR);
	}
}

static const struct route routes[] = {
	ROUTE_PUB("GET", "/channels/whatsapp/webhook", h_verify),
	ROUTE_PUB_LANE("POST", "/channels/whatsapp/webhook", h_notify, LANE_LOOP),
};
const struct route_table whatsapp_routes = ROUTE_TABLE(routes);
