#include "feeds/reviews.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "events/outbox.h"
#include "feeds/reputation.h"
#include "feeds/review_platform.h"
#include "portfolio/portfolio.h"
#include "store/store.h"

#define DAY_MS 86400000LL
#define TEMPLATE_MAX 8192

/* Waits after failed attempt 1, 2, ...: then the reply is reported failed
 * (about 23 hours after the first attempt). */
static const int64_t retry_ms[] = {30000,   120000,   600000,   1800000,
				   3600000, 10800000, 21600000, 43200000};

const char *review_band(int64_t score_x100)
{
	return score_x100 < 600 ? "low" : score_x100 < 800 ? "mid" : "high";
}

/* ------------------------------------------------------------ templates */

/* The portfolio's reply templates, as {"band|language": text}. Returns 0
 * with *out, or < 0. */
static int review_templates_load(struct store_tx *tx, const char *pf, json_t **out)
{
	struct store_rows *r;
	char key[64];
	int rc;

	*out = json_object();
	if (!*out)
		return STORE_ERR;
	rc = store_query(tx,
			 "SELECT band, language, text FROM review_templates WHERE portfolio_id = $1",
			 (struct store_val[]){sv_text(pf)}, 1, &r);
	if (rc != STORE_OK)
		goto fail;
	while ((rc = store_next(r)) == 1) {
		snprintf(key, sizeof key, "%s|%s", store_text(r, 0), store_text(r, 1));
		json_object_set_new(*out, key, json_string(store_text(r, 2)));
	}
	store_rows_close(r);
	if (rc == 0)
		return 0;
fail:
	json_decref(*out);
	*out = NULL;
	return rc;
}

int review_template_set(struct store_tx *tx, const char *pf, const char *band, const char *language,
			const char *text, int64_t now)
{
	int rc = store_exec(tx,
			    "INSERT INTO review_templates (portfolio_id, band, language, text,"
			    " updated_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (portfolio_id,"
			    " band, language) DO UPDATE SET text = excluded.text, updated_at ="
			    " excluded.updated_at",
			    (struct store_val[]){sv_text(pf), sv_text(band), sv_text(language),
						 sv_text(text), sv_int(now)},
			    5);

	return rc < 0 ? rc : 0;
}

/* The template of band for the first n characters of lang (lower-cased
 * into used, 40 bytes), or NULL. */
static const char *template_for(const json_t *t, const char *band, const char *lang, size_t n,
				char *used)
{
	char key[64];
	size_t i;

	for (i = 0; i < n && i < 39; i++)
		used[i] = (char)tolower((unsigned char)lang[i]);
	used[i] = '\0';
	snprintf(key, sizeof key, "%s|%s", band, used);
	return json_string_value(json_object_get(t, key));
}

/* Appends tpl to b with each {name} of names[] replaced by its value. */
static int render(struct buf *b, const char *tpl, const char *const names[2],
		  const char *const values[2])
{
	const char *p = tpl;
	size_t i, n;
	int rc = 0;

	while (*p && rc == 0) {
		for (i = 0; i < 2; i++) {
			n = strlen(names[i]);
			if (!strncmp(p, names[i], n))
				break;
		}
		if (i < 2) {
			rc = buf_puts(b, values[i]);
			p += strlen(names[i]);
		} else {
			rc = buf_putc(b, *p++);
		}
	}
	return rc;
}

char *review_draft(const json_t *templates, const char *band, const char *language,
		   const char *guest, const char *property, char lang_used[40])
{
	static const char *const names[2] = {"{guest_name}", "{property_name}"};
	const char *values[2] = {guest && *guest ? guest : "guest", property}, *tpl;
	const char *dash = strchr(language, '-');
	struct buf b;
	char *out = NULL;

	tpl = template_for(templates, band, language, strlen(language), lang_used);
	if (!tpl && dash)
		tpl = template_for(templates, band, language, (size_t)(dash - language), lang_used);
	if (!tpl)
		return NULL;
	buf_init(&b, TEMPLATE_MAX * 4);
	if (render(&b, tpl, names, values) == 0 && buf_putc(&b, '\0') == 0)
		out = strdup(b.data);
	buf_free(&b);
	return out;
}

