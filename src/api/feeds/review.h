/* review: the v2 handlers of reviews and their replies (issue 15): the
 * list and one review (reviews:read), editing a reply and queueing its
 * publication (reviews:write). Drafting, publishing and the retries are
 * feeds/reviews.h's. */
#ifndef REVOPS_API_REVIEW_H
#define REVOPS_API_REVIEW_H

struct route_table;

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table review_routes;

#endif
