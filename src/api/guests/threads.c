#include "api/guests/threads.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "api/scope.h"
#include "core/clock.h"
#include "core/validate.h"
#include "guests/threads.h"
#include "guests/whatsapp.h"
#include "identity/auth.h"
#include "portfolio/portfolio.h"
#include "store/store.h"

#define MESSAGES_IN_THREAD 50

static const struct vfield template_spec[] = {
	{"name", V_STRING, 1, 0, 512, NULL, 0, NULL},
	{"language", V_STRING, 1, 0, 15, NULL, 0, NULL},
	{"parameters", V_ARRAY, 0, 0, 20, NULL, V_STRING, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static const struct vfield send_spec[] = {
	{"property_id", V_STRING, 1, 0, 64, NULL, 0, NULL},
	{"template", V_OBJECT, 1, 0, 0, template_spec, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

/* 1 when the request reaches one of the thread's properties. */
static int reaches_thread(struct ctx *c, const json_t *thread)
{
	const json_t *p;
	size_t i;

	json_array_foreach(json_object_get(thread, "properties"), i, p)
		if (scope_reaches(c, json_string_value(p)))
			return 1;
	return 0;
}

/* A thread as the request may see it: its last message left out (null)
 * when it is of a property the request does not reach. Returns t. */
static json_t *narrowed(struct ctx *c, json_t *t)
{
	const json_t *last = json_object_get(t, "last_message");
	const char *prop = json_string_value(json_object_get(last, "property_id"));

	if (t && prop && !scope_reaches(c, prop))
		json_object_set_new(t, "last_message", json_null());
	return t;
}

/* Loads the thread of the path for the request, or answers why not.
 * Returns the thread (owned) or NULL. */
static json_t *visible_thread(struct ctx *c, struct store_tx *tx)
{
	json_t *t = NULL;
	int rc = thread_load(tx, c->p.portfolio_id, ctx_param(c, 0), clock_now_ms(), &t);

	if (rc == 1 && reaches_thread(c, t))
		return narrowed(c, t);
	if (rc < 0)
		respond_store_error(c, rc);
	else if (rc == 0)
		respond_error(c, ERR_NOT_FOUND, NULL, "no guest thread %s", ctx_param(c, 0));
	else
		respond_error(c, ERR_INSUFFICIENT_ROLE, NULL,
			      rc == 2 ? "the guest thread is another portfolio's"
				      : "the guest thread concerns no property of this token");
	json_decref(t);
	return NULL;
}

static json_t *row(struct store_tx *tx, struct store_rows *r, void *arg, char *key, size_t keycap)
{
	snprintf(key, keycap, "%s", thread_row_id(r));
	return narrowed(arg, thread_from_row(tx, r, clock_now_ms()));
}

static void h_list(struct ctx *c)
{
	static const char *const statuses[] = {"open", "escalated"};
	static const char *const booleans[] = {"true", "false"};
	struct thread_filter f = {
		NULL, http_query(c->req, "property_id"), http_query(c->req, "guest"), NULL, NULL,
		0};
	struct scope_page pg;
	struct store_rows *r = NULL;
	int rc;

	if (f.guest && strlen(f.guest) > 254) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL, "guest must be a phone or e-mail");
		return;
	}
	if (scope_query_enum(c, "status", statuses, 2, &f.status) < 0 ||
	    scope_query_enum(c, "escalated", booleans, 2, &f.escalated) < 0 ||
	    scope_list_begin(c, "guest-threads", (const char *[]){f.status, f.guest, f.escalated},
			     3, &pg) < 0)
		return;
	f.props = pg.props;
	f.nprops = pg.nprops;
	/* a thread's guest, properties and last message are reads of their
	 * own: a read transaction, not the page's one statement */
	store_rollback(pg.tx);
	if ((rc = store_begin(c->svc->store, STORE_READ, &pg.tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = thread_list(pg.tx, c->p.portfolio_id, pg.after, &f, pg.limit + 1, &r);
	respond_rows_page(c, pg.tx, rc, r, pg.limit, pg.scope, row, c);
}

/* The first MESSAGES_IN_THREAD messages of thread t the request reaches,
 * into t's "messages" (and "messages_next": where the rest are). */
static int embed_messages(struct ctx *c, struct store_tx *tx, json_t *t)
{
	int nprops, n = 0, rc;
	const char *const *props = scope_props(c, &nprops);
	struct store_rows *r;
	json_t *list = json_array();
	char last[ID_MAX] = "", next[200];

	rc = thread_messages(tx, ctx_param(c, 0), "", props, nprops, MESSAGES_IN_THREAD + 1, &r);
	if (rc != STORE_OK) {
		json_decref(list);
		return rc;
	}
	while ((rc = store_next(r)) == 1 && n++ < MESSAGES_IN_THREAD) {
		snprintf(last, sizeof last, "%s", message_row_id(r));
		json_array_append_new(list, message_from_row(r));
	}
	store_rows_close(r);
	snprintf(next, sizeof next, "/v2/guest-threads/%s/messages?after=%s", ctx_param(c, 0), last);
	json_object_set_new(t, "messages", list);
	json_object_set_new(t, "messages_next",
			    n > MESSAGES_IN_THREAD ? json_string(next) : json_null());
	return rc < 0 ? rc : 0;
}

static void h_get(struct ctx *c)
{
	struct store_tx *tx;
	json_t *t;
	int rc = store_begin(c->svc->store, STORE_READ, &tx);

	if (rc != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	if ((t = visible_thread(c, tx)) != NULL) {
		if ((rc = embed_messages(c, tx, t)) < 0) {
			respond_store_error(c, rc);
			json_decref(t);
		} else {
			respond_data(c, 200, t);
		}
	}
	store_rollback(tx);
}

static json_t *message_row(struct store_tx *tx, struct store_rows *r, void *arg, char *key,
			   size_t keycap)
{
	(void)tx;
	(void)arg;
	snprintf(key, keycap, "%s", message_row_id(r));
	return message_from_row(r);
}

static void h_messages(struct ctx *c)
{
	struct scope_page pg;
	struct store_rows *r = NULL;
	const char *after = http_query(c->req, "after");
	json_t *t;
	int rc;

	if (scope_list_begin(c, "guest-thread-messages", (const char *[]){ctx_param(c, 0)}, 1, &pg) <
	    0)
		return;
	store_rollback(pg.tx); /* the thread, then its page: two statements */
	if ((rc = store_begin(c->svc->store, STORE_READ, &pg.tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	if (!(t = visible_thread(c, pg.tx))) {
		store_rollback(pg.tx);
		return;
	}
	json_decref(t);
	if (after && !pg.after[0])
		snprintf(pg.after, sizeof pg.after, "%s", after);
	rc = thread_messages(pg.tx, ctx_param(c, 0), pg.after, pg.props, pg.nprops, pg.limit + 1, &r);
	respond_rows_page(c, pg.tx, rc, r, pg.limit, pg.scope, message_row, NULL);
}

/* Queues the template message of the body to the thread's guest from
 * property, in tx. Returns 0 with the message in *out, or -1 after
 * answering (a store error included). */
static int queue_send(struct ctx *c, struct store_tx *tx, const char *property, json_t **out)
{
	char phone[GUEST_PHONE_MAX], actor[ID_MAX + 8];
	char *tpl = json_dumps(json_object_get(c->body, "template"), JSON_COMPACT | JSON_SORT_KEYS);
	struct guest_msg_outcome o;
	struct guest_msg m;
	const char *tier;
	int rc = tpl ? whatsapp_channel_exists(tx, property) : STORE_ERR;

	*out = NULL;
	if (rc == 0)
		respond_error(c, ERR_VALIDATION_FAILED,
			      json_pack("[{s:s, s:s}]", "field", "property_id", "issue",
					"has no WhatsApp channel (revopsctl whatsapp set)"),
			      "the property has no WhatsApp channel");
	if (rc == 1 && (rc = thread_phone(tx, ctx_param(c, 0), phone)) == 0)
		respond_error(c, ERR_CONFLICT, NULL, "the guest has no phone number to write to");
	if (rc == 1)
		rc = portfolio_sla_tier(tx, c->p.portfolio_id, &tier);
	if (rc == 1) {
		scope_actor(c, actor, sizeof actor);
		m = (struct guest_msg){property, "whatsapp", NULL,          NULL,     0,
				       phone,    NULL,       NULL,          "queued", tpl,
				       actor,    phone,      clock_now_ms()};
		rc = guest_message_record(tx, c->p.portfolio_id, tier, &m, clock_now_ms(), &o);
		if (rc == 0 && (rc = message_load(tx, o.message_id, out)) == 0)
			rc = STORE_ERR;
	}
	free(tpl);
	if (rc < 0)
		respond_store_error(c, rc);
	return rc == 1 ? 0 : -1;
}

/* 1 when the template's language is a code such as en_US or pl. */
static int language_code(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	for (size_t i = 0; i < n; i++)
		if (!isalpha((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
			return 0;
	return n >= 2;
}

/* POST: a template message to the guest, sent by the worker: 202 with
 * the queued message. */
static void h_send(struct ctx *c)
{
	const char *prop = json_string_value(json_object_get(c->body, "property_id"));
	const json_t *tpl = json_object_get(c->body, "template");
	struct store_tx *tx;
	json_t *t, *msg = NULL;
	int rc;

	if (validate_blank(json_string_value(json_object_get(tpl, "name"))) ||
	    !language_code(json_string_value(json_object_get(tpl, "language")))) {
		respond_error(c, ERR_VALIDATION_FAILED,
			      json_pack("[{s:s, s:s}]", "field", "template", "issue",
					"needs a name and a language code such as en_US"),
			      "the template is not valid");
		return;
	}
	if (!scope_reaches(c, prop)) {
		respond_error(c, ERR_INSUFFICIENT_ROLE,
			      json_pack("[{s:s, s:s}]", "field", "property_id", "issue",
					"is outside this token"),
			      "property_id is outside this token");
		return;
	}
	if ((rc = store_begin(c->svc->store, STORE_WRITE, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	/* the thread first: another portfolio's or out of reach is 403,
	 * whatever the body says */
	if ((t = visible_thread(c, tx)) == NULL) {
		store_rollback(tx);
		return;
	}
	json_decref(t);
	if ((rc = portfolio_has_property(tx, c->p.portfolio_id, prop)) == 0)
		respond_error(c, ERR_VALIDATION_FAILED,
			      json_pack("[{s:s, s:s}]", "field", "property_id", "issue",
					"is not a property of this portfolio"),
			      "property_id is not a property of this portfolio");
	else if (rc < 0)
		respond_store_error(c, rc);
	else if (queue_send(c, tx, prop, &msg) == 0) {
		if ((rc = store_commit(tx)) == STORE_OK)
			respond_data(c, 202, msg);
		else
			respond_store_error(c, rc);
		return;
	}
	store_rollback(tx);
}

static const struct route routes[] = {
	ROUTE_V2("GET", "/v2/guest-threads", h_list, AUTH_SCOPE_GUEST_THREADS_READ),
	ROUTE_V2("GET", "/v2/guest-threads/{id}", h_get, AUTH_SCOPE_GUEST_THREADS_READ),
	ROUTE_V2("GET", "/v2/guest-threads/{id}/messages", h_messages, AUTH_SCOPE_GUEST_THREADS_READ),
	ROUTE_V2_JSON("POST", "/v2/guest-threads/{id}/messages", h_send,
		      AUTH_SCOPE_GUEST_THREADS_WRITE, send_spec),
};
const struct route_table thread_routes = ROUTE_TABLE(routes);
