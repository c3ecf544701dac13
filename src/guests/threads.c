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

/* ---------------------------------------------------------- thread rows */

/* A thread as the writers know it: read once, changed in memory, written
 * back whole (thread_write). */
struct tstate {
	char id[ID_MAX], guest_id[ID_MAX], last_id[ID_MAX];
	int is_open; /* status: open (1) or escalated (0) */
	int waiting; /* an inbound message is unanswered (since waiting_since) */
	int dirty;   /* changed since read */
	int64_t waiting_since, episode, escalated_episode, escalated_at, last_at;
	char reason[ID_MAX]; /* escalation_reason ("" when none) */
};

/* A thread's row as one text, from alias t: the columns of struct tstate
 * by spaces, "-" for NULL (no column holds a space), read back by
 * tstate_from_text. One text lets a read of many keys fetch a thread in
 * one correlated subquery. */
#define TSTATE_TEXT                                                                               \
	"t.id || ' ' || t.guest_id || ' ' || t.status || ' ' || COALESCE(CAST(t.waiting_since AS" \
	" TEXT), '-') || ' ' || CAST(t.episode AS TEXT) || ' ' || CAST(t.escalated_episode AS"    \
	" TEXT) || ' ' || COALESCE(CAST(t.escalated_at AS TEXT), '-') || ' ' ||"                  \
	" COALESCE(t.escalation_reason, '-') || ' ' || COALESCE(t.last_message_id, '-') || ' '"   \
	" || COALESCE(CAST(t.last_message_at AS TEXT), '-')"

/* t from its TSTATE_TEXT. Returns 0, or -1 when s is not one. */
_Static_assert(ID_MAX == 40, "tstate_from_text reads fields of ID_MAX - 1 bytes (%39s)");
static int tstate_from_text(const char *s, struct tstate *t)
{
	char f[10][ID_MAX];
	int64_t v[5];
	const int ints[5] = {3, 4, 5, 6, 9};

	memset(t, 0, sizeof *t);
	if (!s || sscanf(s, "%39s %39s %39s %39s %39s %39s %39s %39s %39s %39s", f[0], f[1], f[2],
			 f[3], f[4], f[5], f[6], f[7], f[8], f[9]) != 10)
		return -1;
	for (int i = 0; i < 5; i++)
		v[i] = strcmp(f[ints[i]], "-") ? strtoll(f[ints[i]], NULL, 10) : 0;
	snprintf(t->id, sizeof t->id, "%s", f[0]);
	snprintf(t->guest_id, sizeof t->guest_id, "%s", f[1]);
	t->is_open = !strcmp(f[2], "open");
	t->waiting = strcmp(f[3], "-") != 0;
	t->waiting_since = v[0];
	t->episode = v[1];
	t->escalated_episode = v[2];
	t->escalated_at = v[3];
	snprintf(t->reason, sizeof t->reason, "%s", strcmp(f[7], "-") ? f[7] : "");
	snprintf(t->last_id, sizeof t->last_id, "%s", strcmp(f[8], "-") ? f[8] : "");
	t->last_at = v[4];
	return 0;
}

/* The thread of sql's row (sql: "SELECT " TSTATE_TEXT ...) into t.
 * Returns 1, 0 (none) or < 0. */
static int tstate_query(struct store_tx *tx, const char *sql, const struct store_val *v, int n,
			struct tstate *t)
{
	struct store_rows *r;
	int rc = store_query(tx, sql, v, n, &r);

	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1 && tstate_from_text(store_text(r, 0), t) < 0)
		rc = STORE_ERR;
	store_rows_close(r);
	return rc;
}

/* Thread id's row into t. Returns 1, 0 (none) or < 0. */
static int thread_read(struct store_tx *tx, const char *id, struct tstate *t)
{
	return tstate_query(tx, "SELECT " TSTATE_TEXT " FROM guest_threads t WHERE t.id = $1",
			    (struct store_val[]){sv_text(id)}, 1, t);
}

/* Threads one update writes at most. */
#define WRITE_ROWS 8

/* Writes t[0..n)'s changed rows back (sent: no answer awaited), up to
 * WRITE_ROWS in one statement: an UPDATE from a VALUES list, its rows
 * padded to a power of two (by repeating the last, which writes the
 * same row alike) so a few prepared statements serve all. */
