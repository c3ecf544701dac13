#include "portfolio/snapshot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/clock.h"
#include "store/store.h"

#define SNAPSHOT_SLOTS 1024

struct snap {
	struct portfolio_snapshot pub; /* first: callers hold &pub */
	atomic_int refs;
	int big; /* more than PORTFOLIO_SNAPSHOT_MAX properties: nothing kept */
	int64_t loaded_mono_ms;
	uint64_t seen; /* store_changes(STORE_CH_PROPERTIES) before the load */
	char portfolio_id[ID_MAX];
	struct portfolio_snap_prop *props;
	struct portfolio_ceiling *ceilings;
	size_t ceilings_cap;
	char *text;
};

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static struct snap *slots[SNAPSHOT_SLOTS];

static size_t slot_of(const char *portfolio_id)
{
	size_t h = 5381;

	while (*portfolio_id)
		h = h * 33 + (unsigned char)*portfolio_id++;
	return h % SNAPSHOT_SLOTS;
}

static void snap_free(struct snap *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->pub.n_ceilings; i++)
		portfolio_ceiling_free(&s->ceilings[i]);
	free(s->ceilings);
	free(s->props);
	free(s->text);
	free(s);
}

void portfolio_snapshot_put(const struct portfolio_snapshot *pub)
{
	struct snap *s = (struct snap *)pub;

	if (s && atomic_fetch_sub(&s->refs, 1) == 1)
		snap_free(s);
}

/* Appends the current row to s: its fields into props[n] and its text to
 * text (props[n].json_len set, .json left for fix_texts). Returns 0 or -1. */
static int add_row(struct snap *s, size_t *cap, struct buf *text, struct store_rows *r)
{
	struct portfolio_snap_prop *sp, *grown;
	size_t start = text->len;

	if (s->pub.n == *cap) {
		*cap = *cap ? 2 * *cap : 16;
		grown = realloc(s->props, *cap * sizeof *grown);
		if (!grown)
			return -1;
		s->props = grown;
	}
	sp = &s->props[s->pub.n];
	memset(sp, 0, sizeof *sp);
	/* portfolio_properties_after's columns: id 0, name 2, brand 3, code 4, timezone 6,
	 * currency 7 */
	snprintf(sp->p.id, sizeof sp->p.id, "%s", store_text(r, 0));
	snprintf(sp->p.brand, sizeof sp->p.brand, "%s", store_text(r, 3));
	snprintf(sp->p.name, sizeof sp->p.name, "%s", store_text(r, 2));
	snprintf(sp->p.code, sizeof sp->p.code, "%s", store_text(r, 4));
	snprintf(sp->p.currency, sizeof sp->p.currency, "%s", store_text(r, 7));
	snprintf(sp->p.timezone, sizeof sp->p.timezone, "%s", store_text(r, 6));
	if (portfolio_property_write(text, r) < 0)
		return -1;
	sp->json_len = text->len - start;
	s->pub.n++;
	return 0;
}

/* Points each property's json into s->text, where add_row wrote them one
 * after another. */
static void fix_texts(struct snap *s)
{
	size_t i, off = 0;

	for (i = 0; i < s->pub.n; i++) {
		s->props[i].json = s->text + off;
		off += s->props[i].json_len;
	}
	s->pub.props = s->props;
}

/* portfolio_each_ceiling's fn: keeps the first PORTFOLIO_SNAPSHOT_MAX. */
static int add_ceiling(void *arg, struct portfolio_ceiling *ce)
{
	struct snap *s = arg;
	struct portfolio_ceiling *grown;

	if (s->pub.n_ceilings == PORTFOLIO_SNAPSHOT_MAX) {
		portfolio_ceiling_free(ce);
		return 0;
	}
	if (s->pub.n_ceilings == s->ceilings_cap) {
		s->ceilings_cap = s->ceilings_cap ? 2 * s->ceilings_cap : 4;
		grown = realloc(s->ceilings, s->ceilings_cap * sizeof *grown);
		if (!grown) {
			portfolio_ceiling_free(ce);
			return -1;
		}
		s->ceilings = grown;
	}
	s->ceilings[s->pub.n_ceilings++] = *ce;
	return 0;
}

/* Reads the portfolio's properties and brand ceilings, in one transaction,
 * into a new snapshot (one reference, the caller's), current as of seen
 * (store_changes read before). Returns a store status. */
