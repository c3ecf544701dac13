/* portfolio: portfolios, their properties and brand ceilings as JSON, and
 * the v2 handlers that list and fetch them (API-CONTRACT §4). */
#ifndef REVOPS_PORTFOLIO_H
#define REVOPS_PORTFOLIO_H
#include <jansson.h>
#include "core/common.h"

struct route_table;

struct ctx;
struct store_tx;

/* Loads portfolio id with its brand ceilings. Returns 1 and *out (owned),
 * 0 when there is no such portfolio, or a negative store status. */
int portfolio_load(struct store_tx *tx, const char *id, json_t **out) WUR;
/* Loads the properties of a portfolio (all of them) as a JSON array.
 * Returns 0 or a negative store status. */
int portfolio_properties(struct store_tx *tx, const char *portfolio_id, json_t **out) WUR;
/* Returns 1 when property_id belongs to portfolio_id, 0 if not, < 0 error. */
int portfolio_has_property(struct store_tx *tx, const char *portfolio_id,
			   const char *property_id) WUR;

void portfolio_h_list(struct ctx *c);
void portfolio_h_get(struct ctx *c);
void portfolio_h_properties(struct ctx *c);

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table portfolio_routes;

#endif
