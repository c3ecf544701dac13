#include "guests/threads.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "events/outbox.h"
#include "guests/keywords.h"
#include "operations/sla.h"
#include "sched/timers.h"
#include "store/store.h"

/* ------------------------------------------------------------ addresses */

int guest_phone_e164(const char *in, char out[GUEST_PHONE_MAX])
{
	size_t n = 0;
	const char *p = in;

	if (!p)
		return -1;
	while (*p == ' ')
		p++;
	if (*p == '+')
		p++;
	else if (p[0] == '0' && p[1] == '0')
		p += 2;
	out[n++] = '+';
	for (; *p; p++) {
		if (isdigit((unsigned char)*p)) {
			if (n >= GUEST_PHONE_MAX - 1)
				return -1;
			out[n++] = *p;
		} else if (!strchr(" .-()", *p)) {
			return -1;
		}
	}
	out[n] = '\0';
	return n >= 9 && out[1] != '0' ? 0 : -1; /* 8 to 15 digits, no leading 0 */
}

int guest_email_norm(const char *in, char out[GUEST_EMAIL_MAX])
{
	const char *at = in ? strchr(in, '@') : NULL;
	size_t n = in ? strlen(in) : 0, i;

	if (!at || at == in || !at[1] || strchr(at + 1, '@') || n >= GUEST_EMAIL_MAX)
		return -1;
	for (i = 0; i < n; i++) {
		if (isspace((unsigned char)in[i]) || (unsigned char)in[i] < 0x20)
			return -1;
		out[i] = (char)tolower((unsigned char)in[i]);
	}
	out[n] = '\0';
	return 0;
}

/* --------------------------------------------------------------- guests */

/* The guest of identity (kind, value), into id. Returns 1, 0 or < 0. */
static int guest_of(struct store_tx *tx, const char *pf, const char *kind, const char *value, char *id)
{
	struct store_rows *r;
	int rc = store_query(tx,
			     "SELECT guest_id FROM guest_identities WHERE portfolio_id = $1 AND kind ="
			     " $2 AND value = $3",
			     (struct store_val[]){sv_text(pf), sv_text(kind), sv_text(value)}, 3, &r);

	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1)
		snprintf(id, ID_MAX, "%s", store_text(r, 0));
	store_rows_close(r);
	return rc;
}

static int add_identity(struct store_tx *tx, const char *pf, const char *kind, const char *value,
			const char *guest)
{
	int rc = store_send(tx,
			    "INSERT INTO guest_identities (portfolio_id, kind, value, guest_id) VALUES"
			    " ($1, $2, $3, $4) ON CONFLICT (portfolio_id, kind, value) DO NOTHING",
			    (struct store_val[]){sv_text(pf), sv_text(kind), sv_text(value),
						 sv_text(guest)},
			    4);

	return rc < 0 ? rc : 0;
}

/* The thread of guest, into id. Returns 1, 0 or < 0. */
static int thread_of(struct store_tx *tx, const char *pf, const char *guest, char *id)
{
	struct store_rows *r;
	int rc = store_query(tx,
			     "SELECT id FROM guest_threads WHERE portfolio_id = $1 AND guest_id = $2",
			     (struct store_val[]){sv_text(pf), sv_text(guest)}, 2, &r);

	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1)
		snprintf(id, ID_MAX, "%s", store_text(r, 0));
	store_rows_close(r);
	return rc;
}

/* Moves thread from's messages and properties into thread to, keeps the
 * earlier wait of the two (to's episode goes on) and deletes from. */
static int fold_thread(struct store_tx *tx, const char *from, const char *to)
{
	int rc = store_exec(tx, "UPDATE guest_messages SET thread_id = $2 WHERE thread_id = $1",
			    (struct store_val[]){sv_text(from), sv_text(to)}, 2);

	if (rc >= 0)
		rc = store_exec(tx,
				"INSERT INTO guest_thread_properties (thread_id, property_id) SELECT"
				" $2, property_id FROM guest_thread_properties WHERE thread_id = $1"
				" ON CONFLICT (thread_id, property_id) DO NOTHING",
				(struct store_val[]){sv_text(from), sv_text(to)}, 2);
	if (rc >= 0)
		rc = store_exec(tx,
				"UPDATE guest_threads SET waiting_since = (SELECT MIN(w) FROM (SELECT"
				" waiting_since AS w FROM guest_threads WHERE id IN ($1, $2)) x),"
				" last_message_at = (SELECT MAX(last_message_at) FROM guest_threads"
				" WHERE id IN ($1, $2)) WHERE id = $2",
				(struct store_val[]){sv_text(from), sv_text(to)}, 2);
	if (rc >= 0)
		rc = store_exec(tx, "DELETE FROM guest_thread_properties WHERE thread_id = $1",
				(struct store_val[]){sv_text(from)}, 1);
	if (rc >= 0)
		rc = timer_cancel(tx, THREAD_TIMER, from);
	if (rc >= 0)
		rc = store_exec(tx, "DELETE FROM guest_threads WHERE id = $1",
				(struct store_val[]){sv_text(from)}, 1);
	return rc < 0 ? rc : 0;
}

