/* rate_suggestion: the v2 handlers of rate suggestions (issue 15): the
 * list and one suggestion with its trail (rates:read), and the approval
 * and rejection by a user with role revenue-approver (rates:write). The
 * state machine, governance and the booking-engine push are
 * rates/suggestion.h's. */
#ifndef REVOPS_RATE_SUGGESTION_H
#define REVOPS_RATE_SUGGESTION_H

struct route_table;

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table rate_suggestion_routes;

#endif
