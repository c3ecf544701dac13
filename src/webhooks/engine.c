#include "webhooks/engine.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/id.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "core/trace.h"
#include "net/egress.h"
#include "net/httpc.h"
#include "store/store.h"
#include "webhooks/due_sql.h"
#include "webhooks/signing.h"
#include "webhooks/subscriptions.h"

#define MIN_MS 60000LL
#define HOUR_MS (60 * MIN_MS)
static const int64_t v1_offsets[] = {MIN_MS,       5 * MIN_MS,   15 * MIN_MS,
				     HOUR_MS,      4 * HOUR_MS,  12 * HOUR_MS,
				     24 * HOUR_MS, 48 * HOUR_MS, 72 * HOUR_MS};
static const int64_t v2_offsets[] = {MIN_MS,      5 * MIN_MS,   15 * MIN_MS, HOUR_MS,
				     4 * HOUR_MS, 12 * HOUR_MS, 24 * HOUR_MS};

/* An uncapped lane's claimed and unrecorded deliveries, at most:
 * ENGINE_LANE_CONCURRENCY sending and as many again waiting in the HTTP
 * thread for a slot, so a slot is refilled as soon as its transfer ends,
 * without waiting for the recorder's next turn. A capped lane claims only
 * as many as it may send (its sends must stay 1/rate apart, which a
 * release of waiting ones would break; at 80/s at most, its slots are
 * never what limits it). */
#define LANE_CLAIMED (2 * ENGINE_LANE_CONCURRENCY)
#define FANOUT_BATCH 500
/* A batch also ends once it made this many deliveries, so a burst to many
 * subscriptions never holds the write lock (which the recorders need) for
 * long: 500 events x 32 subscriptions in one transaction held it ~0.1 s. */
#define FANOUT_MAX_DELIVERIES 2000
/* How often an idle fan-out looks at the outbox (events also come from
 * other processes, e.g. revopsctl, so there is nothing to wait on). A read
 * of one index entry: 200 a second cost nothing measurable, and at 20 ms
 * a small backlog ran dry between looks (deliveries/s at 1k pending: 22.2k
 * and 19.9k at 20 ms, 24.8k and 24.1k at 5 ms, alternated). */
#define FANOUT_IDLE_MS 5
/* With no subscription anywhere, a fan-out batch only moves the cursor
 * over the new events; then it runs at most every FANOUT_NOSUB_MS, not
 * after every commit that announces events (two transactions, about 6 %
 * of the CPU of a WhatsApp webhook call on PostgreSQL, which announces
 * one). A new subscription's first events wait that long at most. */
#define FANOUT_NOSUB_MS 100
#define MAX_IN_FLIGHT 512
#define SNIPPET_MAX 1024
#define POLL_IDLE_MS 1000
/* The watch thread's scans of every lane: at most one per WATCH_GAP_MS,
 * and one per WATCH_PERIOD_MS without announcements (watch_main). */
#define WATCH_GAP_MS 1000
#define WATCH_PERIOD_MS 5000
#define NO_DUE INT64_MAX
/* Room for a sealed signing secret (crypto_seal of a 50-byte secret is far
 * shorter). */
#define SEALED_MAX 1024

int engine_schedule(const char *surface, const int64_t **offsets)
{
	if (!strcmp(surface, "v1")) {
		*offsets = v1_offsets;
		return (int)ARRAY_LEN(v1_offsets);
	}
	*offsets = v2_offsets;
	return (int)ARRAY_LEN(v2_offsets);
}

/* ---------------------------------------------------------------- lanes */

struct lane {
	char *key;
	int rate;      /* sends per second, 0 = no cap */
	int owner;     /* the sender that serves it */
	int in_flight; /* claimed and not yet recorded; recorder only */
	int finished;  /* of those, finished and about to be recorded; recorder only */
	/* The HTTP thread's: transfers running, and claimed flights waiting
	 * for one of the ENGINE_LANE_CONCURRENCY slots (FIFO). */
	int running;
	struct flight *wait_head, *wait_tail;
	/* The signing key of its deliveries, prepared, and the sealed value it
	 * was opened from (reopened when that changes: a rotation); owner's
	 * recorder only. */
	char *sealed;
	struct signing_key *skey;
	double tat;     /* GCRA theoretical arrival time, mono ms; recorder only */
	int64_t due_ms; /* earliest known due time (wall ms); under mu */
	unsigned gen;   /* bumped by every notify; under mu */
	int64_t hash;   /* engine_lane_hash(key): the due index's key */
	/* The seqs of its deliveries claimed and not yet recorded (their rows
	 * still look due, so selection skips them); owner's recorder only. A
	 * turn records before it claims, so at most LANE_CLAIMED are claimed
	 * plus as many finished, awaiting their record. */
	int64_t flying[2 * LANE_CLAIMED];
	int nflying;
};

/* A claim row (webhook_claims): deleted with the outcome of its last
 * delivery. Recorder only. */
struct claim_row {
	int64_t id;
	int left;
};

struct flight {
	struct httpc_request req;
	struct lane *lane;
	struct claim_row *claim;
	int64_t seq;
	char id[ID_MAX];
	char surface[4];
	int attempt;
	int manual;
	int64_t origin;     /* schedule origin, 0 before the first attempt */
	int64_t started_at; /* wall ms */
	char *url, *body;
	size_t body_len;
	char hdr[9][160];
	const char *hdrs[10];
	struct flight *next_wait; /* in its lane's wait list (HTTP thread) */
};

/* A flight list guarded by its sender's qmu. */
struct flight_queue {
	struct flight **f;
	size_t n, cap;
};

/* One sender: two threads that serve the lanes whose owner it is. The HTTP
 * thread only drives its asynchronous client: it queues the flights the
 * recorder hands it behind their lanes, starts them as the lanes' slots
 * free, and hands back the finished ones. The recorder does
 * all the database work: it records outcomes, plans and claims. Neither
 * waits for the other, so transfers progress during database turns and
 * turns batch whatever finished meanwhile. */
struct sender {
	struct engine *d;
	int index;
	pthread_t http_thr, rec_thr;
	int http_started, rec_started;
	struct httpc_async *http;
	size_t rr;        /* round-robin start; recorder only */
	size_t in_flight; /* claimed, not yet recorded; recorder only */
	pthread_mutex_t qmu;
	pthread_cond_t qcond;       /* the recorder waits here */
	struct flight_queue ready;  /* claimed, to start (recorder -> HTTP) */
	struct flight_queue done;   /* finished, to record (HTTP -> recorder) */
	struct flight_queue spare;  /* the HTTP thread's, swapped with ready */
	struct flight_queue failed; /* the HTTP thread's: ended at once, to hand back */
	int wake;                   /* under qmu: plan again (a lane got work) */
	volatile int rec_exited;
};

struct engine {
	struct store *st;
	struct engine_opts o;
	unsigned char seal_key[32];
	pthread_t fanout_thr, watch_thr;
	int fanout_started, watch_started;
	struct sender senders[ENGINE_MAX_SENDERS];
	int nsenders;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	volatile int stop;
	int drain_ms;
	struct lane **lanes; /* under mu (the array; see struct lane for fields) */
	size_t nlanes, lanes_cap;
	int64_t cursor;                     /* fan-out thread only */
	_Atomic uint64_t delivered, failed; /* attempts recorded by this process */
};

void engine_counts(struct engine *d, uint64_t *delivered, uint64_t *failed)
{
	*delivered = d ? atomic_load(&d->delivered) : 0;
	*failed = d ? atomic_load(&d->failed) : 0;
}

void engine_touch(struct engine_touched *t, const char *lane, int rate)
{
	int i;

	for (i = 0; i < t->n; i++)
		if (!strcmp(t->lanes[i], lane))
			return;
	if (t->n == (int)ARRAY_LEN(t->lanes) || strlen(lane) >= sizeof t->lanes[0]) {
		t->overflow = 1;
		return;
	}
	snprintf(t->lanes[t->n], sizeof t->lanes[0], "%s", lane);
	t->rates[t->n++] = rate;
}

/* FNV-1a: spreads lanes over the senders. */
static unsigned lane_hash(const char *s)
{
	unsigned h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* The lane's key in the due index: 64-bit FNV-1a cut to 63 bits, never 0
 * (0 marks rows made before the column existed). Two lanes with the same
 * hash stay correct: every query also compares the lane text. */
int64_t engine_lane_hash(const char *lane)
{
	uint64_t h = 14695981039346656037ull;

	for (; *lane; lane++)
		h = (h ^ (unsigned char)*lane) * 1099511628211ull;
	h &= INT64_MAX;
	return h ? (int64_t)h : 1;
}

/* Wakes every sender's recorder (to plan) and HTTP thread. */
static void wake_senders(struct engine *d)
{
	struct sender *sd;
	int i;

	for (i = 0; i < d->nsenders; i++) {
		sd = &d->senders[i];
		if (!sd->http)
			continue;
		pthread_mutex_lock(&sd->qmu);
		sd->wake = 1;
		pthread_cond_signal(&sd->qcond);
		pthread_mutex_unlock(&sd->qmu);
		httpc_async_wakeup(sd->http);
	}
}

/* Makes room for n flights in q. The queues and a turn's finished list
 * get MAX_IN_FLIGHT at start, the most a sender has claimed at once, so
 * pushes never allocate (and never fail) afterwards. */
static int queue_reserve(struct flight_queue *q, size_t n)
{
	struct flight **g = realloc(q->f, n * sizeof *g);

	if (!g)
		return -1;
	q->f = g;
	q->cap = n;
	return 0;
}

/* Appends f to q (caller holds qmu). -1: no memory. */
static int queue_push(struct flight_queue *q, struct flight *f)
{
	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 256;
		struct flight **g = realloc(q->f, cap * sizeof *g);

		if (!g)
			return -1;
		q->f = g;
		q->cap = cap;
	}
	q->f[q->n++] = f;
	return 0;
}

/* The lane named key, made when missing. Caller holds mu. NULL: no memory. */
static struct lane *lane_get(struct engine *d, const char *key, int rate)
{
	struct lane *l, **grown;
	size_t i;

	for (i = 0; i < d->nlanes; i++)
		if (!strcmp(d->lanes[i]->key, key))
			return d->lanes[i];
	if (d->nlanes == d->lanes_cap) {
		size_t cap = d->lanes_cap ? d->lanes_cap * 2 : 16;

		grown = realloc(d->lanes, cap * sizeof *grown);
		if (!grown)
			return NULL;
		d->lanes = grown;
		d->lanes_cap = cap;
	}
	l = calloc(1, sizeof *l);
	if (!l || !(l->key = strdup(key))) {
		free(l);
		return NULL;
	}
	l->rate = rate;
	l->hash = engine_lane_hash(key);
	l->owner = (int)(lane_hash(key) % (unsigned)d->nsenders);
	l->due_ms = NO_DUE;
	d->lanes[d->nlanes++] = l;
	return l;
}

/* Loads every lane with deliveries waiting and its earliest due time. */
static int lanes_rescan(struct engine *d)
{
	struct store_tx *tx;
	struct store_rows *r;
	struct lane *l;
	int rc;

	if ((rc = store_begin(d->st, STORE_READ_ONE, &tx)) != STORE_OK)
		return rc;
	rc = store_query(tx, LANES_SQL, NULL, 0, &r);
	if (rc == STORE_OK) {
		pthread_mutex_lock(&d->mu);
		while ((rc = store_next(r)) == 1) {
			l = lane_get(d, store_text(r, 0), (int)store_int(r, 1));
			if (!l)
				continue;
			if (store_int(r, 2) < l->due_ms)
				l->due_ms = store_int(r, 2);
			l->gen++;
		}
		pthread_mutex_unlock(&d->mu);
		store_rows_close(r);
	}
	store_rollback(tx);
	return rc < 0 ? rc : 0;
}

