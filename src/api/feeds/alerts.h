/* alerts: the v2 alerts of issue 15 (alerts:read): parity alerts
 * (feeds/ota.h) and reputation alerts (feeds/reputation.h), one alert or a
 * page, scoped to the request's properties, and the reputation scores
 * now (GET /v2/reputation). */
#ifndef REVOPS_API_ALERTS_H
#define REVOPS_API_ALERTS_H

struct route_table;

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table alert_routes;

#endif
