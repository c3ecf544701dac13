#include "feeds/reputation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/id.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "events/outbox.h"
#include "portfolio/portfolio.h"
#include "portfolio/snapshot.h"
#include "store/store.h"

#define DAY_MS 86400000LL
/* Subjects one evaluation handles: the portfolio, brands and properties. */
#define MAX_SUBJECTS (1 + 2 * PORTFOLIO_SNAPSHOT_MAX)

int reputation_add(struct store_tx *tx, const char *pf, const char *property_id, int64_t day,
		   int64_t n, int64_t score_sum)
{
	int rc = store_send(tx,
			    "INSERT INTO reputation_days (portfolio_id, property_id, day, reviews,"
			    " score_sum) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (portfolio_id,"
			    " property_id, day) DO UPDATE SET reviews = reputation_days.reviews +"
			    " excluded.reviews, score_sum = reputation_days.score_sum +"
			    " excluded.score_sum",
			    (struct store_val[]){sv_text(pf), sv_text(property_id), sv_int(day),
						 sv_int(n), sv_int(score_sum)},
			    5);

	return rc < 0 ? rc : 0;
}

json_t *reputation_score_json(int64_t x100)
{
	return x100 < 0 ? json_null() : json_real((double)x100 / 100.0);
}

/* ------------------------------------------------------------ scores */

/* One subject's window: scope "portfolio" (subject ""), "brand" or
 * "property". */
struct subject {
	const char *scope;
	char subject[128];
	char brand[128];
	char property_id[ID_MAX];
	int64_t reviews, sum;
	int64_t score;     /* hundredths, -1: too few reviews */
	int64_t floor;     /* the brand's floor, -1: none */
	int64_t stored;    /* the score stored before, -1: none or NULL */
	int has_stored;    /* a row exists */
	char open[ID_MAX]; /* the open alert, "" */
};

struct calc {
	size_t n;
	struct subject s[MAX_SUBJECTS];
};

static struct subject *find(struct calc *k, const char *scope, const char *subject)
{
	size_t i;

	for (i = 0; i < k->n; i++)
		if (!strcmp(k->s[i].scope, scope) && !strcmp(k->s[i].subject, subject))
			return &k->s[i];
	return NULL;
}

static struct subject *add_subject(struct calc *k, const char *scope, const char *subject,
				   const char *brand, const char *property_id)
{
	struct subject *s = find(k, scope, subject);

	if (s || k->n == MAX_SUBJECTS)
		return s;
	s = &k->s[k->n++];
	memset(s, 0, sizeof *s);
	s->scope = scope;
	snprintf(s->subject, sizeof s->subject, "%s", subject);
	snprintf(s->brand, sizeof s->brand, "%s", brand);
	snprintf(s->property_id, sizeof s->property_id, "%s", property_id);
	s->floor = s->stored = -1;
	return s;
}

/* Reads the window's reviews per property and adds each to its property,
 * brand and the portfolio. */
static int read_window(struct store_tx *tx, const char *pf, int64_t now, struct calc *k)
{
	struct store_rows *r;
	struct subject *p, *b;
	int64_t n, sum;
	int rc = store_query(tx,
			     "SELECT property_id, SUM(reviews), SUM(score_sum) FROM reputation_days"
			     " WHERE portfolio_id = $1 AND day >= $2 GROUP BY property_id",
			     (struct store_val[]){sv_text(pf),
						  sv_int(now / DAY_MS - REPUTATION_WINDOW_DAYS + 1)},
			     2, &r);

	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1) {
		if (!(p = find(k, "property", store_text(r, 0))))
			continue;
		n = store_int(r, 1);
		sum = store_int(r, 2);
		b = find(k, "brand", p->brand);
		p->reviews += n;
		p->sum += sum;
		if (b) {
			b->reviews += n;
			b->sum += sum;
		}
		k->s[0].reviews += n;
		k->s[0].sum += sum;
	}
	store_rows_close(r);
	return rc;
}

/* Fills the subjects of props and their scores now. Returns 0 or < 0. */
static int compute(struct store_tx *tx, const char *pf, const struct portfolio_property *props,
		   size_t n, int64_t now, struct calc *k)
{
	size_t i;
	int rc;

	k->n = 0;
	add_subject(k, "portfolio", "", "", "");
	for (i = 0; i < n; i++)
		add_subject(k, "brand", props[i].brand, props[i].brand, "");
	for (i = 0; i < n; i++)
		add_subject(k, "property", props[i].id, props[i].brand, props[i].id);
	if ((rc = read_window(tx, pf, now, k)) < 0)
		return rc;
	for (i = 0; i < k->n; i++)
		k->s[i].score = k->s[i].reviews >= REPUTATION_MIN_REVIEWS
					? (k->s[i].sum + k->s[i].reviews / 2) / k->s[i].reviews
					: -1;
	return 0;
}

