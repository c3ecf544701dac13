/* portfolio: the hotel groups, their properties and brand ceilings. The one
 * owner of the portfolios, properties and brand_ceilings tables
 * (docs/architecture.md, "Where each table lives"); everything else reads
 * and writes them through these functions, inside the caller's
 * transaction. */
#ifndef REVOPS_PORTFOLIO_H
#define REVOPS_PORTFOLIO_H
#include <jansson.h>
#include <stdint.h>
#include "core/buf.h"
#include "core/common.h"
#include "core/id.h"

struct store_tx;
struct store_rows;

/* One property as the rates module needs it. */
struct portfolio_property {
	char id[ID_MAX];
	char code[64]; /* pms_property_code */
	char brand[128];
	char currency[4];
	char name[160];    /* shortened when longer */
	char timezone[64]; /* IANA name, as the operator gave it */
};

/* One brand ceiling, dates as days since the epoch. */
struct portfolio_ceiling {
	int found;
	char id[ID_MAX];
	char brand[128];
	char currency[4];
	int64_t max;        /* minor units */
	json_t *room_types; /* owned array of codes; empty = every room type */
	int64_t from_days;
	int has_to;
	int64_t to_days;
};

/* A new property; nip may be NULL. */
struct portfolio_property_new {
	const char *id, *portfolio_id, *name, *brand, *code, *billing_id, *timezone, *currency;
	const char *nip;
};

/* A new brand ceiling; room_types is a JSON array text, valid_to may be NULL. */
struct portfolio_ceiling_new {
	const char *id, *portfolio_id, *brand, *currency, *room_types, *valid_from, *valid_to;
	int64_t max_minor_units;
};

/* Each returns 1 (found / yes), 0 (no such row) or a negative store status. */
int portfolio_exists(struct store_tx *tx, const char *id) WUR;
/* The SLA tier of portfolio id (from its plan: identity/auth.h), a
 * static string. Returns 1, 0 (no such portfolio) or < 0. */
int portfolio_sla_tier(struct store_tx *tx, const char *id, const char **tier) WUR;
int portfolio_has_property(struct store_tx *tx, const char *portfolio_id, const char *property_id) WUR;
int portfolio_count(struct store_tx *tx, int64_t *n) WUR;
/* The property of the portfolio with the given id, or with the given PMS
 * property code (portfolio_property_by_code). */
int portfolio_property_get(struct store_tx *tx, const char *portfolio_id, const char *id,
			   struct portfolio_property *out) WUR;
int portfolio_property_by_code(struct store_tx *tx, const char *portfolio_id, const char *code,
			       struct portfolio_property *out) WUR;
/* Calls fn with the id and PMS code of each property of the portfolio, in
 * id order. Returns 0 or a negative store status. */
int portfolio_each_property(struct store_tx *tx, const char *portfolio_id,
			    void (*fn)(void *arg, const char *id, const char *code), void *arg) WUR;
/* The per-minute rate limit override; *per_minute is 0 when the plan's
 * figure applies. */
int portfolio_rate_limit(struct store_tx *tx, const char *id, int64_t *per_minute) WUR;

/* Loads the brand ceiling id of the portfolio into *out (out->found 0 when
 * there is none); release with portfolio_ceiling_free. Returns 0 or a
 * negative store status. */
int portfolio_ceiling_get(struct store_tx *tx, const char *portfolio_id, const char *id,
			  struct portfolio_ceiling *out) WUR;
void portfolio_ceiling_free(struct portfolio_ceiling *c);
/* Calls fn with each brand ceiling of the portfolio in id order; fn owns
 * *ce (portfolio_ceiling_free) and returns 0, or -1 to stop (STORE_ERR).
 * Returns 0 or a negative store status. */
int portfolio_each_ceiling(struct store_tx *tx, const char *portfolio_id,
			   int (*fn)(void *arg, struct portfolio_ceiling *ce), void *arg) WUR;

/* Loads portfolio id with its brand ceilings as its API representation.
 * Returns 1 and *out (owned), 0 when there is no such portfolio, or a
 * negative store status. */
int portfolio_load(struct store_tx *tx, const char *id, json_t **out) WUR;
/* Every property of a portfolio, in id order, as a JSON array. Returns 0
 * or a negative store status. */
int portfolio_properties(struct store_tx *tx, const char *portfolio_id, json_t **out) WUR;
/* The properties of a portfolio after id after in id order (only: that one
 * property, or NULL for all), for the caller to page through and render
 * with portfolio_property_write; the row's id is column 0. Returns a store
 * status. */
int portfolio_properties_after(struct store_tx *tx, const char *portfolio_id, const char *after,
			       const char *only, struct store_rows **rows) WUR;
/* Appends one row of portfolio_properties_after as its JSON object: the
 * one place a property is rendered. Returns 0 or -1. */
int portfolio_property_write(struct buf *b, struct store_rows *r) WUR;

/* Writes. Each returns 0 (for portfolio_set_rate_limit: 1 when the
 * portfolio exists, 0 when not) or a negative store status
 * (STORE_CONSTRAINT: a duplicate property code or id). */
int portfolio_create(struct store_tx *tx, const char *id, const char *name, const char *plan) WUR;
int portfolio_set_rate_limit(struct store_tx *tx, const char *id, int64_t per_minute) WUR;
int portfolio_property_add(struct store_tx *tx, const struct portfolio_property_new *p) WUR;
int portfolio_ceiling_add(struct store_tx *tx, const struct portfolio_ceiling_new *c) WUR;

#endif
