/* directory: the users and groups of each portfolio, and the role
 * vocabulary. The only module that touches the users and scim_groups
 * tables. It keeps each resource as the SCIM document the identity
 * provider sent, prepared for storing (directory_user_prepare,
 * directory_group_prepare: no HTTP, no store), with the columns revops
 * needs (userName, active, roles, version) in step; it computes a user's
 * roles, and provisions SAML users just in time.
 *
 * Events: identity/ sits below events/, so a change that causes an sso.*
 * user event describes it in a struct directory_event, and the caller
 * appends that to the outbox inside the same transaction
 * (api/identity/user_event.c). */
#ifndef REVOPS_DIRECTORY_H
#define REVOPS_DIRECTORY_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"

struct store_tx;
struct directory_pair; /* a member id and its group's position */

/* The role names revops knows (API-CONTRACT §2), in this order. A user's
 * roles are its SCIM roles values plus the display names of its groups,
 * kept when they are one of these. */
#define DIRECTORY_NROLES 3
extern const char *const directory_role_names[DIRECTORY_NROLES];
/* 1 if s is one of directory_role_names, else 0. */
int directory_is_role(const char *s);
/* The role names as a sentence for messages: "a, b or c". */
void directory_roles_text(char *out, size_t cap);

/* Longest userName, in characters (bytes of UTF-8: 4 times as many). */
#define DIRECTORY_USER_NAME_MAX 256

/* ------------------------------------------------------------ documents */

/* The first member of o whose key equals key ignoring ASCII case (in the
 * object's order), or NULL. */
json_t *directory_get_ci(const json_t *o, const char *key);
/* Deletes every member of o whose key equals key ignoring ASCII case. */
void directory_del_ci(json_t *o, const char *key);
/* Drops a user's password from doc in every spelling a client can reach
 * it by (any case, qualified by the core User URN, or inside an object
 * under that URN; such an object is replaced by a copy without it). RFC
 * 7643 §7: write-only, never stored or returned. */
void directory_drop_password(json_t *doc);

/* A copy of a SCIM POST or PUT body with what a client cannot set dropped
 * (id, meta; for users also groups and password) and top-level nulls
 * dropped. The caller decrefs it; NULL when memory runs out. */
json_t *directory_sanitize(const json_t *body, int user);

/* The stored form of a user: the columns revops keeps, and the document's
 * text. user_name, display_name and external_id point into the prepared
 * document; roles and doc_s are owned (directory_user_release). */
struct directory_user {
	const char *user_name;
	char lower[DIRECTORY_USER_NAME_MAX * 4 + 1];
	const char *display_name;
	const char *external_id;
	int active;
	char *roles; /* JSON array of the roles values */
	char *doc_s; /* the document, compact */
};
void directory_user_release(struct directory_user *u);

/* Makes doc, a user document, the stored form in place: what a client
 * cannot set dropped (id, meta, groups, password), the Okta/Entra quirks
 * normalised, every attribute checked against the published schemas (with
 * before the stored user or NULL for a new one: values equal to the stored
 * ones pass as they are), the core schema first in "schemas"; then fills
 * *u (the caller calls directory_user_release; nothing to release on a
 * refusal). Touches no store, so it runs before the write transaction.
 * Returns 0, or a refusal with a reason in err: SCIM_SCHEMA_INVALID_SYNTAX
 * (an attribute given twice) or SCIM_SCHEMA_INVALID_VALUE (anything else). */
int directory_user_prepare(json_t *doc, const json_t *before, struct directory_user *u, char *err,
			   size_t cap) WUR;
/* Makes doc, a group document, the stored form in place: checked against
 * the published schemas (before as for users), the core schema first in
 * "schemas", displayName required, members normalised to objects and
 * de-duplicated in O(n log n), at most 10,000. Touches no store. Returns 0
 * or a refusal as directory_user_prepare. */
int directory_group_prepare(json_t *doc, const json_t *before, char *err, size_t cap) WUR;
/* The stored form of a SCIM POST or PUT body, made as the handlers make it
 * (directory_sanitize, then directory_user_prepare or
 * directory_group_prepare), with before the stored resource or NULL.
 * Returns the document (the caller decrefs it), or NULL with *rc a
 * negative SCIM_SCHEMA_* status and the reason in err. fuzz/scim_resource
 * calls it. */
json_t *directory_prepare(const json_t *body, int user, const json_t *before, int *rc, char *err,
			  size_t cap) WUR;

/* ---------------------------------------------------------------- reads */

enum directory_kind { DIRECTORY_USER, DIRECTORY_GROUP };

/* One stored resource. */
struct directory_row {
	char id[ID_MAX];
	json_t *doc; /* owned: directory_row_free */
	int64_t version, created, updated;
};
void directory_row_free(struct directory_row *r);

/* Loads the user or group id of portfolio_id. Returns 1 with *out (the
 * caller calls directory_row_free), 0 when there is none, or a negative
 * store status; *out is emptied first. */
int directory_load(struct store_tx *tx, enum directory_kind kind, const char *portfolio_id,
		   const char *id, struct directory_row *out) WUR;
/* The stored version of a user or group: 1 with *version, 0 when there is
 * none, or a negative store status. */
int directory_version(struct store_tx *tx, enum directory_kind kind, const char *portfolio_id,
		      const char *id, int64_t *version) WUR;
/* Every user or group of the portfolio, ordered by id, as an array of
 * {id, doc, version, created, updated} objects. Returns 0 with *out (the
 * caller decrefs it; set on errors too), or a negative store status. */
int directory_list(struct store_tx *tx, enum directory_kind kind, const char *portfolio_id,
		   json_t **out) WUR;