static int threads_write(struct store_tx *tx, struct tstate *t, size_t n, int64_t now)
{
	static const char head[] =
		"UPDATE guest_threads SET status = v.column3, waiting_since = CAST(v.column4 AS"
		" BIGINT), episode = CAST(v.column5 AS BIGINT), escalated_episode = CAST(v.column6"
		" AS BIGINT), escalated_at = CAST(v.column7 AS BIGINT), escalation_reason ="
		" v.column8, last_message_id = v.column9, last_message_at = CAST(v.column10 AS"
		" BIGINT), updated_at = $1 FROM (VALUES ";
	struct store_val v[1 + WRITE_ROWS * 9];
	struct tstate *rows[WRITE_ROWS];
	size_t i = 0, k, padded;
	char *sql;
	int rc = 0;

	while (rc >= 0 && i < n) {
		for (k = 0; i < n && k < WRITE_ROWS; i++)
			if (t[i].dirty)
				rows[k++] = &t[i];
		if (!k)
			break;
		for (padded = 1; padded < k; padded *= 2)
			;
		v[0] = sv_int(now);
		for (size_t r = 0; r < padded; r++) {
			struct tstate *s = rows[r < k ? r : k - 1];
			struct store_val *w = &v[1 + 9 * r];

			w[0] = sv_text(s->id);
			w[1] = sv_text(s->is_open ? "open" : "escalated");
			w[2] = s->waiting ? sv_int(s->waiting_since) : sv_null();
			w[3] = sv_int(s->episode);
			w[4] = sv_int(s->escalated_episode);
			w[5] = s->escalated_at ? sv_int(s->escalated_at) : sv_null();
			w[6] = sv_text(s->reason[0] ? s->reason : NULL);
			w[7] = sv_text(s->last_id[0] ? s->last_id : NULL);
			w[8] = s->last_at ? sv_int(s->last_at) : sv_null();
			s->dirty = 0;
		}
		sql = store_sql_values(head, padded, 9, 2, ") v WHERE guest_threads.id = v.column2");
		rc = sql ? store_send(tx, sql, v, 1 + 9 * (int)padded) : STORE_ERR;
		free(sql);
	}
	return rc < 0 ? rc : 0;
}

/* Writes t back when it changed (sent: no answer awaited). */
static int thread_write(struct store_tx *tx, struct tstate *t, int64_t now)
{
	return threads_write(tx, t, 1, now);
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

/* Escalates t's open wait now (reason "unanswered" or "keyword", with the
 * keyword): t changes in memory, guest.thread.escalated is appended. */
static int escalate(struct store_tx *tx, const char *pf, struct tstate *t, const char *reason,
		    const char *keyword, int64_t now)
{
	json_t *props = thread_props(tx, t->id), *data = NULL;
	int rc = STORE_ERR;

	t->is_open = 0;
	t->escalated_episode = t->episode;
	t->escalated_at = now;
	snprintf(t->reason, sizeof t->reason, "%s", reason);
	t->dirty = 1;
	data = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:I}", "thread_id", t->id, "guest_id",
			 t->guest_id, "reason", reason, "keyword",
			 keyword ? json_string(keyword) : json_null(), "waiting_since",
			 jsonw_time(t->waiting_since), "escalated_at", jsonw_time(now),
			 "waited_seconds", (json_int_t)((now - t->waiting_since) / 1000));
	if (props && data)
		rc = outbox_append(tx, "v2", "guest.thread.escalated", pf, props, data, NULL, 0);
	json_decref(props);
	json_decref(data);
	return rc < 0 ? rc : 0;
}

/* --------------------------------------------------------------- merges */

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

/* Folds the state of thread from into to's: the later last message of
 * the two; and a wait from had goes on in to, since the earlier of the two
 * waits (a new episode of to when it was not waiting), escalated when
 * either was, else with a timer due at the tier's guest_reply_minutes
 * after its start (step 2 when it moves an open wait of to earlier: to's
 * own timer, later, then finds the episode escalated or answered).
 * Returns 0 or a negative store status. */
