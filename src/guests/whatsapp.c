#include "guests/whatsapp.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/id.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "events/outbox.h"
#include "guests/threads.h"
#include "net/httpc.h"
#include "portfolio/portfolio.h"
#include "store/group.h"
#include "store/store.h"

/* Waits after failed send 1, 2, ...: then the message is failed. */
static const int64_t retry_ms[] = {30000, 120000, 600000, 1800000, 3600000, 10800000};

/* Webhook calls a transaction records at most (group commit). */
#define WHATSAPP_GROUP_MAX 32

/* What the webhook calls read on every call and change seldom is kept in
 * memory: each portfolio's rules (escalation keywords, SLA minutes) and
 * each phone number id's channel (its property and opened app secret).
 * Read in the calls' shared transaction, which runs one at a time, the
 * rules cost it two statements a portfolio; the channel is a read of its
 * own before it. A kept copy serves while no setting was announced
 * (store_changes of STORE_CH_PROPERTIES: setting keywords, SLA minutes or
 * a channel announces it, on every node) and for at most KEPT_TTL_MS (a
 * portfolio's tier follows its plan, which announces nothing). */
#define KEPT_TTL_MS 1000
#define RULES_KEPT 16
#define CHANNELS_KEPT 64

/* A kept copy's key and age; first member of each kind of slot. */
struct kept {
	char key[72];  /* portfolio id, or phone number id (up to 64 digits) */
	int64_t at;    /* clock_mono_ms when read; 0: an empty slot */
	uint64_t seen; /* store_changes(STORE_CH_PROPERTIES) before the read */
};

struct kept_rules {
	struct kept k;
	struct guest_rules rules;
};

/* A channel with its app secret opened (its access token too when asked:
 * only a send needs it). */
struct channel {
	char property_id[ID_MAX], portfolio_id[ID_MAX], phone_number_id[64];
	char *token, *secret;
};

/* Frees c's secrets, wiped first. */
static void channel_free(struct channel *c)
{
	if (c->token)
		crypto_wipe(c->token, strlen(c->token));
	if (c->secret)
		crypto_wipe(c->secret, strlen(c->secret));
	free(c->token);
	free(c->secret);
	c->token = c->secret = NULL;
}

struct kept_channel {
	struct kept k;
	struct channel ch; /* no token */
};

struct whatsapp {
	char base[512]; /* "" for sim: */
	struct store *st;
	struct store_group *inbound; /* the webhook calls' writes */
	pthread_mutex_t kept_mu;     /* the two kinds of kept copies */
	struct kept_rules rules[RULES_KEPT];
	struct kept_channel channels[CHANNELS_KEPT];
};

static int record_calls(struct store_tx *tx, void *const *jobs, size_t n, void *arg);

int whatsapp_open(const char *url, struct store *st, struct whatsapp **out)
{
	struct whatsapp *wa = calloc(1, sizeof *wa);
	size_t n;

	*out = NULL;
	if (!wa || store_group_new(st, WHATSAPP_GROUP_MAX, record_calls, wa, "wa-record",
				   &wa->inbound) < 0) {
		free(wa);
		return -1;
	}
	pthread_mutex_init(&wa->kept_mu, NULL);
	wa->st = st;
	if (strcmp(url, "sim:")) {
		if ((strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) ||
		    strlen(url) >= sizeof wa->base) {
			log_msg(LOG_ERROR, "whatsapp",
				"--whatsapp-api-url must be sim: or an http(s) URL");
			whatsapp_close(wa);
			return -1;
		}
		snprintf(wa->base, sizeof wa->base, "%s", url);
		n = strlen(wa->base);
		while (n && wa->base[n - 1] == '/')
			wa->base[--n] = '\0';
	}
	*out = wa;
	return 0;
}

void whatsapp_close(struct whatsapp *wa)
{
	if (!wa)
		return;
	store_group_free(wa->inbound);
	for (size_t i = 0; i < RULES_KEPT; i++)
		guest_rules_free(&wa->rules[i].rules);
	for (size_t i = 0; i < CHANNELS_KEPT; i++)
		channel_free(&wa->channels[i].ch);
	pthread_mutex_destroy(&wa->kept_mu);
	free(wa);
}

/* A copy of r into out (keywords deep-copied: out outlives the slot).
 * Returns 0 or STORE_ERR (memory). */
static int rules_copy(const struct guest_rules *r, struct guest_rules *out)
{
	out->sla = r->sla;
	out->keywords = r->keywords ? json_deep_copy(r->keywords) : NULL;
	return r->keywords && !out->keywords ? STORE_ERR : 0;
}