/* ------------------------------------------------------------ creating */

#define REVIEW_COLS                                                                            \
	"id, property_id, source, external_id, rating_x100, max_rating, score_x100, language," \
	" text, author, published_at, reply_status, reply_text, reply_band, reply_language,"   \
	" reply_edited, reply_published_at, publish_attempts, next_attempt_at, last_error,"    \
	" created_at, updated_at, portfolio_id"

/* A rating in hundredths as the API writes it: 4 or 4.5. */
static json_t *rating_json(int64_t x100)
{
	return x100 % 100 ? json_real((double)x100 / 100.0) : json_integer(x100 / 100);
}

/* review.drafted's data. */
static json_t *drafted_data(const char *id, const struct review_new *r, const char *reply)
{
	return json_pack("{s:s, s:s, s:s, s:o, s:I, s:s, s:s}", "review_id", id, "source",
			 r->source, "source_review_id", r->external_id, "rating",
			 rating_json(r->rating_x100), "rating_scale", (json_int_t)r->max_rating,
			 "language", r->language, "reply_text", reply);
}

/* A review staged by review_batch_add: its values (strings borrowed from
 * the caller), its draft and, after review_batch_end, its outcome. */
struct staged {
	struct review_new r;
	char property_id[ID_MAX];
	int64_t score;
	const char *band;
	char lang[40];
	char *reply; /* the draft, or NULL */
	struct review_outcome out;
};

struct review_batch {
	json_t *templates; /* "band|language": text */
	json_t *days;      /* "day\x1fproperty id": [reviews, score sum] */
	struct staged *items;
	size_t n, cap;
	int created;
};

int review_batch_begin(struct store_tx *tx, const char *pf, struct review_batch **out)
{
	struct review_batch *b = calloc(1, sizeof *b);
	int rc = b && (b->days = json_object()) ? review_templates_load(tx, pf, &b->templates)
						: STORE_ERR;

	*out = NULL;
	if (rc < 0) {
		review_batch_free(b);
		return rc;
	}
	*out = b;
	return 0;
}

void review_batch_free(struct review_batch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++)
		free(b->items[i].reply);
	free(b->items);
	json_decref(b->templates);
	json_decref(b->days);
	free(b);
}

int review_batch_add(struct review_batch *b, const struct portfolio_property *p,
		     const struct review_new *r)
{
	struct staged *s;
	size_t cap;

	if (b->n == b->cap) {
		cap = b->cap ? b->cap * 2 : 64;
		s = realloc(b->items, cap * sizeof *s);
		if (!s)
			return STORE_ERR;
		b->items = s;
		b->cap = cap;
	}
	s = &b->items[b->n];
	memset(s, 0, sizeof *s);
	s->r = *r;
	snprintf(s->property_id, sizeof s->property_id, "%s", p->id);
	s->score = (r->rating_x100 * 10 + r->max_rating / 2) / r->max_rating;
	s->band = review_band(s->score);
	s->reply = review_draft(b->templates, s->band, r->language, r->author, p->name, s->lang);
	return (int)b->n++;
}

const struct review_outcome *review_batch_outcome(const struct review_batch *b, int i)
{
	return i >= 0 && (size_t)i < b->n ? &b->items[i].out : NULL;
}

/* Counts a new review of property on day in b->days. */
static void count_day(struct review_batch *b, const char *property, int64_t day, int64_t score)
{
	char key[128];
	json_t *v;

	snprintf(key, sizeof key, "%lld\x1f%s", (long long)day, property);
	v = json_object_get(b->days, key);
	if (!v)
		json_object_set_new(b->days, key,
				    json_pack("[I, I]", (json_int_t)1, (json_int_t)score));
	else {
		json_array_set_new(v, 0, json_integer(json_integer_value(json_array_get(v, 0)) + 1));
		json_array_set_new(v, 1,
				   json_integer(json_integer_value(json_array_get(v, 1)) + score));
	}
}

