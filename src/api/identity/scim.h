/* scim: the SCIM 2.0 service provider under /scim/v2 (RFC 7643/7644,
 * API-CONTRACT §8): Users and Groups of one portfolio, authenticated with
 * the portfolio's SCIM bearer token. docs/scim.md describes what Okta and
 * Entra ID send and how we answer.
 *
 * Storage: each resource is kept as the SCIM document the identity provider
 * sent (normalised: string booleans become booleans, read-only attributes
 * dropped), with the columns revops itself needs (userName, active, roles,
 * version) kept in step. Filters are evaluated in memory over a portfolio's
 * resources: a hotel group has at most a few thousand staff. */
#ifndef REVOPS_SCIM_H
#define REVOPS_SCIM_H
#include <jansson.h>
#include "api/respond.h"
#include "core/common.h"

struct route_table;

struct ctx;
struct store_tx;

/* The SCIM error body (urn:ietf:params:scim:api:messages:2.0:Error).
 * scim_type may be NULL. */
void scim_error(struct ctx *c, int status, const char *scim_type, const char *fmt, ...)
	PRINTF(4, 5);
/* The SCIM shape of the pipeline's own refusals (404, 405, 413, 429, ...):
 * SCIM clients parse RFC 7644 §3.12 error bodies for every answer under
 * /scim/. Set as ctx.error_shape by the pipeline. */
void scim_error_shape(struct ctx *c, enum err e, const char *msg);

/* The role names of an active user: the SCIM roles values plus the display
 * names of its groups that are role names (API-CONTRACT §2). Returns 0 with
 * *roles (an owned array, possibly empty), 1 when the user is unknown or
 * inactive, or a negative store status. */
int scim_user_roles(struct store_tx *tx, const char *portfolio_id, const char *user_id,
		    json_t **roles) WUR;

/* Creates a user just in time (SAML) with the given roles, emitting
 * sso.user.provisioned with via "saml_jit". Returns 0 with the new id in
 * id_out, or a negative store status (STORE_CONSTRAINT: userName taken). */
int scim_user_provision_jit(struct store_tx *tx, const char *portfolio_id, const char *user_name,
			    const char *display_name, const json_t *roles, char *id_out,
			    size_t id_cap) WUR;

/* Replaces a user's SCIM roles (document and column) with roles, a JSON
 * array of strings; used for just-in-time users on each SAML login.
 * Returns 0 or a negative store status. */
int scim_user_set_roles(struct store_tx *tx, const char *portfolio_id, const char *user_id,
			const json_t *roles) WUR;

/* The stored form of a SCIM POST or PUT body, made without a store as the
 * handlers make it: read-only and write-only attributes and top-level nulls
 * dropped, then normalised, checked against the published schemas and
 * completed (schemas list, user columns; group members de-duplicated), with
 * before the stored resource or NULL. Returns the document (the caller
 * decrefs it), or NULL with *rc a negative SCIM_SCHEMA_* status and the
 * reason in err. It runs the handlers' own steps (sanitize, then
 * user_prepare or group_prepare); fuzz/scim_resource calls it. */
json_t *scim_prepare(const json_t *body, int user, const json_t *before, int *rc, char *err,
		     size_t cap) WUR;

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