static int fold_state(struct store_tx *tx, const char *pf, const struct guest_rules *rules,
		      const struct tstate *from, struct tstate *to)
{
	int64_t step = to->waiting ? 2 : 1;

	to->dirty = 1;
	if (from->last_at > to->last_at) {
		to->last_at = from->last_at;
		snprintf(to->last_id, sizeof to->last_id, "%s", from->last_id);
	}
	if (!from->waiting || (to->waiting && to->waiting_since <= from->waiting_since))
		return 0;
	if (!to->waiting) {
		to->waiting = 1;
		to->episode++;
	}
	to->waiting_since = from->waiting_since;
	if (to->escalated_episode >= to->episode)
		return 0;
	if (from->escalated_episode >= from->episode) {
		to->escalated_episode = to->episode;
		to->escalated_at = from->escalated_at;
		to->is_open = 0;
		snprintf(to->reason, sizeof to->reason, "%s", from->reason);
		return 0;
	}
	return timer_set(tx, THREAD_TIMER, to->id, to->episode, step, pf,
			 to->waiting_since +
				 clock_business_ms(rules->sla.guest_reply_minutes * 60000));
}

/* Moves thread from's messages and properties into thread to, folds its
 * state into to's (fold_state) and deletes from. */
static int fold_thread(struct store_tx *tx, const char *pf, const struct guest_rules *rules,
		       const char *from, const char *to, int64_t now)
{
	struct tstate f, t;
	int rc = store_exec(tx, "UPDATE guest_messages SET thread_id = $2 WHERE thread_id = $1",
			    (struct store_val[]){sv_text(from), sv_text(to)}, 2);

	if (rc >= 0)
		rc = store_exec(tx,
				"INSERT INTO guest_thread_properties (thread_id, property_id) SELECT"
				" $2, property_id FROM guest_thread_properties WHERE thread_id = $1"
				" ON CONFLICT (thread_id, property_id) DO NOTHING",
				(struct store_val[]){sv_text(from), sv_text(to)}, 2);
	if (rc >= 0 && (rc = thread_read(tx, from, &f)) == 1 &&
	    (rc = thread_read(tx, to, &t)) == 1 && (rc = fold_state(tx, pf, rules, &f, &t)) >= 0)
		rc = thread_write(tx, &t, now);
	else if (rc == 0)
		rc = STORE_ERR; /* both threads were read just before */
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
static int merge(struct store_tx *tx, const char *pf, const struct guest_rules *rules,
		 const char *keep, const char *drop, int64_t now)
{
	char tk[ID_MAX], td[ID_MAX];
	int hk, hd,
		rc = store_exec(tx, "UPDATE guest_identities SET guest_id = $2 WHERE guest_id = $1",
				(struct store_val[]){sv_text(drop), sv_text(keep)}, 2);

	if (rc < 0 || (hk = thread_of(tx, pf, keep, tk)) < 0 || (hd = thread_of(tx, pf, drop, td)) < 0)
		return rc < 0 ? rc : STORE_ERR;
	if (hd == 1 && hk == 1)
		rc = fold_thread(tx, pf, rules, td, tk, now);
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

/* -------------------------------------------------------------- batches */

/* An address of a guest the batch knows. */
struct ident {
	const char *kind; /* "phone" or "email" (static) */
	char value[GUEST_EMAIL_MAX], guest_id[ID_MAX];
	int named; /* the guest has a name */
};

/* A message the batch knows: recorded before, or earlier in the batch. */
struct known {
	char *channel, *external_id;
	struct guest_msg_outcome out;
};

/* A (thread, property) pair the batch listed. */
struct tprop {
	char thread_id[ID_MAX], property_id[ID_MAX];
};

/* What a batch read once and keeps up to date in memory: the guests of
 * its addresses, their threads, the messages of its external ids, the
 * keywords and SLA minutes of the portfolio. */
struct batch {
	struct store_tx *tx;
	const char *pf;
	int64_t now;
	struct ident *ids;
	struct tstate *ts;
	struct known *kn;
	struct tprop *tp;
	size_t nids, capids, nts, capts, nkn, capkn, ntp, captp;
	const struct guest_rules *rules;
};

/* Makes room for one more of *arr's n elements (size bytes each). Returns
 * 0 or STORE_ERR (no memory). */
static int room(void *arr, size_t n, size_t *cap, size_t size)
{
	void **a = arr, *p;
	size_t c = *cap ? *cap * 2 : 16;

	if (n < *cap)
		return 0;
	if (!(p = realloc(*a, c * size)))
		return STORE_ERR;
	*a = p;
	*cap = c;
	return 0;
}

static void batch_free(struct batch *b)
{
	for (size_t i = 0; i < b->nkn; i++) {
		free(b->kn[i].channel);
		free(b->kn[i].external_id);
	}
	free(b->ids);
	free(b->ts);
	free(b->kn);
	free(b->tp);
}

static struct ident *ident_find(struct batch *b, const char *kind, const char *value)
{
	for (size_t i = 0; i < b->nids; i++)
		if (!strcmp(b->ids[i].value, value) && !strcmp(b->ids[i].kind, kind))
			return &b->ids[i];
	return NULL;
}

static int ident_add(struct batch *b, const char *kind, const char *value, const char *guest,
		     int named)
{
	struct ident *d;

	if (room(&b->ids, b->nids, &b->capids, sizeof *b->ids) < 0)
		return STORE_ERR;
	d = &b->ids[b->nids++];
	d->kind = !strcmp(kind, "phone") ? "phone" : "email";
	snprintf(d->value, sizeof d->value, "%s", value);
	snprintf(d->guest_id, sizeof d->guest_id, "%s", guest);
	d->named = named;
	return 0;
}

/* 1 when the batch knows guest has a name. */
static int guest_named(const struct batch *b, const char *guest)
{
	for (size_t i = 0; i < b->nids; i++)
		if (!strcmp(b->ids[i].guest_id, guest))
			return b->ids[i].named;
	return 0;
}

static struct tstate *ts_find(struct batch *b, const char *guest)
{
	for (size_t i = 0; i < b->nts; i++)
		if (!strcmp(b->ts[i].guest_id, guest))
			return &b->ts[i];
	return NULL;
}

static struct known *known_find(struct batch *b, const char *channel, const char *external_id)
{
	for (size_t i = 0; i < b->nkn; i++)
		if (!strcmp(b->kn[i].external_id, external_id) && !strcmp(b->kn[i].channel, channel))
			return &b->kn[i];
	return NULL;
}

static int known_add(struct batch *b, const char *channel, const char *external_id,
		     const struct guest_msg_outcome *out)
{
	struct known *k;

	if (room(&b->kn, b->nkn, &b->capkn, sizeof *b->kn) < 0)
		return STORE_ERR;
	k = &b->kn[b->nkn];
	k->channel = strdup(channel);
	k->external_id = strdup(external_id);
	k->out = *out;
	if (!k->channel || !k->external_id) {
		free(k->channel);
		free(k->external_id);
		return STORE_ERR;
	}
	b->nkn++;
	return 0;
}

/* ---- reading what the batch needs: one statement per READ_KEYS messages */

/* Messages one read carries, at most (4 values each); a read of fewer is
 * padded to a power of two, so a few prepared statements serve all. */
#define READ_KEYS 32

/* The read is a row per message, correlated on its values (k.column2..5:
 * channel, external id, phone, e-mail) by equality on whole keys only,
 * so every lookup is an index probe whatever the planner knows of the
 * tables' sizes (an IN list over a table that was empty when its plan
 * was cached became a filter over every row). The guests of a message's
 * addresses are found once (a materialised CTE), then their names and
 * threads; an address the message lacks costs nothing (CASE). */
#define GUEST_OF(kind, value)                                                                 \
	"CASE WHEN " value " IS NULL THEN NULL ELSE (SELECT i.guest_id FROM guest_identities" \
	" i WHERE i.portfolio_id = $1 AND i.kind = '" kind "' AND i.value = " value ") END"
#define NAMED(guest)                                                                         \
	"CASE WHEN " guest " IS NULL THEN NULL ELSE (SELECT CASE WHEN n.name IS NULL THEN 0" \
	" ELSE 1 END FROM guests n WHERE n.id = " guest ") END"
#define THREAD_TEXT(guest)                                                                        \
	"CASE WHEN " guest " IS NULL THEN NULL ELSE (SELECT " TSTATE_TEXT " FROM guest_threads t" \
	" WHERE t.portfolio_id = $1 AND t.guest_id = " guest ") END"

static char *read_sql(size_t n)
{
	static const char head[] =
		"WITH g AS MATERIALIZED (SELECT k.column1 AS i, (SELECT m.id || ' ' || m.thread_id"
		" FROM guest_messages m WHERE m.portfolio_id = $1 AND m.channel = k.column2 AND"
		" m.external_id = k.column3) AS known, " GUEST_OF(
			"phone", "k.column4") " AS gp, " GUEST_OF("email",
								  "k.column5") " AS ge FROM (VALUES ";
	static const char tail[] = ") k) SELECT i, known, gp, " NAMED("gp") ", " THREAD_TEXT(
		"gp") ", ge, " NAMED("ge") ", " THREAD_TEXT("ge") " FROM g";

	return store_sql_values(head, n, 4, 2, tail);
}

/* Takes in the address kind/value's columns from c on (guest, named,
 * thread) of a row of the read. */
static int read_address(struct batch *b, struct store_rows *r, int c, const char *kind,
			const char *value)
{
	const char *guest = store_text(r, c), *thread = store_text(r, c + 2);
	int rc;

	if (!guest || ident_find(b, kind, value))
		return 0;
	if ((rc = ident_add(b, kind, value, guest, (int)store_int(r, c + 1))) < 0 || !thread ||
	    ts_find(b, guest))
		return rc;
	if (room(&b->ts, b->nts, &b->capts, sizeof *b->ts) < 0)
		return STORE_ERR;
	if (tstate_from_text(thread, &b->ts[b->nts]) < 0)
		return STORE_ERR;
	b->nts++;
	return 0;
}

/* Takes in the row of the read of message m. */
static int read_row(struct batch *b, struct store_rows *r, const struct guest_msg *m)
{
	const char *known = store_text(r, 1);
	struct guest_msg_outcome out = {.duplicate = 1};
	int rc = 0;

	if (known && m->external_id && !known_find(b, m->channel, m->external_id)) {
		if (sscanf(known, "%39s %39s", out.message_id, out.thread_id) != 2)
			return STORE_ERR;
		rc = known_add(b, m->channel, m->external_id, &out);
	}
	if (rc >= 0 && m->phone)
		rc = read_address(b, r, 2, "phone", m->phone);
	if (rc >= 0 && m->email)
		rc = read_address(b, r, 5, "email", m->email);
	return rc;
}

/* Reads what messages m[0..n) (n <= READ_KEYS) need: those of their
 * external ids known, the guests of their addresses and those guests'
 * threads, in one statement. */
static int read_chunk(struct batch *b, const struct guest_msg *m, size_t n)
{
	struct store_val v[1 + READ_KEYS * 4];
	struct store_rows *r;
	size_t padded = 1, at;
	char *sql;
	int rc;

	while (padded < n)
		padded *= 2;
	v[0] = sv_text(b->pf);
	for (size_t i = 0; i < padded; i++) {
		const struct guest_msg *g = &m[i < n ? i : n - 1];

		v[1 + 4 * i] = sv_text(g->external_id ? g->channel : NULL);
		v[2 + 4 * i] = sv_text(g->external_id);
		v[3 + 4 * i] = sv_text(g->phone);
		v[4 + 4 * i] = sv_text(g->email);
	}
	if (!(sql = read_sql(padded)))
		return STORE_ERR;
	rc = store_query(b->tx, sql, v, 1 + (int)padded * 4, &r);
	free(sql);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1)
		if ((at = (size_t)store_int(r, 0)) < n && (rc = read_row(b, r, &m[at])) < 0)
			break;
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

/* The thread of guest, read into the batch when it has one. */
static int read_thread(struct batch *b, const char *guest)
{
	struct tstate t;
	int rc = tstate_query(b->tx,
			      "SELECT " TSTATE_TEXT " FROM guest_threads t WHERE t.portfolio_id = $1"
			      " AND t.guest_id = $2",
			      (struct store_val[]){sv_text(b->pf), sv_text(guest)}, 2, &t);

	if (rc != 1)
		return rc < 0 ? rc : 0;
	if (room(&b->ts, b->nts, &b->capts, sizeof *b->ts) < 0)
		return STORE_ERR;
	b->ts[b->nts++] = t;
	return 0;
}

/* ---- guests */

static int add_identity(struct batch *b, const char *kind, const char *value, const char *guest,
			int named)
{
	int rc = store_send(b->tx,
			    "INSERT INTO guest_identities (portfolio_id, kind, value, guest_id) VALUES"
			    " ($1, $2, $3, $4) ON CONFLICT (portfolio_id, kind, value) DO NOTHING",
			    (struct store_val[]){sv_text(b->pf), sv_text(kind), sv_text(value),
						 sv_text(guest)},
			    4);

	return rc < 0 ? rc : ident_add(b, kind, value, guest, named);
}

/* Merges guest drop into keep (merge) after writing the batch's threads
 * back; the batch then knows drop's addresses as keep's, and reads keep's
 * thread again when it needs it. */
static int batch_merge(struct batch *b, const char *keep, const char *drop)
{
	char k[ID_MAX], d[ID_MAX];
	int rc = 0;

	snprintf(k, sizeof k, "%s", keep);
	snprintf(d, sizeof d, "%s", drop);
	rc = threads_write(b->tx, b->ts, b->nts, b->now);
	if (rc < 0 || (rc = merge(b->tx, b->pf, b->rules, k, d, b->now)) < 0)
		return rc;
	for (size_t i = 0; i < b->nids; i++)
		if (!strcmp(b->ids[i].guest_id, d))
			snprintf(b->ids[i].guest_id, ID_MAX, "%s", k);
	for (size_t i = b->nts; i-- > 0;)
		if (!strcmp(b->ts[i].guest_id, k) || !strcmp(b->ts[i].guest_id, d))
			b->ts[i] = b->ts[--b->nts];
	return 0;
}

/* The guest of m's phone or e-mail (made, or two merged, as needed), into
 * id. Returns 1 (a new guest), 0 or < 0. */
static int batch_guest(struct batch *b, const struct guest_msg *m, char *id)
{
	const struct ident *p = m->phone ? ident_find(b, "phone", m->phone) : NULL;
	const struct ident *e = m->email ? ident_find(b, "email", m->email) : NULL;
	int has_p = p != NULL, has_e = e != NULL, made = 0, named, rc = 0;

	if (p && e && strcmp(p->guest_id, e->guest_id)) {
		/* ids are time-ordered: the older guest stays */
		int older = strcmp(p->guest_id, e->guest_id) < 0;

		snprintf(id, ID_MAX, "%s", older ? p->guest_id : e->guest_id);
		rc = batch_merge(b, id, older ? e->guest_id : p->guest_id);
	} else if (p || e) {
		snprintf(id, ID_MAX, "%s", p ? p->guest_id : e->guest_id);
	} else {
		if (id_new("gst_", id, ID_MAX) < 0)
			return STORE_ERR;
		made = 1;
		rc = store_send(b->tx,
				"INSERT INTO guests (id, portfolio_id, name, created_at, updated_at)"
				" VALUES ($1, $2, $3, $4, $4)",
				(struct store_val[]){sv_text(id), sv_text(b->pf), sv_text(m->name),
						     sv_int(b->now)},
				4);
	}
	named = made ? m->name && *m->name : guest_named(b, id);
	if (rc >= 0 && m->phone && !has_p)
		rc = add_identity(b, "phone", m->phone, id, named);
	if (rc >= 0 && m->email && !has_e)
		rc = add_identity(b, "email", m->email, id, named);
	if (rc >= 0 && !named && m->name && *m->name) {
		rc = store_send(b->tx, "UPDATE guests SET name = $2, updated_at = $3 WHERE id = $1",
				(struct store_val[]){sv_text(id), sv_text(m->name), sv_int(b->now)},
				3);
		for (size_t i = 0; i < b->nids; i++)
			if (!strcmp(b->ids[i].guest_id, id))
				b->ids[i].named = 1;
	}
	return rc < 0 ? rc : made;
}

/* ---- threads */

/* The thread of guest (read, or made when there is none; a new guest
 * has none) into *t. */
static int batch_thread(struct batch *b, const char *guest, int new_guest, struct tstate **t)
{
	struct tstate *s;
	int rc;

	if ((*t = ts_find(b, guest)) != NULL)
		return 0;
	if (!new_guest && (rc = read_thread(b, guest)) < 0)
		return rc;
	if ((*t = ts_find(b, guest)) != NULL)
		return 0;
	if (room(&b->ts, b->nts, &b->capts, sizeof *b->ts) < 0)
		return STORE_ERR;
	s = &b->ts[b->nts];
	memset(s, 0, sizeof *s);
	s->is_open = 1;
	snprintf(s->guest_id, sizeof s->guest_id, "%s", guest);
	if (id_new("gt_", s->id, sizeof s->id) < 0)
		return STORE_ERR;
	rc = store_send(b->tx,
			"INSERT INTO guest_threads (id, portfolio_id, guest_id, status, created_at,"
			" updated_at) VALUES ($1, $2, $3, 'open', $4, $4)",
			(struct store_val[]){sv_text(s->id), sv_text(b->pf), sv_text(guest),
					     sv_int(b->now)},
			4);
	*t = &b->ts[b->nts++];
	return rc < 0 ? rc : 0;
}

/* Lists property among thread t's (once a batch). */
static int batch_tprop(struct batch *b, const struct tstate *t, const char *property)
{
	struct tprop *p;

	for (size_t i = 0; i < b->ntp; i++)
		if (!strcmp(b->tp[i].thread_id, t->id) && !strcmp(b->tp[i].property_id, property))
			return 0;
	if (room(&b->tp, b->ntp, &b->captp, sizeof *b->tp) < 0)
		return STORE_ERR;
	p = &b->tp[b->ntp++];
	snprintf(p->thread_id, sizeof p->thread_id, "%s", t->id);
	snprintf(p->property_id, sizeof p->property_id, "%s", property);
	return store_send_row(b->tx, "INSERT INTO guest_thread_properties (thread_id, property_id)",
			      " ON CONFLICT (thread_id, property_id) DO NOTHING", 2,
			      (struct store_val[]){sv_text(t->id), sv_text(property)});
}

/* An inbound message m of t: starts a wait when none is open (its timer
 * due at the tier's guest_reply_minutes after m's time), then escalates
 * at once when its text holds a keyword of the portfolio. */
static int batch_inbound(struct batch *b, struct tstate *t, const struct guest_msg *m, int *escalated)
{
	char keyword[KEYWORD_MAX];
	int rc;

	if (!t->waiting) {
		t->waiting = t->dirty = 1;
		t->waiting_since = m->at;
		t->episode++;
		rc = timer_set(b->tx, THREAD_TIMER, t->id, t->episode, 1, b->pf,
			       m->at + clock_business_ms(b->rules->sla.guest_reply_minutes * 60000));
		if (rc < 0)
			return rc;
	}
	if (t->escalated_episode >= t->episode)
		return 0;
	if ((rc = keywords_find(b->rules->keywords, m->text, keyword)) <= 0)
		return rc < 0 ? STORE_ERR : 0;
	*escalated = 1;
	return escalate(b->tx, b->pf, t, "keyword", keyword, b->now);
}

/* An answer: the wait ends, its timer with it. */
static int batch_answered(struct batch *b, struct tstate *t)
{
	int rc;

	if (!t->waiting)
		return 0;
	t->waiting = 0;
	t->is_open = t->dirty = 1;
	rc = timer_cancel(b->tx, THREAD_TIMER, t->id);
	return rc < 0 ? rc : 0;
}

/* ---- messages */

static int insert_message(struct batch *b, const struct tstate *t, const struct guest_msg *m,
			  const char *id)
{
	return store_send_row(
		b->tx,
		"INSERT INTO guest_messages (id, portfolio_id, thread_id, property_id, channel,"
		" direction, external_id, recipient, text, template, status, next_attempt_at, at,"
		" created_by, created_at, updated_at)",
		"", 16,
		(struct store_val[]){sv_text(id), sv_text(b->pf), sv_text(t->id),
				     sv_text(m->property_id), sv_text(m->channel),
				     sv_text(m->inbound ? "inbound" : "outbound"),
				     sv_text(m->external_id), sv_text(m->recipient),
				     sv_text(m->text), sv_text(m->template_json), sv_text(m->status),
				     strcmp(m->status, "queued") ? sv_null() : sv_int(b->now),
				     sv_int(m->at), sv_text(m->created_by), sv_int(b->now),
				     sv_int(b->now)});
}

/* Records m as guest_messages_record says, into *out. */
static int record_one(struct batch *b, const struct guest_msg *m, struct guest_msg_outcome *out)
{
	const struct known *k = m->external_id ? known_find(b, m->channel, m->external_id) : NULL;
	struct tstate *t;
	int rc;

	memset(out, 0, sizeof *out);
	if (k) {
		/* a message seen before changes nothing, not even its guest's
		 * addresses */
		*out = k->out;
		out->duplicate = 1;
		out->escalated = 0;
		return 0;
	}
	if ((rc = batch_guest(b, m, out->guest_id)) < 0 ||
	    (rc = batch_thread(b, out->guest_id, rc == 1, &t)) < 0)
		return rc;
	snprintf(out->thread_id, sizeof out->thread_id, "%s", t->id);
	if (id_new("msg_", out->message_id, sizeof out->message_id) < 0)
		return STORE_ERR;
	if ((rc = insert_message(b, t, m, out->message_id)) < 0 ||
	    (rc = batch_tprop(b, t, m->property_id)) < 0 ||
	    (m->external_id && (rc = known_add(b, m->channel, m->external_id, out)) < 0))
		return rc;
	if (!t->last_at || t->last_at <= m->at) {
		snprintf(t->last_id, sizeof t->last_id, "%s", out->message_id);
		t->last_at = m->at;
	}
	t->dirty = 1;
	return m->inbound ? batch_inbound(b, t, m, &out->escalated) : batch_answered(b, t);
}

int guest_rules_load(struct store_tx *tx, const char *pf, const char *tier, struct guest_rules *out)
{
	int rc = sla_get(tx, pf, tier, &out->sla);

	out->keywords = NULL;
	return rc < 0 ? rc : keywords_load(tx, pf, &out->keywords);
}

void guest_rules_free(struct guest_rules *r)
{
	json_decref(r->keywords);
	r->keywords = NULL;
}

int guest_messages_record(struct store_tx *tx, const char *pf, const struct guest_rules *rules,
			  const struct guest_msg *m, size_t n, int64_t now,
			  struct guest_msg_outcome *out, guest_recorded_fn fn, void *arg)
{
	struct batch b = {.tx = tx, .pf = pf, .now = now, .rules = rules};
	int rc = 0;

	for (size_t i = 0; rc >= 0 && i < n; i += READ_KEYS)
		rc = read_chunk(&b, m + i, n - i < READ_KEYS ? n - i : READ_KEYS);
	for (size_t i = 0; rc >= 0 && i < n; i++)
		if ((rc = record_one(&b, &m[i], &out[i])) >= 0 && fn)
			rc = fn(tx, i, &out[i], arg);
	if (rc >= 0)
		rc = threads_write(tx, b.ts, b.nts, now);
	batch_free(&b);
	return rc < 0 ? rc : 0;
}

int guest_message_record(struct store_tx *tx, const char *pf, const char *pf_tier,
			 const struct guest_msg *m, int64_t now, struct guest_msg_outcome *out)
{
	struct guest_rules rules;
	int rc = guest_rules_load(tx, pf, pf_tier, &rules);

	if (rc >= 0)
		rc = guest_messages_record(tx, pf, &rules, m, 1, now, out, NULL, NULL);
	guest_rules_free(&rules);
	return rc;
}

int thread_escalate_fire(struct store_tx *tx, const struct timer *t, int64_t now, void *arg)
{
	struct tstate s;
	int rc = thread_read(tx, t->subject_id, &s);

	(void)arg;
	if (rc != 1)
		return rc < 0 ? rc : 0; /* merged into another: its own timer runs */
	if (!s.waiting || s.episode != t->episode || s.escalated_episode >= s.episode)
		return 0; /* answered, or escalated already (a keyword) */
	if ((rc = escalate(tx, t->portfolio_id, &s, "unanswered", NULL, now)) < 0)
		return rc;
	return thread_write(tx, &s, now);
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