/* The brands' floors onto their brand and property subjects. */
static int read_floors(struct store_tx *tx, const char *pf, struct calc *k)
{
	struct store_rows *r;
	size_t i;
	int rc = store_query(
		tx, "SELECT brand, min_score_x100 FROM reputation_floors WHERE portfolio_id = $1",
		(struct store_val[]){sv_text(pf)}, 1, &r);

	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1)
		for (i = 1; i < k->n; i++)
			if (!strcmp(k->s[i].brand, store_text(r, 0)))
				k->s[i].floor = store_int(r, 1);
	store_rows_close(r);
	return rc;
}

/* What is stored: the last scores and the open alerts. */
static int read_state(struct store_tx *tx, const char *pf, struct calc *k)
{
	struct store_rows *r;
	struct subject *s;
	int rc = store_query(tx,
			     "SELECT scope, subject, score_x100 FROM reputation_scores"
			     " WHERE portfolio_id = $1",
			     (struct store_val[]){sv_text(pf)}, 1, &r);

	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1)
		if ((s = find(k, store_text(r, 0), store_text(r, 1))) != NULL) {
			s->has_stored = 1;
			s->stored = store_is_null(r, 2) ? -1 : store_int(r, 2);
		}
	store_rows_close(r);
	if (rc < 0)
		return rc;
	rc = store_query(tx,
			 "SELECT id, scope, subject FROM reputation_alerts WHERE portfolio_id = $1"
			 " AND status = 'open'",
			 (struct store_val[]){sv_text(pf)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1)
		if ((s = find(k, store_text(r, 1), store_text(r, 2))) != NULL)
			snprintf(s->open, sizeof s->open, "%s", store_text(r, 0));
	store_rows_close(r);
	return rc;
}

/* ------------------------------------------------------------ acting */

static int store_score(struct store_tx *tx, const char *pf, const struct subject *s, int64_t now)
{
	int rc = store_send(tx,
			    "INSERT INTO reputation_scores (portfolio_id, scope, subject, score_x100,"
			    " reviews, updated_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT"
			    " (portfolio_id, scope, subject) DO UPDATE SET score_x100 ="
			    " excluded.score_x100, reviews = excluded.reviews, updated_at ="
			    " excluded.updated_at",
			    (struct store_val[]){sv_text(pf), sv_text(s->scope), sv_text(s->subject),
						 s->score < 0 ? sv_null() : sv_int(s->score),
						 sv_int(s->reviews), sv_int(now)},
			    6);

	return rc < 0 ? rc : 0;
}

/* The properties an alert of s concerns: its property, or its brand's. */
static json_t *alert_properties(const struct calc *k, const struct subject *s)
{
	json_t *a = json_array();
	size_t i;

	if (!strcmp(s->scope, "property")) {
		json_array_append_new(a, json_string(s->property_id));
		return a;
	}
	for (i = 0; i < k->n; i++)
		if (!strcmp(k->s[i].scope, "property") && !strcmp(k->s[i].brand, s->brand))
			json_array_append_new(a, json_string(k->s[i].property_id));
	return a;
}

static int open_alert(struct store_tx *tx, const char *pf, const struct calc *k,
		      const struct subject *s, int64_t now)
{
	char id[ID_MAX];
	json_t *data, *props;
	int rc;

	if (id_new("ra_", id, sizeof id) < 0)
		return STORE_ERR;
	rc = store_send(tx,
			"INSERT INTO reputation_alerts (id, portfolio_id, scope, subject, brand,"
			" property_id, status, threshold_x100, score_x100, previous_x100, current_x100,"
			" opened_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 'open', $7, $8, $9,"
			" $8, $10, $10)",
			(struct store_val[]){sv_text(id), sv_text(pf), sv_text(s->scope),
					     sv_text(s->subject), sv_text(s->brand),
					     sv_text(s->property_id[0] ? s->property_id : NULL),
					     sv_int(s->floor), sv_int(s->score),
					     s->stored < 0 ? sv_null() : sv_int(s->stored),
					     sv_int(now)},
			10);
	if (rc < 0)
		return rc;
	data = json_pack("{s:s, s:s, s:o, s:o, s:o, s:s, s:o}", "alert_id", id, "brand", s->brand,
			 "score", reputation_score_json(s->score), "previous_score",
			 reputation_score_json(s->stored), "threshold",
			 reputation_score_json(s->floor), "scope", s->scope, "property_id",
			 s->property_id[0] ? json_string(s->property_id) : json_null());
	props = alert_properties(k, s);
	rc = data && props
		     ? outbox_append(tx, "v2", "reputation.score.dropped", pf, props, data, NULL, 0)
		     : STORE_ERR;
	json_decref(data);
	json_decref(props);
	return rc < 0 ? rc : 1;
}