static int load(struct store *st, const char *portfolio_id, uint64_t seen, struct snap **out)
{
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	struct buf text;
	struct snap *s = calloc(1, sizeof *s);
	size_t cap = 0;
	int rc = STORE_ERR;

	buf_init(&text, 0);
	if (!s)
		goto out;
	atomic_init(&s->refs, 1);
	s->seen = seen;
	snprintf(s->portfolio_id, sizeof s->portfolio_id, "%s", portfolio_id);
	if ((rc = store_begin(st, STORE_READ, &tx)) != STORE_OK ||
	    (rc = portfolio_properties_after(tx, portfolio_id, "", NULL, &r)) != STORE_OK)
		goto out;
	while ((rc = store_next(r)) == 1) {
		if (s->pub.n == PORTFOLIO_SNAPSHOT_MAX) {
			s->big = 1;
			s->pub.n = 0;
			break;
		}
		if (add_row(s, &cap, &text, r) < 0) {
			rc = STORE_ERR;
			goto out;
		}
	}
	store_rows_close(r);
	r = NULL;
	if (rc < 0 ||
	    (!s->big && (rc = portfolio_each_ceiling(tx, portfolio_id, add_ceiling, s)) < 0))
		goto out;
	s->pub.ceilings = s->ceilings;
	s->text = buf_steal(&text);
	fix_texts(s);
	s->loaded_mono_ms = clock_mono_ms();
	rc = STORE_OK;
out:
	store_rows_close(r);
	store_rollback(tx);
	buf_free(&text);
	if (rc != STORE_OK) {
		snap_free(s);
		s = NULL;
	}
	*out = s;
	return rc;
}

/* The slot's snapshot of portfolio_id when it was loaded at the changes
 * count seen (no property added since, as far as store_changes tells) and
 * is young enough, with a reference for the caller; else NULL. */
static struct snap *cached(size_t slot, const char *portfolio_id, uint64_t seen)
{
	struct snap *s;

	pthread_mutex_lock(&slots_lock);
	s = slots[slot];
	if (s && (strcmp(s->portfolio_id, portfolio_id) != 0 || s->seen != seen ||
		  clock_mono_ms() - s->loaded_mono_ms >= PORTFOLIO_SNAPSHOT_TTL_MS))
		s = NULL;
	if (s)
		atomic_fetch_add(&s->refs, 1);
	pthread_mutex_unlock(&slots_lock);
	return s;
}

int portfolio_snapshot_get(struct store *st, const char *portfolio_id,
			   const struct portfolio_snapshot **out)
{
	/* Read once, before any row: on SQLite it is a read of the file. */
	uint64_t seen = store_changes(st, STORE_CH_PROPERTIES);
	size_t slot = slot_of(portfolio_id);
	struct snap *s, *old;
	int rc;

	*out = NULL;
	if (!(s = cached(slot, portfolio_id, seen))) {
		if ((rc = load(st, portfolio_id, seen, &s)) != STORE_OK)
			return rc;
		atomic_fetch_add(&s->refs, 1); /* the slot's */
		pthread_mutex_lock(&slots_lock);
		old = slots[slot];
		slots[slot] = s;
		pthread_mutex_unlock(&slots_lock);
		portfolio_snapshot_put(old ? &old->pub : NULL);
	}
	if (s->big) {
		portfolio_snapshot_put(&s->pub);
		return 0;
	}
	*out = &s->pub;
	return 1;
}

const struct portfolio_snap_prop *portfolio_snapshot_find(const struct portfolio_snapshot *s,
							  const char *id)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (!strcmp(s->props[i].p.id, id))
			return &s->props[i];
	return NULL;
}

const struct portfolio_ceiling *portfolio_snapshot_ceiling(const struct portfolio_snapshot *s,
							   const char *id)
{
	size_t i;

	for (i = 0; i < s->n_ceilings; i++)
		if (!strcmp(s->ceilings[i].id, id))
			return &s->ceilings[i];
	return NULL;
}

int portfolio_known_property(struct store *st, const char *portfolio_id, const char *property_id)
{
	const struct portfolio_snapshot *s;
	struct store_tx *tx;
	int rc = portfolio_snapshot_get(st, portfolio_id, &s);

	if (rc < 0)
		return rc;
	rc = s && portfolio_snapshot_find(s, property_id);
	portfolio_snapshot_put(s);
	if (rc)
		return 1;
	if ((rc = store_begin(st, STORE_READ_ONE, &tx)) != STORE_OK)
		return rc;
	rc = portfolio_has_property(tx, portfolio_id, property_id);
	store_rollback(tx);
	return rc;
}