/* Merges guest drop into keep: identities, then threads (keep's thread,
 * or drop's renamed when keep has none). */
static int merge(struct store_tx *tx, const char *pf, const char *keep, const char *drop)
{
	char tk[ID_MAX], td[ID_MAX];
	int hk, hd,
		rc = store_exec(tx, "UPDATE guest_identities SET guest_id = $2 WHERE guest_id = $1",
				(struct store_val[]){sv_text(drop), sv_text(keep)}, 2);

	if (rc < 0 || (hk = thread_of(tx, pf, keep, tk)) < 0 || (hd = thread_of(tx, pf, drop, td)) < 0)
		return rc < 0 ? rc : STORE_ERR;
	if (hd == 1 && hk == 1)
		rc = fold_thread(tx, td, tk);
	else if (hd == 1)
		rc = store_exec(tx, "UPDATE guest_threads SET guest_id = $2 WHERE id = $1",
				(struct store_val[]){sv_text(td), sv_text(keep)}, 2);
	if (rc >= 0)
		rc = store_exec(tx, "DELETE FROM guests WHERE id = $1",
				(struct store_val[]){sv_text(drop)}, 1);
	if (rc >= 0)
		log_msg(LOG_INFO, "guests", "guest %s merged into %s (one guest, two addresses)",
			drop, keep);
	return rc < 0 ? rc : 0;
}

/* The guest of m's phone or e-mail (made, or two merged, as needed), into
 * id. Returns 0 or < 0. */
static int find_guest(struct store_tx *tx, const char *pf, const struct guest_msg *m, int64_t now,
		      char *id)
{
	char byphone[ID_MAX] = "", byemail[ID_MAX] = "";
	int rc = m->phone ? guest_of(tx, pf, "phone", m->phone, byphone) : 0;

	if (rc >= 0 && m->email)
		rc = guest_of(tx, pf, "email", m->email, byemail);
	if (rc < 0)
		return rc;
	if (byphone[0] && byemail[0] && strcmp(byphone, byemail)) {
		/* ids are time-ordered: the older guest stays */
		int older = strcmp(byphone, byemail) < 0;

		snprintf(id, ID_MAX, "%s", older ? byphone : byemail);
		rc = merge(tx, pf, id, older ? byemail : byphone);
	} else if (byphone[0] || byemail[0]) {
		snprintf(id, ID_MAX, "%s", byphone[0] ? byphone : byemail);
	} else {
		if (id_new("gst_", id, ID_MAX) < 0)
			return STORE_ERR;
		rc = store_send(tx,
				"INSERT INTO guests (id, portfolio_id, name, created_at, updated_at)"
				" VALUES ($1, $2, $3, $4, $4)",
				(struct store_val[]){sv_text(id), sv_text(pf), sv_text(m->name),
						     sv_int(now)},
				4);
	}
	if (rc >= 0 && m->phone && !byphone[0])
		rc = add_identity(tx, pf, "phone", m->phone, id);
	if (rc >= 0 && m->email && !byemail[0])
		rc = add_identity(tx, pf, "email", m->email, id);
	if (rc >= 0 && m->name && *m->name)
		rc = store_send(tx,
				"UPDATE guests SET name = COALESCE(name, $2), updated_at = $3 WHERE id"
				" = $1",
				(struct store_val[]){sv_text(id), sv_text(m->name), sv_int(now)}, 3);
	return rc < 0 ? rc : 0;
}

/* -------------------------------------------------------------- threads */

/* What a record or an escalation reads of a thread. */
struct wait {
	int waiting; /* an inbound message is unanswered */
	int64_t waiting_since, episode, escalated_episode;
	char guest_id[ID_MAX];
};