/* Resolves (resolve 1) or follows the score of (0) the open alert of s. */
static int update_alert(struct store_tx *tx, const struct subject *s, int resolve, int64_t now)
{
	int rc = store_send(tx,
			    resolve ? "UPDATE reputation_alerts SET status = 'resolved', current_x100 ="
				      " $2, resolved_at = $3, updated_at = $3 WHERE id = $1"
				    : "UPDATE reputation_alerts SET current_x100 = $2, updated_at = $3"
				      " WHERE id = $1 AND current_x100 <> $2",
			    (struct store_val[]){sv_text(s->open), sv_int(s->score), sv_int(now)}, 3);

	return rc < 0 ? rc : 0;
}

/* Acts on one subject: its stored score and its alert. Returns 1 when an
 * alert opened, 0, or < 0. */
static int act(struct store_tx *tx, const char *pf, const struct calc *k, const struct subject *s,
	       int64_t now)
{
	int rc = 0;

	if (s->score >= 0 && s->floor >= 0) {
		if (!s->open[0] && s->score < s->floor)
			rc = open_alert(tx, pf, k, s, now);
		else if (s->open[0])
			rc = update_alert(tx, s, s->score >= s->floor, now);
	}
	if (rc >= 0 && (!s->has_stored || s->stored != s->score))
		rc = store_score(tx, pf, s, now) < 0 ? STORE_ERR : rc;
	return rc;
}

int reputation_evaluate(struct store_tx *tx, const char *pf, const struct portfolio_property *props,
			size_t n, int64_t now)
{
	struct calc *k = malloc(sizeof *k);
	size_t i;
	int rc, opened = 0;

	if (!k)
		return STORE_ERR;
	rc = compute(tx, pf, props, n, now, k);
	if (rc == 0)
		rc = read_floors(tx, pf, k);
	if (rc >= 0)
		rc = read_state(tx, pf, k);
	for (i = 0; rc >= 0 && i < k->n; i++)
		if ((rc = act(tx, pf, k, &k->s[i], now)) > 0)
			opened += rc;
	free(k);
	return rc < 0 ? rc : opened;
}

/* Evaluates one portfolio with its own snapshot and write transaction. */
static int sweep_one(struct store *st, const char *pf, int64_t now)
{
	const struct portfolio_snapshot *snap;
	struct portfolio_property *props = NULL;
	struct store_tx *tx;
	size_t i;
	int rc = portfolio_snapshot_get(st, pf, &snap);

	if (rc <= 0)
		return rc; /* more properties than a snapshot keeps: not evaluated */
	props = calloc(snap->n ? snap->n : 1, sizeof *props);
	for (i = 0; props && i < snap->n; i++)
		props[i] = snap->props[i].p;
	rc = props ? store_begin(st, STORE_WRITE, &tx) : STORE_ERR;
	if (rc == STORE_OK)
		rc = store_finish(tx, reputation_evaluate(tx, pf, props, snap->n, now));
	portfolio_snapshot_put(snap);
	free(props);
	return rc;
}

int reputation_sweep(struct store *st)
{
	struct store_tx *tx;
	struct store_rows *r;
	json_t *pfs = json_array(), *v;
	size_t i;
	int rc = pfs ? store_begin(st, STORE_READ_ONE, &tx) : STORE_ERR;

	if (rc != STORE_OK)
		goto out;
	rc = store_query(tx, "SELECT DISTINCT portfolio_id FROM reputation_floors", NULL, 0, &r);
	if (rc == STORE_OK) {
		while ((rc = store_next(r)) == 1)
			json_array_append_new(pfs, json_string(store_text(r, 0)));
		store_rows_close(r);
	}
	store_rollback(tx);
	json_array_foreach(pfs, i, v) {
		if (rc < 0)
			break;
		rc = sweep_one(st, json_string_value(v), clock_now_ms());
	}
out:
	json_decref(pfs);
	return rc < 0 ? rc : 0;
}