/* The slot of n (stride bytes apart, each a struct kept first) that
 * keeps key, read less than KEPT_TTL_MS before now with seen unchanged
 * since, or NULL; then *victim is the slot to fill with a new read (an
 * empty one, else the oldest). kept_mu held. */
static struct kept *kept_find(void *slots, size_t n, size_t stride, const char *key, uint64_t seen,
			      int64_t now, struct kept **victim)
{
	*victim = slots;
	for (size_t i = 0; i < n; i++) {
		struct kept *k = (struct kept *)((char *)slots + i * stride);

		if (k->at && k->seen == seen && !strcmp(k->key, key) && now - k->at < KEPT_TTL_MS)
			return k;
		if (k->at < (*victim)->at)
			*victim = k;
	}
	return NULL;
}

/* Marks slot as keeping key, read now with seen (at 0 when its copy
 * failed: empty). */
static void kept_mark(struct kept *slot, const char *key, uint64_t seen, int64_t now, int ok)
{
	snprintf(slot->key, sizeof slot->key, "%s", key);
	slot->seen = seen;
	slot->at = ok ? now : 0;
}

/* pf's rules into out (guest_rules_free it): a kept copy, else read in
 * tx and kept. seen: store_changes(STORE_CH_PROPERTIES) as the newest
 * call they serve began (a setting announced before any of the calls
 * began applies to all). Returns 0 or < 0. */
static int rules_get(struct whatsapp *wa, struct store_tx *tx, const char *pf, uint64_t seen,
		     struct guest_rules *out)
{
	int64_t now = clock_mono_ms();
	struct kept *k, *slot;
	const char *tier;
	int rc;

	pthread_mutex_lock(&wa->kept_mu);
	k = kept_find(wa->rules, RULES_KEPT, sizeof *wa->rules, pf, seen, now, &slot);
	rc = k ? rules_copy(&((struct kept_rules *)k)->rules, out) : 1;
	pthread_mutex_unlock(&wa->kept_mu);
	if (rc != 1)
		return rc;
	if ((rc = portfolio_sla_tier(tx, pf, &tier)) < 0 ||
	    (rc = guest_rules_load(tx, pf, tier, out)) < 0)
		return rc;
	pthread_mutex_lock(&wa->kept_mu);
	/* the victim may have been refilled meanwhile: it is replaced anyway */
	guest_rules_free(&((struct kept_rules *)slot)->rules);
	kept_mark(slot, pf, seen, now, rules_copy(out, &((struct kept_rules *)slot)->rules) == 0);
	pthread_mutex_unlock(&wa->kept_mu);
	return 0;
}

/* ------------------------------------------------------------- channels */

/* The additional data a sealed secret is bound to: its column and the
 * property, so a sealed value copied elsewhere does not open. */
static void aad(char *out, size_t cap, const char *what, const char *property_id)
{
	snprintf(out, cap, "whatsapp:%s:%s", what, property_id);
}

int whatsapp_channel_set(struct store_tx *tx, const unsigned char key[32], const char *pf,
			 const char *property_id, const char *phone_number_id,
			 const char *access_token, const char *app_secret, const char *verify_token,
			 int64_t now)
{
	char a1[128], a2[128], hash[2 * CRYPTO_SHA256_LEN + 1], *tok, *sec;
	int rc;

	aad(a1, sizeof a1, "token", property_id);
	aad(a2, sizeof a2, "secret", property_id);
	tok = crypto_seal(key, access_token, a1);
	sec = crypto_seal(key, app_secret, a2);
	crypto_sha256_hex(verify_token, strlen(verify_token), hash);
	rc = tok && sec
		     ? store_exec(tx,
				  "INSERT INTO whatsapp_channels (property_id, portfolio_id,"
				  " phone_number_id, access_token_sealed, app_secret_sealed,"
				  " verify_token_hash, created_at, updated_at) VALUES ($1, $2, $3,"
				  " $4, $5, $6, $7, $7) ON CONFLICT (property_id) DO UPDATE SET"
				  " phone_number_id = excluded.phone_number_id, access_token_sealed"
				  " = excluded.access_token_sealed, app_secret_sealed ="
				  " excluded.app_secret_sealed, verify_token_hash ="
				  " excluded.verify_token_hash, updated_at = excluded.updated_at",
				  (struct store_val[]){sv_text(property_id), sv_text(pf),
						       sv_text(phone_number_id), sv_text(tok),
						       sv_text(sec), sv_text(hash), sv_int(now)},
				  7)
		     : STORE_ERR;
	free(tok);
	free(sec);
	if (rc == STORE_CONSTRAINT)
		return 1;
	/* the webhook calls of every node keep channels (channel_get) */
	if (rc >= 0)
		rc = store_notify(tx, STORE_CH_PROPERTIES);
	return rc < 0 ? rc : 0;
}