static int wait_of(struct store_tx *tx, const char *thread, struct wait *w)
{
	struct store_rows *r;
	int rc = store_query(tx,
			     "SELECT waiting_since, episode, escalated_episode, guest_id FROM"
			     " guest_threads WHERE id = $1",
			     (struct store_val[]){sv_text(thread)}, 1, &r);

	memset(w, 0, sizeof *w);
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1) {
		w->waiting = !store_is_null(r, 0);
		w->waiting_since = w->waiting ? store_int(r, 0) : 0;
		w->episode = store_int(r, 1);
		w->escalated_episode = store_int(r, 2);
		snprintf(w->guest_id, sizeof w->guest_id, "%s", store_text(r, 3));
	}
	store_rows_close(r);
	return rc;
}

/* The thread's property ids, as a JSON array (owned), or NULL. */
static json_t *thread_props(struct store_tx *tx, const char *thread)
{
	struct store_rows *r;
	json_t *a = json_array();
	int rc = a ? store_query(tx,
				 "SELECT property_id FROM guest_thread_properties WHERE thread_id = $1"
				 " ORDER BY property_id",
				 (struct store_val[]){sv_text(thread)}, 1, &r)
		   : STORE_ERR;

	if (rc != STORE_OK) {
		json_decref(a);
		return NULL;
	}
	while ((rc = store_next(r)) == 1)
		json_array_append_new(a, json_string(store_text(r, 0)));
	store_rows_close(r);
	if (rc < 0) {
		json_decref(a);
		return NULL;
	}
	return a;
}

/* Escalates the thread's open wait w now (reason "unanswered" or
 * "keyword", with the keyword) and emits guest.thread.escalated. */
static int escalate(struct store_tx *tx, const char *pf, const char *thread, const struct wait *w,
		    const char *reason, const char *keyword, int64_t now)
{
	json_t *props = thread_props(tx, thread), *data = NULL;
	int rc = props ? store_exec(tx,
				    "UPDATE guest_threads SET status = 'escalated', escalated_episode"
				    " = episode, escalated_at = $2, escalation_reason = $3, updated_at"
				    " = $2 WHERE id = $1",
				    (struct store_val[]){sv_text(thread), sv_int(now),
							 sv_text(reason)},
				    3)
		       : STORE_ERR;

	if (rc >= 0) {
		data = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:I}", "thread_id", thread,
				 "guest_id", w->guest_id, "reason", reason, "keyword",
				 keyword ? json_string(keyword) : json_null(), "waiting_since",
				 jsonw_time(w->waiting_since), "escalated_at", jsonw_time(now),
				 "waited_seconds", (json_int_t)((now - w->waiting_since) / 1000));
		rc = data ? outbox_append(tx, "v2", "guest.thread.escalated", pf, props, data, NULL, 0)
			  : STORE_ERR;
	}
	json_decref(props);
	json_decref(data);
	return rc < 0 ? rc : 0;
}

/* An inbound message of thread at at: starts a wait when none is open
 * (its timer due at the tier's guest_reply_minutes after at), then
 * escalates at once when text holds a keyword of the portfolio. */
static int inbound(struct store_tx *tx, const char *pf, const char *tier, const char *thread,
		   const char *text, int64_t at, int64_t now, int *escalated)
{
	struct sla_settings s;
	struct wait w;
	char keyword[KEYWORD_MAX];
	int rc = wait_of(tx, thread, &w);

	if (rc != 1)
		return rc < 0 ? rc : STORE_ERR;
	if (!w.waiting) {
		if ((rc = sla_get(tx, pf, tier, &s)) < 0)
			return rc;
		w = (struct wait){1, at, w.episode + 1, w.escalated_episode, ""};
		rc = store_exec(tx,
				"UPDATE guest_threads SET waiting_since = $2, episode = $3 WHERE id ="
				" $1",
				(struct store_val[]){sv_text(thread), sv_int(at), sv_int(w.episode)},
				3);
		if (rc >= 0)
			rc = timer_set(tx, THREAD_TIMER, thread, w.episode, 1, pf,
				       at + clock_business_ms(s.guest_reply_minutes * 60000));
		if (rc < 0 || (rc = wait_of(tx, thread, &w)) != 1)
			return rc < 0 ? rc : STORE_ERR;
	}
	if (w.escalated_episode >= w.episode)
		return 0;
	if ((rc = keywords_match(tx, pf, text, keyword)) <= 0)
		return rc;
	*escalated = 1;
	return escalate(tx, pf, thread, &w, "keyword", keyword, now);
}

