/* webhook: the HTTP handlers of webhook subscriptions (API-CONTRACT §5):
 * create (v1, v2), list, get, delete and secret rotation. They parse the
 * request, call webhooks/subscriptions (what a valid subscription is,
 * sealing and rotating secrets, the tables) and answer. Delivery endpoints
 * are api/webhooks/delivery. */
#ifndef REVOPS_WEBHOOK_H
#define REVOPS_WEBHOOK_H
#include "core/validate.h"

struct route_table;

struct ctx;

extern const struct vfield webhook_v1_spec[];
extern const struct vfield webhook_v2_spec[];

void webhook_h_create_v1(struct ctx *c);
void webhook_h_create_v2(struct ctx *c);
void webhook_h_list(struct ctx *c);
void webhook_h_get(struct ctx *c);
void webhook_h_delete(struct ctx *c);
void webhook_h_rotate(struct ctx *c);

/* A body that passed webhook_v1_spec or webhook_v2_spec has its events
 * checked further by subscriptions_check_events. */

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table webhook_routes;

#endif
