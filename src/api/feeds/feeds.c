#include "api/feeds/feeds.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "api/scope.h"
#include "core/clock.h"
#include "core/currency.h"
#include "core/validate.h"
#include "core/log.h"
#include "events/outbox.h"
#include "feeds/ota.h"
#include "feeds/reputation.h"
#include "feeds/reviews.h"
#include "guests/threads.h"
#include "identity/auth.h"
#include "portfolio/portfolio.h"
#include "portfolio/snapshot.h"
#include "rates/suggestion.h"
#include "store/store.h"

/* How far in the future an observed_at may lie (clock skew). */
#define FUTURE_SKEW_MS (5 * 60 * 1000)

/* What one batch's writes share. */
struct batch {
	struct store_tx *tx;
	const struct portfolio_snapshot *snap; /* may be NULL */
	void *state;                           /* the feed's own (begin), or NULL */
	int64_t now;
	int written; /* items written so far */
	/* A feed that stages its items (write) and writes them at the end
	 * keeps each staged item's result here, in order, to fill then. */
	json_t *staged;
};

/* One feed: its item spec, the checks of an item of a known property, the
 * write of a good one, and optional steps around a batch's writes. */
struct feed {
	const struct vfield *spec;
	void (*check)(const json_t *it, const struct portfolio_property *p, const char *prefix,
		      json_t *details);
	/* Writes it inside b->tx and fills result ("status" and more). */
	int (*write)(struct batch *b, struct ctx *c, const json_t *it,
		     const struct portfolio_property *p, json_t *result);
	int (*begin)(struct batch *b, struct ctx *c); /* before the first item */
	int (*end)(struct batch *b, struct ctx *c);   /* after the last */
	void (*done)(void *state);                    /* frees the state */
	/* STORE_WRITE, or STORE_WRITE_OWN for a feed whose writes take the
	 * writers' turn themselves when they need it (store.h). */
	int mode;
};