/* An answer: the wait ends, its timer with it. */
static int answered(struct store_tx *tx, const char *thread, int64_t now)
{
	int rc = store_exec(tx,
			    "UPDATE guest_threads SET waiting_since = NULL, status = 'open', updated_at"
			    " = $2 WHERE id = $1 AND waiting_since IS NOT NULL",
			    (struct store_val[]){sv_text(thread), sv_int(now)}, 2);

	if (rc > 0)
		rc = timer_cancel(tx, THREAD_TIMER, thread);
	return rc < 0 ? rc : 0;
}

/* The thread of guest (made when new), into id. */
static int thread_for(struct store_tx *tx, const char *pf, const char *guest, int64_t now, char *id)
{
	int rc = thread_of(tx, pf, guest, id);

	if (rc != 0)
		return rc < 0 ? rc : 0;
	if (id_new("gt_", id, ID_MAX) < 0)
		return STORE_ERR;
	rc = store_send(tx,
			"INSERT INTO guest_threads (id, portfolio_id, guest_id, status, created_at,"
			" updated_at) VALUES ($1, $2, $3, 'open', $4, $4)",
			(struct store_val[]){sv_text(id), sv_text(pf), sv_text(guest), sv_int(now)},
			4);
	return rc < 0 ? rc : 0;
}

/* Inserts m into thread unless known; out->duplicate and the known ids
 * when it is. */
static int insert_message(struct store_tx *tx, const char *pf, const char *thread,
			  const struct guest_msg *m, int64_t now, struct guest_msg_outcome *out)
{
	struct store_rows *r;
	int rc;

	if (id_new("msg_", out->message_id, sizeof out->message_id) < 0)
		return STORE_ERR;
	rc = store_query(
		tx,
		"INSERT INTO guest_messages (id, portfolio_id, thread_id, property_id, channel,"
		" direction, external_id, recipient, text, template, status, next_attempt_at, at,"
		" created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
		" $10, $11, $12, $13, $14, $15, $15) ON CONFLICT (portfolio_id, channel,"
		" external_id) DO NOTHING RETURNING id",
		(struct store_val[]){sv_text(out->message_id), sv_text(pf), sv_text(thread),
				     sv_text(m->property_id), sv_text(m->channel),
				     sv_text(m->inbound ? "inbound" : "outbound"),
				     sv_text(m->external_id), sv_text(m->recipient),
				     sv_text(m->text), sv_text(m->template_json), sv_text(m->status),
				     strcmp(m->status, "queued") ? sv_null() : sv_int(now),
				     sv_int(m->at), sv_text(m->created_by), sv_int(now)},
		15, &r);

	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	store_rows_close(r);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	out->duplicate = 1;
	rc = store_query(tx,
			 "SELECT id, thread_id FROM guest_messages WHERE portfolio_id = $1 AND channel"
			 " = $2 AND external_id = $3",
			 (struct store_val[]){sv_text(pf), sv_text(m->channel),
					      sv_text(m->external_id)},
			 3, &r);
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1) {
		snprintf(out->message_id, sizeof out->message_id, "%s", store_text(r, 0));
		snprintf(out->thread_id, sizeof out->thread_id, "%s", store_text(r, 1));
	}
	store_rows_close(r);
	return rc == 1 ? 0 : (rc < 0 ? rc : STORE_ERR);
}

/* out->duplicate with the known ids when (pf, m's channel, external id)
 * is recorded. Returns 1 (known), 0 or < 0. */
static int known_message(struct store_tx *tx, const char *pf, const struct guest_msg *m,
			 struct guest_msg_outcome *out)
{
	struct store_rows *r;
	int rc = store_query(tx,
			     "SELECT m.id, m.thread_id, t.guest_id FROM guest_messages m JOIN"
			     " guest_threads t ON t.id = m.thread_id WHERE m.portfolio_id = $1 AND"
			     " m.channel = $2 AND m.external_id = $3",
			     (struct store_val[]){sv_text(pf), sv_text(m->channel),
						  sv_text(m->external_id)},
			     3, &r);

	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1) {
		out->duplicate = 1;
		snprintf(out->message_id, sizeof out->message_id, "%s", store_text(r, 0));
		snprintf(out->thread_id, sizeof out->thread_id, "%s", store_text(r, 1));
		snprintf(out->guest_id, sizeof out->guest_id, "%s", store_text(r, 2));
	}
	store_rows_close(r);
	return rc;
}