/* The id of the known review (portfolio, source, external id). */
static int known_id(struct store_tx *tx, const char *pf, const struct review_new *r, char *id)
{
	struct store_rows *rows;
	int rc = store_query(tx,
			     "SELECT id FROM reviews WHERE portfolio_id = $1 AND source = $2 AND"
			     " external_id = $3",
			     (struct store_val[]){sv_text(pf), sv_text(r->source),
						  sv_text(r->external_id)},
			     3, &rows);

	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(rows)) == 1)
		snprintf(id, ID_MAX, "%s", store_text(rows, 0));
	store_rows_close(rows);
	return rc == 1 ? 0 : (rc < 0 ? rc : STORE_ERR);
}

#define REVIEW_NCOLS 18
#define REVIEW_CHUNK 16 /* at least store_rows_per(REVIEW_NCOLS) */

/* Staged review s's row (a new id in s->out.id) into v[REVIEW_NCOLS]. */
static int staged_row(const char *pf, struct staged *s, int64_t now, struct store_val *v)
{
	const struct review_new *r = &s->r;
	struct store_val row[REVIEW_NCOLS] = {sv_text(s->out.id),
					      sv_text(pf),
					      sv_text(s->property_id),
					      sv_text(r->source),
					      sv_text(r->external_id),
					      sv_int(r->rating_x100),
					      sv_int(r->max_rating),
					      sv_int(s->score),
					      sv_text(r->language),
					      sv_text(r->text),
					      sv_text(r->author),
					      sv_int(r->published_at),
					      sv_text(s->reply ? "drafted" : "none"),
					      sv_text(s->reply),
					      sv_text(s->reply ? s->band : NULL),
					      sv_text(s->reply ? s->lang : NULL),
					      sv_int(now),
					      sv_int(now)};

	if (id_new("rv_", s->out.id, sizeof s->out.id) < 0)
		return STORE_ERR;
	memcpy(v, row, sizeof row);
	return 0;
}

/* A review inserted: its reputation count and, when drafted, review.drafted. */
static int created(struct store_tx *tx, const char *pf, struct review_batch *b, struct staged *s)
{
	json_t *data = NULL, *props = NULL;
	int rc;

	count_day(b, s->property_id, s->r.published_at / DAY_MS, s->score);
	b->created++;
	if (!s->reply)
		return 0;
	s->out.drafted = 1;
	data = drafted_data(s->out.id, &s->r, s->reply);
	props = json_pack("[s]", s->property_id);
	rc = data && props ? outbox_append(tx, "v1", "review.drafted", pf, props, data, NULL, 0)
			   : STORE_ERR;
	json_decref(data);
	json_decref(props);
	return rc < 0 ? rc : 0;
}

/* Inserts staged reviews s[0..n) in one statement unless known: the unique
 * index decides, so a review seen twice, in two batches or in one, is one.
 * The rows it returns are the new reviews; each other one is a duplicate
 * and reads the known id. */
static int insert_chunk(struct store_tx *tx, const char *pf, struct review_batch *b,
			struct staged *s, size_t n, int64_t now)
{
	struct store_val v[REVIEW_CHUNK * REVIEW_NCOLS];
	struct store_rows *rows;
	size_t i;
	int rc = 0;

	for (i = 0; rc == 0 && i < n; i++) {
		s[i].out.duplicate = 1;
		rc = staged_row(pf, &s[i], now, v + i * REVIEW_NCOLS);
	}
	if (rc == 0)
		rc = store_query_rows(
			tx,
			"INSERT INTO reviews (id, portfolio_id, property_id, source, external_id,"
			" rating_x100, max_rating, score_x100, language, text, author, published_at,"
			" reply_status, reply_text, reply_band, reply_language, created_at,"
			" updated_at)",
			" ON CONFLICT (portfolio_id, source, external_id) DO NOTHING RETURNING id",
			REVIEW_NCOLS, v, n, &rows);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(rows)) == 1)
		for (i = 0; i < n; i++)
			if (!strcmp(s[i].out.id, store_text(rows, 0)))
				s[i].out.duplicate = 0;
	store_rows_close(rows);
	for (i = 0; rc == 0 && i < n; i++)
		rc = s[i].out.duplicate ? known_id(tx, pf, &s[i].r, s[i].out.id)
					: created(tx, pf, b, &s[i]);
	return rc;
}