int whatsapp_channel_exists(struct store_tx *tx, const char *property_id)
{
	int64_t one;

	return store_query_int(tx, "SELECT 1 FROM whatsapp_channels WHERE property_id = $1",
			       (struct store_val[]){sv_text(property_id)}, 1, &one);
}

int whatsapp_verify_token(struct store_tx *tx, const char *token)
{
	char hash[2 * CRYPTO_SHA256_LEN + 1];
	int64_t one;

	crypto_sha256_hex(token, strlen(token), hash);
	return store_query_int(tx, "SELECT 1 FROM whatsapp_channels WHERE verify_token_hash = $1",
			       (struct store_val[]){sv_text(hash)}, 1, &one);
}

/* The channel of column = value (phone_number_id or property_id), with
 * its app secret and, when want_token, its access token opened. Returns
 * 1, 0 or < 0 (also when a secret does not open: the key changed). */
static int channel_by(struct store_tx *tx, const unsigned char key[32], const char *sql,
		      const char *value, int want_token, struct channel *c)
{
	struct store_rows *r;
	char a1[128], a2[128];
	int rc = store_query(tx, sql, (struct store_val[]){sv_text(value)}, 1, &r);

	memset(c, 0, sizeof *c);
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1) {
		snprintf(c->property_id, sizeof c->property_id, "%s", store_text(r, 0));
		snprintf(c->portfolio_id, sizeof c->portfolio_id, "%s", store_text(r, 1));
		snprintf(c->phone_number_id, sizeof c->phone_number_id, "%s", store_text(r, 2));
		aad(a1, sizeof a1, "token", c->property_id);
		aad(a2, sizeof a2, "secret", c->property_id);
		c->token = want_token ? crypto_open(key, store_text(r, 3), a1) : NULL;
		c->secret = crypto_open(key, store_text(r, 4), a2);
		if ((want_token && !c->token) || !c->secret) {
			log_msg(LOG_ERROR, "whatsapp",
				"the secrets of property %s's WhatsApp channel do not open with this "
				"server's key",
				c->property_id);
			channel_free(c);
			rc = STORE_ERR;
		}
	}
	store_rows_close(r);
	return rc;
}

#define CHANNEL_COLS                                                              \
	"SELECT property_id, portfolio_id, phone_number_id, access_token_sealed," \
	" app_secret_sealed FROM whatsapp_channels WHERE "

/* ------------------------------------------------------------- inbound */

/* 1 when signature is "sha256=" and the hex HMAC-SHA256 of raw under
 * secret, compared in constant time. */
static int signed_by(const char *secret, const char *raw, size_t len, const char *signature)
{
	unsigned char mac[CRYPTO_SHA256_LEN];
	char hex[2 * CRYPTO_SHA256_LEN + 1];

	if (!signature || strncmp(signature, "sha256=", 7) || strlen(signature + 7) != sizeof hex - 1)
		return 0;
	crypto_hmac_sha256(secret, strlen(secret), raw, len, mac);
	crypto_hex(mac, sizeof mac, hex);
	return crypto_equal(hex, signature + 7, sizeof hex - 1);
}

/* The "value" objects of doc's changes, in order, into a new array
 * (borrowed items). NULL when doc is not Meta's shape (why says where). */
static json_t *values_of(const json_t *doc, char *why, size_t cap)
{
	const json_t *entry, *change;
	json_t *out;
	size_t i, k;

	if (!json_is_array(json_object_get(doc, "entry"))) {
		snprintf(why, cap, "entry must be a list");
		return NULL;
	}
	out = json_array();
	json_array_foreach(json_object_get(doc, "entry"), i, entry) {
		json_array_foreach(json_object_get(entry, "changes"), k, change) {
			const json_t *v = json_object_get(change, "value");
			const json_t *md = json_object_get(v, "metadata");

			if (!json_is_object(v) ||
			    !json_is_string(json_object_get(md, "phone_number_id"))) {
				snprintf(why, cap,
					 "entry[%zu].changes[%zu].value.metadata."
					 "phone_number_id is missing",
					 i, k);
				json_decref(out);
				return NULL;
			}
			json_array_append(out, (json_t *)v);
		}
	}
	return out;
}

static const char *pnid_of(const json_t *value)
{
	return json_string_value(
		json_object_get(json_object_get(value, "metadata"), "phone_number_id"));
}

