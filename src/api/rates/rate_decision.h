/* rate_decision: governed rate decisions (spec "Rate decision";
 * API-CONTRACT §4). A decision is validated, checked against its brand
 * ceiling for every property and against the approver's role BEFORE any
 * PMS call, written to every property's PMS in parallel, compensated if any
 * write fails, and recorded in a hash-chained audit trail together with the
 * events it causes. */
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

struct store;

/* At start-up: a decision left "pending" by a process that died during its
 * PMS writes is marked failed, with an audit entry saying so (the PMS state
 * of its properties is unknown; nothing is compensated automatically).
 * Returns how many were marked, or -1. */
int rate_decision_recover(struct store *st);

void rate_decision_h_create(struct ctx *c);
void rate_decision_h_list(struct ctx *c);
void rate_decision_h_get(struct ctx *c);
void rate_decision_h_audit(struct ctx *c);
void rate_decision_h_revert(struct ctx *c);

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table rate_decision_routes;

#endif