int guest_message_record(struct store_tx *tx, const char *pf, const char *pf_tier,
			 const struct guest_msg *m, int64_t now, struct guest_msg_outcome *out)
{
	int rc;

	memset(out, 0, sizeof *out);
	/* a message seen before changes nothing, not even its guest's
	 * addresses (the insert below settles two racing) */
	if (m->external_id && (rc = known_message(tx, pf, m, out)) != 0)
		return rc < 0 ? rc : 0;
	if ((rc = find_guest(tx, pf, m, now, out->guest_id)) < 0 ||
	    (rc = thread_for(tx, pf, out->guest_id, now, out->thread_id)) < 0 ||
	    (rc = insert_message(tx, pf, out->thread_id, m, now, out)) < 0 || out->duplicate)
		return rc < 0 ? rc : 0;
	rc = store_send(tx,
			"INSERT INTO guest_thread_properties (thread_id, property_id) VALUES ($1, $2)"
			" ON CONFLICT (thread_id, property_id) DO NOTHING",
			(struct store_val[]){sv_text(out->thread_id), sv_text(m->property_id)}, 2);
	if (rc >= 0)
		rc = store_exec(tx,
				"UPDATE guest_threads SET last_message_id = $2, last_message_at = $3,"
				" updated_at = $4 WHERE id = $1 AND (last_message_at IS NULL OR"
				" last_message_at <= $3)",
				(struct store_val[]){sv_text(out->thread_id), sv_text(out->message_id),
						     sv_int(m->at), sv_int(now)},
				4);
	if (rc >= 0)
		rc = m->inbound ? inbound(tx, pf, pf_tier, out->thread_id, m->text, m->at, now,
					  &out->escalated)
				: answered(tx, out->thread_id, now);
	return rc < 0 ? rc : 0;
}

int thread_escalate_fire(struct store_tx *tx, const struct timer *t, int64_t now, void *arg)
{
	struct wait w;
	int rc = wait_of(tx, t->subject_id, &w);

	(void)arg;
	if (rc != 1)
		return rc < 0 ? rc : 0; /* merged into another: its own timer runs */
	if (!w.waiting || w.episode != t->episode || w.escalated_episode >= w.episode)
		return 0; /* answered, or escalated already (a keyword) */
	return escalate(tx, t->portfolio_id, t->subject_id, &w, "unanswered", NULL, now);
}

/* ------------------------------------------------------------- messages */

#define MESSAGE_COLS                                                                           \
	"id, thread_id, property_id, channel, direction, external_id, text, template, status," \
	" error, at, created_by, created_at, updated_at, recipient, attempts"

json_t *message_from_row(struct store_rows *r)
{
	json_t *tpl = store_is_null(r, 7) ? json_null() : json_loads(store_text(r, 7), 0, NULL);

	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:o,"
			 " s:I}",
			 "id", store_text(r, 0), "thread_id", store_text(r, 1), "property_id",
			 store_text(r, 2), "channel", store_text(r, 3), "direction",
			 store_text(r, 4), "external_id",
			 store_is_null(r, 5) ? json_null() : json_string(store_text(r, 5)), "text",
			 store_is_null(r, 6) ? json_null() : json_string(store_text(r, 6)),
			 "template", tpl ? tpl : json_null(), "status", store_text(r, 8), "error",
			 store_is_null(r, 9) ? json_null() : json_string(store_text(r, 9)), "at",
			 jsonw_time(store_int(r, 10)), "created_by",
			 store_is_null(r, 11) ? json_null() : json_string(store_text(r, 11)),
			 "created_at", jsonw_time(store_int(r, 12)), "updated_at",
			 jsonw_time(store_int(r, 13)), "attempts", (json_int_t)store_int(r, 15));
}

const char *message_row_id(struct store_rows *r)
{
	return store_text(r, 0);
}

int thread_messages(struct store_tx *tx, const char *thread, const char *after,
		    const char *const *props, int nprops, int limit, struct store_rows **rows)
{
	struct store_sql q = {.len = 0};

	store_sql_add(&q, "SELECT " MESSAGE_COLS " FROM guest_messages WHERE thread_id = $#",
		      sv_text(thread));
	store_sql_add(&q, " AND id > $#", sv_text(after));
	if (props)
		store_sql_in(&q, "property_id", props, nprops);
	store_sql_add(&q, " ORDER BY id LIMIT $#", sv_int(limit));
	if (q.overflow)
		return STORE_ERR;
	return store_query(tx, q.text, q.v, q.n, rows);
}

