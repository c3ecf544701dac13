#include "identity/directory.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "identity/auth.h"
#include "identity/scim_filter.h"
#include "identity/scim_patch.h"
#include "identity/scim_schema.h"
#include "store/store.h"

#define MAX_MEMBERS 10000

const char *const directory_role_names[DIRECTORY_NROLES] = {"revenue-approver", "finance-operator",
							    "ops-manager"};

int directory_is_role(const char *s)
{
	size_t i;

	for (i = 0; i < DIRECTORY_NROLES; i++)
		if (!strcmp(directory_role_names[i], s))
			return 1;
	return 0;
}

void directory_roles_text(char *out, size_t cap)
{
	size_t i, len = 0;

	out[0] = '\0';
	for (i = 0; i < DIRECTORY_NROLES && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s",
					!i                         ? ""
					: i + 1 < DIRECTORY_NROLES ? ", "
								   : " or ",
					directory_role_names[i]);
}

/* -------------------------------------------------------------- documents */

json_t *directory_get_ci(const json_t *o, const char *key)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v)
		if (!strcasecmp(k, key))
			return v;
	return NULL;
}

void directory_del_ci(json_t *o, const char *key)
{
	const char *k;
	json_t *v;
	void *tmp;

	json_object_foreach_safe(o, tmp, k, v)
		if (!strcasecmp(k, key))
			json_object_del(o, k);
}

/* RFC 7643 §4.1.1 and §7: a user's "password" is write-only and never
 * returned. revops signs users in with SAML only, so a password is accepted
 * and discarded. Used on every document about to be stored (POST, PUT,
 * PATCH, a SAML login) and by the handlers on every one about to be
 * returned, which covers rows stored before this rule. */
void directory_drop_password(json_t *doc)
{
	const char *k;
	json_t *v, *copy;
	void *tmp;

	json_object_foreach_safe(doc, tmp, k, v) {
		if (!strcasecmp(k, "password") || !strcasecmp(k, SCIM_URN_USER ":password")) {
			json_object_del(doc, k);
		} else if (!strcasecmp(k, SCIM_URN_USER) && json_is_object(v) &&
			   directory_get_ci(v, "password")) {
			copy = json_deep_copy(v);
			directory_del_ci(copy, "password");
			if (!copy || json_object_set_new(doc, k, copy))
				json_object_del(doc, k);
		}
	}
}

/* Drops from a user document what a client cannot set: the read-only id,
 * meta and groups (computed from group membership), and the password. */
static void drop_unsettable(json_t *doc)
{
	directory_del_ci(doc, "id");
	directory_del_ci(doc, "meta");
	directory_del_ci(doc, "groups");
	directory_drop_password(doc);
}

json_t *directory_sanitize(const json_t *body, int user)
{
	json_t *doc = json_deep_copy(body), *v;
	const char *k;
	void *tmp;

	directory_del_ci(doc, "id");
	directory_del_ci(doc, "meta");
	if (user)
		drop_unsettable(doc);
	json_object_foreach_safe(doc, tmp, k, v)
		if (json_is_null(v))
			json_object_del(doc, k);
	return doc;
}

/* Puts the core schema URN first in "schemas", keeping any others sent. */
static void fix_schemas(json_t *doc, const char *core)
{
	json_t *s = directory_get_ci(doc, "schemas"), *fresh = json_pack("[s]", core), *v;
	size_t i;

	if (json_is_array(s))
		json_array_foreach(s, i, v)
			if (json_is_string(v) && strcmp(json_string_value(v), core))
				json_array_append(fresh, v);
	directory_del_ci(doc, "schemas");
	json_object_set_new(doc, "schemas", fresh);
}

void directory_user_release(struct directory_user *u)
{
	free(u->roles);
	free(u->doc_s);
	u->roles = u->doc_s = NULL;
}

/* The userName columns of u from doc; -1 with a reason in err. */
static int user_name_column(json_t *doc, struct directory_user *u, char *err, size_t cap)
{
	json_t *v = directory_get_ci(doc, "userName");
	size_t i;

	if (!json_is_string(v) || !json_string_length(v) ||
	    json_string_length(v) > DIRECTORY_USER_NAME_MAX) {
		snprintf(err, cap, "userName is required (a string of 1-%d characters)",
			 DIRECTORY_USER_NAME_MAX);
		return -1;
	}
	u->user_name = json_string_value(v);
	for (i = 0; u->user_name[i]; i++)
		u->lower[i] = (char)tolower((unsigned char)u->user_name[i]);
	u->lower[i] = '\0';
	return 0;
}

/* The roles column of u (a JSON array of the values of doc's roles); -1
 * with a reason in err. */