void engine_notify(struct engine *d, const struct engine_touched *t)
{
	struct lane *l;
	int i;

	if (!d || !t || (!t->n && !t->overflow))
		return;
	if (t->overflow) {
		if (lanes_rescan(d) < 0)
			log_msg(LOG_ERROR, "webhook", "cannot rescan delivery lanes");
	}
	pthread_mutex_lock(&d->mu);
	for (i = 0; i < t->n; i++) {
		l = lane_get(d, t->lanes[i], t->rates[i]);
		if (!l)
			continue;
		l->due_ms = 0;
		l->gen++;
	}
	pthread_mutex_unlock(&d->mu);
	wake_senders(d);
}

struct notify_later {
	struct engine *d;
	struct engine_touched t;
};

static void notify_later(void *arg)
{
	struct notify_later *n = arg;

	engine_notify(n->d, &n->t);
}

/* Commits tx, which made deliveries due in the lanes of t: announced to
 * every node, and this node's senders of those lanes woken once it has
 * committed (a scope may hold the commit past store_finish: store.h).
 * Returns a store status. */
static int notify_after(struct engine *d, struct store_tx *tx, const struct engine_touched *t)
{
	struct notify_later *n = store_after_commit(tx, notify_later, sizeof *n);
	int rc = n ? store_notify(tx, STORE_CH_DELIVERIES) : STORE_ERR;

	if (n) {
		n->d = d;
		n->t = *t;
	}
	return store_finish(tx, rc);
}

/* -------------------------------------------------------------- fan-out */

static int plan_rate(const char *plan)
{
	if (!strcmp(plan, "enterprise"))
		return 80;
	if (!strcmp(plan, "group"))
		return 20;
	return 5;
}

/* The envelope around the delivery id: prefix + delivery id + suffix is the
 * body (spec "Webhook event envelope" v1 / v2, fields in table order). */
static int envelope(const struct outbox_event *ev, struct buf *pre, struct buf *suf)
{
	char ts[CLOCK_RFC3339_LEN];
	json_t *props = json_loads(ev->property_ids, 0, NULL);
	const char *first = json_string_value(json_array_get(props, 0));
	int rc = -1;

	clock_format_ms(ev->created_at, ts);
	if (!json_is_array(props))
		goto out;
	if (buf_puts(pre, "{\"id\":") < 0 || jsonw_str(pre, ev->id) < 0 ||
	    buf_puts(pre, ",\"type\":") < 0 || jsonw_str(pre, ev->type) < 0 ||
	    buf_puts(pre, ",\"created_at\":") < 0 || jsonw_str(pre, ts) < 0 ||
	    buf_puts(pre, ",\"delivery_id\":\"") < 0)
		goto out;
	if (buf_putc(suf, '"') < 0)
		goto out;
	if (!strcmp(ev->surface, "v1")) {
		if (buf_puts(suf, ",\"property_id\":") < 0 || jsonw_str(suf, first) < 0)
			goto out;
	} else {
		if (buf_puts(suf, ",\"portfolio_id\":") < 0 || jsonw_str(suf, ev->portfolio_id) < 0 ||
		    buf_puts(suf, ",\"properties\":") < 0 || buf_puts(suf, ev->property_ids) < 0)
			goto out;
	}
	if (buf_puts(suf, ",\"data\":") < 0 || buf_puts(suf, ev->data) < 0 || buf_putc(suf, '}') < 0)
		goto out;
	rc = 0;
out:
	json_decref(props);
	return rc;
}

/* The columns of a delivery row, in the order of DELIVERY_INSERT. */
#define DELIVERY_COLS 18
#define DELIVERY_INSERT                                                                       \
	"INSERT INTO webhook_deliveries (id, portfolio_id, subscription_id, surface, target," \
	" primary_id, event_id, event_type, event_created_at, url, lane, rate_per_s, body,"   \
	" next_attempt_at, lane_hash, traceparent, state, created_at)"
/* Delivery rows gathered before one multi-row insert (STORE_MAX_PARAMS /
 * DELIVERY_COLS: one statement each). */
#define FAN_ROWS (STORE_MAX_PARAMS / DELIVERY_COLS)

/* What every delivery made for one event shares, and the rows gathered
 * for the next insert with the copies of their own values. */
struct fan {
	struct store_tx *tx;
	const struct outbox_event *ev;
	const struct buf *body;
	int64_t now;
	json_t *created; /* when not NULL, gets {id, target} per delivery */
	struct engine_touched *touched;
	struct store_val vals[FAN_ROWS * DELIVERY_COLS];
	char *owned[FAN_ROWS * 4];
	size_t nrows, nowned;
};

/* A copy of n bytes at p (NUL-terminated) that f keeps until fan_flush;
 * NULL when out of memory. */
static const char *fan_keep(struct fan *f, const char *p, size_t n)
{
	char *c = malloc(n + 1);

	if (!c)
		return NULL;
	memcpy(c, p, n);
	c[n] = '\0';
	f->owned[f->nowned++] = c;
	return c;
}

/* Inserts f's gathered rows (none when rc < 0) and frees their copies.
 * Returns rc, or the insert's store status when it failed. */
static int fan_flush(struct fan *f, int rc)
{
	if (rc >= 0 && f->nrows) {
		int st = store_send_rows(f->tx, DELIVERY_INSERT, "", DELIVERY_COLS, f->vals,
					 f->nrows);

		rc = st < 0 ? st : rc;
	}
	while (f->nowned)
		free(f->owned[--f->nowned]);
	f->nrows = 0;
	return rc;
}

/* Adds one delivery of f->ev to s (its primary URL, or its mirror with
 * primary_id naming the primary) to f's rows, notes its lane and reports
 * it; a full set of rows is inserted at once. */
static int add_delivery(struct fan *f, const struct subscription *s, const char *id,
			const char *target, const char *primary_id, const char *url,
			const char *lane, int rate)
{
	const struct outbox_event *ev = f->ev;
	const char *cid = fan_keep(f, id, strlen(id)), *clane = fan_keep(f, lane, strlen(lane));
	const char *cbody = fan_keep(f, f->body->data, f->body->len);
	const char *cprimary = primary_id ? fan_keep(f, primary_id, strlen(primary_id)) : NULL;

	if (!cid || !clane || !cbody || (primary_id && !cprimary))
		return STORE_ERR;
	memcpy(&f->vals[f->nrows++ * DELIVERY_COLS],
	       (struct store_val[]){sv_text(cid), sv_text(s->portfolio_id), sv_text(s->id),
				    sv_text(s->surface), sv_text(target), sv_text(cprimary),
				    sv_text(ev->id), sv_text(ev->type), sv_int(ev->created_at),
				    sv_text(url), sv_text(clane), sv_int(rate),
				    sv_blob(cbody, f->body->len), sv_int(f->now),
				    sv_int(engine_lane_hash(lane)), sv_text(ev->traceparent),
				    sv_text("pending"), sv_int(f->now)},
	       DELIVERY_COLS * sizeof *f->vals);
	engine_touch(f->touched, lane, rate);
	if (f->created)
		json_array_append_new(f->created,
				      json_pack("{s:s, s:s}", "id", id, "target", target));
	return f->nrows == FAN_ROWS ? fan_flush(f, 0) : 0;
}

/* Creates the deliveries of ev for the subscriptions in subs that want it
 * (all of them when ping). */
static int fan_out_event(struct store_tx *tx, const struct outbox_event *ev,
			 const struct subscription *subs, size_t nsubs, int ping, json_t *created,
			 struct engine_touched *touched)
{
	struct buf pre, suf, body, lane;
	char id[ID_MAX], mid[ID_MAX];
	struct fan f = {.tx = tx,
			.ev = ev,
			.body = &body,
			.now = clock_now_ms(),
			.created = created,
			.touched = touched};
	int rc = 0, count = 0, rate;
	size_t i;

	buf_init(&pre, 0);
	buf_init(&suf, 0);
	buf_init(&body, 0);
	buf_init(&lane, 0);
	if (envelope(ev, &pre, &suf) < 0) {
		rc = STORE_ERR;
		goto out;
	}
	for (i = 0; i < nsubs; i++) {
		const struct subscription *s = &subs[i];

		if (strcmp(s->portfolio_id, ev->portfolio_id) || strcmp(s->surface, ev->surface))
			continue;
		if (!ping && (s->created_at > ev->created_at || !subscriptions_wants(s, ev->type)))
			continue;
		buf_reset(&body);
		buf_reset(&lane);
		rate = strcmp(s->surface, "v1") ? plan_rate(s->plan) : 20;
		if (id_new("dlv_", id, sizeof id) < 0 || buf_append(&body, pre.data, pre.len) < 0 ||
		    buf_puts(&body, id) < 0 || buf_append(&body, suf.data, suf.len) < 0 ||
		    (strcmp(s->surface, "v1") ? buf_printf(&lane, "v2 %s %s", s->portfolio_id, s->url)
					      : buf_printf(&lane, "v1 %s", s->id)) < 0) {
			rc = STORE_ERR;
			goto out;
		}
		if ((rc = add_delivery(&f, s, id, "primary", NULL, s->url, lane.data, rate)) < 0)
			goto out;
		count++;
		if (!s->mirror_url || strcmp(s->surface, "v2"))
			continue;
		/* The mirror copy: its own delivery, the primary's body byte for byte. */
		buf_reset(&lane);
		if (id_new("dlv_", mid, sizeof mid) < 0 ||
		    buf_printf(&lane, "v2m %s %s", s->portfolio_id, s->mirror_url) < 0) {
			rc = STORE_ERR;
			goto out;
		}
		if ((rc = add_delivery(&f, s, mid, "mirror", id, s->mirror_url, lane.data, rate)) < 0)
			goto out;
		count++;
	}
	rc = count;
out:
	rc = fan_flush(&f, rc);
	buf_free(&pre);
	buf_free(&suf);
	buf_free(&body);
	buf_free(&lane);
	return rc;
}

/* Inside tx: creates the deliveries of ev for subscription only_sub (a ping)
 * or, when only_sub is NULL, for every enabled subscription of the event's
 * portfolio and surface that lists its type and existed when it happened.
 * Appends {"id", "target"} of each delivery to created when not NULL and
 * records the lanes in touched. Returns the number created or a negative
 * store status. */
static int fan_out_subs(struct store_tx *tx, const struct outbox_event *ev, const char *only_sub,
			json_t *created, struct engine_touched *touched)
{
	struct subscription *subs;
	size_t n;
	int rc;

	rc = subscriptions_load_enabled(tx, only_sub, &subs, &n);
	if (rc < 0)
		return rc;
	rc = fan_out_event(tx, ev, subs, n, only_sub != NULL, created, touched);
	subscriptions_free(subs, n);
	return rc;
}

/* A fan-out batch in progress (fan_out_one's arg). */
struct batch {
	struct store_tx *tx;
	const struct subscription *subs;
	size_t nsubs;
	struct engine_touched *touched;
	int64_t last; /* the seq of the last event read */
	int n;        /* events read */
	int made;     /* deliveries made */
};

/* outbox_each_after's fn: the deliveries of one event. Stops the read
 * once the batch made FANOUT_MAX_DELIVERIES. */
static int fan_out_one(const struct outbox_event *ev, void *arg)
{
	struct batch *b = arg;
	int rc;

	b->last = ev->seq;
	b->n++;
	rc = fan_out_event(b->tx, ev, b->subs, b->nsubs, 0, NULL, b->touched);
	if (rc < 0)
		return rc;
	b->made += rc;
	if (b->made >= FANOUT_MAX_DELIVERIES) {
		b->n = FANOUT_BATCH; /* more may follow: go again at once */
		return 1;
	}
	return 0;
}

/* 1 when a lane of t may be another node's to send: its bucket is not
 * held here, or t overflowed. Only then are the other nodes told (their
 * watch thread reads every lane again, a scan of every delivery due);
 * this node's own senders learn of t from engine_notify. A bucket changing
 * hands between this check and the commit is caught by the new holder's
 * rescan on taking it, or by the watch's periodic one. */
static int touched_elsewhere(const struct engine *d, const struct engine_touched *t)
{
	uint64_t held = cluster_held(d->o.cluster);

	if (t->overflow)
		return 1;
	for (int i = 0; i < t->n; i++)
		if (!(held >> ((uint64_t)engine_lane_hash(t->lanes[i]) % CLUSTER_BUCKETS) & 1))
			return 1;
	return 0;
}