int message_load(struct store_tx *tx, const char *id, json_t **out)
{
	struct store_rows *r;
	int rc = store_query(tx, "SELECT " MESSAGE_COLS " FROM guest_messages WHERE id = $1",
			     (struct store_val[]){sv_text(id)}, 1, &r);

	*out = NULL;
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1 && !(*out = message_from_row(r)))
		rc = STORE_ERR;
	store_rows_close(r);
	return rc;
}

static int message_by_external(struct store_tx *tx, const char *channel, const char *external_id,
			       json_t **out)
{
	struct store_rows *r;
	int rc = store_query(tx,
			     "SELECT " MESSAGE_COLS " FROM guest_messages WHERE channel = $1 AND"
			     " external_id = $2 AND direction = 'outbound'",
			     (struct store_val[]){sv_text(channel), sv_text(external_id)}, 2, &r);

	*out = NULL;
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1 && !(*out = message_from_row(r)))
		rc = STORE_ERR;
	store_rows_close(r);
	return rc;
}

/* The order of delivery statuses: a status never moves back. */
static int rank(const char *s)
{
	static const char *const order[] = {"queued", "sent", "delivered", "read"};

	for (int i = 0; i < 4; i++)
		if (!strcmp(s, order[i]))
			return i;
	return 9; /* failed: final */
}

int guest_message_status(struct store_tx *tx, const char *channel, const char *external_id,
			 const char *status, const char *error, int64_t now, json_t **message)
{
	const char *was;
	int rc = message_by_external(tx, channel, external_id, message);

	if (rc != 1)
		return rc < 0 ? rc : 2;
	was = json_string_value(json_object_get(*message, "status"));
	if (!was || rank(was) >= rank(status) || !strcmp(was, "failed")) {
		json_decref(*message);
		*message = NULL;
		return 0;
	}
	rc = store_exec(tx,
			"UPDATE guest_messages SET status = $3, error = $4, updated_at = $5 WHERE"
			" channel = $1 AND external_id = $2",
			(struct store_val[]){sv_text(channel), sv_text(external_id),
					     sv_text(status), sv_text(error), sv_int(now)},
			5);
	/* delivered, or read without a delivered before it: reported once */
	if (rc >= 0 && rank(status) >= rank("delivered") && strcmp(status, "failed") &&
	    rank(was) < rank("delivered")) {
		json_object_set_new(*message, "status", json_string(status));
		return 1;
	}
	json_decref(*message);
	*message = NULL;
	return rc < 0 ? rc : 0;
}

/* -------------------------------------------------------------- reading */

#define THREAD_COLS                                                                            \
	"t.id, t.guest_id, t.status, t.waiting_since, t.episode, t.escalated_episode,"         \
	" t.escalated_at, t.escalation_reason, t.last_message_id, t.created_at, t.updated_at," \
	" g.name, t.portfolio_id"

const char *thread_row_id(struct store_rows *r)
{
	return store_text(r, 0);
}

/* The guest's addresses: {"phones": [...], "emails": [...]}. */
static json_t *addresses(struct store_tx *tx, const char *guest)
{
	struct store_rows *r;
	json_t *phones = json_array(), *emails = json_array();
	int rc = store_query(tx,
			     "SELECT kind, value FROM guest_identities WHERE guest_id = $1 ORDER BY"
			     " kind, value",
			     (struct store_val[]){sv_text(guest)}, 1, &r);

	if (rc == STORE_OK) {
		while ((rc = store_next(r)) == 1)
			json_array_append_new(strcmp(store_text(r, 0), "phone") ? emails : phones,
					      json_string(store_text(r, 1)));
		store_rows_close(r);
	}
	if (rc < 0) {
		json_decref(phones);
		json_decref(emails);
		return NULL;
	}
	return json_pack("{s:o, s:o}", "phones", phones, "emails", emails);
}

static json_t *last_message(struct store_tx *tx, struct store_rows *t)
{
	struct store_rows *r;
	json_t *m = NULL;
	int rc;

	if (store_is_null(t, 8))
		return json_null();
	rc = store_query(tx, "SELECT " MESSAGE_COLS " FROM guest_messages WHERE id = $1",
			 (struct store_val[]){sv_text(store_text(t, 8))}, 1, &r);
	if (rc != STORE_OK)
		return NULL;
	if (store_next(r) == 1)
		m = message_from_row(r);
	store_rows_close(r);
	return m ? m : json_null();
}