/* Writes the staged reviews in order, a statement per store_rows_per
 * rows, not a round trip per review. */
static int write_staged(struct store_tx *tx, const char *pf, struct review_batch *b, int64_t now)
{
	size_t per = store_rows_per(REVIEW_NCOLS), k;
	int rc = 0;

	per = per > REVIEW_CHUNK ? REVIEW_CHUNK : per;

	for (size_t i = 0; rc == 0 && i < b->n; i += k) {
		k = b->n - i < per ? b->n - i : per;
		rc = insert_chunk(tx, pf, b, b->items + i, k, now);
	}
	return rc;
}

int review_batch_end(struct store_tx *tx, const char *pf, struct review_batch *b, int64_t now)
{
	const char *key, *prop;
	json_t *v;
	int rc = write_staged(tx, pf, b, now);

	json_object_foreach(b->days, key, v) {
		prop = strchr(key, '\x1f');
		if (rc < 0 || !prop)
			break;
		rc = reputation_add(tx, pf, prop + 1, strtoll(key, NULL, 10),
				    json_integer_value(json_array_get(v, 0)),
				    json_integer_value(json_array_get(v, 1)));
	}
	return rc < 0 ? rc : b->created;
}

/* ------------------------------------------------------------ reading */

json_t *review_from_row(struct store_rows *r)
{
	json_t *tpl = store_is_null(r, 13) ? json_null()
					   : json_pack("{s:s, s:s}", "band", store_text(r, 13),
						       "language", store_text(r, 14));
	json_t *reply = json_pack(
		"{s:s, s:o, s:o, s:b, s:o, s:I, s:o, s:o}", "status", store_text(r, 11), "text",
		store_is_null(r, 12) ? json_null() : json_string(store_text(r, 12)), "template",
		tpl ? tpl : json_null(), "edited", (int)store_int(r, 15), "published_at",
		store_is_null(r, 16) ? json_null() : jsonw_time(store_int(r, 16)), "attempts",
		(json_int_t)store_int(r, 17), "next_attempt_at",
		store_is_null(r, 18) || strcmp(store_text(r, 11), "publishing")
			? json_null()
			: jsonw_time(store_int(r, 18)),
		"last_error", store_is_null(r, 19) ? json_null() : json_string(store_text(r, 19)));

	return json_pack("{s:s, s:s, s:s, s:s, s:o, s:I, s:o, s:s, s:s, s:s, s:o, s:o, s:o, s:o}",
			 "id", store_text(r, 0), "property_id", store_text(r, 1), "source",
			 store_text(r, 2), "external_id", store_text(r, 3), "rating",
			 rating_json(store_int(r, 4)), "max_rating", (json_int_t)store_int(r, 5),
			 "score", reputation_score_json(store_int(r, 6)), "language",
			 store_text(r, 7), "text", store_text(r, 8), "author", store_text(r, 9),
			 "published_at", jsonw_time(store_int(r, 10)), "reply",
			 reply ? reply : json_null(), "created_at", jsonw_time(store_int(r, 20)),
			 "updated_at", jsonw_time(store_int(r, 21)));
}

const char *review_row_id(struct store_rows *r)
{
	return store_text(r, 0);
}

int review_list(struct store_tx *tx, const char *pf, const char *after,
		const struct review_filter *f, int limit, struct store_rows **rows)
{
	struct store_sql q = {.len = 0};

	store_sql_page(&q, "SELECT " REVIEW_COLS " FROM reviews", pf, after);
	store_sql_eq(&q, "property_id", f->property_id);
	store_sql_eq(&q, "source", f->source);
	store_sql_eq(&q, "reply_status", f->reply_status);
	store_sql_eq(&q, "language", f->language);
	return store_sql_page_end(tx, &q, f->props, f->nprops, limit, rows);
}