/* The profile name of wa_id among value's contacts, or NULL. */
static const char *contact_name(const json_t *value, const char *wa_id)
{
	const json_t *c;
	size_t i;

	json_array_foreach(json_object_get(value, "contacts"), i, c)
		if (!strcmp(json_string_value(json_object_get(c, "wa_id"))
				    ? json_string_value(json_object_get(c, "wa_id"))
				    : "",
			    wa_id))
			return json_string_value(
				json_object_get(json_object_get(c, "profile"), "name"));
	return NULL;
}

/* An inbound message of a batch, as the threads record it. */
struct inbound {
	struct guest_msg g;
	const struct channel *ch;
	char phone[GUEST_PHONE_MAX], text[64];
};

/* m of value (channel ch) as an inbound message into *in. Returns 1, or 0
 * when m is not a message we can thread (Meta's other kinds). */
static int inbound_of(const struct channel *ch, const json_t *value, const json_t *m, int64_t now,
		      struct inbound *in)
{
	const char *from = json_string_value(json_object_get(m, "from"));
	const char *wamid = json_string_value(json_object_get(m, "id"));
	const char *type = json_string_value(json_object_get(m, "type"));
	const char *body = json_string_value(json_object_get(json_object_get(m, "text"), "body"));
	const char *secs = json_string_value(json_object_get(m, "timestamp"));

	if (!from || !wamid || guest_phone_e164(from, in->phone) < 0 || strlen(wamid) > 256)
		return 0;
	if (!body) {
		snprintf(in->text, sizeof in->text, "[%s]", type ? type : "message");
		body = in->text;
	}
	in->ch = ch;
	in->g = (struct guest_msg){ch->property_id,
				   "whatsapp",
				   wamid,
				   body,
				   1,
				   in->phone,
				   NULL,
				   contact_name(value, from),
				   "received",
				   NULL,
				   NULL,
				   in->phone,
				   secs ? strtoll(secs, NULL, 10) * 1000 : now};
	if (in->g.at <= 0 || in->g.at > now + 300000)
		in->g.at = now;
	return 1;
}

/* guest_recorded_fn of a portfolio's inbound messages (arg: the struct
 * inbound pointers, in the order given): whatsapp.received when new. Its
 * texts are written straight (jsonw), one a webhook call: a jansson tree
 * cost as much as the event's insert. */
static int received(struct store_tx *tx, size_t i, const struct guest_msg_outcome *out, void *arg)
{
	const struct inbound *in = ((const struct inbound *const *)arg)[i];
	char at[CLOCK_RFC3339_LEN];
	struct buf data, props;
	int rc = 0;

	if (out->duplicate)
		return 0;
	buf_init(&data, 0);
	buf_init(&props, 0);
	clock_format_ms(in->g.at, at);
	if (buf_putc(&data, '{') < 0 || jsonw_key(&data, "message_id", 1) < 0 ||
	    jsonw_str(&data, out->message_id) < 0 || jsonw_key(&data, "thread_id", 0) < 0 ||
	    jsonw_str(&data, out->thread_id) < 0 || jsonw_key(&data, "guest_id", 0) < 0 ||
	    jsonw_str(&data, out->guest_id) < 0 || jsonw_key(&data, "from", 0) < 0 ||
	    jsonw_str(&data, in->phone) < 0 || jsonw_key(&data, "name", 0) < 0 ||
	    jsonw_str(&data, in->g.name) < 0 || jsonw_key(&data, "text", 0) < 0 ||
	    jsonw_str(&data, in->g.text) < 0 || jsonw_key(&data, "wamid", 0) < 0 ||
	    jsonw_str(&data, in->g.external_id) < 0 || jsonw_key(&data, "received_at", 0) < 0 ||
	    jsonw_str(&data, at) < 0 || buf_putc(&data, '}') < 0 || buf_putc(&props, '[') < 0 ||
	    jsonw_str(&props, in->ch->property_id) < 0 || buf_putc(&props, ']') < 0)
		rc = STORE_ERR;
	if (rc == 0)
		rc = outbox_append_text(tx, "v1", "whatsapp.received", in->ch->portfolio_id,
					props.data, data.data);
	buf_free(&data);
	buf_free(&props);
	return rc < 0 ? rc : 0;
}

/* One portfolio's share of a batch: its inbound messages, in order, and
 * its rules, read before the writers' turn. */
struct share {
	const char *pf;
	struct inbound **in;
	size_t n;
	struct guest_rules rules;
};