/* Which groups list which users, so that a user's groups are found by
 * binary search: listing n users over groups that hold m members in all
 * costs O((n + m) log m), not O(n * m). */
struct directory_memberships {
	json_t *groups;               /* directory_list(DIRECTORY_GROUP) output; owned */
	struct directory_pair *pairs; /* sorted by member id, then position */
	size_t n;
};
/* Reads every group of the portfolio under tx and indexes it by member.
 * *ms is set either way (free it with directory_memberships_free).
 * Returns 0 or a negative store status. */
int directory_memberships_load(struct store_tx *tx, const char *portfolio_id,
			       struct directory_memberships *ms) WUR;
void directory_memberships_free(struct directory_memberships *ms);
/* The groups that list user_id as a member, each once, in the order of
 * ms->groups: a new array of the {id, doc, ...} objects (borrowed
 * references taken), or NULL when memory runs out. */
json_t *directory_user_groups(const struct directory_memberships *ms, const char *user_id);

/* The users of the portfolio for an operator, ordered by id, as an array
 * of {id, user_name, display_name?, active, roles}. Returns 0 with *out
 * (the caller decrefs it) or a negative store status with *out NULL. */
int directory_user_summaries(struct store_tx *tx, const char *portfolio_id, json_t **out) WUR;
/* user_name of user_id in portfolio_id into out. 0, 1 when unknown, or a
 * negative store status. */
int directory_user_name(struct store_tx *tx, const char *portfolio_id, const char *user_id,
			char *out, size_t cap) WUR;
/* The user whose userName matches user_name case-insensitively
 * (users.user_name_lower) and its role names: its SCIM roles values plus
 * the display names of the groups listing it, each kept when it is a role
 * name (directory_is_role), once, in that order. One statement. Returns 0
 * with its id in id_out and *roles (an owned array, possibly empty), 1
 * when unknown, 2 when inactive (*roles NULL), or a negative store status. */
int directory_user_find_roles(struct store_tx *tx, const char *portfolio_id, const char *user_name,
			      char *id_out, size_t cap, json_t **roles) WUR;

/* --------------------------------------------------------------- writes */

/* An sso.* user event a change causes, for the caller to append to the
 * outbox in the same transaction. */
struct directory_event {
	const char *type; /* "sso.user.provisioned", "sso.user.deprovisioned", NULL: none */
	char user_id[ID_MAX];
	char user_name[DIRECTORY_USER_NAME_MAX * 4 + 1];
	const char *via; /* "scim" or "saml_jit" */
	int revoked;     /* tokens revoked by the change, or -1 when none could be */
};

/* Creates a user for an operator (via "admin") or just in time (via
 * "saml_jit"): active, with the roles values of roles (a JSON array of
 * strings; other elements skipped) and display_name unless it is NULL.
 * Writes the new id ("usr_...") to id_out. Returns 0, or a negative store
 * status (STORE_CONSTRAINT: userName taken, or no such portfolio). */
int directory_user_create(struct store_tx *tx, const char *portfolio_id, const char *user_name,
			  const char *display_name, const json_t *roles, const char *via,
			  char *id_out, size_t id_cap) WUR;
/* Stores a prepared user (directory_user_prepare) as a new SCIM user.
 * Writes the new id to id_out and fills *ev (sso.user.provisioned, via
 * "scim"). Returns 0, or a negative store status (STORE_CONSTRAINT: the
 * userName is taken). */
int directory_user_add(struct store_tx *tx, const char *portfolio_id, const struct directory_user *u,
		       char *id_out, size_t id_cap, struct directory_event *ev) WUR;
/* Stores a prepared user over old (as loaded under tx): columns, version
 * + 1. When it deactivates the user, revokes every token of the user and
 * fills *ev (sso.user.deprovisioned, via "scim"); else ev->type is NULL.
 * Returns 0 or a negative store status (STORE_CONSTRAINT: userName taken).
 * Revoked tokens' cached validations are dropped once tx commits; a caller
 * whose change a cached validation holds otherwise (roles) drops them with
 * auth_revocation_bump_at_commit. */
int directory_user_update(struct store_tx *tx, const char *portfolio_id,
			  const struct directory_row *old, const struct directory_user *u,
			  struct directory_event *ev) WUR;
/* Deletes user old: revokes its tokens, removes it from every group of the
 * portfolio, deletes the row, and fills *ev (sso.user.deprovisioned, via
 * "scim"). Returns 0 or a negative store status. Cached validations of
 * its tokens are dropped once tx commits. */
int directory_user_delete(struct store_tx *tx, const char *portfolio_id,
			  const struct directory_row *old, struct directory_event *ev) WUR;
/* Signs in the user a verified SAML assertion names (name_id, compared
 * case-insensitively). An unknown user is provisioned just in time with
 * roles and display_name ("" for none), filling *ev (sso.user.provisioned,
 * via "saml_jit"); a just-in-time user's roles follow each assertion, a
 * SCIM user's stay SCIM's. Returns 0 with the user's id in id_out, 1 when
 * the user is deactivated, or a negative store status. */
int directory_user_login(struct store_tx *tx, const char *portfolio_id, const char *name_id,
			 const char *display_name, const json_t *roles, char *id_out, size_t id_cap,
			 struct directory_event *ev) WUR;

/* Stores a prepared group (directory_group_prepare) as group id, a new one
 * when insert, else over the stored one (version + 1). Members that name
 * no user or group of the portfolio, or the group itself, are dropped from
 * doc first. Returns 0 or a negative store status. */
int directory_group_save(struct store_tx *tx, const char *portfolio_id, const char *id, json_t *doc,
			 int insert) WUR;
/* Deletes group id. Returns 0 or a negative store status. */
int directory_group_delete(struct store_tx *tx, const char *portfolio_id, const char *id) WUR;

#endif
