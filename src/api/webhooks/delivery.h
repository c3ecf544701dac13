/* delivery: the webhook delivery endpoints (API-CONTRACT §5): attempt logs,
 * dead letters, manual retry (v1) and replay (v2), pings and the SLA
 * report. The engine that sends is webhooks/engine. */
#ifndef REVOPS_DELIVERY_H
#define REVOPS_DELIVERY_H

struct route_table;

struct ctx;

void delivery_h_list(struct ctx *c);         /* GET /v2/webhooks/{id}/deliveries */
void delivery_h_get(struct ctx *c);          /* GET /v2/webhooks/deliveries/{id} */
void delivery_h_dead_letters(struct ctx *c); /* GET /v2/webhooks/dead-letters */
void delivery_h_replay(struct ctx *c);       /* POST /v2/webhooks/deliveries/{id}/replay */
void delivery_h_retry(struct ctx *c);        /* POST /v1/webhooks/deliveries/{id}/retry */
void delivery_h_ping_v1(struct ctx *c);      /* POST /v1/webhooks/{id}/ping */
void delivery_h_ping_v2(struct ctx *c);      /* POST /v2/webhooks/{id}/ping */
void delivery_h_sla(struct ctx *c);          /* GET /v2/webhooks/sla?month=YYYY-MM */

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table delivery_routes;

#endif