json_t *thread_from_row(struct store_tx *tx, struct store_rows *r, int64_t now)
{
	int waiting = !store_is_null(r, 3);
	int64_t since = waiting ? store_int(r, 3) : 0;
	json_t *addr = addresses(tx, store_text(r, 1)), *props = thread_props(tx, store_text(r, 0));
	json_t *last = last_message(tx, r), *out = NULL;

	if (addr && props && last) {
		json_object_set_new(addr, "id", json_string(store_text(r, 1)));
		json_object_set_new(addr, "name",
				    store_is_null(r, 11) ? json_null()
							 : json_string(store_text(r, 11)));
		out = json_pack("{s:s, s:O, s:s, s:b, s:O, s:o, s:I, s:O, s:o, s:o, s:o, s:o}",
				"id", store_text(r, 0), "guest", addr, "status", store_text(r, 2),
				"escalated", waiting && store_int(r, 5) >= store_int(r, 4),
				"properties", props, "waiting_since",
				waiting ? jsonw_time(since) : json_null(), "waiting_seconds",
				(json_int_t)(waiting && now > since ? (now - since) / 1000 : 0),
				"last_message", last, "escalated_at",
				store_is_null(r, 6) ? json_null() : jsonw_time(store_int(r, 6)),
				"escalation_reason",
				store_is_null(r, 7) ? json_null() : json_string(store_text(r, 7)),
				"created_at", jsonw_time(store_int(r, 9)), "updated_at",
				jsonw_time(store_int(r, 10)));
	}
	json_decref(addr);
	json_decref(props);
	json_decref(last);
	return out;
}

int thread_list(struct store_tx *tx, const char *pf, const char *after,
		const struct thread_filter *f, int limit, struct store_rows **rows)
{
	struct store_sql q = {.len = 0};
	char phone[GUEST_PHONE_MAX], email[GUEST_EMAIL_MAX];

	store_sql_add(&q,
		      "SELECT " THREAD_COLS " FROM guest_threads t JOIN guests g ON g.id ="
		      " t.guest_id WHERE t.portfolio_id = $#",
		      sv_text(pf));
	store_sql_add(&q, " AND t.id > $#", sv_text(after));
	store_sql_eq(&q, "t.status", f->status);
	if (f->escalated && !strcmp(f->escalated, "true"))
		store_sql_add(&q,
			      " AND t.waiting_since IS NOT NULL AND t.escalated_episode >= t.episode",
			      sv_null());
	else if (f->escalated && !strcmp(f->escalated, "false"))
		store_sql_add(&q, " AND (t.waiting_since IS NULL OR t.escalated_episode < t.episode)",
			      sv_null());
	if (f->property_id && *f->property_id)
		store_sql_add(&q,
			      " AND EXISTS (SELECT 1 FROM guest_thread_properties p WHERE p.thread_id"
			      " = t.id AND p.property_id = $#)",
			      sv_text(f->property_id));
	if (f->guest && *f->guest) {
		int is_phone = guest_phone_e164(f->guest, phone) == 0;

		if (!is_phone && guest_email_norm(f->guest, email) < 0)
			snprintf(email, sizeof email, "%s", f->guest);
		store_sql_add(&q,
			      " AND t.guest_id IN (SELECT guest_id FROM guest_identities WHERE"
			      " portfolio_id = t.portfolio_id AND value = $#)",
			      sv_text(is_phone ? phone : email));
	}
	if (f->props) {
		store_sql_add(&q,
			      " AND EXISTS (SELECT 1 FROM guest_thread_properties p WHERE p.thread_id"
			      " = t.id",
			      sv_null());
		store_sql_in(&q, "p.property_id", f->props, f->nprops);
		store_sql_add(&q, ")", sv_null());
	}
	store_sql_add(&q, " ORDER BY t.id LIMIT $#", sv_int(limit));
	if (q.overflow)
		return STORE_ERR;
	return store_query(tx, q.text, q.v, q.n, rows);
}