static int roles_column(json_t *doc, struct directory_user *u, char *err, size_t cap)
{
	json_t *roles = directory_get_ci(doc, "roles"), *list = json_array(), *r, *val;
	size_t i;
	int rc = -1;

	if (roles && !json_is_array(roles)) {
		snprintf(err, cap, "roles must be an array");
		goto out;
	}
	json_array_foreach(roles, i, r) {
		val = json_is_object(r) ? directory_get_ci(r, "value") : r;
		if (!json_is_string(val)) {
			snprintf(err, cap, "roles[%zu].value must be a string", i);
			goto out;
		}
		json_array_append(list, val);
	}
	u->roles = json_dumps(list, JSON_COMPACT);
	rc = u->roles ? 0 : -1;
out:
	json_decref(list);
	return rc;
}

/* Checks a user document and extracts the columns revops keeps into *u
 * (roles owned, the rest pointing into doc). Returns 0, or -1 with a
 * reason in err. */
static int user_columns(json_t *doc, struct directory_user *u, char *err, size_t cap)
{
	json_t *v;

	memset(u, 0, sizeof *u);
	if (user_name_column(doc, u, err, cap) < 0)
		return -1;
	v = directory_get_ci(doc, "displayName");
	if (json_is_null(v)) {
		directory_del_ci(doc, "displayName"); /* null = unassigned (RFC 7643 §2.5) */
		v = NULL;
	}
	if (v && !json_is_string(v)) {
		snprintf(err, cap, "displayName must be a string");
		return -1;
	}
	u->display_name = json_string_value(v);
	v = directory_get_ci(doc, "externalId");
	if (v && !json_is_string(v)) {
		snprintf(err, cap, "externalId must be a string");
		return -1;
	}
	u->external_id = json_string_value(v);
	v = directory_get_ci(doc, "active");
	if (v && !json_is_boolean(v)) {
		snprintf(err, cap, "active must be a boolean");
		return -1;
	}
	u->active = v ? json_is_true(v) : 1;
	if (!v)
		json_object_set_new(doc, "active", json_true());
	return roles_column(doc, u, err, cap);
}

/* The columns of doc and its text into *u; -1 with a reason in err and
 * nothing to release. */
static int user_stored_form(json_t *doc, struct directory_user *u, char *err, size_t cap)
{
	if (user_columns(doc, u, err, cap) < 0)
		return -1;
	u->doc_s = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!u->doc_s) {
		directory_user_release(u);
		snprintf(err, cap, "out of memory");
		return -1;
	}
	return 0;
}

int directory_user_prepare(json_t *doc, const json_t *before, struct directory_user *u, char *err,
			   size_t cap)
{
	int rc = SCIM_SCHEMA_INVALID_VALUE;

	memset(u, 0, sizeof *u);
	snprintf(err, cap, "out of memory");
	drop_unsettable(doc);
	if (scim_patch_normalize(doc, err, cap) != SCIM_PATCH_OK ||
	    (rc = scim_schema_check(scim_schemas_builtin(), "User", doc, before, err, cap)) < 0)
		goto bad;
	rc = SCIM_SCHEMA_INVALID_VALUE;
	fix_schemas(doc, SCIM_URN_USER);
	if (user_stored_form(doc, u, err, cap) < 0)
		goto bad;
	return 0;
bad:
	if (!err[0])
		snprintf(err, cap, "out of memory");
	return rc;
}

/* A string and a position, sorted by the string, then the position: a
 * member's value and its place in the members list (group_members), or a
 * member id and its group's place in a group list (memberships). */
struct directory_pair {
	const char *key;
	size_t i;
};

static int pair_cmp(const void *a, const void *b)
{
	const struct directory_pair *x = a, *y = b;
	int r = strcmp(x->key, y->key);

	return r ? r : (x->i > y->i) - (x->i < y->i);
}

/* The member m as stored: {value, display?, type?}; NULL without memory. */
static json_t *member_object(json_t *m)
{
	json_t *val = json_is_object(m) ? directory_get_ci(m, "value") : m, *o, *d, *t;

	o = json_pack("{s:O}", "value", val);
	if (o && json_is_object(m)) {
		d = directory_get_ci(m, "display");
		t = directory_get_ci(m, "type");
		if (!d)
			d = directory_get_ci(m, "displayName");
		if (json_is_string(d))
			json_object_set(o, "display", d);
		if (json_is_string(t))
			json_object_set(o, "type", t);
	}
	return o;
}

/* Marks in dup (n bytes) the members of m whose value an earlier member
 * has, sorting the values once. Returns 0, or -1 with a reason in err (an
 * ill-formed member, no memory). */
