/* rate_decision: the v2 handlers of governed rate decisions (spec "Rate
 * decision"; API-CONTRACT §4): the request bodies and their checks, the
 * token's reach, and the answers. Governance, the PMS write sequence and
 * the audit trail are rates/'s (rates/decision.h). */
#ifndef REVOPS_RATE_DECISION_H
#define REVOPS_RATE_DECISION_H

#include "core/validate.h"

struct route_table;

struct ctx;

extern const struct vfield rate_decision_spec[];
extern const struct vfield rate_revert_spec[];

/* The checks of a rate decision body that rate_decision_spec cannot
 * express, run on a body that passed the spec: at least one property, each
 * an id given once; room_type_code a code; dates YYYY-MM-DD, from <= to,
 * at most 366 days; a known currency; minor_units > 0; governance strings
 * not blank. Appends one details entry per problem (validate_add_detail);
 * appends nothing when the body is acceptable. */
void rate_decision_check(const json_t *body, json_t *details);

void rate_decision_h_create(struct ctx *c);
void rate_decision_h_list(struct ctx *c);
void rate_decision_h_get(struct ctx *c);
void rate_decision_h_audit(struct ctx *c);
void rate_decision_h_revert(struct ctx *c);

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table rate_decision_routes;

#endif