/* Records the messages of share sh. */
static int record_share(struct store_tx *tx, const struct share *sh, int64_t now)
{
	struct guest_msg *g = calloc(sh->n, sizeof *g);
	struct guest_msg_outcome *out = calloc(sh->n, sizeof *out);
	int rc = g && out ? 0 : STORE_ERR;

	for (size_t i = 0; rc >= 0 && i < sh->n; i++)
		g[i] = sh->in[i]->g;
	if (rc >= 0)
		rc = guest_messages_record(tx, sh->pf, &sh->rules, g, sh->n, now, out, received,
					   (void *)sh->in);
	free(g);
	free(out);
	return rc < 0 ? rc : 0;
}

/* Records one status s of channel ch; whatsapp.sent when it is the
 * delivery of a message we sent. */
static int record_status(struct store_tx *tx, const struct channel *ch, const json_t *s, int64_t now)
{
	const char *wamid = json_string_value(json_object_get(s, "id"));
	const char *status = json_string_value(json_object_get(s, "status"));
	const json_t *e = json_array_get(json_object_get(s, "errors"), 0);
	char error[300] = "";
	json_t *msg = NULL, *data, *props;
	int rc;

	if (!wamid || !status ||
	    (strcmp(status, "sent") && strcmp(status, "delivered") && strcmp(status, "read") &&
	     strcmp(status, "failed")))
		return 0;
	if (e)
		snprintf(error, sizeof error, "%lld %s",
			 (long long)json_integer_value(json_object_get(e, "code")),
			 json_string_value(json_object_get(e, "title"))
				 ? json_string_value(json_object_get(e, "title"))
				 : "failed");
	rc = guest_message_status(tx, "whatsapp", wamid, status, error[0] ? error : NULL, now, &msg);
	if (rc != 1)
		return rc < 0 ? rc : 0;
	data = json_pack("{s:O, s:O, s:s, s:O, s:o}", "message_id", json_object_get(msg, "id"),
			 "thread_id", json_object_get(msg, "thread_id"), "wamid", wamid, "template",
			 json_object_get(msg, "template"), "delivered_at", jsonw_time(now));
	props = json_pack("[s]", ch->property_id);
	rc = data && props ? outbox_append(tx, "v1", "whatsapp.sent", ch->portfolio_id, props, data,
					   NULL, 0)
			   : STORE_ERR;
	json_decref(data);
	json_decref(props);
	json_decref(msg);
	return rc < 0 ? rc : 0;
}

/* A webhook call checked, waiting for its transaction. */
struct whatsapp_call {
	json_t *values;      /* the body's change values */
	struct channel *chs; /* one per value; secret NULL: no channel of ours */
	size_t n;
	uint64_t seen; /* store_changes(STORE_CH_PROPERTIES) as the call began */
	void (*done)(void *arg, int rc);
	void *done_arg;
};

void whatsapp_call_free(struct whatsapp_call *c)
{
	if (!c)
		return;
	for (size_t i = 0; c->chs && i < c->n; i++)
		channel_free(&c->chs[i]);
	free(c->chs);
	json_decref(c->values);
	free(c);
}

/* The inbound messages of calls[0..n), in order, into *out (owned). */
static int inbound_all(struct whatsapp_call *const *calls, size_t n, int64_t now,
		       struct inbound **out, size_t *count)
{
	const json_t *v, *m;
	size_t i, j, k, cap = 0;
	struct inbound *in = NULL;

	*count = 0;
	for (i = 0; i < n; i++)
		json_array_foreach(calls[i]->values, j, v)
			cap += json_array_size(json_object_get(v, "messages"));
	if (cap && !(in = calloc(cap, sizeof *in)))
		return STORE_ERR;
	for (i = 0; i < n; i++)
		json_array_foreach(calls[i]->values, j, v) {
			if (!calls[i]->chs[j].secret)
				continue;
			json_array_foreach(json_object_get(v, "messages"), k, m)
				*count += inbound_of(&calls[i]->chs[j], v, m, now, &in[*count]);
		}
	*out = in;
	return 0;
}

/* Splits in[0..count) by portfolio, in the order of their first
 * message, into sh (room for count; *nsh set), in (room for count: the
 * shares' message pointers), each with its rules (rules_get). */