static int member_duplicates(const json_t *m, unsigned char *dup, char *err, size_t cap)
{
	size_t i, n = json_array_size(m);
	struct directory_pair *refs = malloc((n ? n : 1) * sizeof *refs);
	json_t *v, *val;
	int rc = -1;

	if (!refs) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	json_array_foreach(m, i, v) {
		val = json_is_object(v) ? directory_get_ci(v, "value") : v;
		if (!json_is_string(val) || !json_string_length(val) ||
		    json_string_length(val) > 256) {
			snprintf(err, cap, "members[%zu].value must be a non-empty string", i);
			goto out;
		}
		refs[i].key = json_string_value(val);
		refs[i].i = i;
	}
	qsort(refs, n, sizeof *refs, pair_cmp);
	for (i = 1; i < n; i++)
		if (!strcmp(refs[i].key, refs[i - 1].key))
			dup[refs[i].i] = 1;
	rc = 0;
out:
	free(refs);
	return rc;
}

/* Normalises group members to objects {value, display?, type?}, accepting
 * bare strings (as some clients send), dropping duplicates: of members
 * with the same value (compared exactly) the first stays, in place.
 * Returns 0, or -1 with a reason (the first ill-formed member, or too many
 * members). */
static int group_members(json_t *doc, char *err, size_t cap)
{
	json_t *m = directory_get_ci(doc, "members"), *out = json_array(), *v;
	size_t i, n = json_array_size(m);
	unsigned char *dup = calloc(n ? n : 1, 1);
	int rc = -1;

	if (m && !json_is_array(m)) {
		snprintf(err, cap, "members must be an array");
		goto out;
	}
	if (!out || !dup) {
		snprintf(err, cap, "out of memory");
		goto out;
	}
	if (member_duplicates(m, dup, err, cap) < 0)
		goto out;
	json_array_foreach(m, i, v)
		if (!dup[i] && json_array_append_new(out, member_object(v))) {
			snprintf(err, cap, "out of memory");
			goto out;
		}
	if (json_array_size(out) > MAX_MEMBERS) {
		snprintf(err, cap, "a group has at most %d members", MAX_MEMBERS);
		goto out;
	}
	directory_del_ci(doc, "members");
	json_object_set(doc, "members", out);
	rc = 0;
out:
	free(dup);
	json_decref(out);
	return rc;
}

static int group_display_name(const json_t *doc, char *err, size_t cap)
{
	json_t *v = directory_get_ci(doc, "displayName");

	if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) > 256) {
		snprintf(err, cap, "displayName is required (a string of 1-256 characters)");
		return -1;
	}
	return 0;
}

int directory_group_prepare(json_t *doc, const json_t *before, char *err, size_t cap)
{
	int rc = scim_schema_check(scim_schemas_builtin(), "Group", doc, before, err, cap);

	if (rc < 0)
		return rc;
	fix_schemas(doc, SCIM_URN_GROUP);
	if (group_display_name(doc, err, cap) < 0 || group_members(doc, err, cap) < 0)
		return SCIM_SCHEMA_INVALID_VALUE;
	return 0;
}

json_t *directory_prepare(const json_t *body, int user, const json_t *before, int *rc, char *err,
			  size_t cap)
{
	json_t *doc = directory_sanitize(body, user);
	struct directory_user u = {0};

	err[0] = '\0';
	*rc = SCIM_SCHEMA_INVALID_VALUE;
	if (!doc) {
		snprintf(err, cap, "out of memory");
		return NULL;
	}
	*rc = user ? directory_user_prepare(doc, before, &u, err, cap)
		   : directory_group_prepare(doc, before, err, cap);
	directory_user_release(&u);
	if (*rc < 0) {
		json_decref(doc);
		return NULL;
	}
	return doc;
}

/* ---------------------------------------------------------------- reads */

void directory_row_free(struct directory_row *r)
{
	json_decref(r->doc);
	r->doc = NULL;
}

/* The row r is on as a struct directory_row (columns id, scim, version,
 * created_at, updated_at); a document that is not an object reads as {}. */
static void row_read(struct store_rows *r, struct directory_row *out)
{
	memset(out, 0, sizeof *out);
	snprintf(out->id, sizeof out->id, "%s", store_text(r, 0));
	out->doc = json_loads(store_text(r, 1), 0, NULL);
	if (!json_is_object(out->doc)) {
		json_decref(out->doc);
		out->doc = json_object();
	}
	out->version = store_int(r, 2);
	out->created = store_int(r, 3);
	out->updated = store_int(r, 4);
}

int directory_load(struct store_tx *tx, enum directory_kind kind, const char *portfolio_id,
		   const char *id, struct directory_row *out)
{
	struct store_rows *r;
	int rc;

	memset(out, 0, sizeof *out);
	rc = store_query(tx,
			 kind == DIRECTORY_USER
				 ? "SELECT id, scim, version, created_at, updated_at FROM users"
				   " WHERE portfolio_id = $1 AND id = $2"
				 : "SELECT id, scim, version, created_at, updated_at FROM scim_groups"
				   " WHERE portfolio_id = $1 AND id = $2",
			 (struct store_val[]){sv_text(portfolio_id), sv_text(id)}, 2, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1)
		row_read(r, out);
	store_rows_close(r);
	return rc;
}