/* One fan-out batch: the events after the cursor (at most FANOUT_BATCH)
 * become deliveries and the cursor moves, in one transaction; with no
 * subscription at all they are passed over unread (*no_subs set).
 * Returns how many events it took (0: nothing new; FANOUT_BATCH: more may
 * be waiting, also when the batch stopped at FANOUT_MAX_DELIVERIES) or a
 * negative store status. */
static int fan_out_batch(struct engine *d, struct engine_touched *touched, int *no_subs)
{
	struct store_tx *tx = NULL;
	struct subscription *subs = NULL;
	size_t nsubs = 0;
	int64_t seq = 0, last;
	struct batch b;
	int rc, n;

	/* A cheap read first, so an idle outbox never takes the write lock. */
	if ((rc = store_begin(d->st, 0, &tx)) != STORE_OK)
		return rc;
	rc = outbox_first_after(tx, d->cursor, &seq);
	store_rollback(tx);
	tx = NULL;
	if (rc <= 0)
		return rc;
	/* Without the writers' turn (an own writer): the events it reads
	 * commit in the order of their numbers, so those it sees are all that
	 * precede the last; it only inserts deliveries, and it never waits for
	 * the turn while it holds a row. */
	if ((rc = store_begin(d->st, STORE_WRITE_OWN, &tx)) != STORE_OK)
		return rc;
	/* The cursor as committed, its row locked until the commit: another
	 * worker node's fan-out waits here, then reads where this one left. */
	if ((rc = store_query_int(tx,
				  "UPDATE webhook_dispatch SET last_event_seq = last_event_seq"
				  " WHERE id = 1 RETURNING last_event_seq",
				  NULL, 0, &d->cursor)) < 0)
		goto out;
	/* The batch's events first, then the subscriptions: each of those
	 * events committed before the subscriptions are read, so a
	 * subscription made before any of them is among those read (on
	 * PostgreSQL every statement sees what committed before it began). */
	if ((rc = n = outbox_skip_after(tx, d->cursor, FANOUT_BATCH, &last)) < 0)
		goto out;
	if ((rc = subscriptions_load_enabled(tx, NULL, &subs, &nsubs)) < 0)
		goto out;
	*no_subs = nsubs == 0;
	b = (struct batch){tx, subs, nsubs, touched, d->cursor, 0, 0};
	/* With subscriptions, those n events read whole (events commit in the
	 * order of their numbers: they are the first n after the cursor);
	 * without any, passed over unread. */
	if (nsubs && n > 0 && (rc = outbox_each_after(tx, d->cursor, n, fan_out_one, &b)) < 0)
		goto out;
	if (!nsubs) {
		b.n = n;
		b.last = last;
	}
	rc = store_send(tx, "UPDATE webhook_dispatch SET last_event_seq = $1 WHERE id = 1",
			(struct store_val[]){sv_int(b.last)}, 1);
	if (rc >= 0 && touched_elsewhere(d, touched))
		rc = store_notify(tx, STORE_CH_DELIVERIES);
	if (rc < 0)
		goto out;
	rc = store_commit(tx);
	tx = NULL;
	if (rc == STORE_OK) {
		d->cursor = b.last;
		rc = b.n;
	}
out:
	store_rollback(tx);
	subscriptions_free(subs, nsubs);
	return rc;
}

/* The claims of nodes that are gone (NULL: made by a process before nodes
 * were recorded): their deliveries were in flight when the node stopped. */
#define DEAD_CLAIMS                                                                    \
	"webhook_claims WHERE node IS NULL OR node NOT IN (SELECT id FROM nodes WHERE" \
	" heartbeat_at > $1)"

/* Sets *n to the outstanding deliveries that dead nodes' claims name. */
static int claimed_outstanding(struct store_tx *tx, int64_t alive_after, int64_t *n)
{
	struct store_rows *r;
	struct buf seqs;
	int64_t *ids = NULL;
	size_t count = 0;
	int rc;

	buf_init(&seqs, 0);
	if ((rc = store_query(tx, "SELECT seqs FROM " DEAD_CLAIMS,
			      (struct store_val[]){sv_int(alive_after)}, 1, &r)) < 0)
		goto out;
	while ((rc = store_next(r)) == 1)
		if (buf_printf(&seqs, "%s,", store_text(r, 0)) < 0) {
			rc = STORE_ERR;
			break;
		}
	store_rows_close(r);
	if (rc < 0 || !seqs.len)
		goto out;
	if (!(ids = malloc(seqs.len * sizeof *ids))) { /* more than there are numbers */
		rc = STORE_ERR;
		goto out;
	}
	for (char *p = seqs.data; *p;) {
		ids[count++] = strtoll(p, &p, 10);
		p += *p == ',';
	}
	rc = store_count_ids(tx,
			     "SELECT COUNT(*) FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL"
			     " AND seq IN " STORE_IDS_LIST,
			     ids, count, n);
out:
	free(ids);
	buf_free(&seqs);
	return rc < 0 ? rc : STORE_OK;
}

/* Takes over the claims of nodes that stopped (a previous process of this
 * one, or another worker): counts the outstanding deliveries they name
 * (they may reach their receiver twice) and deletes them; those
 * deliveries were never changed, so they are due, and whoever holds their
 * lanes sends them. A read first, so the usual case takes no write lock. */
static int recover_claims(struct store *st)
{
	int64_t alive_after = cluster_alive_after(clock_now_ms()), dead = 0, n = 0;
	struct store_val v = sv_int(alive_after);
	struct store_tx *tx;
	int rc;

	if ((rc = store_begin(st, 0, &tx)) != STORE_OK)
		return rc;
	rc = store_query_int(tx, "SELECT COUNT(*) FROM " DEAD_CLAIMS, &v, 1, &dead);
	store_rollback(tx);
	if (rc < 0 || dead == 0)
		return rc < 0 ? rc : 0;
	if ((rc = store_begin(st, 1, &tx)) != STORE_OK)
		return rc;
	rc = claimed_outstanding(tx, alive_after, &n);
	if (rc >= 0)
		rc = store_exec(tx, "DELETE FROM " DEAD_CLAIMS, &v, 1);
	if ((rc = store_finish(tx, rc)) != STORE_OK)
		return rc;
	if (n > 0)
		log_msg(LOG_WARN, "webhook_recovered",
			"%" PRId64 " deliveries were in flight when a node stopped; sending them"
			" again (receivers may see them twice)",
			n);
	return 0;
}

/* Waits FANOUT_NOSUB_MS, or until the engine stops (d->cond runs on
 * CLOCK_MONOTONIC: engine_start). */
static void pause_no_subs(struct engine *d)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += FANOUT_NOSUB_MS * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&d->mu);
	while (!d->stop && pthread_cond_timedwait(&d->cond, &d->mu, &ts) == 0)
		;
	pthread_mutex_unlock(&d->mu);
}

/* Fan-out: a batch whenever the outbox has news (a notification, or its
 * own full batch; with no subscription, FANOUT_NOSUB_MS after a batch
 * that passed over some), else at the idle interval: FANOUT_IDLE_MS on a
 * database of its own (another process, revopsctl, notifies nobody),
 * a second where every writer notifies. On a shared database it also
 * takes over the claims of nodes that stopped, once a second. */
static void *fanout_main(void *arg)
{
	struct engine *d = arg;
	struct engine_touched touched;
	int shared = store_shared(d->st), n, no_subs = 0;
	int64_t last_recover = clock_mono_ms();
	uint64_t seen;

	while (!d->stop) {
		seen = store_notified(d->st, STORE_CH_OUTBOX);
		memset(&touched, 0, sizeof touched);
		n = fan_out_batch(d, &touched, &no_subs);
		if (n < 0)
			log_msg(LOG_ERROR, "webhook", "fan-out failed (store status %d); retrying",
				n);
		engine_notify(d, &touched);
		if (shared && clock_mono_ms() - last_recover >= 1000) {
			last_recover = clock_mono_ms();
			if (recover_claims(d->st) < 0)
				log_msg(LOG_ERROR, "webhook",
					"cannot take over stopped nodes' claims");
		}
		if (n == FANOUT_BATCH || d->stop)
			continue;
		if (n > 0 && no_subs) {
			pause_no_subs(d);
			continue;
		}
		store_wait(d->st, STORE_CH_OUTBOX, seen,
			   n < 0    ? 500
			   : shared ? 1000
				    : FANOUT_IDLE_MS);
	}
	return NULL;
}

/* Shared database: deliveries made due by other nodes (their fan-out, a
 * redelivery through an API node) are announced; the lanes are read again
 * and the senders wake. Reading every lane is a scan of every delivery
 * due (a quarter of a second with 80,000 waiting and two nodes busy), so
 * announcements that come faster are taken together, at most one scan
 * every WATCH_GAP_MS: the first one after a quiet spell at once, the ones
 * of a burst up to WATCH_GAP_MS later. Every WATCH_PERIOD_MS regardless,
 * in case one was missed. */
static void *watch_main(void *arg)
{
	struct engine *d = arg;
	uint64_t seen = store_notified(d->st, STORE_CH_DELIVERIES), now;
	int64_t last = clock_mono_ms() - WATCH_PERIOD_MS, left;
	int pending = 0;

	while (!d->stop) {
		left = last + (pending ? WATCH_GAP_MS : WATCH_PERIOD_MS) - clock_mono_ms();
		now = store_wait(d->st, STORE_CH_DELIVERIES, seen, left > 0 ? (int)left : 0);
		if (d->stop)
			break;
		pending |= now != seen;
		seen = now;
		if (clock_mono_ms() - last < (pending ? WATCH_GAP_MS : WATCH_PERIOD_MS))
			continue;
		last = clock_mono_ms();
		pending = 0;
		if (lanes_rescan(d) < 0)
			log_msg(LOG_ERROR, "webhook", "cannot rescan delivery lanes");
		wake_senders(d);
	}
	return NULL;
}

/* The cluster's probe: 1 while a lane of bucket has sends in flight. */
static int bucket_busy(void *arg, unsigned bucket)
{
	struct engine *d = arg;
	int busy = 0;

	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < d->nlanes && !busy; i++)
		busy = (uint64_t)d->lanes[i]->hash % CLUSTER_BUCKETS == bucket &&
		       d->lanes[i]->in_flight > 0;
	pthread_mutex_unlock(&d->mu);
	return busy;
}

/* The cluster took buckets: their lanes may have deliveries waiting.
 * Taken from a node that stopped, they may be in its claims: those are
 * counted first (the node is dead from the moment its leases expired),
 * before this node sends them again. */
static void buckets_taken(void *arg)
{
	struct engine *d = arg;

	if (recover_claims(d->st) < 0)
		log_msg(LOG_ERROR, "webhook", "cannot take over stopped nodes' claims");
	if (lanes_rescan(d) < 0)
		log_msg(LOG_ERROR, "webhook", "cannot rescan delivery lanes");
	wake_senders(d);
}

/* --------------------------------------------------------------- sender */

struct claim {
	struct lane *lane;
	int want;
	unsigned gen;
};

static void flight_free(struct flight *f)
{
	if (!f)
		return;
	buf_free(&f->req.response);
	free(f->url);
	free(f->body);
	free(f);
}

/* Frees a claimed flight whose outcome will not be recorded (stop, or no
 * room to queue it): its claim row stays in the database, so the delivery
 * is counted and sent again at the next start; the row's memory goes with
 * its last flight. */
static void flight_abandon(struct flight *f)
{
	if (f && f->claim && --f->claim->left == 0)
		free(f->claim);
	flight_free(f);
}

/* The error class of an attempt: NULL for a 2xx (a success). */
static const char *error_class(const struct httpc_request *r)
{
	int answered = r->error == HTTPC_OK || (r->error == HTTPC_ETOOBIG && r->status > 0);

	if (answered)
		return r->status >= 200 && r->status < 300 ? NULL : "http_status";
	switch (r->error) {
	case HTTPC_ETIMEOUT:
		return "timeout";
	case HTTPC_ECONNECT:
		return "connect";
	case HTTPC_ETLS:
		return "tls";
	case HTTPC_ERESOLVE:
		return "resolve";
	case HTTPC_EREFUSED_TARGET:
		return "refused_target";
	default:
		return "other";
	}
}

