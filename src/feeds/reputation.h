/* reputation: rolling reputation scores and the alerts their floors open
 * (issue 15; docs/feeds.md, "Reputation"), the one owner of the
 * reputation_days, reputation_floors, reputation_scores and
 * reputation_alerts tables.
 *
 * A review's score is rating / max_rating x 10 (0-10). The score of a
 * property, a brand (its properties in the portfolio) or the portfolio is
 * the mean score of the reviews published in the last
 * REPUTATION_WINDOW_DAYS UTC days (today included), once there are at
 * least REPUTATION_MIN_REVIEWS of them; with fewer there is no score.
 * Scores are kept in hundredths of a point.
 *
 * A brand may have a floor (revopsctl reputation-ceiling set). When the
 * brand's score, or the score of one of its properties, is below the
 * floor and no alert of that subject is open, an alert opens and v2
 * reputation.score.dropped is emitted: once per crossing. The alert
 * resolves when the score is back at or above the floor; a later drop
 * opens a new one. A subject without a score (too few reviews) leaves its
 * alert as it is. */
#ifndef REVOPS_REPUTATION_H
#define REVOPS_REPUTATION_H
#include <jansson.h>
#include <stdint.h>
#include "core/common.h"

struct store;
struct store_tx;
struct store_rows;
struct portfolio_property;

#define REPUTATION_WINDOW_DAYS 30
#define REPUTATION_MIN_REVIEWS 5

/* Counts n reviews of property_id published on day (days since the
 * epoch, UTC) whose scores sum to score_sum (hundredths), inside tx.
 * Returns 0 or < 0. */
int reputation_add(struct store_tx *tx, const char *portfolio_id, const char *property_id,
		   int64_t day, int64_t n, int64_t score_sum) WUR;

/* Recomputes the portfolio's scores as of now for its properties props[0..n)
 * and acts on the floors, inside tx (alerts, events, stored scores).
 * Returns how many alerts opened, or < 0. */
int reputation_evaluate(struct store_tx *tx, const char *portfolio_id,
			const struct portfolio_property *props, size_t n, int64_t now) WUR;

/* Re-evaluates every portfolio that has a floor (scores move as days pass
 * without reviews too). Returns alerts opened, or < 0. */
int reputation_sweep(struct store *st) WUR;

/* Sets the floor of a brand of the portfolio (0-1000 hundredths). Returns
 * 0 or < 0. */
int reputation_floor_set(struct store_tx *tx, const char *portfolio_id, const char *brand,
			 int64_t min_x100, int64_t now) WUR;

/* The scores now: {"window_days", "min_reviews", "portfolio": {score,
 * reviews}, "brands": [{brand, score, reviews, min_score}], "properties":
 * [{property_id, brand, score, reviews}]} for props[0..n); with narrowed
 * set, the portfolio and brands are left out (null and []). Returns 0 or
 * < 0. */
int reputation_scores_json(struct store_tx *tx, const char *portfolio_id,
			   const struct portfolio_property *props, size_t n, int narrowed,
			   int64_t now, json_t **out) WUR;

/* Filters of the alert list; NULL or "" for none. props: the property ids
 * the caller reaches (then brand alerts are left out), or NULL for all. */
struct reputation_filter {
	const char *status, *brand, *property_id;
	const char *const *props;
	int nprops;
};
int reputation_alert_list(struct store_tx *tx, const char *portfolio_id, const char *after,
			  const struct reputation_filter *f, int limit, struct store_rows **rows) WUR;
json_t *reputation_alert_from_row(struct store_rows *r);
const char *reputation_alert_row_id(struct store_rows *r);
/* One alert: 1, 0 (none), 2 (another portfolio's) or < 0. */
int reputation_alert_load(struct store_tx *tx, const char *portfolio_id, const char *id,
			  json_t **out) WUR;

/* A score in hundredths as the API writes it (8.12), or null (-1). */
json_t *reputation_score_json(int64_t x100);

#endif