int thread_load(struct store_tx *tx, const char *pf, const char *id, int64_t now, json_t **out)
{
	struct store_rows *r;
	int rc = store_query(tx,
			     "SELECT " THREAD_COLS " FROM guest_threads t JOIN guests g ON g.id ="
			     " t.guest_id WHERE t.id = $1",
			     (struct store_val[]){sv_text(id)}, 1, &r);

	*out = NULL;
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1) {
		if (strcmp(store_text(r, 12), pf))
			rc = 2;
		else if (!(*out = thread_from_row(tx, r, now)))
			rc = STORE_ERR;
	}
	store_rows_close(r);
	return rc;
}

/* ------------------------------------------------------------- outbound */

int thread_phone(struct store_tx *tx, const char *thread, char out[GUEST_PHONE_MAX])
{
	struct store_rows *r;
	int rc = store_query(tx,
			     "SELECT recipient FROM guest_messages WHERE thread_id = $1 AND channel ="
			     " 'whatsapp' AND recipient IS NOT NULL ORDER BY at DESC, id DESC LIMIT 1",
			     (struct store_val[]){sv_text(thread)}, 1, &r);

	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1)
		snprintf(out, GUEST_PHONE_MAX, "%s", store_text(r, 0));
	store_rows_close(r);
	if (rc != 0)
		return rc;
	rc = store_query(tx,
			 "SELECT i.value FROM guest_identities i JOIN guest_threads t ON t.guest_id ="
			 " i.guest_id WHERE t.id = $1 AND i.kind = 'phone' ORDER BY i.value LIMIT 1",
			 (struct store_val[]){sv_text(thread)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1)
		snprintf(out, GUEST_PHONE_MAX, "%s", store_text(r, 0));
	store_rows_close(r);
	return rc;
}

int guest_outbound_claim(struct store_tx *tx, const char *channel, int64_t now, int64_t lease_ms,
			 int max, struct guest_outbound *out)
{
	struct store_rows *r;
	int n = 0,
	    rc = store_query(tx,
			     "SELECT id, portfolio_id, property_id, recipient, template, text,"
			     " attempts FROM guest_messages WHERE status = 'queued' AND"
			     " next_attempt_at <= $1 AND channel = $2 ORDER BY next_attempt_at"
			     " LIMIT $3",
			     (struct store_val[]){sv_int(now), sv_text(channel), sv_int(max)}, 3, &r);

	if (rc != STORE_OK)
		return rc;
	while (n < max && (rc = store_next(r)) == 1) {
		struct guest_outbound *o = &out[n++];

		memset(o, 0, sizeof *o);
		snprintf(o->id, sizeof o->id, "%s", store_text(r, 0));
		snprintf(o->portfolio_id, sizeof o->portfolio_id, "%s", store_text(r, 1));
		snprintf(o->property_id, sizeof o->property_id, "%s", store_text(r, 2));
		snprintf(o->phone, sizeof o->phone, "%s",
			 store_is_null(r, 3) ? "" : store_text(r, 3));
		o->template_json = store_is_null(r, 4) ? NULL : strdup(store_text(r, 4));
		o->text = store_is_null(r, 5) ? NULL : strdup(store_text(r, 5));
		o->attempts = store_int(r, 6);
	}
	store_rows_close(r);
	for (int i = 0; rc >= 0 && i < n; i++)
		rc = store_exec(tx, "UPDATE guest_messages SET next_attempt_at = $2 WHERE id = $1",
				(struct store_val[]){sv_text(out[i].id), sv_int(now + lease_ms)}, 2);
	if (rc < 0) {
		guest_outbound_free(out, n);
		return rc;
	}
	return n;
}

void guest_outbound_free(struct guest_outbound *o, int n)
{
	for (int i = 0; i < n; i++) {
		free(o[i].template_json);
		free(o[i].text);
		o[i].template_json = o[i].text = NULL;
	}
}

int guest_outbound_done(struct store_tx *tx, const char *id, const char *status,
			const char *external_id, const char *error, int64_t next_at, int64_t now)
{
	int rc = store_exec(tx,
			    "UPDATE guest_messages SET status = $2, external_id = COALESCE($3,"
			    " external_id), error = $4, next_attempt_at = $5, attempts = attempts + 1,"
			    " updated_at = $6 WHERE id = $1 AND status = 'queued'",
			    (struct store_val[]){sv_text(id), sv_text(status), sv_text(external_id),
						 sv_text(error),
						 next_at ? sv_int(next_at) : sv_null(), sv_int(now)},
			    6);

	return rc < 0 ? rc : 0;
}
