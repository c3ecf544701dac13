/* suggestion: rate suggestions from a revenue management system (spec
 * "States and transitions", v1; issue 15), the one owner of the
 * rate_suggestions table. A suggestion arrives pending approval (v1
 * rate.suggested); a user with role revenue-approver approves it, which is
 * governed like a rate decision (the brand ceilings of the property's brand
 * checked before any write, then the rate pushed to the booking engine,
 * then recorded with its hash-chained trail, an approved rate floor and v1
 * rate.approved), or rejects it (v1 rate.rejected). A suggestion still
 * pending once its stay date has passed (UTC) expires. No HTTP here: the
 * handlers in api/feeds/ and api/rates/ call these. */
#ifndef REVOPS_SUGGESTION_H
#define REVOPS_SUGGESTION_H
#include <jansson.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"

struct store;
struct store_tx;
struct outbox_later;
struct store_rows;
struct pms;

/* How long an approval holds a suggestion while it pushes the rate; past
 * it (a stopped server), the suggestion can be acted on again. */
#define SUGGESTION_CLAIM_MS 30000

/* One suggestion of the feed, validated by the caller (dates YYYY-MM-DD,
 * both rates in the property's currency). */
struct suggestion_new {
	const char *property_id, *room_type_code, *date, *currency, *trigger;
	const char *actor; /* who fed it ("client:cli_..."), for the trail */
	int64_t current_minor, proposed_minor;
};

/* Records s as pending approval inside tx, with the first entry of its
 * trail, and makes ready its v1 rate.suggested (whose data is exactly the
 * spec's) in *later (outbox_later_add), for the caller to append in the
 * writers' turn: the rows are the suggestion's own, so a feed batch writes
 * them beside other writers (STORE_WRITE_OWN). Writes the new id
 * ("rs_...") to id_out (ID_MAX bytes). Returns 0 or a negative store
 * status. */
int suggestion_create(struct store_tx *tx, const char *portfolio_id, const struct suggestion_new *s,
		      int64_t now, struct outbox_later **later, char *id_out) WUR;

/* Loads suggestion id of the portfolio as its API representation. Returns
 * 1, 0 (no such suggestion in any portfolio), 2 (another portfolio's), or
 * a negative store status. */
int suggestion_load(struct store_tx *tx, const char *portfolio_id, const char *id, json_t **out) WUR;

/* A list's filters; NULL or "" for none. props: the property ids the
 * caller reaches (nprops of them), or NULL for all of the portfolio. */
struct suggestion_filter {
	const char *status, *property_id, *date_from, *date_to;
	const char *const *props;
	int nprops;
};
/* The suggestions of the portfolio after id after, in id order, at most
 * limit, for the caller to page through with suggestion_from_row. Returns
 * a store status. */
int suggestion_list(struct store_tx *tx, const char *portfolio_id, const char *after,
		    const struct suggestion_filter *f, int limit, struct store_rows **rows) WUR;
json_t *suggestion_from_row(struct store_rows *r);
const char *suggestion_row_id(struct store_rows *r);

/* Who acts on a suggestion: a user of the portfolio. */
struct suggestion_outcome;

struct suggestion_who {
	const char *portfolio_id;
	const char *user_id; /* "" when the token is not a user's */
	int (*reaches)(void *arg, const char *property_id);
	void *arg;
	/* NULL, or called with arg inside the transaction that records the
	 * outcome (*o as it will be returned), before its commit: as
	 * decision_who.record (rates/decision.h). */
	int (*record)(void *arg, struct store_tx *tx, const struct suggestion_outcome *o);
};

enum suggestion_result {
	SUGGESTION_DONE,             /* body: the suggestion now */
	SUGGESTION_NOT_FOUND,        /* no such suggestion */
	SUGGESTION_OTHER_PORTFOLIO,  /* it belongs to another portfolio */
	SUGGESTION_OUT_OF_REACH,     /* body: {property_id}, outside the credentials */
	SUGGESTION_NOT_APPROVER,     /* why: not a user, inactive, or lacks the role */
	SUGGESTION_CONFLICT,         /* why; status: what it is */
	SUGGESTION_CEILING_EXCEEDED, /* body: the failed checks; stays pending */
	SUGGESTION_PUSH_FAILED,      /* why: the booking engine's failure; stays pending */
};

struct suggestion_outcome {
	enum suggestion_result result;
	char status[24];
	char why[240];
	json_t *body; /* owned by the caller */
};

/* Approves (approve 1) or rejects (approve 0, with reason or NULL)
 * suggestion id as who, pushing an approved rate through booking.
 * Returns 0 with *out, or a negative store status. */
int suggestion_decide(struct store *st, struct pms *booking, const struct suggestion_who *who,
		      const char *id, int approve, const char *reason,
		      struct suggestion_outcome *out) WUR;

/* Today's date (UTC) as YYYY-MM-DD: a suggestion for an earlier date has
 * expired. */
void suggestion_today(char out[16]);
/* Marks expired every suggestion still pending (and not being pushed)
 * whose stay date is before today, with a trail entry each. Returns how
 * many, or a negative store status. */
int suggestion_expire(struct store *st, const char *today) WUR;

#endif