#define ATTEMPT_COLS 7

/* Records one finished attempt f in tx: its attempt row's values into
 * row[ATTEMPT_COLS] (the snippet of the answer written to snippet), for
 * the caller to insert, and its delivery moved on (delivered; retry
 * scheduled at origin + offset; or dead-lettered: schedule exhausted, or a
 * manual retry/replay failed). Sets *next_ms to the next due time or
 * NO_DUE. One UPDATE per attempt: a turn's outcomes as one UPDATE ... FROM
 * json_each over a JSON array cost ~4 us more per row (SQLite materialises
 * every updated row, body included, before writing it). */
static int record_outcome(struct store_tx *tx, struct flight *f, int64_t now, int64_t *next_ms,
			  struct store_val *row, char snippet[SNIPPET_MAX + 1])
{
	const char *err = error_class(&f->req);
	const int64_t *offs;
	int noffs = engine_schedule(f->surface, &offs);
	int64_t origin = f->origin ? f->origin : f->started_at, next = NO_DUE;
	const char *state;
	size_t n = f->req.response.len < SNIPPET_MAX ? f->req.response.len : SNIPPET_MAX;
	int rc;

	memcpy(snippet, f->req.response.data ? f->req.response.data : "", n);
	snippet[n] = '\0';
	if (!n && err && f->req.errmsg[0])
		snprintf(snippet, SNIPPET_MAX + 1, "%s", f->req.errmsg);
	jsonw_sanitize(snippet);
	if (!err) {
		state = "delivered";
	} else if (f->manual || f->attempt > noffs) {
		state = "dead_lettered";
	} else {
		state = "retry_scheduled";
		next = origin + clock_business_ms(offs[f->attempt - 1]);
	}
	*next_ms = next;
	memcpy(row,
	       (struct store_val[]){sv_text(f->id), sv_int(f->attempt), sv_int(f->started_at),
				    sv_int((int64_t)llround(f->req.duration_ms)),
				    f->req.status > 0 ? sv_int(f->req.status) : sv_null(),
				    err ? sv_text(err) : sv_null(), sv_text(snippet)},
	       ATTEMPT_COLS * sizeof *row);
	rc = store_send(tx,
			"UPDATE webhook_deliveries SET state = $2, attempt_count = $3,"
			" schedule_origin = $4, next_attempt_at = $5, manual = 0,"
			" delivered_at = CASE WHEN $2 = 'delivered' THEN $6 ELSE delivered_at END,"
			" dead_lettered_at = CASE WHEN $2 = 'dead_lettered' THEN $6"
			" ELSE dead_lettered_at END WHERE seq = $1",
			(struct store_val[]){sv_int(f->seq), sv_text(state), sv_int(f->attempt),
					     sv_int(origin),
					     next == NO_DUE ? sv_null() : sv_int(next), sv_int(now)},
			6);
	return rc < 0 ? rc : 0;
}

/* Records the n finished attempts f[]: their deliveries, and their
 * attempt rows STORE_ROWS to a statement; next[i] gets f[i]'s next due
 * time or NO_DUE. */
static int record_outcomes(struct store_tx *tx, struct flight **f, size_t n, int64_t *next)
{
	struct store_val rows[STORE_ROWS * ATTEMPT_COLS];
	char(*snips)[SNIPPET_MAX + 1] = malloc(STORE_ROWS * sizeof *snips);
	int64_t now = clock_now_ms();
	size_t i, k, j;
	int rc = snips ? 0 : STORE_ERR;

	for (i = 0; rc == 0 && i < n; i += k) {
		k = n - i < STORE_ROWS ? n - i : STORE_ROWS;
		for (j = 0; rc == 0 && j < k; j++)
			rc = record_outcome(tx, f[i + j], now, &next[i + j],
					    &rows[j * ATTEMPT_COLS], snips[j]);
		if (rc == 0)
			rc = store_send_rows(tx,
					     "INSERT INTO webhook_attempts (delivery_id, n, started_at,"
					     " duration_ms, http_status, error, response_snippet)",
					     " ON CONFLICT (delivery_id, n) DO NOTHING",
					     ATTEMPT_COLS, rows, k);
	}
	free(snips);
	if (rc < 0)
		return rc;
	for (i = 0; i < n; i++)
		if (next[i] == NO_DUE && error_class(&f[i]->req))
			log_msg(LOG_INFO, "webhook_dead_lettered", "delivery=%s attempts=%d",
				f[i]->id, f[i]->attempt);
	return 0;
}

/* The traceparent header of an attempt whose event's request carried one
 * (stored): the same trace and flags, a new span id for each attempt, so
 * the receiver's span descends from this delivery. Nothing when tp is
 * NULL or no longer parses. */
static void flight_trace(struct flight *f, const char *tp)
{
	struct trace_ctx t;
	char span[17], v[TRACE_PARENT_LEN];

	if (!tp || trace_parse(tp, &t) < 0 || trace_new_span(span) < 0)
		return;
	trace_format(&t, span, v);
	snprintf(f->hdr[8], sizeof f->hdr[8], "traceparent: %s", v);
}

/* Builds a flight from a claimed row (columns of DUE_COLS). NULL: no memory. */
static struct flight *flight_new(struct lane *lane, struct store_rows *r)
{
	struct flight *f = calloc(1, sizeof *f);

	if (!f)
		return NULL;
	f->lane = lane;
	f->seq = store_int(r, 0);
	snprintf(f->id, sizeof f->id, "%s", store_text(r, 1));
	snprintf(f->surface, sizeof f->surface, "%s", store_text(r, 2));
	f->attempt = (int)store_int(r, 8) + 1;
	f->origin = store_is_null(r, 9) ? 0 : store_int(r, 9);
	f->manual = (int)store_int(r, 10);
	f->url = strdup(store_text(r, 6));
	f->body_len = store_len(r, 7);
	f->body = malloc(f->body_len + 1);
	if (!f->url || !f->body) {
		flight_free(f);
		return NULL;
	}
	memcpy(f->body, store_text(r, 7), f->body_len);
	f->body[f->body_len] = '\0';
	snprintf(f->hdr[0], sizeof f->hdr[0], "X-Service-Event-Id: %s", store_text(r, 3));
	snprintf(f->hdr[1], sizeof f->hdr[1], "X-Service-Event-Type: %s", store_text(r, 4));
	snprintf(f->hdr[2], sizeof f->hdr[2], "X-Service-Delivery-Id: %s", f->id);
	snprintf(f->hdr[3], sizeof f->hdr[3], "webhook-id: %s", f->id);
	if (strcmp(f->surface, "v1"))
		snprintf(f->hdr[4], sizeof f->hdr[4], "X-Service-Portfolio: %s", store_text(r, 5));
	flight_trace(f, store_is_null(r, 12) ? NULL : store_text(r, 12));
	return f;
}

/* Signs f with key (fresh webhook-timestamp) and fills its header list.
 * Returns 0, or -1 when signing failed. */
static int flight_sign(struct flight *f, struct signing_key *key)
{
	char hex[SIGNING_HEX_LEN], sig[128];
	int64_t ts = clock_now_ms() / 1000;
	size_t i, n = 0;

	if (signing_key_sign(key, f->id, ts, f->body, f->body_len, hex, sig, sizeof sig) < 0)
		return -1;
	snprintf(f->hdr[5], sizeof f->hdr[5], "X-Service-Signature: %s", hex);
	snprintf(f->hdr[6], sizeof f->hdr[6], "webhook-timestamp: %" PRId64, ts);
	snprintf(f->hdr[7], sizeof f->hdr[7], "webhook-signature: %s", sig);
	for (i = 0; i < ARRAY_LEN(f->hdr); i++)
		if (f->hdr[i][0])
			f->hdrs[n++] = f->hdr[i];
	f->hdrs[n] = NULL;
	return 0;
}

static void lane_key_drop(struct lane *l)
{
	signing_key_free(l->skey);
	l->skey = NULL;
	free(l->sealed);
	l->sealed = NULL;
}

/* The signing key of l's deliveries, or NULL when unusable: a v1
 * subscription's own secret, or the v2 portfolio's (the mirror shares it).
 * The sealed value is read at every claim, so a rotation applies to the
 * next claim; it is opened only when it changed, and the lane keeps the
 * prepared key (in memory only) between claims. */
static struct signing_key *lane_key(struct engine *d, struct lane *l, struct store_tx *tx,
				    const char *surface, const char *portfolio_id,
				    const char *subscription_id)
{
	char sealed[SEALED_MAX], *secret;
	int rc;

	rc = subscriptions_sealed_secret(tx, surface, portfolio_id, subscription_id, sealed,
					 sizeof sealed);
	if (rc < 0)
		return NULL;
	if (rc == 0) {
		lane_key_drop(l);
		return NULL;
	}
	if (l->sealed && !strcmp(l->sealed, sealed))
		return l->skey;
	lane_key_drop(l);
	secret = subscriptions_open_secret(d->seal_key, sealed, surface, portfolio_id,
					   subscription_id);
	if (!secret)
		return NULL;
	l->skey = signing_key_new(secret);
	crypto_wipe(secret, strlen(secret));
	free(secret);
	if (l->skey && !(l->sealed = strdup(sealed)))
		lane_key_drop(l);
	return l->skey;
}

/* 1 when seq is one of the lane's deliveries in flight. */
static int lane_flying(const struct lane *l, int64_t seq)
{
	int i;

	for (i = 0; i < l->nflying; i++)
		if (l->flying[i] == seq)
			return 1;
	return 0;
}

static void lane_landed(struct lane *l, int64_t seq)
{
	int i;

	for (i = 0; i < l->nflying; i++)
		if (l->flying[i] == seq) {
			l->flying[i] = l->flying[--l->nflying];
			return;
		}
}

/* Takes the rows r yields as flights of l, skipping those in flight, until
 * out holds want (*n so far); the first one fetches the lane's key. Returns
 * the rows seen, or a negative store status. */
static int take_rows(struct engine *d, struct store_tx *tx, struct lane *l, struct store_rows *r,
		     int want, struct flight **out, int *n, struct signing_key **key)
{
	int rc, rows = 0;

	while ((rc = store_next(r)) == 1) {
		rows++;
		if (*n == want || lane_flying(l, store_int(r, 0)))
			continue;
		if (!(out[*n] = flight_new(l, r)))
			return STORE_ERR;
		if (*n == 0)
			*key = lane_key(d, l, tx, out[0]->surface, store_text(r, 5),
					store_text(r, 11));
		(*n)++;
	}
	return rc < 0 ? rc : rows;
}

/* One lane's selection in progress (select_lane's helpers share it). */
struct pick {
	struct engine *d;
	struct store_tx *tx;
	struct lane *l;
	int want;
	int64_t now;
	struct flight **out; /* room for want */
	int n;               /* flights in out */
	int rows;            /* due rows seen, those in flight included */
	struct signing_key *key;
};

/* Reads the seqs of up to p->want due deliveries of the lane that are not
 * in flight into seqs (room for cap), earliest first; p->rows gets the due
 * rows seen. Returns how many seqs, or a negative store status. */
static int pick_seqs(struct pick *p, int64_t *seqs, int cap)
{
	struct lane *l = p->l;
	struct store_rows *r;
	int rc, nseqs = 0;

	/* Deliveries in flight still look due: ask for that many more. */
	rc = store_query(p->tx, DUE_SEQS_SQL,
			 (struct store_val[]){sv_int(l->hash), sv_int(p->now),
					      sv_int(p->want + l->nflying)},
			 3, &r);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1) {
		p->rows++;
		if (nseqs < p->want && nseqs < cap && !lane_flying(l, store_int(r, 0)))
			seqs[nseqs++] = store_int(r, 0);
	}
	store_rows_close(r);
	return rc < 0 ? rc : nseqs;
}