static const struct vfield money_spec[] = {
	{"currency", V_STRING, 1, 0, 3, NULL, 0, NULL},
	{"minor_units", V_INT, 1, 0, 0, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static const struct vfield batch_spec[] = {
	{"items", V_ARRAY, 1, 0, FEEDS_MAX_ITEMS, NULL, V_OBJECT, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

/* ------------------------------------------------------------- checks */

static const char *str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static void add(json_t *details, const char *prefix, const char *field, const char *issue)
{
	char path[128];

	snprintf(path, sizeof path, "%s.%s", prefix, field);
	validate_add_detail(details, path, issue);
}

/* A money field: known currency, the property's, a positive amount. */
static void check_money(const json_t *it, const char *field, const struct portfolio_property *p,
			const char *prefix, json_t *details)
{
	const json_t *m = json_object_get(it, field);
	const char *cur = str(m, "currency");
	char f[64], issue[96];

	snprintf(f, sizeof f, "%s.currency", field);
	if (!currency_known(cur)) {
		add(details, prefix, f, "must be an ISO 4217 currency code such as PLN");
	} else if (strcmp(cur, p->currency)) {
		snprintf(issue, sizeof issue, "must be the property's currency, %s", p->currency);
		add(details, prefix, f, issue);
	}
	snprintf(f, sizeof f, "%s.minor_units", field);
	if (json_integer_value(json_object_get(m, "minor_units")) <= 0)
		add(details, prefix, f, "must be a positive integer");
}

static void check_room_and_date(const json_t *it, const char *prefix, json_t *details, int64_t *day)
{
	if (!validate_code(str(it, "room_type_code")))
		add(details, prefix, "room_type_code",
		    "must be a code of letters, digits, '-', '_' or '.'");
	if (!str(it, "date") || clock_parse_date(str(it, "date"), day) < 0)
		add(details, prefix, "date", "must be a date YYYY-MM-DD");
}

/* ---------------------------------------------------- rate suggestions */

static const struct vfield suggestion_spec[] = {
	{"property_id", V_STRING, 1, 0, 64, NULL, 0, NULL},
	{"room_type_code", V_STRING, 1, 0, 32, NULL, 0, NULL},
	{"date", V_STRING, 1, 0, 10, NULL, 0, NULL},
	{"current_rate", V_OBJECT, 1, 0, 0, money_spec, 0, NULL},
	{"proposed_rate", V_OBJECT, 1, 0, 0, money_spec, 0, NULL},
	{"trigger", V_STRING, 1, 0, 200, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static void suggestion_check(const json_t *it, const struct portfolio_property *p,
			     const char *prefix, json_t *details)
{
	int64_t day = 0;

	check_room_and_date(it, prefix, details, &day);
	if (day && day < clock_now_ms() / 86400000)
		add(details, prefix, "date", "must not be in the past (UTC)");
	check_money(it, "current_rate", p, prefix, details);
	check_money(it, "proposed_rate", p, prefix, details);
	if (validate_blank(str(it, "trigger")))
		add(details, prefix, "trigger", "must not be empty");
}

static int suggestion_write(struct batch *b, struct ctx *c, const json_t *it,
			    const struct portfolio_property *p, json_t *result)
{
	const json_t *cur = json_object_get(it, "current_rate");
	char id[ID_MAX], actor[ID_MAX + 8];
	struct suggestion_new s = {
		p->id,
		str(it, "room_type_code"),
		str(it, "date"),
		p->currency,
		str(it, "trigger"),
		actor,
		json_integer_value(json_object_get(cur, "minor_units")),
		json_integer_value(
			json_object_get(json_object_get(it, "proposed_rate"), "minor_units")),
	};
	struct outbox_later *later = b->state; /* made by the first suggestion */
	int rc;

	scope_actor(c, actor, sizeof actor);
	rc = suggestion_create(b->tx, c->p.portfolio_id, &s, b->now, &later, id);
	b->state = later;
	if (rc == 0) {
		json_object_set_new(result, "status", json_string("created"));
		json_object_set_new(result, "id", json_string(id));
	}
	return rc;
}

/* After the suggestions: their rate.suggested events, in the writers'
 * turn (the rows went in beside other writers). */
static int suggestion_end(struct batch *b, struct ctx *c)
{
	(void)c;
	return outbox_later_append(b->tx, b->state);
}

static void suggestion_done(void *state)
{
	outbox_later_free(state);
}

/* ------------------------------------------------------------ OTA rates */

static const struct vfield ota_spec[] = {
	{"property_id", V_STRING, 1, 0, 64, NULL, 0, NULL},
	{"ota", V_STRING, 1, 0, 32, NULL, 0, NULL},
	{"room_type_code", V_STRING, 1, 0, 32, NULL, 0, NULL},
	{"date", V_STRING, 1, 0, 10, NULL, 0, NULL},
	{"rate", V_OBJECT, 1, 0, 0, money_spec, 0, NULL},
	{"observed_at", V_STRING, 1, 0, 40, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static void ota_check(const json_t *it, const struct portfolio_property *p, const char *prefix,
		      json_t *details)
{
	int64_t day, at;

	check_room_and_date(it, prefix, details, &day);
	if (!validate_code(str(it, "ota")))
		add(details, prefix, "ota",
		    "must name the OTA as a code of letters, digits, '-', '_' or '.' such as "
		    "booking.com");
	check_money(it, "rate", p, prefix, details);
	if (!str(it, "observed_at") || clock_parse_time(str(it, "observed_at"), &at) < 0)
		add(details, prefix, "observed_at",
		    "must be an RFC 3339 date-time such as 2026-11-22T08:00:00Z");
	else if (at > clock_now_ms() + FUTURE_SKEW_MS)
		add(details, prefix, "observed_at", "must not be in the future");
}

static int ota_begin(struct batch *b, struct ctx *c)
{
	struct ota_batch *ob;
	int rc = ota_batch_begin(&ob);

	(void)c;
	b->state = ob;
	return rc;
}

static void ota_done(void *state)
{
	ota_batch_free(state);
}

static int ota_write(struct batch *b, struct ctx *c, const json_t *it,
		     const struct portfolio_property *p, json_t *result)
{
	const json_t *rate = json_object_get(it, "rate");
	struct ota_new o = {p->id,
			    str(it, "ota"),
			    str(it, "room_type_code"),
			    str(it, "date"),
			    p->currency,
			    json_integer_value(json_object_get(rate, "minor_units")),
			    0};

	(void)c;
	if (clock_parse_time(str(it, "observed_at"), &o.observed_at) < 0 ||
	    ota_batch_add(b->state, &o) < 0)
		return STORE_ERR;
	return json_array_append(b->staged, result) ? STORE_ERR : 0;
}

/* After the observations are staged: their writes and results. */
static int ota_end(struct batch *b, struct ctx *c)
{
	const struct ota_outcome *out;
	json_t *res;
	size_t i;
	int rc = ota_batch_end(b->tx, c->p.portfolio_id, b->state, b->now);

	json_array_foreach(b->staged, i, res) {
		if (rc < 0 || !(out = ota_batch_outcome(b->state, (int)i)))
			break;
		json_object_set_new(res, "status", json_string("created"));
		json_object_set_new(res, "parity", json_string(ota_parity_name(out->parity)));
		json_object_set_new(res, "parity_alert_id",
				    out->alert_id[0] ? json_string(out->alert_id) : json_null());
	}
	return rc;
}

/* -------------------------------------------------------------- reviews */

static const struct vfield review_spec[] = {
	{"property_id", V_STRING, 1, 0, 64, NULL, 0, NULL},
	{"source", V_STRING, 1, 0, 32, NULL, 0, NULL},
	{"external_id", V_STRING, 1, 0, 256, NULL, 0, NULL},
	{"rating", V_NUMBER, 1, 0, 0, NULL, 0, NULL},
	{"max_rating", V_INT, 1, 0, 0, NULL, 0, NULL},
	{"language", V_STRING, 1, 0, 35, NULL, 0, NULL},
	{"text", V_STRING, 1, 0, 20000, NULL, 0, NULL},
	{"author", V_STRING, 1, 0, 200, NULL, 0, NULL},
	{"published_at", V_STRING, 1, 0, 40, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

/* A language tag: letters, then "-" and letters or digits (BCP 47's
 * shape, not its registry). */
static int language_tag(const char *s)
{
	size_t i, run = 0;

	if (!s || !isalpha((unsigned char)s[0]))
		return 0;
	for (i = 0; s[i]; i++) {
		if (s[i] == '-') {
			if (!run || !s[i + 1])
				return 0;
			run = 0;
		} else if (!isalnum((unsigned char)s[i]) || ++run > 8) {
			return 0;
		}
	}
	return 1;
}

/* The rating in hundredths. */
static int64_t rating_x100(const json_t *it)
{
	double r = json_number_value(json_object_get(it, "rating"));

	return (int64_t)(r * 100.0 + 0.5);
}

static void review_check(const json_t *it, const struct portfolio_property *p, const char *prefix,
			 json_t *details)
{
	int64_t max = json_integer_value(json_object_get(it, "max_rating")), at;
	double rating = json_number_value(json_object_get(it, "rating"));

	(void)p;
	if (!validate_code(str(it, "source")))
		add(details, prefix, "source",
		    "must name the platform as a code such as google or booking.com");
	if (validate_blank(str(it, "external_id")))
		add(details, prefix, "external_id", "must not be empty");
	if (max < 1 || max > 100)
		add(details, prefix, "max_rating", "must be an integer from 1 to 100");
	else if (rating < 0 || rating > (double)max)
		add(details, prefix, "rating", "must be from 0 to max_rating");
	if (!language_tag(str(it, "language")))
		add(details, prefix, "language", "must be a language tag such as en or pl-PL");
	if (!str(it, "published_at") || clock_parse_time(str(it, "published_at"), &at) < 0)
		add(details, prefix, "published_at",
		    "must be an RFC 3339 date-time such as 2026-11-22T08:00:00Z");
	else if (at > clock_now_ms() + FUTURE_SKEW_MS)
		add(details, prefix, "published_at", "must not be in the future");
}

static void review_done(void *state)
{
	review_batch_free(state);
}

static int review_begin(struct batch *b, struct ctx *c)
{
	struct review_batch *rb;
	int rc = review_batch_begin(b->tx, c->p.portfolio_id, &rb);

	b->state = rb;
	return rc;
}

static int review_write(struct batch *b, struct ctx *c, const json_t *it,
			const struct portfolio_property *p, json_t *result)
{
	struct review_new r = {str(it, "source"),
			       str(it, "external_id"),
			       str(it, "language"),
			       str(it, "text"),
			       str(it, "author"),
			       rating_x100(it),
			       json_integer_value(json_object_get(it, "max_rating")),
			       0};

	(void)c;
	if (clock_parse_time(str(it, "published_at"), &r.published_at) < 0 ||
	    review_batch_add(b->state, p, &r) < 0)
		return STORE_ERR;
	return json_array_append(b->staged, result) ? STORE_ERR : 0;
}

/* The staged reviews' results, once written. */
static void review_results(struct batch *b)
{
	const struct review_outcome *out;
	json_t *res;
	size_t i;

	json_array_foreach(b->staged, i, res) {
		if (!(out = review_batch_outcome(b->state, (int)i)))
			break;
		json_object_set_new(res, "status",
				    json_string(out->duplicate ? "duplicate" : "created"));
		json_object_set_new(res, "id", json_string(out->id));
		json_object_set_new(res, "reply_drafted", json_boolean(out->drafted));
	}
}

/* After the reviews are staged: their writes, then the portfolio's
 * reputation, alerts included. */
static int review_end(struct batch *b, struct ctx *c)
{
	struct portfolio_property *props;
	size_t i;
	int rc = review_batch_end(b->tx, c->p.portfolio_id, b->state, b->now);

	if (rc >= 0)
		review_results(b);
	if (rc <= 0)
		return rc;
	if (!b->snap) {
		log_msg(LOG_WARN, "reputation",
			"portfolio %s has more properties than a snapshot keeps; its reputation is "
			"evaluated by the worker's sweep only",
			c->p.portfolio_id);
		return 0;
	}
	props = calloc(b->snap->n ? b->snap->n : 1, sizeof *props);
	if (!props)
		return STORE_ERR;
	for (i = 0; i < b->snap->n; i++)
		props[i] = b->snap->props[i].p;
	rc = reputation_evaluate(b->tx, c->p.portfolio_id, props, b->snap->n, b->now);
	free(props);
	return rc < 0 ? rc : 0;
}

/* -------------------------------------------------------- guest messages */

static const struct vfield guest_spec[] = {
	{"phone", V_STRING, 0, 1, 32, NULL, 0, NULL},
	{"email", V_STRING, 0, 1, 254, NULL, 0, NULL},
	{"name", V_STRING, 0, 1, 200, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static const struct vfield message_spec[] = {
	{"property_id", V_STRING, 1, 0, 64, NULL, 0, NULL},
	{"channel", V_STRING, 1, 0, 32, NULL, 0, NULL},
	{"direction", V_STRING, 1, 0, 10, NULL, 0, NULL},
	{"guest", V_OBJECT, 1, 0, 0, guest_spec, 0, NULL},
	{"text", V_STRING, 1, 0, GUEST_TEXT_MAX, NULL, 0, NULL},
	{"at", V_STRING, 1, 0, 40, NULL, 0, NULL},
	{"external_id", V_STRING, 1, 0, 256, NULL, 0, NULL},
	{NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

/* An item's guest addresses, normalised (NULL when absent). Returns 0,
 * or -1 when one is malformed or both are absent. */
static int guest_addresses(const json_t *it, char phone[GUEST_PHONE_MAX],
			   char email[GUEST_EMAIL_MAX], const char **p, const char **e)
{
	const json_t *g = json_object_get(it, "guest");
	const char *ph = str(g, "phone"), *em = str(g, "email");

	*p = ph && guest_phone_e164(ph, phone) == 0 ? phone : NULL;
	*e = em && guest_email_norm(em, email) == 0 ? email : NULL;
	return (ph && !*p) || (em && !*e) || (!*p && !*e) ? -1 : 0;
}

static void message_check(const json_t *it, const struct portfolio_property *p, const char *prefix,
			  json_t *details)
{
	const json_t *g = json_object_get(it, "guest");
	const char *dir = str(it, "direction");
	char phone[GUEST_PHONE_MAX], email[GUEST_EMAIL_MAX];
	int64_t at;

	(void)p;
	if (!validate_code(str(it, "channel")))
		add(details, prefix, "channel", "must name the channel as a code such as email");
	else if (!strcasecmp(str(it, "channel"), "whatsapp"))
		add(details, prefix, "channel",
		    "WhatsApp messages come from Meta's webhook (/channels/whatsapp/webhook), not "
		    "this feed");
	if (!dir || (strcmp(dir, "inbound") && strcmp(dir, "outbound")))
		add(details, prefix, "direction", "must be inbound or outbound");
	if (str(g, "phone") && guest_phone_e164(str(g, "phone"), phone) < 0)
		add(details, prefix, "guest.phone",
		    "must be a phone number in international form such as +48600100200");
	if (str(g, "email") && guest_email_norm(str(g, "email"), email) < 0)
		add(details, prefix, "guest.email", "must be an e-mail address");
	if (!str(g, "phone") && !str(g, "email"))
		add(details, prefix, "guest", "must give the guest's phone or e-mail");
	if (validate_blank(str(it, "text")))
		add(details, prefix, "text", "must not be empty");
	if (validate_blank(str(it, "external_id")))
		add(details, prefix, "external_id", "must not be empty");
	if (!str(it, "at") || clock_parse_time(str(it, "at"), &at) < 0)
		add(details, prefix, "at",
		    "must be an RFC 3339 date-time such as 2026-11-22T08:00:00Z");
	else if (at > clock_now_ms() + FUTURE_SKEW_MS)
		add(details, prefix, "at", "must not be in the future");
}

/* The portfolio's escalation keywords and SLA minutes, read once a batch
 * (b->state). */
static int message_begin(struct batch *b, struct ctx *c)
{
	struct guest_rules *r = calloc(1, sizeof *r);

	if (!r)
		return STORE_ERR;
	b->state = r;
	return guest_rules_load(b->tx, c->p.portfolio_id, auth_plan_sla_tier(c->p.plan), r);
}

static void message_done(void *state)
{
	if (state)
		guest_rules_free(state);
	free(state);
}

static int message_write(struct batch *b, struct ctx *c, const json_t *it,
			 const struct portfolio_property *p, json_t *result)
{
	char phone[GUEST_PHONE_MAX], email[GUEST_EMAIL_MAX], actor[ID_MAX + 8];
	int inbound = !strcmp(str(it, "direction"), "inbound");
	struct guest_msg m = {p->id,
			      str(it, "channel"),
			      str(it, "external_id"),
			      str(it, "text"),
			      inbound,
			      NULL,
			      NULL,
			      str(json_object_get(it, "guest"), "name"),
			      inbound ? "received" : "sent",
			      NULL,
			      inbound ? NULL : actor,
			      NULL,
			      0};
	struct guest_msg_outcome out;
	int rc;

	scope_actor(c, actor, sizeof actor);
	if (guest_addresses(it, phone, email, &m.phone, &m.email) < 0 ||
	    clock_parse_time(str(it, "at"), &m.at) < 0)
		return STORE_ERR;
	rc = guest_messages_record(b->tx, c->p.portfolio_id, b->state, &m, 1, b->now, &out, NULL,
				   NULL);
	if (rc == 0) {
		json_object_set_new(result, "status",
				    json_string(out.duplicate ? "duplicate" : "created"));
		json_object_set_new(result, "id", json_string(out.message_id));
		json_object_set_new(result, "thread_id", json_string(out.thread_id));
		json_object_set_new(result, "escalated", json_boolean(out.escalated));
	}
	return rc;
}

/* -------------------------------------------------------------- batches */

/* A rejected item's result. */
static json_t *rejected(size_t i, enum err e, json_t *details, const char *msg)
{
	return json_pack("{s:I, s:s, s:{s:s, s:s, s:o}}", "index", (json_int_t)i, "status",
			 "rejected", "error", "code", err_code(e), "message", msg, "details",
			 details ? details : json_array());
}

/* Finds item i's property (this node's snapshot, else tx) and checks it
 * can be written. Returns 1 (good: *p filled), 0 (results[i] says why) or
 * a negative store status. */
static int admit(struct ctx *c, struct store_tx *tx, const struct portfolio_snapshot *snap,
		 const struct feed *f, const json_t *it, size_t i, struct portfolio_property *p,
		 json_t *results)
{
	const struct portfolio_snap_prop *sp;
	json_t *details = json_array();
	const char *prop = str(it, "property_id"), *issue = NULL;
	char prefix[32], field[64], msg[128];
	int rc = 1;

	snprintf(prefix, sizeof prefix, "items[%zu]", i);
	if (validate_object(it, f->spec, prefix, details)) {
		json_array_set_new(results, i,
				   rejected(i, ERR_VALIDATION_FAILED, details,
					    "the item is not valid"));
		return 0;
	}
	if (!scope_reaches(c, prop))
		issue = "is outside this token";
	else if (snap && (sp = portfolio_snapshot_find(snap, prop)) != NULL)
		*p = sp->p;
	else if ((rc = portfolio_property_get(tx, c->p.portfolio_id, prop, p)) == 0)
		issue = "is not a property of this portfolio";
	if (rc < 0) {
		json_decref(details);
		return rc;
	}
	if (issue) {
		snprintf(field, sizeof field, "%s.property_id", prefix);
		validate_add_detail(details, field, issue);
		snprintf(msg, sizeof msg, "%s %s", field, issue);
		json_array_set_new(results, i, rejected(i, ERR_INSUFFICIENT_ROLE, details, msg));
		return 0;
	}
	f->check(it, p, prefix, details);
	if (json_array_size(details)) {
		json_array_set_new(results, i,
				   rejected(i, ERR_VALIDATION_FAILED, details,
					    "the item is not valid"));
		return 0;
	}
	json_decref(details);
	return 1;
}

/* Admits and writes every item inside tx, filling results. Returns 0 or a
 * negative store status (then nothing is kept). */
static int run_items(struct ctx *c, struct store_tx *tx, const struct feed *f, const json_t *items,
		     json_t *results)
{
	struct batch b = {tx, NULL, NULL, clock_now_ms(), 0, json_array()};
	struct portfolio_property p;
	json_t *it, *res;
	size_t i;
	int rc = b.staged ? portfolio_snapshot_get(c->svc->store, c->p.portfolio_id, &b.snap)
			  : STORE_ERR;

	if (rc >= 0 && f->begin)
		rc = f->begin(&b, c);
	for (i = 0; rc >= 0 && i < json_array_size(items); i++) {
		it = json_array_get(items, i);
		if ((rc = admit(c, tx, b.snap, f, it, i, &p, results)) <= 0)
			continue;
		res = json_pack("{s:I}", "index", (json_int_t)i);
		rc = res ? f->write(&b, c, it, &p, res) : STORE_ERR;
		json_array_set_new(results, i, res);
		b.written++;
	}
	if (rc >= 0 && f->end)
		rc = f->end(&b, c);
	portfolio_snapshot_put(b.snap);
	if (f->done)
		f->done(b.state);
	json_decref(b.staged);
	return rc < 0 ? rc : 0;
}

/* Counts the results by status: {"created": n, "duplicate": n, "rejected": n}. */
static json_t *counts(const json_t *results)
{
	json_int_t created = 0, dup = 0, bad = 0;
	const char *st;
	json_t *r;
	size_t i;

	json_array_foreach(results, i, r) {
		st = str(r, "status");
		created += st && !strcmp(st, "created");
		dup += st && !strcmp(st, "duplicate");
		bad += st && !strcmp(st, "rejected");
	}
	return json_pack("{s:I, s:I, s:I}", "created", created, "duplicate", dup, "rejected", bad);
}

static void feed_run(struct ctx *c, const struct feed *f)
{
	const json_t *items = json_object_get(c->body, "items");
	struct store_tx *tx;
	json_t *results, *data;
	size_t i;
	int rc;

	if (!json_array_size(items)) {
		respond_error(c, ERR_VALIDATION_FAILED,
			      json_pack("[{s:s, s:s}]", "field", "items", "issue",
					"must hold at least one item"),
			      "the batch is empty");
		return;
	}
	results = json_array();
	for (i = 0; i < json_array_size(items); i++)
		json_array_append_new(results, json_null());
	if ((rc = store_begin(c->svc->store, f->mode, &tx)) == STORE_OK)
		rc = store_finish(tx, run_items(c, tx, f, items, results));
	if (rc != STORE_OK) {
		json_decref(results);
		respond_store_error(c, rc);
		return;
	}
	data = counts(results);
	json_object_set_new(data, "results", results);
	respond_data(c, 200, data);
}

/* Suggestions insert beside other writers; their events take the turn. */
static const struct feed suggestion_feed = {suggestion_spec,  suggestion_check,
					    suggestion_write, NULL,
					    suggestion_end,   suggestion_done,
					    STORE_WRITE_OWN};
static const struct feed ota_feed = {ota_spec, ota_check, ota_write,  ota_begin,
				     ota_end,  ota_done,  STORE_WRITE};
static const struct feed message_feed = {message_spec, message_check, message_write, message_begin,
					 NULL,         message_done,  STORE_WRITE};
/* Reviews insert beside other writers; review_batch_end takes the turn. */
static const struct feed review_feed = {review_spec, review_check, review_write,   review_begin,
					review_end,  review_done,  STORE_WRITE_OWN};

static void feeds_h_suggestions(struct ctx *c)
{
	feed_run(c, &suggestion_feed);
}

static void feeds_h_ota(struct ctx *c)
{
	feed_run(c, &ota_feed);
}

static void feeds_h_reviews(struct ctx *c)
{
	feed_run(c, &review_feed);
}

static void feeds_h_messages(struct ctx *c)
{
	feed_run(c, &message_feed);
}

static const struct route routes[] = {
	ROUTE_V2_JSON("POST", "/v2/feeds/rate-suggestions", feeds_h_suggestions,
		      AUTH_SCOPE_FEEDS_WRITE, batch_spec),
	ROUTE_V2_JSON("POST", "/v2/feeds/ota-rates", feeds_h_ota, AUTH_SCOPE_FEEDS_WRITE, batch_spec),
	ROUTE_V2_JSON("POST", "/v2/feeds/reviews", feeds_h_reviews, AUTH_SCOPE_FEEDS_WRITE,
		      batch_spec),
	ROUTE_V2_JSON("POST", "/v2/feeds/guest-messages", feeds_h_messages, AUTH_SCOPE_FEEDS_WRITE,
		      batch_spec),
};
const struct route_table feed_routes = ROUTE_TABLE(routes);
