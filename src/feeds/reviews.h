/* reviews: guest reviews from the review feed, their reply drafts and the
 * publication of replies to the source platform (issue 15; docs/feeds.md,
 * "Reviews"), the one owner of the reviews and review_templates tables.
 *
 * A review is known by (portfolio, source, external id): seen twice, it is
 * one review. A new review counts towards reputation (feeds/reputation.h)
 * and, when the portfolio has a reply template for its rating band and
 * language, gets a drafted reply (v1 review.drafted). A draft may be edited,
 * then published: publishing is queued and sent by the worker role
 * (review_publish_due), retried on the REVIEW_RETRY schedule until the
 * platform accepts it (v1 review.published) or the schedule runs out
 * (reply status failed, with the last error; publishing again starts a new
 * schedule). */
#ifndef REVOPS_REVIEWS_H
#define REVOPS_REVIEWS_H
#include <jansson.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"

struct store;
struct store_tx;
struct store_rows;
struct portfolio_property;
struct review_platform;

#define REVIEW_REPLY_MAX 4096 /* characters of a reply (Google's limit) */
/* How long a worker holds a reply it is sending. */
#define REVIEW_SEND_LEASE_MS 60000
/* How long one review_publish_due call starts new sends for (the worker's
 * once-a-second chores run it; a platform that hangs holds them at most
 * this plus one call's REVIEW_PLATFORM_TIMEOUT_MS). */
#define REVIEW_SEND_BUDGET_MS 2000

/* The rating band of a score (hundredths, 0-1000): "low" below 6.00,
 * "mid" below 8.00, "high" from 8.00. */
const char *review_band(int64_t score_x100);

/* Sets one template (band low|mid|high, language lower case). Returns 0
 * or < 0. */
int review_template_set(struct store_tx *tx, const char *portfolio_id, const char *band,
			const char *language, const char *text, int64_t now) WUR;
/* The reply text for a review: the template of band for language (exact,
 * case-insensitively, else its primary subtag: "pl-PL" uses "pl"), with
 * {guest_name} and {property_name} replaced (an empty guest name reads
 * "guest"). NULL when no template fits (or out of memory); lang_used
 * names the template's language. free() the result. */
char *review_draft(const json_t *templates, const char *band, const char *language,
		   const char *guest, const char *property, char lang_used[40]);

/* One review of the feed, validated by the caller. */
struct review_new {
	const char *source, *external_id, *language, *text, *author;
	int64_t rating_x100; /* rating x 100 */
	int64_t max_rating;
	int64_t published_at; /* ms */
};

struct review_outcome {
	char id[ID_MAX];
	int duplicate; /* already known: nothing changed */
	int drafted;   /* a reply was drafted (review.drafted) */
};

/* The reviews of one feed batch: the portfolio's templates, the reviews
 * staged, their reputation counts. */
struct review_batch;

/* Begins a batch (loads the templates). Returns 0 with *out, or < 0. */
int review_batch_begin(struct store_tx *tx, const char *portfolio_id, struct review_batch **out) WUR;
/* Stages r of property p (r's strings must live until review_batch_end)
 * and drafts its reply. Returns its index in the batch, or < 0. */
int review_batch_add(struct review_batch *b, const struct portfolio_property *p,
		     const struct review_new *r) WUR;
/* Writes the staged reviews inside tx, in order: a review known already
 * (in the database or earlier in the batch: the unique index's key) is a
 * duplicate with the known id and changes nothing; a new one is inserted.
 * A round trip per few reviews, not one each, and, when tx is
 * STORE_WRITE_OWN, beside other writers (the unique index settles two
 * batches' race). Then it takes the writers' turn (store_turn) for the new
 * reviews' review.drafted events and the batch's reputation counts, so
 * tx stays in it. Returns how many reviews were created, or < 0. */
int review_batch_end(struct store_tx *tx, const char *portfolio_id, struct review_batch *b,
		     int64_t now) WUR;
/* The outcome of staged review i, after review_batch_end (NULL: no such). */
const struct review_outcome *review_batch_outcome(const struct review_batch *b, int i);
void review_batch_free(struct review_batch *b);

/* Filters of the list; NULL or "" for none. props as elsewhere. */
struct review_filter {
	const char *property_id, *source, *reply_status, *language;
	const char *const *props;
	int nprops;
};
int review_list(struct store_tx *tx, const char *portfolio_id, const char *after,
		const struct review_filter *f, int limit, struct store_rows **rows) WUR;
json_t *review_from_row(struct store_rows *r);
const char *review_row_id(struct store_rows *r);
/* One review: 1, 0 (none), 2 (another portfolio's) or < 0. */
int review_load(struct store_tx *tx, const char *portfolio_id, const char *id, json_t **out) WUR;

/* Replaces the reply text of review id (status none, drafted or failed:
 * it becomes drafted). Returns 1, 0 (its status forbids it) or < 0. */
int review_reply_set(struct store_tx *tx, const char *id, const char *text, int64_t now) WUR;
/* Queues the reply of review id for publication (status drafted or
 * failed). Returns 1, 0 (its status forbids it) or < 0. */
int review_reply_publish(struct store_tx *tx, const char *id, int64_t now) WUR;

/* Worker: sends the replies due now through rp (at most 16, and none
 * started after REVIEW_SEND_BUDGET_MS), each claimed first so that several
 * workers never send one twice at once, and records each outcome. Returns
 * how many were sent (accepted or not), or < 0. */
int review_publish_due(struct store *st, struct review_platform *rp) WUR;

#endif