/* Loads the deliveries seqs names into p->out, STORE_IDS to a statement
 * (DUE_ROWS_SQL), leaving out those that are not the lane's (another lane
 * with the same hash: the caller sees fewer than nseqs). Returns 0 or a
 * negative store status. */
static int pick_by_seq(struct pick *p, const int64_t *seqs, int nseqs)
{
	struct store_val v[STORE_IDS + 1];
	struct store_rows *r;
	int rc = 0;

	for (size_t from = 0; rc >= 0 && from < (size_t)nseqs; from += STORE_IDS) {
		store_ids_group(v, seqs, (size_t)nseqs, from);
		v[STORE_IDS] = sv_text(p->l->key);
		rc = store_query(p->tx, DUE_ROWS_SQL, v, STORE_IDS + 1, &r);
		if (rc != STORE_OK)
			break;
		rc = take_rows(p->d, p->tx, p->l, r, p->want, p->out, &p->n, &p->key);
		store_rows_close(r);
	}
	return rc < 0 ? rc : 0;
}

/* Selects the lane's due deliveries by the lane text (DUE_LANE_SQL) instead,
 * after dropping the flights taken so far: for a lane whose hash another
 * lane shares. p->rows gets the rows seen. Returns them, or a negative
 * store status. */
static int pick_by_text(struct pick *p)
{
	struct lane *l = p->l;
	struct store_rows *r;
	int rc, i;

	for (i = 0; i < p->n; i++)
		flight_free(p->out[i]);
	p->n = 0;
	rc = store_query(p->tx, DUE_LANE_SQL,
			 (struct store_val[]){sv_int(l->hash), sv_int(p->now),
					      sv_int(p->want + l->nflying), sv_text(l->key)},
			 4, &r);
	if (rc == STORE_OK) {
		rc = p->rows = take_rows(p->d, p->tx, l, r, p->want, p->out, &p->n, &p->key);
		store_rows_close(r);
	}
	return rc;
}

/* Signs the picked flights with the lane's key; one that cannot be signed
 * is marked failed, to be recorded as an attempt without being sent. */
static void pick_sign(struct pick *p)
{
	struct flight *f;
	int i;

	for (i = 0; i < p->n; i++) {
		f = p->out[i];
		if (p->key && flight_sign(f, p->key) == 0)
			continue;
		/* Sent nowhere; recorded as a failed attempt. */
		f->req.error = HTTPC_EOTHER;
		snprintf(f->req.errmsg, sizeof f->req.errmsg, "signing secret unavailable");
		f->req.status = -1;
	}
}

/* Sets *min_due to the lane's earliest due time after now, or NO_DUE when
 * none. Returns 0 or 1 (found), or a negative store status. */
static int lane_next_due(struct store_tx *tx, const struct lane *l, int64_t now, int64_t *min_due)
{
	int rc;

	rc = store_query_int(tx,
			     "SELECT next_attempt_at FROM webhook_deliveries WHERE"
			     " lane_hash = $1 AND next_attempt_at > $2 AND lane = $3"
			     " ORDER BY next_attempt_at LIMIT 1",
			     (struct store_val[]){sv_int(l->hash), sv_int(now), sv_text(l->key)}, 3,
			     min_due);
	if (rc < 0)
		return rc;
	if (rc == 0 || *min_due == 0)
		*min_due = NO_DUE;
	return rc;
}

/* Loads up to c->want due deliveries of c->lane that are not in flight, in
 * the read transaction tx, and signs them (the claim is written later,
 * under the write lock). Appends the flights to out (room for want more).
 * Sets *min_due to the lane's next due time when fewer than want were
 * due, else 0. Returns how many or a negative store status. */
static int select_lane(struct engine *d, struct store_tx *tx, const struct claim *c, int64_t now,
		       struct flight **out, int64_t *min_due)
{
	struct pick p = {d, tx, c->lane, c->want, now, out, 0, 0, NULL};
	int64_t seqs[LANE_CLAIMED];
	int rc, nseqs, i;

	*min_due = 0;
	if ((nseqs = pick_seqs(&p, seqs, (int)ARRAY_LEN(seqs))) < 0)
		return nseqs;
	rc = pick_by_seq(&p, seqs, nseqs);
	/* A seq of another lane with the same hash: select by the text. */
	if (rc >= 0 && p.n < nseqs)
		rc = pick_by_text(&p);
	if (rc < 0)
		goto fail;
	pick_sign(&p);
	/* Every due one is taken or in flight (those were due when claimed,
	 * so none is later than now): the next is in the future. */
	if (p.rows < c->want + p.l->nflying && (rc = lane_next_due(tx, p.l, now, min_due)) < 0)
		goto fail;
	rc = p.n;
	goto out;
fail:
	for (i = 0; i < p.n; i++)
		flight_free(out[i]);
out:
	return rc;
}

/* Deletes the n claim rows whose deliveries are all recorded. */
static int claims_delete(struct store_tx *tx, struct claim_row **rows, size_t n)
{
	int64_t *ids = malloc(n * sizeof *ids);
	int rc = STORE_ERR;

	if (!ids)
		return rc;
	for (size_t i = 0; i < n; i++)
		ids[i] = rows[i]->id;
	rc = store_exec_ids(tx, "DELETE FROM webhook_claims WHERE id IN " STORE_IDS_LIST, ids, n);
	free(ids);
	return rc < 0 ? rc : 0;
}

/* Writes the claim row of the n flights f inside the write transaction
 * and points them at it. Returns the row (malloc'ed) or NULL with *rc set
 * to a negative store status. */
static struct claim_row *claim_write(struct engine *d, struct store_tx *tx, struct flight **f,
				     size_t n, int64_t now, int *rc)
{
	struct claim_row *c = calloc(1, sizeof *c);
	struct buf seqs;
	size_t i;

	buf_init(&seqs, 0);
	*rc = STORE_ERR;
	if (!c)
		goto out;
	for (i = 0; i < n; i++)
		if (buf_printf(&seqs, i ? ",%" PRId64 : "%" PRId64, f[i]->seq) < 0)
			goto out;
	*rc = store_query_int(
		tx,
		"INSERT INTO webhook_claims (seqs, created_at, node) VALUES ($1, $2, $3)"
		" RETURNING id",
		(struct store_val[]){sv_text(seqs.data), sv_int(now),
				     sv_text(d->o.cluster ? cluster_node_id(d->o.cluster) : NULL)},
		3, &c->id);
	if (*rc != 1) {
		*rc = *rc < 0 ? *rc : STORE_ERR;
		goto out;
	}
	*rc = 0;
	c->left = (int)n;
	for (i = 0; i < n; i++)
		f[i]->claim = c;
out:
	buf_free(&seqs);
	if (*rc < 0) {
		free(c);
		c = NULL;
	}
	return c;
}

/* How many sends the lane's cap allows now. Sends are spaced 1/rate apart
 * with no burst (a GCRA with zero tolerance): never more than rate in any
 * second, and a late wake-up is not made up for, so jitter only lowers the
 * rate a little. */
static int lane_tokens(const struct engine *d, const struct lane *l, double mono)
{
	if (d->o.uncapped || l->rate <= 0)
		return ENGINE_LANE_CONCURRENCY;
	return l->tat <= mono ? 1 : 0;
}

/* Milliseconds until the lane's cap allows a send. */
static int lane_token_wait(const struct lane *l, double mono)
{
	double wait = l->tat - mono;

	return wait <= 0 ? 0 : (int)ceil(wait);
}

static void lane_consume(const struct engine *d, struct lane *l, int n, double mono)
{
	if (d->o.uncapped || l->rate <= 0 || n <= 0)
		return;
	if (l->tat < mono)
		l->tat = mono;
	l->tat += n * (1000.0 / l->rate);
}

/* Starts a claimed flight: the URL check, then the transfer. Returns 1
 * when it finished at once (refused or failed to start: record it), 0 when
 * running.
 *
 * The SSRF check of a send happens on the address itself: a host name is
 * resolved by libcurl's asynchronous resolver (so a slow or dead DNS server
 * holds only its own transfers, never this thread), and httpc's socket-open
 * guard refuses every forbidden address before a socket exists. The check
 * and the connection therefore use the same answer: a rebinding DNS server
 * gets no second say. A literal address is checked here. */
static int flight_start(struct sender *sd, struct flight *f)
{
	struct engine *d = sd->d;
	struct egress_target t;
	int rc;

	f->started_at = clock_now_ms();
	if (f->req.status == -1) {
		f->req.status = 0;
		return 1;
	}
	rc = egress_check_url(f->url, 0, d->o.allow_private, &t);
	if (rc != EGRESS_OK) {
		f->req.status = 0;
		f->req.error = HTTPC_EREFUSED_TARGET;
		snprintf(f->req.errmsg, sizeof f->req.errmsg, "%s", t.why);
		return 1;
	}
	f->req.method = "POST";
	f->req.url = f->url;
	f->req.body = f->body;
	f->req.body_len = f->body_len;
	f->req.headers = f->hdrs;
	f->req.timeout_ms = HTTPC_DEFAULT_TIMEOUT_MS;
	f->req.max_response = SNIPPET_MAX;
	f->req.egress_guard = 1;
	f->req.user = f;
	rc = httpc_async_start(sd->http, &f->req);
	if (rc == 0)
		return 0;
	if (rc < 0) {
		f->req.error = HTTPC_EOTHER;
		snprintf(f->req.errmsg, sizeof f->req.errmsg, "out of memory");
	}
	return 1;
}

struct turn {
	struct flight_queue fin; /* finished, to record */
	struct claim *claims;
	size_t nclaims;
	int blocked_wait; /* ms until a capped lane may send again, or -1 */
};

/* Decides which lanes to claim from now: due, under their concurrency and
 * cap, round robin from d->rr, within MAX_IN_FLIGHT overall. Returns the
 * wait (ms) until the next known due time when nothing is claimable. */
static int plan_claims(struct sender *sd, struct turn *t, int64_t now, double mono, size_t in_flight)
{
	struct engine *d = sd->d;
	size_t i, n, budget = in_flight < MAX_IN_FLIGHT ? MAX_IN_FLIGHT - in_flight : 0;
	int64_t wait = POLL_IDLE_MS;
	struct lane *l;
	uint64_t held = cluster_held(d->o.cluster);
	int want, tokens;

	t->nclaims = 0;
	pthread_mutex_lock(&d->mu);
	n = d->nlanes;
	if (!t->claims || n > 0) {
		struct claim *c = realloc(t->claims, (n ? n : 1) * sizeof *c);

		if (!c) {
			pthread_mutex_unlock(&d->mu);
			return POLL_IDLE_MS;
		}
		t->claims = c;
	}
	for (i = 0; i < n && budget > 0; i++) {
		l = d->lanes[(sd->rr + i) % n];
		if (l->owner != sd->index || !(held >> (uint64_t)l->hash % CLUSTER_BUCKETS & 1))
			continue; /* another sender's, or another node's */
		if (l->due_ms > now) {
			if (l->due_ms != NO_DUE && l->due_ms - now < wait)
				wait = l->due_ms - now;
			continue;
		}
		/* Attempts that finished count as free already: their outcome
		 * is recorded in the same transaction that claims the next. */
		want = (d->o.uncapped || l->rate <= 0 ? LANE_CLAIMED : ENGINE_LANE_CONCURRENCY) -
		       (l->in_flight - l->finished);
		if (want <= 0)
			continue;
		tokens = lane_tokens(d, l, mono);
		if (tokens <= 0) {
			if (lane_token_wait(l, mono) < wait)
				wait = lane_token_wait(l, mono);
			continue;
		}
		if (want > tokens)
			want = tokens;
		if ((size_t)want > budget)
			want = (int)budget;
		budget -= (size_t)want;
		t->claims[t->nclaims++] = (struct claim){l, want, l->gen};
	}
	if (n)
		sd->rr = (sd->rr + 1) % n;
	pthread_mutex_unlock(&d->mu);
	return (int)wait;
}

/* One turn's working lists (run_turn's helpers share them), sized at its
 * start and freed at its end. */
