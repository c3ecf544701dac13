/* portfolios: the v2 handlers that list and fetch the token's portfolio
 * and its properties (API-CONTRACT §4). The data is portfolio/'s. */
#ifndef REVOPS_API_PORTFOLIOS_H
#define REVOPS_API_PORTFOLIOS_H

struct route_table;
struct ctx;

void portfolio_h_list(struct ctx *c);
void portfolio_h_get(struct ctx *c);
void portfolio_h_properties(struct ctx *c);

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table portfolio_routes;

#endif