static int share_out(struct whatsapp *wa, struct store_tx *tx, uint64_t seen, struct inbound *in,
		     size_t count, struct inbound **ptrs, struct share *sh, size_t *nsh)
{
	size_t i, j, used = 0;
	int rc = 0;

	*nsh = 0;
	for (i = 0; rc >= 0 && i < count; i++) {
		const char *pf = in[i].ch->portfolio_id;

		for (j = 0; j < *nsh && strcmp(sh[j].pf, pf); j++)
			;
		if (j < *nsh)
			continue;
		sh[j] = (struct share){pf, ptrs + used, 0, {NULL, {0, 0, 0}}};
		(*nsh)++;
		for (size_t k = i; k < count; k++)
			if (!strcmp(in[k].ch->portfolio_id, pf))
				sh[j].in[sh[j].n++] = &in[k];
		used += sh[j].n;
		rc = rules_get(wa, tx, pf, seen, &sh[j].rules);
	}
	return rc < 0 ? rc : 0;
}

/* store_group_fn (arg: the struct whatsapp): records the messages of the
 * webhook calls jobs[0..n) (a guest_messages_record batch per portfolio,
 * the portfolios' rules read, when not kept, before the writers' turn)
 * and then their statuses. */
static int record_calls(struct store_tx *tx, void *const *jobs, size_t n, void *arg)
{
	struct whatsapp_call *const *calls = (struct whatsapp_call *const *)jobs;
	int64_t now = clock_now_ms();
	struct inbound *in = NULL, **ptrs = NULL;
	struct share *sh = NULL;
	const json_t *v, *s;
	size_t count, nsh = 0, i, j, k;
	uint64_t seen = 0;
	int rc = inbound_all(calls, n, now, &in, &count);

	for (i = 0; i < n; i++)
		if (calls[i]->seen > seen)
			seen = calls[i]->seen;

	if (rc >= 0 && count &&
	    (!(ptrs = calloc(count, sizeof *ptrs)) || !(sh = calloc(count, sizeof *sh))))
		rc = STORE_ERR;
	if (rc >= 0 && count)
		rc = share_out(arg, tx, seen, in, count, ptrs, sh, &nsh);
	if (rc >= 0)
		rc = store_turn(tx);
	for (i = 0; rc >= 0 && i < nsh; i++)
		rc = record_share(tx, &sh[i], now);
	for (i = 0; rc >= 0 && i < n; i++)
		json_array_foreach(calls[i]->values, j, v) {
			if (!calls[i]->chs[j].secret)
				continue;
			json_array_foreach(json_object_get(v, "statuses"), k, s)
				if (rc >= 0)
					rc = record_status(tx, &calls[i]->chs[j], s, now);
		}
	for (i = 0; i < nsh; i++)
		guest_rules_free(&sh[i].rules);
	free(sh);
	free(ptrs);
	free(in);
	return rc < 0 ? rc : 0;
}

/* Copies c (its secret, no token) into out. Returns 0 or STORE_ERR. */
static int channel_copy(const struct channel *c, struct channel *out)
{
	*out = *c;
	out->token = NULL;
	out->secret = strdup(c->secret);
	return out->secret ? 0 : STORE_ERR;
}

/* The channel of phone number id pnid into c (secret opened, no token):
 * a kept copy, else read (a statement alone) and kept. seen: as the call
 * began (struct whatsapp_call). Returns 1, 0 (no such channel) or < 0. */
static int channel_get(struct whatsapp *wa, const unsigned char key[32], const char *pnid,
		       uint64_t seen, struct channel *c)
{
	int64_t now = clock_mono_ms();
	struct kept *k, *slot;
	struct kept_channel *kc;
	struct store_tx *tx;
	int rc;

	memset(c, 0, sizeof *c);
	pthread_mutex_lock(&wa->kept_mu);
	k = kept_find(wa->channels, CHANNELS_KEPT, sizeof *wa->channels, pnid, seen, now, &slot);
	rc = k ? channel_copy(&((struct kept_channel *)k)->ch, c) : 2;
	pthread_mutex_unlock(&wa->kept_mu);
	if (rc != 2)
		return rc < 0 ? rc : 1;
	if ((rc = store_begin(wa->st, STORE_READ_ONE, &tx)) != STORE_OK)
		return rc;
	rc = channel_by(tx, key, CHANNEL_COLS "phone_number_id = $1", pnid, 0, c);
	store_rollback(tx);
	if (rc != 1)
		return rc;
	pthread_mutex_lock(&wa->kept_mu);
	kc = (struct kept_channel *)slot;
	channel_free(&kc->ch);
	kept_mark(slot, pnid, seen, now, channel_copy(c, &kc->ch) == 0);
	pthread_mutex_unlock(&wa->kept_mu);
	return 1;
}

/* Finds the channels of c's values and checks signature against each one
 * known. Returns 0 with *result (and why), or < 0. */