struct turn_work {
	struct flight **claimed; /* selected and signed; claimed once committed */
	size_t nclaimed;
	int64_t *next;                /* per finished flight: its next due time */
	struct claim_row **done_rows; /* claim rows whose last flight finished */
	size_t ndone_rows;
	int64_t *min_due; /* per claim: the lane's next due time, or 0 */
};

/* Selects and signs the deliveries of t->claims into w->claimed, in a read
 * snapshot outside the write lock, which the senders and fan-out share.
 * Each claim's want becomes how many it got (0 when its lane failed). */
static void turn_select(struct engine *d, struct turn *t, struct turn_work *w, int64_t now)
{
	struct store_tx *tx = NULL;
	size_t i;
	int got;

	if (t->nclaims && store_begin(d->st, 0, &tx) == STORE_OK) {
		for (i = 0; i < t->nclaims; i++) {
			got = select_lane(d, tx, &t->claims[i], now, w->claimed + w->nclaimed,
					  &w->min_due[i]);
			t->claims[i].want = got < 0 ? 0 : got;
			if (got > 0)
				w->nclaimed += (size_t)got;
		}
		store_rollback(tx);
	} else {
		for (i = 0; i < t->nclaims; i++)
			t->claims[i].want = 0;
	}
}

/* The write transaction of a turn: records t->fin's outcomes (w->next gets
 * their next due times), deletes the claim rows they complete (listed in
 * w->done_rows) and writes the claim row of w->claimed. Every row it
 * changes is this sender's (its lanes' claimed deliveries, their attempts,
 * its claim rows), so it does not take the writers' turn (STORE_WRITE_OWN):
 * on PostgreSQL the senders record beside each other and beside the
 * fan-out. Returns 0, or a negative store status with every claim row's
 * count as it was. */
static int turn_write(struct engine *d, struct turn *t, struct turn_work *w, int64_t now)
{
	struct store_tx *tx = NULL;
	struct claim_row *row = NULL;
	size_t i, recorded = 0;
	int rc;

	if ((rc = store_begin(d->st, STORE_WRITE_OWN, &tx)) != STORE_OK) {
		tx = NULL;
		goto out;
	}
	if (t->fin.n && (rc = record_outcomes(tx, t->fin.f, t->fin.n, w->next)) < 0)
		goto out;
	for (recorded = 0; recorded < t->fin.n; recorded++) {
		struct flight *f = t->fin.f[recorded];

		if (f->claim && --f->claim->left == 0)
			w->done_rows[w->ndone_rows++] = f->claim;
	}
	if (w->ndone_rows && (rc = claims_delete(tx, w->done_rows, w->ndone_rows)) < 0)
		goto out;
	if (w->nclaimed && !(row = claim_write(d, tx, w->claimed, w->nclaimed, now, &rc)))
		goto out;
	rc = store_commit(tx);
	tx = NULL;
	if (rc == STORE_OK)
		row = NULL; /* committed: the claimed flights own it */
out:
	if (rc < 0) {
		/* Nothing was recorded: the claims keep their counts. */
		for (i = 0; i < recorded; i++)
			if (t->fin.f[i]->claim)
				t->fin.f[i]->claim->left++;
	}
	store_rollback(tx);
	free(row);
	return rc;
}

/* After the commit: lanes learn their next due times and in-flight counts,
 * the finished flights and completed claim rows are freed, and the capped
 * lanes' sends are counted. */
static void turn_committed(struct sender *sd, struct turn *t, struct turn_work *w, double mono)
{
	struct engine *d = sd->d;
	size_t i;

	for (i = 0; i < w->ndone_rows; i++)
		free(w->done_rows[i]);
	w->ndone_rows = 0;
	for (i = 0; i < t->fin.n; i++)
		lane_landed(t->fin.f[i]->lane, t->fin.f[i]->seq);
	for (i = 0; i < w->nclaimed; i++) {
		struct lane *l = w->claimed[i]->lane;

		if (l->nflying < (int)ARRAY_LEN(l->flying))
			l->flying[l->nflying++] = w->claimed[i]->seq;
	}
	/* A claim's min_due was read before this turn recorded its finished
	 * attempts, so it cannot know their retries: it is set first and the
	 * retries lower it after. (The other order let a lane claimed and
	 * finished in one turn forget a retry until the next full rescan.) */
	pthread_mutex_lock(&d->mu);
	for (i = 0; i < t->nclaims; i++) {
		struct claim *c = &t->claims[i];

		c->lane->in_flight += c->want;
		if (w->min_due[i] && c->lane->gen == c->gen)
			c->lane->due_ms = w->min_due[i];
	}
	for (i = 0; i < t->fin.n; i++) {
		struct lane *l = t->fin.f[i]->lane;

		l->in_flight--;
		l->finished = 0;
		if (w->next[i] < l->due_ms)
			l->due_ms = w->next[i];
	}
	pthread_mutex_unlock(&d->mu);
	for (i = 0; i < t->nclaims; i++)
		lane_consume(d, t->claims[i].lane, t->claims[i].want, mono);
	for (i = 0; i < t->fin.n; i++) {
		atomic_fetch_add(error_class(&t->fin.f[i]->req) ? &d->failed : &d->delivered, 1);
		flight_free(t->fin.f[i]);
	}
	sd->in_flight -= t->fin.n;
	t->fin.n = 0;
}

/* Hands the claimed flights w->claimed to the HTTP thread; w->claimed is
 * empty afterwards. */
static void turn_hand_over(struct sender *sd, struct turn_work *w)
{
	size_t i;

	pthread_mutex_lock(&sd->qmu);
	for (i = 0; i < w->nclaimed; i++) {
		if (queue_push(&sd->ready, w->claimed[i]) == 0) {
			sd->in_flight++;
			continue;
		}
		/* Cannot happen (room is reserved at start). It is selected
		 * again; its claim row stays until the next start. */
		log_msg(LOG_ERROR, "webhook", "no room to queue delivery %s; it waits",
			w->claimed[i]->id);
		lane_landed(w->claimed[i]->lane, w->claimed[i]->seq);
		w->claimed[i]->lane->in_flight--;
		flight_abandon(w->claimed[i]);
	}
	pthread_mutex_unlock(&sd->qmu);
	if (w->nclaimed)
		httpc_async_wakeup(sd->http);
	w->nclaimed = 0;
}

/* One write transaction: record t->fin, then claim for t->claims. Started
 * flights go to the async client; ones that end at once join t->fin for
 * the next turn. Returns 0, or a negative store status (then the finished
 * ones stay in t->fin and nothing was claimed). */
static int run_turn(struct sender *sd, struct turn *t, int64_t now, double mono)
{
	struct turn_work w = {0};
	size_t i, total = 0;
	int rc;

	for (i = 0; i < t->nclaims; i++)
		total += (size_t)t->claims[i].want;
	w.claimed = calloc(total ? total : 1, sizeof *w.claimed);
	w.next = calloc(t->fin.n ? t->fin.n : 1, sizeof *w.next);
	w.done_rows = calloc(t->fin.n ? t->fin.n : 1, sizeof *w.done_rows);
	w.min_due = calloc(t->nclaims ? t->nclaims : 1, sizeof *w.min_due);
	if (!w.claimed || !w.next || !w.done_rows || !w.min_due) {
		rc = STORE_ERR;
		goto out;
	}
	turn_select(sd->d, t, &w, now);
	if ((rc = turn_write(sd->d, t, &w, now)) != STORE_OK)
		goto out;
	turn_committed(sd, t, &w, mono);
	turn_hand_over(sd, &w);
	rc = 0;
out:
	if (rc < 0)
		for (i = 0; i < t->fin.n; i++)
			t->fin.f[i]->lane->finished = 0;
	for (i = 0; i < w.nclaimed; i++)
		flight_free(w.claimed[i]);
	free(w.claimed);
	free(w.next);
	free(w.done_rows);
	free(w.min_due);
	return rc;
}

/* Waits up to wait ms (none when 0) for finished flights or a wake-up,
 * then moves the finished flights the HTTP thread handed back to t->fin. */
static void recorder_collect(struct sender *sd, struct turn *t, int wait)
{
	struct timespec ts;
	size_t i;

	pthread_mutex_lock(&sd->qmu);
	if (sd->done.n == 0 && !sd->wake && wait > 0 && !sd->d->stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)wait * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&sd->qcond, &sd->qmu, &ts);
	}
	sd->wake = 0;
	for (i = 0; i < sd->done.n; i++)
		if (queue_push(&t->fin, sd->done.f[i]) < 0) {
			/* Cannot happen (room reserved). It is
			 * selected again; its claim row stays. */
			lane_landed(sd->done.f[i]->lane, sd->done.f[i]->seq);
			sd->done.f[i]->lane->in_flight--;
			sd->in_flight--;
			flight_abandon(sd->done.f[i]);
		}
	sd->done.n = 0;
	pthread_mutex_unlock(&sd->qmu);
}

/* Plans the claims (none when stopping) and runs a turn when there is
 * anything to record or claim. Returns how long (ms) the recorder may wait
 * for news before the next. */
static int recorder_turn(struct sender *sd, struct turn *t, int stopping)
{
	int64_t now = clock_now_ms();
	double mono = (double)clock_mono_us() / 1000.0;
	size_t i;
	int wait;

	t->nclaims = 0;
	for (i = 0; i < t->fin.n; i++)
		t->fin.f[i]->lane->finished++;
	wait = stopping ? 20 : plan_claims(sd, t, now, mono, sd->in_flight);
	if (t->fin.n == 0 && t->nclaims == 0)
		return wait;
	if (run_turn(sd, t, now, mono) < 0) {
		log_msg(LOG_ERROR, "webhook", "delivery bookkeeping failed; retrying");
		return 200;
	}
	/* Plan again at once: claimed lanes may have more due, and recorded
	 * outcomes set new due times. */
	return 0;
}

/* The recorder: waits for finished flights or a reason to plan, then runs
 * a turn. At stop it claims nothing more and records until every flight
 * came back or the drain time passed. */
static void *recorder_main(void *arg)
{
	struct sender *sd = arg;
	struct engine *d = sd->d;
	struct turn t = {0};
	int64_t drain_until = 0;
	int wait = 0, stopping;
	size_t i;

	if (queue_reserve(&t.fin, MAX_IN_FLIGHT) < 0)
		log_msg(LOG_ERROR, "webhook", "out of memory reserving the recorder's list");
	for (;;) {
		stopping = d->stop;
		if (stopping && !drain_until)
			drain_until = clock_mono_ms() + d->drain_ms;
		if (stopping && t.fin.n == 0 && (sd->in_flight == 0 || clock_mono_ms() >= drain_until))
			break;
		recorder_collect(sd, &t, wait);
		wait = recorder_turn(sd, &t, stopping);
	}
	/* Flights not back keep their claim: sent again at the next start. */
	for (i = 0; i < t.fin.n; i++)
		flight_abandon(t.fin.f[i]);
	free(t.fin.f);
	free(t.claims);
	sd->rec_exited = 1;
	httpc_async_wakeup(sd->http);
	return NULL;
}

/* Puts f at the end of its lane's wait list. */
static void lane_enqueue(struct flight *f)
{
	struct lane *l = f->lane;

	if (l->wait_tail)
		l->wait_tail->next_wait = f;
	else
		l->wait_head = f;
	l->wait_tail = f;
}

/* Starts the waiting flights of l while it has a free slot; those that
 * end at once (refused, unsigned) go to failed, to be recorded as they
 * are. */
static void lane_fill(struct sender *sd, struct lane *l, struct flight_queue *failed)
{
	struct flight *f;

	while (l->running < ENGINE_LANE_CONCURRENCY && (f = l->wait_head)) {
		l->wait_head = f->next_wait;
		if (!l->wait_head)
			l->wait_tail = NULL;
		f->next_wait = NULL;
		if (flight_start(sd, f) == 0)
			l->running++;
		else if (queue_push(failed, f) < 0)
			flight_abandon(f); /* cannot happen: room reserved */
	}
}