static void *review_row(struct store_rows *r)
{
	return review_from_row(r);
}

int review_load(struct store_tx *tx, const char *pf, const char *id, json_t **out)
{
	void *v;
	int rc = store_get_owned(tx, "SELECT " REVIEW_COLS " FROM reviews WHERE id = $1", id, 22,
				 pf, review_row, &v);

	*out = v;
	return rc;
}

/* ------------------------------------------------------------ replies */

int review_reply_set(struct store_tx *tx, const char *id, const char *text, int64_t now)
{
	return store_exec(tx,
			  "UPDATE reviews SET reply_text = $2, reply_status = 'drafted', reply_edited = 1,"
			  " last_error = NULL, updated_at = $3 WHERE id = $1 AND reply_status IN"
			  " ('none', 'drafted', 'failed')",
			  (struct store_val[]){sv_text(id), sv_text(text), sv_int(now)}, 3);
}

int review_reply_publish(struct store_tx *tx, const char *id, int64_t now)
{
	return store_exec(tx,
			  "UPDATE reviews SET reply_status = 'publishing', publish_attempts = 0,"
			  " next_attempt_at = $2, last_error = NULL, updated_at = $2 WHERE id = $1 AND"
			  " reply_status IN ('drafted', 'failed') AND reply_text IS NOT NULL",
			  (struct store_val[]){sv_text(id), sv_int(now)}, 2);
}

/* One reply being sent. */
struct sending {
	char id[ID_MAX], pf[ID_MAX], property_id[ID_MAX], code[64];
	char source[64], external_id[300], language[40];
	char *text;
	int64_t due, attempts, rating_x100, max_rating;
};

/* Claims the reply of s (due at s->due) for this worker. 1, 0 (another
 * took it) or < 0. */
static int claim(struct store *st, struct sending *s, int64_t now)
{
	return store_exec_alone(st, STORE_WRITE_OWN,
				"UPDATE reviews SET next_attempt_at = $3 WHERE id = $1 AND reply_status ="
				" 'publishing' AND next_attempt_at = $2",
				(struct store_val[]){sv_text(s->id), sv_int(s->due),
						     sv_int(now + REVIEW_SEND_LEASE_MS)},
				3);
}

/* review.published, and the reply published, inside tx. */
static int record_published(struct store_tx *tx, const struct sending *s,
			    const struct review_reply *rr, int64_t now)
{
	char at[CLOCK_RFC3339_LEN];
	json_t *data, *props;
	int rc = store_exec(tx,
			    "UPDATE reviews SET reply_status = 'published', reply_published_at = $2,"
			    " publish_attempts = publish_attempts + 1, next_attempt_at = NULL,"
			    " last_error = NULL, updated_at = $3 WHERE id = $1 AND reply_status ="
			    " 'publishing'",
			    (struct store_val[]){sv_text(s->id), sv_int(rr->published_at),
						 sv_int(now)},
			    3);

	if (rc <= 0)
		return rc;
	clock_format_ms(rr->published_at, at);
	data = json_pack("{s:s, s:s, s:s, s:s, s:s, s:n}", "review_id", s->id, "source", s->source,
			 "source_review_id", s->external_id, "reply_text", s->text, "published_at",
			 at, "reply_url");
	props = json_pack("[s]", s->property_id);
	rc = data && props ? outbox_append(tx, "v1", "review.published", s->pf, props, data, NULL, 0)
			   : STORE_ERR;
	json_decref(data);
	json_decref(props);
	return rc;
}

