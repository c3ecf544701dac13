/* webhook: webhook subscriptions (API-CONTRACT §5): v1 subscriptions with
 * their own signing secret, v2 subscriptions sharing the portfolio's
 * secret, mirrors on Enterprise, secret rotation. Secrets are returned once
 * and stored sealed (crypto_seal) under the key in <data-dir>/revops.key.
 * Delivery (the dispatcher reading the outbox) is a separate module. */
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

/* 1 when type is an event of the surface's table (spec "Events"). */
int webhook_event_known(const char *surface, const char *type);
/* The checks of a subscription's "events" that its spec cannot express, on
 * a body that passed webhook_v1_spec or webhook_v2_spec (so events is an
 * array of strings): at least one, each an event type of surface ("v1" or
 * "v2") named once. Appends one details entry per problem. */
void webhook_check_events(const char *surface, const json_t *events, json_t *details);

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table webhook_routes;

#endif