/* The HTTP thread: queues the flights the recorder claimed behind their
 * lanes and starts them as slots free (at most ENGINE_LANE_CONCURRENCY
 * transfers per lane), hands back the finished ones, until the recorder
 * has exited. */
static void *sender_main(void *arg)
{
	struct sender *sd = arg;
	struct httpc_request *done[256];
	struct flight_queue swap;
	struct lane *l;
	size_t i, nd;
	int n;

	while (!sd->rec_exited) {
		n = httpc_async_poll(sd->http, 1000, done, ARRAY_LEN(done));
		nd = n > 0 ? (size_t)n : 0;
		/* A finished transfer frees its slot for the lane's next. */
		for (i = 0; i < nd; i++) {
			l = ((struct flight *)done[i]->user)->lane;
			l->running--;
			lane_fill(sd, l, &sd->failed);
		}
		pthread_mutex_lock(&sd->qmu);
		for (i = 0; i < nd; i++)
			if (queue_push(&sd->done, done[i]->user) < 0)
				flight_abandon(done[i]->user); /* cannot happen: room reserved */
		swap = sd->ready;
		sd->ready = sd->spare;
		sd->spare = swap;
		if (n > 0)
			pthread_cond_signal(&sd->qcond);
		pthread_mutex_unlock(&sd->qmu);
		for (i = 0; i < sd->spare.n; i++) {
			lane_enqueue(sd->spare.f[i]);
			lane_fill(sd, sd->spare.f[i]->lane, &sd->failed);
		}
		sd->spare.n = 0;
		if (sd->failed.n) {
			pthread_mutex_lock(&sd->qmu);
			for (i = 0; i < sd->failed.n; i++)
				if (queue_push(&sd->done, sd->failed.f[i]) < 0)
					flight_abandon(sd->failed.f[i]);
			pthread_cond_signal(&sd->qcond);
			pthread_mutex_unlock(&sd->qmu);
			sd->failed.n = 0;
		}
	}
	return NULL;
}

/* ---------------------------------------------------------------- start */

/* httpc_async_free's callback: a request is the first member of its flight. */
static void abandon_flight(struct httpc_request *r)
{
	flight_abandon(r->user);
}

/* Start-up: gives the deliveries made before lane_hash existed their hash. */
static int fill_lane_hashes(struct store *st)
{
	struct store_tx *tx;
	struct store_rows *r;
	struct buf lanes;
	int rc;

	if ((rc = store_begin(st, 1, &tx)) != STORE_OK)
		return rc;
	rc = store_query(tx,
			 "SELECT DISTINCT lane FROM webhook_deliveries WHERE lane_hash = 0"
			 " AND next_attempt_at IS NOT NULL",
			 NULL, 0, &r);
	buf_init(&lanes, 0);
	if (rc >= 0) {
		/* Collected first: a statement cannot run while r is open. */
		while ((rc = store_next(r)) == 1)
			if (buf_append(&lanes, store_text(r, 0), strlen(store_text(r, 0)) + 1) < 0)
				rc = STORE_ERR;
		store_rows_close(r);
	}
	for (size_t off = 0; rc >= 0 && off < lanes.len; off += strlen(lanes.data + off) + 1)
		rc = store_exec(tx,
				"UPDATE webhook_deliveries SET lane_hash = $1 WHERE lane = $2"
				" AND lane_hash = 0",
				(struct store_val[]){sv_int(engine_lane_hash(lanes.data + off)),
						     sv_text(lanes.data + off)},
				2);
	buf_free(&lanes);
	return store_finish(tx, rc);
}

static void lanes_free(struct engine *d)
{
	struct flight *f;
	size_t i;

	for (i = 0; i < d->nlanes; i++) {
		/* Claimed, never started (stop): their claim stays. */
		while ((f = d->lanes[i]->wait_head)) {
			d->lanes[i]->wait_head = f->next_wait;
			flight_abandon(f);
		}
		lane_key_drop(d->lanes[i]);
		free(d->lanes[i]->key);
		free(d->lanes[i]);
	}
	free(d->lanes);
}

/* Recovers a previous process's claims, loads the lanes with deliveries
 * waiting and the fan-out cursor. Returns 0, or -1 on a store failure. */
static int engine_load(struct engine *d)
{
	struct store_tx *tx;
	int rc;

	if (recover_claims(d->st) < 0 || fill_lane_hashes(d->st) < 0 || lanes_rescan(d) < 0)
		return -1;
	if ((rc = store_begin(d->st, 0, &tx)) != STORE_OK)
		return -1;
	rc = store_query_int(tx, "SELECT last_event_seq FROM webhook_dispatch WHERE id = 1", NULL,
			     0, &d->cursor);
	store_rollback(tx);
	return rc == 1 ? 0 : -1;
}

/* Sets up each sender's locks, asynchronous client and queues (room for
 * MAX_IN_FLIGHT each). Returns 0, or -1 when out of memory (engine_stop
 * frees what was made). */
static int senders_init(struct engine *d)
{
	int i;

	for (i = 0; i < d->nsenders; i++) {
		struct sender *sd = &d->senders[i];

		sd->d = d;
		sd->index = i;
		pthread_mutex_init(&sd->qmu, NULL);
		pthread_cond_init(&sd->qcond, NULL);
		sd->http = httpc_async_new();
		if (!sd->http || queue_reserve(&sd->ready, MAX_IN_FLIGHT) < 0 ||
		    queue_reserve(&sd->done, MAX_IN_FLIGHT) < 0 ||
		    queue_reserve(&sd->spare, MAX_IN_FLIGHT) < 0 ||
		    queue_reserve(&sd->failed, MAX_IN_FLIGHT) < 0)
			return -1;
	}
	return 0;
}

/* Starts each sender's recorder and HTTP thread, then the fan-out thread.
 * Returns 0, or -1 when a thread could not start (engine_stop joins those
 * that did). */
static int threads_start(struct engine *d)
{
	char name[16];
	int i;

	for (i = 0; i < d->nsenders; i++) {
		struct sender *sd = &d->senders[i];

		if (pthread_create(&sd->rec_thr, NULL, recorder_main, sd) != 0)
			return -1;
		sd->rec_started = 1;
		snprintf(name, sizeof name, "wh-record-%d", i % 100);
		pthread_setname_np(sd->rec_thr, name);
		if (pthread_create(&sd->http_thr, NULL, sender_main, sd) != 0)
			return -1;
		sd->http_started = 1;
		snprintf(name, sizeof name, "wh-send-%d", i % 100);
		pthread_setname_np(sd->http_thr, name);
	}
	if (pthread_create(&d->fanout_thr, NULL, fanout_main, d) != 0)
		return -1;
	d->fanout_started = 1;
	pthread_setname_np(d->fanout_thr, "wh-fanout");
	if (store_shared(d->st)) {
		if (pthread_create(&d->watch_thr, NULL, watch_main, d) != 0)
			return -1;
		d->watch_started = 1;
		pthread_setname_np(d->watch_thr, "wh-watch");
	}
	return 0;
}

int engine_start(struct store *st, const struct engine_opts *o, struct engine **out)
{
	struct engine *d = calloc(1, sizeof *d);
	pthread_condattr_t ca;

	*out = NULL;
	if (!d)
		return -1;
	d->st = st;
	d->o = *o;
	d->nsenders = o->senders < 1                    ? 1
		      : o->senders > ENGINE_MAX_SENDERS ? ENGINE_MAX_SENDERS
							: o->senders;
	memcpy(d->seal_key, o->seal_key, sizeof d->seal_key);
	d->o.seal_key = d->seal_key;
	pthread_mutex_init(&d->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (engine_load(d) < 0 || senders_init(d) < 0 || threads_start(d) < 0)
		goto fail;
	if (o->cluster &&
	    cluster_serve_lanes(o->cluster, &(struct cluster_hooks){bucket_busy, buckets_taken, d}) <
		    0)
		goto fail;
	*out = d;
	return 0;
fail:
	log_msg(LOG_ERROR, "webhook", "cannot start the delivery engine");
	engine_stop(d, 0);
	return -1;
}

void engine_stop(struct engine *d, int drain_ms)
{
	int i;

	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->drain_ms = drain_ms;
	d->stop = 1;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->mu);
	wake_senders(d);
	store_kick(d->st, STORE_CH_OUTBOX);
	store_kick(d->st, STORE_CH_DELIVERIES);
	if (d->fanout_started)
		pthread_join(d->fanout_thr, NULL);
	if (d->watch_started)
		pthread_join(d->watch_thr, NULL);
	for (i = 0; i < d->nsenders; i++) {
		struct sender *sd = &d->senders[i];
		size_t k;

		if (sd->rec_started)
			pthread_join(sd->rec_thr, NULL);
		else
			sd->rec_exited = 1;
		if (sd->http_started)
			pthread_join(sd->http_thr, NULL);
		/* Attempts still running are abandoned with their claim. */
		httpc_async_free(sd->http, abandon_flight);
		for (k = 0; k < sd->ready.n; k++)
			flight_abandon(sd->ready.f[k]);
		for (k = 0; k < sd->done.n; k++)
			flight_abandon(sd->done.f[k]);
		free(sd->ready.f);
		free(sd->done.f);
		free(sd->spare.f);
		free(sd->failed.f);
		if (sd->d) {
			pthread_cond_destroy(&sd->qcond);
			pthread_mutex_destroy(&sd->qmu);
		}
	}
	lanes_free(d);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->mu);
	crypto_wipe(d->seal_key, sizeof d->seal_key);
	free(d);
}

/* ------------------------------------------------------- delivery API */

#define DAY_MS (24LL * 3600 * 1000)
#define RETRY_WINDOW_MS (30 * DAY_MS)  /* v1: after the original event */
#define REPLAY_WINDOW_MS (90 * DAY_MS) /* v2 */

#define DLV_COLS                                                                       \
	"id, subscription_id, event_id, event_type, surface, target, url, state,"      \
	" attempt_count, next_attempt_at, event_created_at, created_at, delivered_at," \
	" dead_lettered_at, portfolio_id, seq, lane, rate_per_s"

static const char *const states[] = {"pending", "retry_scheduled", "delivered", "dead_lettered"};

int engine_delivery_state_known(const char *state)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(states); i++)
		if (!strcmp(state, states[i]))
			return 1;
	return 0;
}

static json_t *time_or_null(struct store_rows *r, int col)
{
	char ts[CLOCK_RFC3339_LEN];

	if (store_is_null(r, col))
		return json_null();
	clock_format_ms(store_int(r, col), ts);
	return json_string(ts);
}

/* The attempt log of one delivery, oldest first. */
static json_t *attempts_json(struct store_tx *tx, const char *id)
{
	struct store_rows *r;
	json_t *list = json_array(), *a;
	char ts[CLOCK_RFC3339_LEN];

	if (store_query(tx,
			"SELECT n, started_at, duration_ms, http_status, error, response_snippet"
			" FROM webhook_attempts WHERE delivery_id = $1 ORDER BY n",
			(struct store_val[]){sv_text(id)}, 1, &r) != STORE_OK)
		return list;
	while (store_next(r) == 1) {
		clock_format_ms(store_int(r, 1), ts);
		a = json_pack("{s:I, s:s, s:I, s:o, s:s?, s:s}", "n", (json_int_t)store_int(r, 0),
			      "at", ts, "duration_ms", (json_int_t)store_int(r, 2), "http_status",
			      store_is_null(r, 3) ? json_null() : json_integer(store_int(r, 3)),
			      "error", store_text(r, 4), "response_snippet", store_text(r, 5));
		json_array_append_new(list, a);
	}
	store_rows_close(r);
	return list;
}

/* A delivery object from a DLV_COLS row, with its attempt log (one more
 * query). next_attempt_at is shown only while the delivery waits (during
 * an attempt it is the time the delivery became due). */
