/* scim: the SCIM 2.0 service provider under /scim/v2 (RFC 7643/7644,
 * API-CONTRACT §8): Users and Groups of one portfolio, authenticated with
 * the portfolio's SCIM bearer token. docs/scim.md describes what Okta and
 * Entra ID send and how we answer.
 *
 * HTTP only: it parses requests, calls the directory (identity/directory.h),
 * which stores each resource as the SCIM document the identity provider
 * sent, and answers. Filters are evaluated in memory over a portfolio's
 * resources: a hotel group has at most a few thousand staff. */
#ifndef REVOPS_SCIM_H
#define REVOPS_SCIM_H
#include <jansson.h>
#include "api/respond.h"
#include "core/common.h"

struct route_table;

struct ctx;

/* The SCIM error body (urn:ietf:params:scim:api:messages:2.0:Error).
 * scim_type may be NULL. */
void scim_error(struct ctx *c, int status, const char *scim_type, const char *fmt, ...) PRINTF(4, 5);
/* The SCIM shape of the pipeline's own refusals (404, 405, 413, 429, ...):
 * SCIM clients parse RFC 7644 §3.12 error bodies for every answer under
 * /scim/. Set as ctx.error_shape by the pipeline. */
void scim_error_shape(struct ctx *c, enum err e, const char *msg);

void scim_h_service_provider_config(struct ctx *c);
void scim_h_resource_types(struct ctx *c);
void scim_h_resource_type(struct ctx *c);
void scim_h_schemas(struct ctx *c);
void scim_h_schema(struct ctx *c);
void scim_h_users_list(struct ctx *c);
void scim_h_users_create(struct ctx *c);
void scim_h_user_get(struct ctx *c);
void scim_h_user_put(struct ctx *c);
void scim_h_user_patch(struct ctx *c);
void scim_h_user_delete(struct ctx *c);
void scim_h_groups_list(struct ctx *c);
void scim_h_groups_create(struct ctx *c);
void scim_h_group_get(struct ctx *c);
void scim_h_group_put(struct ctx *c);
void scim_h_group_patch(struct ctx *c);
void scim_h_group_delete(struct ctx *c);

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table scim_routes;

#endif
