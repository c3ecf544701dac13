/* alerts: the v2 alert lists of issue 15 (alerts:read): parity alerts
 * (feeds/ota.h), one alert or a page, scoped to the request's
 * properties. */
#ifndef REVOPS_API_ALERTS_H
#define REVOPS_API_ALERTS_H

struct route_table;

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table alert_routes;

#endif