static int check_call(struct whatsapp *wa, const unsigned char key[32], struct whatsapp_call *c,
		      const char *raw, size_t len, const char *signature,
		      enum whatsapp_result *result, char *why, size_t cap)
{
	const json_t *v;
	size_t i, known = 0;
	int rc = 0;

	*result = WHATSAPP_UNSIGNED;
	snprintf(why, cap, "the signature does not verify");
	json_array_foreach(c->values, i, v) {
		if ((rc = channel_get(wa, key, pnid_of(v), c->seen, &c->chs[i])) < 0)
			return rc;
		if (rc == 1 && !signed_by(c->chs[i].secret, raw, len, signature))
			return 0;
		known += rc == 1;
	}
	if (!known)
		snprintf(why, cap, "no channel of this server has the phone number id of the call");
	else
		*result = WHATSAPP_OK;
	return 0;
}

int whatsapp_check(struct whatsapp *wa, const unsigned char key[32], const json_t *doc,
		   const char *raw, size_t len, const char *signature, struct whatsapp_call **call,
		   enum whatsapp_result *result, char *why, size_t cap)
{
	struct whatsapp_call *c = calloc(1, sizeof *c);
	int rc = 0;

	*call = NULL;
	*result = WHATSAPP_BAD_BODY;
	if (!c)
		return STORE_ERR;
	if (!(c->values = values_of(doc, why, cap)))
		goto out;
	/* once a call, before any kept copy is looked at (on SQLite a read
	 * of the database file's header) */
	c->seen = store_changes(wa->st, STORE_CH_PROPERTIES);
	c->n = json_array_size(c->values);
	if (!(c->chs = calloc(c->n ? c->n : 1, sizeof *c->chs))) {
		rc = STORE_ERR;
		goto out;
	}
	rc = check_call(wa, key, c, raw, len, signature, result, why, cap);
	if (rc == 0 && *result == WHATSAPP_OK) {
		*call = c;
		c = NULL;
	}
out:
	whatsapp_call_free(c);
	return rc < 0 ? rc : 0;
}

/* store_group_done_fn: the call's outcome to its caller, once the call
 * is freed (so the caller, once told, holds the only references left to
 * the body's tree, and frees it on its own thread). */
static void recorded(void *arg, int rc)
{
	struct whatsapp_call *c = arg;
	void (*done)(void *arg, int rc) = c->done;
	void *done_arg = c->done_arg;

	whatsapp_call_free(c);
	done(done_arg, rc);
}

int whatsapp_record(struct whatsapp *wa, struct whatsapp_call *call,
		    void (*done)(void *arg, int rc), void *arg)
{
	call->done = done;
	call->done_arg = arg;
	if (store_group_submit(wa->inbound, call, recorded, call) == 0)
		return 0;
	whatsapp_call_free(call);
	return -1;
}

/* ------------------------------------------------------------ outbound */

/* The Cloud API body of a template message to phone (E.164). */
static char *send_body(const struct guest_outbound *o)
{
	json_t *tpl = o->template_json ? json_loads(o->template_json, 0, NULL) : NULL;
	json_t *params = json_array(), *p, *body;
	char *text = NULL;
	size_t i;

	json_array_foreach(json_object_get(tpl, "parameters"), i, p)
		json_array_append_new(params, json_pack("{s:s, s:O}", "type", "text", "text", p));
	body = json_pack("{s:s, s:s, s:s, s:{s:O, s:{s:O}, s:[{s:s, s:o}]}}", "messaging_product",
			 "whatsapp", "to", o->phone + 1, "type", "template", "template", "name",
			 json_object_get(tpl, "name"), "language", "code",
			 json_object_get(tpl, "language"), "components", "type", "body",
			 "parameters", params);
	if (body)
		text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	json_decref(tpl);
	return text;
}

/* One send's outcome. */
struct sent {
	int ok, permanent;
	char wamid[256], error[300];
};

/* Sends o through ch; fills s. */
static void send_one(struct whatsapp *wa, const struct channel *ch, const struct guest_outbound *o,
		     struct sent *s)
{
	char url[800], auth[600], *body = send_body(o);
	const char *headers[] = {auth, "Content-Type: application/json", NULL};
	struct httpc_request q;
	json_t *ans;