int reputation_floor_set(struct store_tx *tx, const char *pf, const char *brand, int64_t min_x100,
			 int64_t now)
{
	int rc = store_exec(tx,
			    "INSERT INTO reputation_floors (portfolio_id, brand, min_score_x100,"
			    " updated_at) VALUES ($1, $2, $3, $4) ON CONFLICT (portfolio_id, brand)"
			    " DO UPDATE SET min_score_x100 = excluded.min_score_x100, updated_at ="
			    " excluded.updated_at",
			    (struct store_val[]){sv_text(pf), sv_text(brand), sv_int(min_x100),
						 sv_int(now)},
			    4);

	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------------ reading */

int reputation_scores_json(struct store_tx *tx, const char *pf,
			   const struct portfolio_property *props, size_t n, int narrowed,
			   int64_t now, json_t **out)
{
	struct calc *k = malloc(sizeof *k);
	json_t *brands = json_array(), *propsj = json_array(), *portfolio = json_null();
	struct subject *s;
	size_t i;
	int rc = k ? compute(tx, pf, props, n, now, k) : STORE_ERR;

	if (rc == 0)
		rc = read_floors(tx, pf, k);
	for (i = 0; rc >= 0 && i < k->n; i++) {
		s = &k->s[i];
		if (!strcmp(s->scope, "property"))
			json_array_append_new(propsj,
					      json_pack("{s:s, s:s, s:o, s:I}", "property_id",
							s->property_id, "brand", s->brand, "score",
							reputation_score_json(s->score), "reviews",
							(json_int_t)s->reviews));
		else if (!narrowed && !strcmp(s->scope, "brand"))
			json_array_append_new(brands,
					      json_pack("{s:s, s:o, s:I, s:o}", "brand", s->brand,
							"score", reputation_score_json(s->score),
							"reviews", (json_int_t)s->reviews, "min_score",
							reputation_score_json(s->floor)));
		else if (!narrowed) {
			json_decref(portfolio);
			portfolio = json_pack("{s:o, s:I}", "score", reputation_score_json(s->score),
					      "reviews", (json_int_t)s->reviews);
		}
	}
	free(k);
	*out = rc < 0 ? NULL
		      : json_pack("{s:i, s:i, s:O, s:O, s:O}", "window_days",
				  REPUTATION_WINDOW_DAYS, "min_reviews", REPUTATION_MIN_REVIEWS,
				  "portfolio", portfolio, "brands", brands, "properties", propsj);
	json_decref(portfolio);
	json_decref(brands);
	json_decref(propsj);
	return rc < 0 ? rc : (*out ? 0 : STORE_ERR);
}

#define ALERT_COLS                                                                          \
	"id, scope, brand, property_id, status, threshold_x100, score_x100, previous_x100," \
	" current_x100, opened_at, resolved_at, updated_at, portfolio_id"

json_t *reputation_alert_from_row(struct store_rows *r)
{
	return json_pack("{s:s, s:s, s:s, s:o, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id",
			 store_text(r, 0), "scope", store_text(r, 1), "brand", store_text(r, 2),
			 "property_id",
			 store_is_null(r, 3) ? json_null() : json_string(store_text(r, 3)), "status",
			 store_text(r, 4), "threshold", reputation_score_json(store_int(r, 5)),
			 "score", reputation_score_json(store_int(r, 6)), "previous_score",
			 reputation_score_json(store_is_null(r, 7) ? -1 : store_int(r, 7)),
			 "current_score", reputation_score_json(store_int(r, 8)), "opened_at",
			 jsonw_time(store_int(r, 9)), "resolved_at",
			 store_is_null(r, 10) ? json_null() : jsonw_time(store_int(r, 10)),
			 "updated_at", jsonw_time(store_int(r, 11)));
}

const char *reputation_alert_row_id(struct store_rows *r)
{
	return store_text(r, 0);
}

int reputation_alert_list(struct store_tx *tx, const char *pf, const char *after,
			  const struct reputation_filter *f, int limit, struct store_rows **rows)
{
	struct store_sql q = {.len = 0};

	store_sql_page(&q, "SELECT " ALERT_COLS " FROM reputation_alerts", pf, after);
	store_sql_eq(&q, "status", f->status);
	store_sql_eq(&q, "brand", f->brand);
	store_sql_eq(&q, "property_id", f->property_id);
	return store_sql_page_end(tx, &q, f->props, f->nprops, limit, rows);
}

static void *alert_row(struct store_rows *r)
{
	return reputation_alert_from_row(r);
}

int reputation_alert_load(struct store_tx *tx, const char *pf, const char *id, json_t **out)
{
	void *v;
	int rc = store_get_owned(tx, "SELECT " ALERT_COLS " FROM reputation_alerts WHERE id = $1",
				 id, 12, pf, alert_row, &v);

	*out = v;
	return rc;
}