static json_t *delivery_json(struct store_tx *tx, struct store_rows *r)
{
	const char *state = store_text(r, 7);
	int waiting = !strcmp(state, "pending") || !strcmp(state, "retry_scheduled");

	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:o, s:o, s:o, s:o, s:o,"
			 " s:o}",
			 "id", store_text(r, 0), "subscription_id", store_text(r, 1), "event_id",
			 store_text(r, 2), "event_type", store_text(r, 3), "surface",
			 store_text(r, 4), "target", store_text(r, 5), "url", store_text(r, 6),
			 "state", state, "attempt_count", (json_int_t)store_int(r, 8),
			 "next_attempt_at", waiting ? time_or_null(r, 9) : json_null(),
			 "event_created_at", time_or_null(r, 10), "created_at", time_or_null(r, 11),
			 "delivered_at", time_or_null(r, 12), "dead_lettered_at",
			 time_or_null(r, 13), "attempts", attempts_json(tx, store_text(r, 0)));
}

json_t *engine_delivery_item(struct store_tx *tx, struct store_rows *r, void *arg, char *key,
			     size_t keycap)
{
	(void)arg;
	snprintf(key, keycap, "%" PRId64, store_int(r, 15));
	return delivery_json(tx, r);
}

/* A page of the portfolio's deliveries matching where, an SQL condition on
 * $2 (param, may be NULL), newest first: seq below before, limit + 1 rows.
 * As engine_deliveries_page. */
static int page_query(struct store *st, const char *where, const char *portfolio_id,
		      const char *param, int64_t before, int limit, struct store_tx **tx,
		      struct store_rows **rows)
{
	char sql[768];
	int rc;

	*rows = NULL;
	snprintf(sql, sizeof sql,
		 "SELECT " DLV_COLS " FROM webhook_deliveries WHERE portfolio_id = $1 AND (%s)"
		 " AND seq < $3 ORDER BY seq DESC LIMIT $4",
		 where);
	if ((rc = store_begin(st, 0, tx)) != STORE_OK) {
		*tx = NULL;
		return rc;
	}
	rc = store_query(*tx, sql,
			 (struct store_val[]){sv_text(portfolio_id), sv_text(param), sv_int(before),
					      sv_int(limit + 1)},
			 4, rows);
	if (rc != STORE_OK)
		*rows = NULL;
	return rc;
}

int engine_deliveries_page(struct store *st, const char *portfolio_id, const char *subscription_id,
			   const char *state, int64_t before, int limit, struct store_tx **tx,
			   struct store_rows **rows)
{
	char where[128];

	*tx = NULL;
	*rows = NULL;
	if (!state)
		return page_query(st, "subscription_id = $2", portfolio_id, subscription_id, before,
				  limit, tx, rows);
	/* The SQL names the state directly: it is one of the four literals. */
	if (!engine_delivery_state_known(state))
		return STORE_ERR;
	snprintf(where, sizeof where, "subscription_id = $2 AND state = '%s'", state);
	return page_query(st, where, portfolio_id, subscription_id, before, limit, tx, rows);
}

int engine_dead_letters_page(struct store *st, const char *portfolio_id,
			     const char *subscription_id, int64_t before, int limit,
			     struct store_tx **tx, struct store_rows **rows)
{
	return page_query(st,
			  "state = 'dead_lettered' AND subscription_id = COALESCE($2, subscription_id)",
			  portfolio_id, subscription_id, before, limit, tx, rows);
}

/* Loads delivery id inside tx: ENGINE_MINE with its DLV_COLS row open in
 * *out (the caller closes it), ENGINE_NONE (none, or of another surface
 * than surface when that is not NULL), ENGINE_OTHER (another portfolio's)
 * or a negative store status. */
static int load_delivery(struct store_tx *tx, const char *portfolio_id, const char *id,
			 const char *surface, struct store_rows **out)
{
	struct store_rows *r;
	int rc;

	*out = NULL;
	rc = store_query(tx, "SELECT " DLV_COLS " FROM webhook_deliveries WHERE id = $1",
			 (struct store_val[]){sv_text(id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1 && surface && strcmp(store_text(r, 4), surface))
		rc = ENGINE_NONE;
	else if (rc == 1 && strcmp(store_text(r, 14), portfolio_id))
		rc = ENGINE_OTHER;
	else if (rc == 1) {
		*out = r;
		return ENGINE_MINE;
	}
	store_rows_close(r);
	return rc;
}

int engine_delivery_get(struct store *st, const char *portfolio_id, const char *id, json_t **out)
{
	struct store_tx *tx;
	struct store_rows *r;
	int rc;

	*out = NULL;
	if ((rc = store_begin(st, 0, &tx)) != STORE_OK)
		return rc;
	rc = load_delivery(tx, portfolio_id, id, NULL, &r);
	if (rc == ENGINE_MINE) {
		*out = delivery_json(tx, r);
		store_rows_close(r);
	}
	store_rollback(tx);
	return rc;
}

/* The redelivery rules, on delivery row r of surface: v1 retry takes
 * dead-lettered deliveries only, v2 replay delivered or dead-lettered
 * ones, both within the window (scaled) of the original event. Returns 0,
 * ENGINE_STATE (state in out) or ENGINE_EXPIRED (window_days in out). */
static int redeliverable(struct store_rows *r, const char *surface, int64_t now,
			 struct engine_redelivery *out)
{
	const char *state = store_text(r, 7);
	int v1 = !strcmp(surface, "v1");
	int64_t window = v1 ? RETRY_WINDOW_MS : REPLAY_WINDOW_MS;

	snprintf(out->state, sizeof out->state, "%s", state);
	if (!(!strcmp(state, "dead_lettered") || (!v1 && !strcmp(state, "delivered"))))
		return ENGINE_STATE;
	if (now - store_int(r, 10) > clock_business_ms(window)) {
		out->window_days = (int)(window / DAY_MS);
		return ENGINE_EXPIRED;
	}
	return 0;
}

/* Inside the write transaction tx: checks and requeues delivery id, and
 * reads it back into out->delivery; the lane it joins goes to touched.
 * Returns engine_redeliver's outcomes. */
static int redeliver_in(struct store_tx *tx, const char *portfolio_id, const char *id,
			const char *surface, struct engine_redelivery *out,
			struct engine_touched *touched)
{
	struct store_rows *r;
	int64_t now = clock_now_ms();
	int rc;

	if ((rc = load_delivery(tx, portfolio_id, id, surface, &r)) != ENGINE_MINE)
		return rc;
	rc = redeliverable(r, surface, now, out);
	if (rc == 0 && store_text(r, 16)[0])
		engine_touch(touched, store_text(r, 16), (int)store_int(r, 17));
	else if (rc == 0)
		touched->overflow = 1;
	store_rows_close(r);
	if (rc != 0)
		return rc;
	rc = store_exec(tx,
			"UPDATE webhook_deliveries SET state = 'pending', manual = 1,"
			" next_attempt_at = $2 WHERE id = $1 AND state = $3",
			(struct store_val[]){sv_text(id), sv_int(now), sv_text(out->state)}, 3);
	if (rc < 0 || (rc = load_delivery(tx, portfolio_id, id, surface, &r)) != ENGINE_MINE)
		return rc;
	out->delivery = delivery_json(tx, r);
	store_rows_close(r);
	return ENGINE_MINE;
}

int engine_redeliver(struct engine *d, struct store *st, const char *portfolio_id, const char *id,
		     const char *surface, struct engine_redelivery *out)
{
	struct engine_touched touched = {0};
	struct store_tx *tx;
	int rc;

	*out = (struct engine_redelivery){0};
	if ((rc = store_begin(st, 1, &tx)) != STORE_OK)
		return rc;
	rc = redeliver_in(tx, portfolio_id, id, surface, out, &touched);
	if (rc != ENGINE_MINE) {
		store_rollback(tx);
		goto out;
	}
	/* The worker serving its lane may be another node. */
	if ((rc = notify_after(d, tx, &touched)) != STORE_OK)
		goto out;
	rc = ENGINE_MINE;
out:
	if (rc != ENGINE_MINE) {
		json_decref(out->delivery);
		out->delivery = NULL;
	}
	return rc;
}

/* What a ping's event fans out to (ping_fan_out's arg). */
struct ping_fan {
	struct store_tx *tx;
	const char *subscription_id;
	json_t *created;
	struct engine_touched *touched;
};

/* outbox_get's fn: the deliveries of the ping event to its subscription. */
static int ping_fan_out(const struct outbox_event *ev, void *arg)
{
	struct ping_fan *pf = arg;
	int rc = fan_out_subs(pf->tx, ev, pf->subscription_id, pf->created, pf->touched);

	return rc < 0 ? rc : 0;
}

/* Inside the write transaction tx: the ping's event and its deliveries
 * (listed in created). Returns engine_ping's outcomes; evt gets the event
 * id. */
static int ping_in(struct store_tx *tx, const char *surface, const char *portfolio_id,
		   const char *subscription_id, char evt[ID_MAX], json_t *created,
		   struct engine_touched *touched)
{
	struct ping_fan pf = {tx, subscription_id, created, touched};
	json_t *data, *props = json_array();
	int rc, mirror = 0;

	rc = subscriptions_ping_target(tx, portfolio_id, subscription_id, surface, &mirror);
	if (rc != SUBSCRIPTIONS_MINE) {
		json_decref(props);
		return rc < 0 ? rc : rc == SUBSCRIPTIONS_OTHER ? ENGINE_OTHER : ENGINE_NONE;
	}
	data = json_pack("{s:s, s:b}", "subscription_id", subscription_id, "mirror", mirror);
	rc = outbox_append(tx, surface, "webhook.ping", portfolio_id, props, data, evt, ID_MAX);
	json_decref(data);
	json_decref(props);
	if (rc < 0)
		return rc;
	rc = outbox_get(tx, evt, ping_fan_out, &pf);
	if (rc < 0)
		return rc;
	return rc == 1 ? ENGINE_MINE : STORE_ERR;
}

int engine_ping(struct engine *d, struct store *st, const char *surface, const char *portfolio_id,
		const char *subscription_id, json_t **out)
{
	struct engine_touched touched = {0};
	struct store_tx *tx;
	char evt[ID_MAX];
	json_t *created = json_array();
	int rc;

	*out = NULL;
	if ((rc = store_begin(st, 1, &tx)) != STORE_OK)
		goto out;
	rc = ping_in(tx, surface, portfolio_id, subscription_id, evt, created, &touched);
	if (rc != ENGINE_MINE) {
		store_rollback(tx);
		goto out;
	}
	if ((rc = notify_after(d, tx, &touched)) != STORE_OK)
		goto out;
	*out = json_pack("{s:s, s:s, s:O}", "event_id", evt, "subscription_id", subscription_id,
			 "deliveries", created);
	rc = ENGINE_MINE;
out:
	json_decref(created);
	return rc;
}

int engine_sla(struct store *st, const char *portfolio_id, int64_t start, int64_t end,
	       struct engine_sla *out)
{
	struct store_tx *tx;
	struct store_rows *r;
	int rc;

	*out = (struct engine_sla){0, 0, 1.0, ENGINE_SLA_TARGET, 0};
	if ((rc = store_begin(st, 0, &tx)) != STORE_OK)
		return rc;
	/* Primary v2 deliveries of real events (pings are synthetic). */
	rc = store_query(tx,
			 "SELECT COUNT(*), COALESCE(SUM(CASE WHEN state = 'delivered' THEN 1 ELSE 0 END), 0) FROM"
			 " webhook_deliveries WHERE portfolio_id = $1 AND target = 'primary'"
			 " AND surface = 'v2' AND event_created_at >= $2 AND event_created_at < $3"
			 " AND event_type <> 'webhook.ping'",
			 (struct store_val[]){sv_text(portfolio_id), sv_int(start), sv_int(end)}, 3,
			 &r);
	if (rc == STORE_OK) {
		if ((rc = store_next(r)) == 1) {
			out->events = store_int(r, 0);
			out->delivered = store_int(r, 1);
		}
		store_rows_close(r);
	}
	store_rollback(tx);
	if (rc < 0)
		return rc;
	out->ratio = out->events ? (double)out->delivered / (double)out->events : 1.0;
	out->credit_due = out->ratio < ENGINE_SLA_CREDIT_BELOW;
	return 0;
}