	memset(s, 0, sizeof *s);
	if (!body || !o->phone[0]) {
		s->permanent = 1;
		snprintf(s->error, sizeof s->error, "the message has no template or no recipient");
		free(body);
		return;
	}
	if (!wa->base[0]) {
		s->ok = 1;
		snprintf(s->wamid, sizeof s->wamid, "wamid.SIM%.40s", o->id);
		free(body);
		return;
	}
	snprintf(url, sizeof url, "%s/%s/%s/messages", wa->base, WHATSAPP_API_VERSION,
		 ch->phone_number_id);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", ch->token);
	memset(&q, 0, sizeof q);
	q.method = "POST";
	q.url = url;
	q.headers = headers;
	q.body = body;
	q.body_len = strlen(body);
	q.timeout_ms = WHATSAPP_TIMEOUT_MS;
	q.max_response = 64 * 1024;
	if (httpc_perform(&q, 1) < 0 || q.error != HTTPC_OK) {
		snprintf(s->error, sizeof s->error, "no answer from the Cloud API: %s",
			 q.error != HTTPC_OK ? q.errmsg : "no memory");
	} else {
		ans = json_loadb(q.response.data ? q.response.data : "", q.response.len, 0, NULL);
		const char *id = json_string_value(
			json_object_get(json_array_get(json_object_get(ans, "messages"), 0), "id"));
		const char *msg =
			json_string_value(json_object_get(json_object_get(ans, "error"), "message"));

		if (q.status / 100 == 2 && id && strlen(id) < sizeof s->wamid) {
			s->ok = 1;
			snprintf(s->wamid, sizeof s->wamid, "%s", id);
		} else {
			s->permanent = q.status / 100 == 4 && q.status != 429 && q.status != 408;
			snprintf(s->error, sizeof s->error, "the Cloud API answered HTTP %ld%s%s",
				 q.status, msg ? ": " : "", msg ? msg : "");
		}
		json_decref(ans);
	}
	buf_free(&q.response);
	free(body);
}

/* Records s for o: sent, failed for good, or retried later. */
static int record_send(struct store *st, const struct guest_outbound *o, const struct sent *s)
{
	struct store_tx *tx;
	int64_t now = clock_now_ms(), next = 0;
	int last = o->attempts + 1 >= (int64_t)ARRAY_LEN(retry_ms) + 1;
	const char *status = s->ok ? "sent" : (s->permanent || last) ? "failed" : "queued";
	int rc = store_begin(st, STORE_WRITE, &tx);

	if (!s->ok && !strcmp(status, "queued"))
		next = now + clock_business_ms(retry_ms[o->attempts]);
	if (!s->ok)
		log_msg(LOG_WARN, "whatsapp", "message %s: %s%s", o->id, s->error,
			strcmp(status, "failed") ? "; tried again later" : "; given up");
	if (rc != STORE_OK)
		return rc;
	/* guest_outbound_done only moves a queued message: a retry stays
	 * queued with its next time */
	rc = guest_outbound_done(tx, o->id, status, s->ok ? s->wamid : NULL,
				 s->ok ? NULL : s->error, next, now);
	return store_finish(tx, rc);
}

/* Sends the claimed messages o[0..n). */
static void send_claimed(struct store *st, const unsigned char key[32], struct whatsapp *wa,
			 const struct guest_outbound *o, int n)
{
	int64_t start = clock_mono_ms();
	struct channel ch;
	struct store_tx *tx;
	struct sent s;
	int rc;

	for (int i = 0; i < n && clock_mono_ms() - start < WHATSAPP_SEND_BUDGET_MS; i++) {
		if ((rc = store_begin(st, STORE_READ, &tx)) != STORE_OK)
			return;
		rc = channel_by(tx, key, CHANNEL_COLS "property_id = $1", o[i].property_id, 1, &ch);
		store_rollback(tx);
		if (rc < 0)
			continue;
		if (rc == 0) {
			s = (struct sent){0, 1, "", "the property has no WhatsApp channel any more"};
		} else {
			send_one(wa, &ch, &o[i], &s);
			channel_free(&ch);
		}
		if (record_send(st, &o[i], &s) < 0)
			log_msg(LOG_WARN, "whatsapp", "could not record the send of %s", o[i].id);
	}
}

int whatsapp_send_due(struct store *st, const unsigned char key[32], struct whatsapp *wa)
{
	struct guest_outbound o[16];
	struct store_tx *tx;
	int n, rc = store_begin(st, STORE_WRITE, &tx);

	if (rc != STORE_OK)
		return rc;
	n = guest_outbound_claim(tx, "whatsapp", clock_now_ms(), WHATSAPP_SEND_LEASE_MS, 16, o);
	if ((rc = store_finish(tx, n)) != STORE_OK) {
		if (n > 0)
			guest_outbound_free(o, n);
		return rc;
	}
	send_claimed(st, key, wa, o, n);
	guest_outbound_free(o, n);
	return n;
}