/* A failed attempt: the next one on the schedule, or failed for good. */
static int record_failure(struct store_tx *tx, const struct sending *s,
			  const struct review_reply *rr, int64_t now)
{
	int64_t n = s->attempts + 1;
	int last = n > (int64_t)ARRAY_LEN(retry_ms);
	int rc = store_exec(tx,
			    "UPDATE reviews SET reply_status = $2, publish_attempts = $3,"
			    " next_attempt_at = $4, last_error = $5, updated_at = $6 WHERE id = $1"
			    " AND reply_status = 'publishing'",
			    (struct store_val[]){sv_text(s->id),
						 sv_text(last ? "failed" : "publishing"), sv_int(n),
						 last ? sv_null()
						      : sv_int(now +
							       clock_business_ms(retry_ms[n - 1])),
						 sv_text(rr->error), sv_int(now)},
			    6);

	if (last && rc > 0)
		log_msg(LOG_WARN, "reviews",
			"reply to review %s not published after %lld attempts: %s", s->id,
			(long long)n, rr->error);
	return rc < 0 ? rc : 0;
}

/* Sends s and records the outcome. */
static int send_one(struct store *st, struct review_platform *rp, struct sending *s)
{
	struct review_reply rr = {s->pf, s->code, s->external_id, s->text, 0, 0, 0, ""};
	struct store_tx *tx;
	int rc = claim(st, s, clock_now_ms());

	if (rc <= 0)
		return rc;
	if (review_platform_reply(rp, &rr) < 0)
		snprintf(rr.error, sizeof rr.error, "could not send the reply");
	if ((rc = store_begin(st, STORE_WRITE, &tx)) != STORE_OK)
		return rc;
	rc = rr.ok ? record_published(tx, s, &rr, clock_now_ms())
		   : record_failure(tx, s, &rr, clock_now_ms());
	return store_finish(tx, rc) != STORE_OK ? STORE_ERR : 1;
}

/* The replies due now, at most cap, into s[] (texts owned). */
static int due(struct store *st, int64_t now, struct sending *s, size_t cap, size_t *n)
{
	struct portfolio_property p;
	struct store_tx *tx;
	struct store_rows *r;
	int rc = store_begin(st, STORE_READ, &tx), opened;

	*n = 0;
	if (rc != STORE_OK)
		return rc;
	rc = store_query(tx,
			 "SELECT id, portfolio_id, property_id, source, external_id, reply_text,"
			 " next_attempt_at, publish_attempts FROM reviews WHERE reply_status ="
			 " 'publishing' AND next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT $2",
			 (struct store_val[]){sv_int(now), sv_int((int64_t)cap)}, 2, &r);
	opened = rc == STORE_OK;
	while (opened && (rc = store_next(r)) == 1) {
		struct sending *x = &s[(*n)++];

		memset(x, 0, sizeof *x);
		snprintf(x->id, sizeof x->id, "%s", store_text(r, 0));
		snprintf(x->pf, sizeof x->pf, "%s", store_text(r, 1));
		snprintf(x->property_id, sizeof x->property_id, "%s", store_text(r, 2));
		snprintf(x->source, sizeof x->source, "%s", store_text(r, 3));
		snprintf(x->external_id, sizeof x->external_id, "%s", store_text(r, 4));
		x->text = strdup(store_text(r, 5));
		x->due = store_int(r, 6);
		x->attempts = store_int(r, 7);
		rc = x->text ? 1 : STORE_ERR;
	}
	if (opened)
		store_rows_close(r);
	for (size_t i = 0; rc >= 0 && i < *n; i++) {
		rc = portfolio_property_get(tx, s[i].pf, s[i].property_id, &p);
		snprintf(s[i].code, sizeof s[i].code, "%s", rc == 1 ? p.code : "");
	}
	store_rollback(tx);
	return rc < 0 ? rc : 0;
}

int review_publish_due(struct store *st, struct review_platform *rp)
{
	struct sending s[16];
	int64_t until = clock_mono_ms() + REVIEW_SEND_BUDGET_MS;
	size_t n = 0, i;
	int rc = due(st, clock_now_ms(), s, ARRAY_LEN(s), &n), sent = 0;

	/* Replies not reached within the budget stay due for the next call. */
	for (i = 0; rc >= 0 && i < n && clock_mono_ms() < until; i++)
		if ((rc = send_one(st, rp, &s[i])) > 0)
			sent++;
	for (i = 0; i < n; i++)
		free(s[i].text);
	return rc < 0 ? rc : sent;
}