int directory_version(struct store_tx *tx, enum directory_kind kind, const char *portfolio_id,
		      const char *id, int64_t *version)
{
	return store_query_int(tx,
			       kind == DIRECTORY_USER
				       ? "SELECT version FROM users WHERE portfolio_id = $1 AND id = $2"
				       : "SELECT version FROM scim_groups WHERE portfolio_id = $1"
					 " AND id = $2",
			       (struct store_val[]){sv_text(portfolio_id), sv_text(id)}, 2, version);
}

int directory_list(struct store_tx *tx, enum directory_kind kind, const char *portfolio_id,
		   json_t **out)
{
	struct store_rows *r;
	struct directory_row row;
	int rc;

	*out = json_array();
	if (!*out)
		return STORE_ERR;
	rc = store_query(tx,
			 kind == DIRECTORY_USER
				 ? "SELECT id, scim, version, created_at, updated_at FROM users"
				   " WHERE portfolio_id = $1 ORDER BY id"
				 : "SELECT id, scim, version, created_at, updated_at FROM scim_groups"
				   " WHERE portfolio_id = $1 ORDER BY id",
			 (struct store_val[]){sv_text(portfolio_id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1) {
		row_read(r, &row);
		if (json_array_append_new(*out, json_pack("{s:s, s:o, s:I, s:I, s:I}", "id", row.id,
							  "doc", row.doc, "version",
							  (json_int_t)row.version, "created",
							  (json_int_t)row.created, "updated",
							  (json_int_t)row.updated))) {
			rc = STORE_ERR;
			break;
		}
	}
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

/* 1 if doc's members list user_id (an object whose value is it). */
static int has_member(const json_t *doc, const char *user_id)
{
	json_t *m = directory_get_ci(doc, "members"), *v, *val;
	size_t i;

	json_array_foreach(m, i, v) {
		val = json_is_object(v) ? directory_get_ci(v, "value") : NULL;
		if (json_is_string(val) && !strcmp(json_string_value(val), user_id))
			return 1;
	}
	return 0;
}

/* Indexes ms->groups by member, counting members as has_member() does.
 * Returns 0, or -1 when memory runs out (ms->pairs then empty). */
static int memberships_index(struct directory_memberships *ms)
{
	const json_t *g, *m, *v;
	size_t i, j, total = 0;

	json_array_foreach(ms->groups, i, g)
		total += json_array_size(directory_get_ci(json_object_get(g, "doc"), "members"));
	if (!total)
		return 0;
	ms->pairs = malloc(total * sizeof *ms->pairs);
	if (!ms->pairs)
		return -1;
	json_array_foreach(ms->groups, i, g)
		json_array_foreach(directory_get_ci(json_object_get(g, "doc"), "members"), j, m) {
			v = json_is_object(m) ? directory_get_ci(m, "value") : NULL;
			if (json_is_string(v))
				ms->pairs[ms->n++] = (struct directory_pair){json_string_value(v), i};
		}
	qsort(ms->pairs, ms->n, sizeof *ms->pairs, pair_cmp);
	return 0;
}

int directory_memberships_load(struct store_tx *tx, const char *portfolio_id,
			       struct directory_memberships *ms)
{
	int rc;

	memset(ms, 0, sizeof *ms);
	rc = directory_list(tx, DIRECTORY_GROUP, portfolio_id, &ms->groups);
	if (rc >= 0 && memberships_index(ms) < 0)
		rc = STORE_ERR;
	return rc;
}

void directory_memberships_free(struct directory_memberships *ms)
{
	free(ms->pairs);
	json_decref(ms->groups);
	memset(ms, 0, sizeof *ms);
}

json_t *directory_user_groups(const struct directory_memberships *ms, const char *user_id)
{
	json_t *list = json_array();
	size_t lo = 0, hi = ms->n, mid, i;

	while (lo < hi) { /* the first pair of this user */
		mid = lo + (hi - lo) / 2;
		if (strcmp(ms->pairs[mid].key, user_id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = lo; list && i < ms->n && !strcmp(ms->pairs[i].key, user_id); i++) {
		if (i > lo && ms->pairs[i].i == ms->pairs[i - 1].i)
			continue;
		if (json_array_append(list, json_array_get(ms->groups, ms->pairs[i].i))) {
			json_decref(list);
			list = NULL;
		}
	}
	return list;
}

int directory_user_summaries(struct store_tx *tx, const char *portfolio_id, json_t **out)
{
	struct store_rows *r;
	json_t *roles;
	int rc;

	*out = NULL;
	rc = store_query(tx,
			 "SELECT id, user_name, display_name, active, roles FROM users"
			 " WHERE portfolio_id = $1 ORDER BY id",
			 (struct store_val[]){sv_text(portfolio_id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	*out = json_array();
	while ((rc = store_next(r)) == 1) {
		roles = json_loads(store_text(r, 4), 0, NULL);
		json_array_append_new(*out,
				      json_pack("{s:s, s:s, s:s?, s:b, s:o}", "id", store_text(r, 0),
						"user_name", store_text(r, 1), "display_name",
						store_text(r, 2), "active", (int)store_int(r, 3),
						"roles", roles ? roles : json_array()));
	}
	store_rows_close(r);
	if (rc < 0) {
		json_decref(*out);
		*out = NULL;
		return rc;
	}
	return 0;
}

/* One text column of the first row a query gives into out: 0, 1 when
 * there is no row, or a negative store status. */
static int query_text(struct store_tx *tx, const char *sql, const struct store_val *params, int n,
		      char *out, size_t cap)
{
	struct store_rows *r;
	int rc = store_query(tx, sql, params, n, &r);

	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1)
		snprintf(out, cap, "%s", store_text(r, 0));
	store_rows_close(r);
	return rc < 0 ? rc : rc == 1 ? 0 : 1;
}

int directory_user_name(struct store_tx *tx, const char *portfolio_id, const char *user_id,
			char *out, size_t cap)
{
	return query_text(tx, "SELECT user_name FROM users WHERE portfolio_id = $1 AND id = $2",
			  (struct store_val[]){sv_text(portfolio_id), sv_text(user_id)}, 2, out, cap);
}

/* user_name in lower case, as users.user_name_lower holds it. */
static void lower_name(const char *user_name, char *out, size_t cap)
{
	size_t i;

	for (i = 0; user_name[i] && i + 1 < cap; i++)
		out[i] = (char)tolower((unsigned char)user_name[i]);
	out[i] = '\0';
}

/* Appends name to roles when it is a role name not yet there. */
static void add_role(json_t *roles, const char *name)
{
	json_t *v;
	size_t i;

	if (!directory_is_role(name))
		return;
	json_array_foreach(roles, i, v)
		if (!strcmp(json_string_value(v), name))
			return;
	json_array_append_new(roles, json_string(name));
}

/* A new array of the role names among own's values (a user's roles
 * column), each once. */
static json_t *own_roles(const json_t *own)
{
	json_t *roles = json_array(), *v;
	size_t i;

	json_array_foreach(own, i, v)
		if (json_is_string(v))
			add_role(roles, json_string_value(v));
	return roles;
}

/* Appends the display name of the group doc to roles when it lists user_id
 * and is a role name not yet there. */
static void add_group_role(json_t *roles, const json_t *doc, const char *user_id)
{
	json_t *name = directory_get_ci(doc, "displayName");

	if (json_is_string(name) && has_member(doc, user_id))
		add_role(roles, json_string_value(name));
}

/* The rows of directory_user_find_roles's statement after its first (the
 * user's, whose roles are own): each group's SCIM document. */
static int roles_from_rows(struct store_rows *r, const char *user_id, const json_t *own,
			   json_t **roles)
{
	json_t *doc;
	int rc;

	*roles = own_roles(own);
	while ((rc = store_next(r)) == 1) {
		doc = json_loads(store_text(r, 3), 0, NULL);
		add_group_role(*roles, doc, user_id);
		json_decref(doc);
	}
	if (rc == 0)
		return 0;
	json_decref(*roles);
	*roles = NULL;
	return rc;
}

int directory_user_find_roles(struct store_tx *tx, const char *portfolio_id, const char *user_name,
			      char *id_out, size_t cap, json_t **roles)
{
	char lower[DIRECTORY_USER_NAME_MAX * 4 + 1];
	struct store_rows *r;
	json_t *own = NULL;
	int rc;

	*roles = NULL;
	lower_name(user_name, lower, sizeof lower);
	/* One statement: the user's row (kind 0), then every group's (kind 1). */
	rc = store_query(tx,
			 "SELECT 0, id, active, roles FROM users WHERE portfolio_id = $1"
			 " AND user_name_lower = $2"
			 " UNION ALL SELECT 1, id, 0, scim FROM scim_groups WHERE portfolio_id = $1"
			 " ORDER BY 1, 2",
			 (struct store_val[]){sv_text(portfolio_id), sv_text(lower)}, 2, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1 && store_int(r, 0) != 0)
		rc = 0; /* groups only: no such user */
	if (rc == 1) {
		snprintf(id_out, cap, "%s", store_text(r, 1));
		rc = store_int(r, 2) == 1 ? 0 : 2;
	} else if (rc == 0) {
		rc = 1;
	}
	if (rc == 0) {
		own = json_loads(store_text(r, 3), 0, NULL);
		rc = roles_from_rows(r, id_out, own, roles);
	}
	json_decref(own);
	store_rows_close(r);
	return rc;
}

/* --------------------------------------------------------------- writes */

/* Fills *ev for type about user_id/user_name. */
static void event_set(struct directory_event *ev, const char *type, const char *user_id,
		      const char *user_name, const char *via, int revoked)
{
	ev->type = type;
	snprintf(ev->user_id, sizeof ev->user_id, "%s", user_id);
	snprintf(ev->user_name, sizeof ev->user_name, "%s", user_name ? user_name : "");
	ev->via = via;
	ev->revoked = revoked;
}

/* Inserts a user row with id from u, written by via. */
static int insert_user(struct store_tx *tx, const char *pf, const char *id,
		       const struct directory_user *u, const char *via)
{
	int64_t now = clock_now_ms();
	int rc;

	rc = store_exec(tx,
			"INSERT INTO users (id, portfolio_id, user_name, user_name_lower,"
			" display_name, external_id, active, roles, scim, version, via,"
			" created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1,"
			" $10, $11, $11)",
			(struct store_val[]){sv_text(id), sv_text(pf), sv_text(u->user_name),
					     sv_text(u->lower), sv_text(u->display_name),
					     sv_text(u->external_id), sv_int(u->active),
					     sv_text(u->roles), sv_text(u->doc_s), sv_text(via),
					     sv_int(now)},
			11);
	return rc < 0 ? rc : 0;
}

/* The SCIM roles attribute for the role values of roles (strings only). */
static json_t *roles_attribute(const json_t *roles)
{
	json_t *list = json_array(), *v;
	size_t i;

	json_array_foreach(roles, i, v)
		if (json_is_string(v))
			json_array_append_new(list, json_pack("{s:O}", "value", v));
	return list;
}

int directory_user_create(struct store_tx *tx, const char *portfolio_id, const char *user_name,
			  const char *display_name, const json_t *roles, const char *via,
			  char *id_out, size_t id_cap)
{
	struct directory_user u = {0};
	char err[256];
	json_t *doc;
	int rc = STORE_ERR;

	doc = json_pack("{s:[s], s:s, s:b, s:o}", "schemas", SCIM_URN_USER, "userName", user_name,
			"active", 1, "roles", roles_attribute(roles));
	if (!doc)
		return STORE_ERR;
	if (display_name)
		json_object_set_new(doc, "displayName", json_string(display_name));
	if (user_stored_form(doc, &u, err, sizeof err) < 0 || id_new("usr_", id_out, id_cap) < 0)
		goto out;
	rc = insert_user(tx, portfolio_id, id_out, &u, via);
out:
	directory_user_release(&u);
	json_decref(doc);
	return rc;
}

int directory_user_add(struct store_tx *tx, const char *portfolio_id, const struct directory_user *u,
		       char *id_out, size_t id_cap, struct directory_event *ev)
{
	int rc;

	if (id_new("usr_", id_out, id_cap) < 0)
		return STORE_ERR;
	rc = insert_user(tx, portfolio_id, id_out, u, "scim");
	if (rc == 0)
		event_set(ev, "sso.user.provisioned", id_out, u->user_name, "scim", -1);
	return rc;
}

int directory_user_update(struct store_tx *tx, const char *portfolio_id,
			  const struct directory_row *old, const struct directory_user *u,
			  struct directory_event *ev)
{
	json_t *was = directory_get_ci(old->doc, "active");
	int was_active = !was || json_is_true(was), rc, revoked;

	ev->type = NULL;
	rc = store_exec(tx,
			"UPDATE users SET user_name = $3, user_name_lower = $4,"
			" display_name = $5, external_id = $6, active = $7, roles = $8,"
			" scim = $9, version = version + 1, updated_at = $10"
			" WHERE portfolio_id = $1 AND id = $2",
			(struct store_val[]){sv_text(portfolio_id), sv_text(old->id),
					     sv_text(u->user_name), sv_text(u->lower),
					     sv_text(u->display_name), sv_text(u->external_id),
					     sv_int(u->active), sv_text(u->roles),
					     sv_text(u->doc_s), sv_int(clock_now_ms())},
			10);
	if (rc < 0)
		return rc;
	if (was_active && !u->active) {
		revoked = auth_revoke_user_tokens(tx, old->id, clock_now_ms());
		if (revoked < 0)
			return revoked;
		event_set(ev, "sso.user.deprovisioned", old->id, u->user_name, "scim", revoked);
	}
	return 0;
}

/* Removes user_id from every group of the portfolio that lists it. */
static int drop_memberships(struct store_tx *tx, const char *pf, const char *user_id)
{
	json_t *groups = NULL, *g, *doc, *m, *v;
	size_t i, j;
	char *doc_s;
	int rc;

	rc = directory_list(tx, DIRECTORY_GROUP, pf, &groups);
	json_array_foreach(groups, i, g) {
		doc = json_object_get(g, "doc");
		if (rc < 0 || !has_member(doc, user_id))
			continue;
		m = directory_get_ci(doc, "members");
		for (j = json_array_size(m); j-- > 0;) {
			v = directory_get_ci(json_array_get(m, j), "value");
			if (json_is_string(v) && !strcmp(json_string_value(v), user_id))
				json_array_remove(m, j);
		}
		doc_s = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
		rc = store_exec(tx,
				"UPDATE scim_groups SET scim = $2, version = version + 1,"
				" updated_at = $3 WHERE id = $1",
				(struct store_val[]){sv_text(json_string_value(
							     json_object_get(g, "id"))),
						     sv_text(doc_s), sv_int(clock_now_ms())},
				3);
		free(doc_s);
	}
	json_decref(groups);
	return rc < 0 ? rc : 0;
}

int directory_user_delete(struct store_tx *tx, const char *portfolio_id,
			  const struct directory_row *old, struct directory_event *ev)
{
	json_t *name = directory_get_ci(old->doc, "userName");
	int rc, revoked;

	ev->type = NULL;
	revoked = auth_revoke_user_tokens(tx, old->id, clock_now_ms());
	rc = revoked;
	if (rc >= 0)
		rc = drop_memberships(tx, portfolio_id, old->id);
	if (rc >= 0)
		rc = store_exec(tx, "DELETE FROM users WHERE portfolio_id = $1 AND id = $2",
				(struct store_val[]){sv_text(portfolio_id), sv_text(old->id)}, 2);
	if (rc < 0)
		return rc;
	event_set(ev, "sso.user.deprovisioned", old->id, json_string_value(name), "scim", revoked);
	return 0;
}

/* Replaces a just-in-time user's SCIM roles (document and column) with
 * roles, a JSON array of strings. Returns 0 or a negative store status. */
static int set_roles(struct store_tx *tx, const char *pf, const char *user_id, const json_t *roles)
{
	struct directory_row row;
	char *doc_s = NULL, *roles_s = NULL;
	int rc;

	rc = directory_load(tx, DIRECTORY_USER, pf, user_id, &row);
	if (rc <= 0)
		return rc < 0 ? rc : STORE_ERR;
	directory_del_ci(row.doc, "roles");
	json_object_set_new(row.doc, "roles", roles_attribute(roles));
	directory_drop_password(row.doc); /* one an older version stored goes now */
	doc_s = json_dumps(row.doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	roles_s = json_dumps(roles, JSON_COMPACT);
	rc = doc_s && roles_s
		     ? store_exec(tx,
				  "UPDATE users SET scim = $3, roles = $4, version = version + 1,"
				  " updated_at = $5 WHERE portfolio_id = $1 AND id = $2",
				  (struct store_val[]){sv_text(pf), sv_text(user_id), sv_text(doc_s),
						       sv_text(roles_s), sv_int(clock_now_ms())},
				  5)
		     : STORE_ERR;
	free(doc_s);
	free(roles_s);
	directory_row_free(&row);
	return rc < 0 ? rc : 0;
}

int directory_user_login(struct store_tx *tx, const char *portfolio_id, const char *name_id,
			 const char *display_name, const json_t *roles, char *id_out, size_t id_cap,
			 struct directory_event *ev)
{
	char lower[DIRECTORY_USER_NAME_MAX * 4 + 1];
	struct store_rows *r;
	int rc, active = 0, jit = 0;

	ev->type = NULL;
	lower_name(name_id, lower, sizeof lower);
	rc = store_query(tx,
			 "SELECT id, active, via FROM users WHERE portfolio_id = $1"
			 " AND user_name_lower = $2",
			 (struct store_val[]){sv_text(portfolio_id), sv_text(lower)}, 2, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		snprintf(id_out, id_cap, "%s", store_text(r, 0));
		active = store_int(r, 1) == 1;
		jit = !strcmp(store_text(r, 2), "saml_jit");
	}
	store_rows_close(r);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		rc = directory_user_create(tx, portfolio_id, name_id,
					   display_name && *display_name ? display_name : NULL,
					   roles, "saml_jit", id_out, id_cap);
		if (rc == 0)
			event_set(ev, "sso.user.provisioned", id_out, name_id, "saml_jit", -1);
		return rc;
	}
	if (!active)
		return 1;
	return jit ? set_roles(tx, portfolio_id, id_out, roles) : 0;
}

/* Members looked up per statement, by primary key only (with the
 * portfolio in the condition, SQLite chose the portfolio index and read
 * every user of the portfolio per statement); the portfolio and the group
 * itself are checked on the rows. */
#define MEMBER_CHUNK 30
#define MEMBER_IN                                                                          \
	"($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22," \
	"$23,$24,$25,$26,$27,$28,$29,$30)"

/* Appends to keep the members m[from..from+MEMBER_CHUNK) that name a user
 * or another group of the portfolio (one statement; the last chunk is
 * padded with its last id). */
static int keep_known(struct store_tx *tx, const char *pf, const char *self_id, const json_t *m,
		      size_t from, json_t *keep)
{
	struct store_val v[MEMBER_CHUNK];
	size_t n = json_array_size(m), i, k, nfound = 0;
	char found[MEMBER_CHUNK][ID_MAX];
	struct store_rows *r;
	int rc;

	for (i = 0; i < MEMBER_CHUNK; i++)
		v[i] = sv_text(json_string_value(
			json_object_get(json_array_get(m, from + i < n ? from + i : n - 1), "value")));
	rc = store_query(tx,
			 "SELECT id, portfolio_id FROM users WHERE id IN " MEMBER_IN
			 " UNION ALL SELECT id, portfolio_id FROM scim_groups WHERE id IN " MEMBER_IN,
			 v, MEMBER_CHUNK, &r);
	if (rc < 0)
		return rc;
	while ((rc = store_next(r)) == 1 && nfound < MEMBER_CHUNK)
		if (!strcmp(store_text(r, 1), pf) && strcmp(store_text(r, 0), self_id))
			snprintf(found[nfound++], ID_MAX, "%s", store_text(r, 0));
	store_rows_close(r);
	for (i = from; rc >= 0 && i < n && i < from + MEMBER_CHUNK; i++)
		for (k = 0; k < nfound; k++)
			if (!strcmp(found[k], json_string_value(json_object_get(json_array_get(m, i),
										"value")))) {
				rc = json_array_append(keep, json_array_get(m, i)) ? STORE_ERR : 0;
				break;
			}
	return rc < 0 ? rc : 0;
}

/* Drops members that name no user or group of this portfolio (ids of
 * other portfolios' users, or made-up ones, are not stored), and the group
 * itself. One indexed statement per MEMBER_CHUNK members (on PostgreSQL a
 * round trip each, inside the write lock: one per member held it ~0.85 s
 * for 10,000); the array is rebuilt once, not shifted per removal.
 * Members are de-duplicated already (directory_group_prepare). Returns 0
 * or a negative store status. */
static int drop_foreign_members(struct store_tx *tx, const char *pf, const char *self_id, json_t *doc)
{
	json_t *m = directory_get_ci(doc, "members"), *keep;
	int rc = 0;

	if (!json_array_size(m))
		return 0;
	if (!(keep = json_array()))
		return STORE_ERR;
	for (size_t from = 0; rc >= 0 && from < json_array_size(m); from += MEMBER_CHUNK)
		rc = keep_known(tx, pf, self_id, m, from, keep);
	if (rc >= 0 && json_array_size(keep) != json_array_size(m) &&
	    (json_array_clear(m) || json_array_extend(m, keep)))
		rc = STORE_ERR;
	json_decref(keep);
	return rc < 0 ? rc : 0;
}

int directory_group_save(struct store_tx *tx, const char *portfolio_id, const char *id, json_t *doc,
			 int insert)
{
	char *doc_s = NULL;
	const char *name, *ext;
	int rc;

	if ((rc = drop_foreign_members(tx, portfolio_id, id, doc)) < 0)
		return rc;
	doc_s = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!doc_s)
		return STORE_ERR;
	name = json_string_value(directory_get_ci(doc, "displayName"));
	ext = json_string_value(directory_get_ci(doc, "externalId"));
	rc = store_exec(tx,
			insert ? "INSERT INTO scim_groups (id, portfolio_id, display_name, external_id,"
				 " scim, version, created_at, updated_at)"
				 " VALUES ($1, $2, $3, $4, $5, 1, $6, $6)"
			       : "UPDATE scim_groups SET display_name = $3, external_id = $4, scim = $5,"
				 " version = version + 1, updated_at = $6"
				 " WHERE portfolio_id = $2 AND id = $1",
			(struct store_val[]){sv_text(id), sv_text(portfolio_id), sv_text(name),
					     sv_text(ext), sv_text(doc_s), sv_int(clock_now_ms())},
			6);
	free(doc_s);
	return rc < 0 ? rc : 0;
}

int directory_group_delete(struct store_tx *tx, const char *portfolio_id, const char *id)
{
	int rc = store_exec(tx, "DELETE FROM scim_groups WHERE portfolio_id = $1 AND id = $2",
			    (struct store_val[]){sv_text(portfolio_id), sv_text(id)}, 2);

	return rc < 0 ? rc : 0;
}
