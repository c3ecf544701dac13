#include "api/identity/scim.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/ctx.h"
#include "api/respond.h"
#include "core/clock.h"
#include "core/embedded.h"
#include "core/id.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "events/outbox.h"
#include "identity/scim_filter.h"
#include "identity/scim_patch.h"
#include "identity/scim_schema.h"
#include "store/store.h"

#define URN_USER "urn:ietf:params:scim:schemas:core:2.0:User"
#define URN_GROUP "urn:ietf:params:scim:schemas:core:2.0:Group"
#define URN_ENT "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
#define URN_LIST "urn:ietf:params:scim:api:messages:2.0:ListResponse"
#define URN_ERROR "urn:ietf:params:scim:api:messages:2.0:Error"

#define SCIM_MAX_RESULTS 200
#define SCIM_DEFAULT_COUNT 100
#define SCIM_MAX_MEMBERS 10000
#define USER_NAME_MAX 256

static const char *const role_names[] = {"revenue-approver", "finance-operator", "ops-manager"};

/* ---------------------------------------------------------------- output */

static void send_scim(struct ctx *c, int status, json_t *body)
{
	respond_raw_json(c, status, body);
	c->res->content_type = "application/scim+json";
}

void scim_error(struct ctx *c, int status, const char *scim_type, const char *fmt, ...)
{
	char msg[512], st[8];
	va_list ap;
	json_t *body;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	jsonw_sanitize(msg);
	snprintf(st, sizeof st, "%d", status);
	body = json_pack("{s:[s], s:s, s:s}", "schemas", URN_ERROR, "status", st, "detail", msg);
	if (scim_type)
		json_object_set_new(body, "scimType", json_string(scim_type));
	c->error_code = scim_type ? scim_type : "scim";
	send_scim(c, status, body);
}

void scim_error_shape(struct ctx *c, enum err e, const char *msg)
{
	scim_error(c, err_status(e),
		   e == ERR_REQUEST_MALFORMED ? "invalidSyntax"
		   : e == ERR_VALIDATION_FAILED ? "invalidValue" : NULL, "%s", msg);
}

static void db_error(struct ctx *c, int rc)
{
	if (rc == STORE_BUSY)
		scim_error(c, 503, NULL, "the database is busy; retry");
	else
		scim_error(c, 500, NULL, "internal error");
}

static void location(struct ctx *c, const char *kind, const char *id, char *out, size_t cap)
{
	snprintf(out, cap, "%s/scim/v2/%s/%s", c->svc->cfg->public_url, kind, id);
}

static json_t *meta_json(struct ctx *c, const char *kind, const char *id, int64_t version,
			 int64_t created, int64_t updated)
{
	char loc[600], etag[32];

	location(c, kind, id, loc, sizeof loc);
	snprintf(etag, sizeof etag, "W/\"%lld\"", (long long)version);
	return json_pack("{s:s, s:o, s:o, s:s, s:s}", "resourceType",
			 !strcmp(kind, "Users") ? "User" : "Group", "created", jsonw_time(created),
			 "lastModified", jsonw_time(updated), "location", loc, "version", etag);
}

/* -------------------------------------------------------- JSON helpers */

static json_t *get_ci(const json_t *o, const char *key)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v)
		if (!strcasecmp(k, key))
			return v;
	return NULL;
}

static void del_ci(json_t *o, const char *key)
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
 * and discarded. This drops it from a user document in every spelling a
 * client can reach it by: any case, qualified by the core User URN
 * ("urn:...:core:2.0:User:password"), or inside an object under that URN.
 * Such an object is replaced by a copy without it, so that another
 * document sharing the object is not changed. Used on every document about
 * to be stored (POST, PUT, PATCH) and on every one about to be returned,
 * which covers rows stored before this rule. */
static void drop_password(json_t *doc)
{
	const char *k;
	json_t *v, *copy;
	void *tmp;

	json_object_foreach_safe(doc, tmp, k, v) {
		if (!strcasecmp(k, "password") || !strcasecmp(k, URN_USER ":password")) {
			json_object_del(doc, k);
		} else if (!strcasecmp(k, URN_USER) && json_is_object(v) && get_ci(v, "password")) {
			copy = json_deep_copy(v);
			del_ci(copy, "password");
			if (!copy || json_object_set_new(doc, k, copy))
				json_object_del(doc, k);
		}
	}
}

/* Drops from a user document what a client cannot set: the read-only id,
 * meta and groups (computed from group membership), and the password. */
static void drop_unsettable(json_t *doc)
{
	del_ci(doc, "id");
	del_ci(doc, "meta");
	del_ci(doc, "groups");
	drop_password(doc);
}

/* Copies a resource body into the stored form: read-only and write-only
 * attributes (id, meta; for users also groups and password) and top-level
 * nulls dropped. */
static json_t *sanitize(const json_t *body, int user)
{
	json_t *doc = json_deep_copy(body), *v;
	const char *k;
	void *tmp;

	del_ci(doc, "id");
	del_ci(doc, "meta");
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
	json_t *s = get_ci(doc, "schemas"), *fresh = json_pack("[s]", core), *v;
	size_t i;

	if (json_is_array(s))
		json_array_foreach(s, i, v)
			if (json_is_string(v) && strcmp(json_string_value(v), core))
				json_array_append(fresh, v);
	del_ci(doc, "schemas");
	json_object_set_new(doc, "schemas", fresh);
}

/* -------------------------------------------------------------- columns */

struct user_cols {
	const char *user_name;
	char lower[USER_NAME_MAX * 4 + 1];
	const char *display_name;
	const char *external_id;
	int active;
	char *roles; /* JSON array of role values; free() */
};

/* Checks a user document and extracts the columns revops keeps. Returns 0,
 * or -1 with a reason in err. */
static int user_columns(json_t *doc, struct user_cols *u, char *err, size_t cap)
{
	json_t *v, *roles, *r, *list = json_array();
	size_t i;

	memset(u, 0, sizeof *u);
	v = get_ci(doc, "userName");
	if (!json_is_string(v) || !json_string_length(v) ||
	    json_string_length(v) > USER_NAME_MAX) {
		snprintf(err, cap, "userName is required (a string of 1-%d characters)",
			 USER_NAME_MAX);
		goto bad;
	}
	u->user_name = json_string_value(v);
	for (i = 0; u->user_name[i]; i++)
		u->lower[i] = (char)tolower((unsigned char)u->user_name[i]);
	u->lower[i] = '\0';
	v = get_ci(doc, "displayName");
	if (json_is_null(v)) {
		del_ci(doc, "displayName"); /* null = unassigned (RFC 7643 §2.5) */
		v = NULL;
	}
	if (v && !json_is_string(v)) {
		snprintf(err, cap, "displayName must be a string");
		goto bad;
	}
	u->display_name = json_string_value(v);
	v = get_ci(doc, "externalId");
	if (v && !json_is_string(v)) {
		snprintf(err, cap, "externalId must be a string");
		goto bad;
	}
	u->external_id = json_string_value(v);
	v = get_ci(doc, "active");
	if (v && !json_is_boolean(v)) {
		snprintf(err, cap, "active must be a boolean");
		goto bad;
	}
	u->active = v ? json_is_true(v) : 1;
	if (!v)
		json_object_set_new(doc, "active", json_true());
	roles = get_ci(doc, "roles");
	if (roles && !json_is_array(roles)) {
		snprintf(err, cap, "roles must be an array");
		goto bad;
	}
	json_array_foreach(roles, i, r) {
		json_t *val = json_is_object(r) ? get_ci(r, "value") : r;

		if (!json_is_string(val)) {
			snprintf(err, cap, "roles[%zu].value must be a string", i);
			goto bad;
		}
		json_array_append(list, val);
	}
	u->roles = json_dumps(list, JSON_COMPACT);
	json_decref(list);
	return u->roles ? 0 : -1;
bad:
	json_decref(list);
	return -1;
}

/* A string and a position, sorted by the string, then the position: a
 * member's value and its place in the members list (group_members), or a
 * member id and its group's place in a group list (memberships). */
struct keyed {
	const char *key;
	size_t i;
};

static int keyed_cmp(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	int r = strcmp(x->key, y->key);

	return r ? r : (x->i > y->i) - (x->i < y->i);
}

/* Normalises group members to objects {value, display?, type?}, accepting
 * bare strings (as some clients send), dropping duplicates: of members
 * with the same value (compared exactly) the first stays, in place. The
 * values are sorted once to find duplicates, O(n log n). Returns 0, or -1
 * with a reason (the first ill-formed member, or too many members). */
static int group_members(json_t *doc, char *err, size_t cap)
{
	json_t *m = get_ci(doc, "members"), *out = json_array(), *v, *val, *o;
	struct keyed *refs = NULL;
	unsigned char *dup = NULL;
	size_t i, n = json_array_size(m);

	if (m && !json_is_array(m)) {
		snprintf(err, cap, "members must be an array");
		goto bad;
	}
	refs = malloc((n ? n : 1) * sizeof *refs);
	dup = calloc(n ? n : 1, 1);
	if (!out || !refs || !dup) {
		snprintf(err, cap, "out of memory");
		goto bad;
	}
	json_array_foreach(m, i, v) {
		val = json_is_object(v) ? get_ci(v, "value") : v;
		if (!json_is_string(val) || !json_string_length(val) ||
		    json_string_length(val) > 256) {
			snprintf(err, cap, "members[%zu].value must be a non-empty string", i);
			goto bad;
		}
		refs[i].key = json_string_value(val);
		refs[i].i = i;
	}
	qsort(refs, n, sizeof *refs, keyed_cmp);
	for (i = 1; i < n; i++)
		if (!strcmp(refs[i].key, refs[i - 1].key))
			dup[refs[i].i] = 1;
	json_array_foreach(m, i, v) {
		if (dup[i])
			continue;
		val = json_is_object(v) ? get_ci(v, "value") : v;
		o = json_pack("{s:O}", "value", val);
		if (json_is_object(v)) {
			json_t *d = get_ci(v, "display"), *t = get_ci(v, "type");

			if (!d)
				d = get_ci(v, "displayName");
			if (json_is_string(d))
				json_object_set(o, "display", d);
			if (json_is_string(t))
				json_object_set(o, "type", t);
		}
		if (json_array_append_new(out, o)) {
			snprintf(err, cap, "out of memory");
			goto bad;
		}
	}
	if (json_array_size(out) > SCIM_MAX_MEMBERS) {
		snprintf(err, cap, "a group has at most %d members", SCIM_MAX_MEMBERS);
		goto bad;
	}
	free(refs);
	free(dup);
	del_ci(doc, "members");
	json_object_set_new(doc, "members", out);
	return 0;
bad:
	free(refs);
	free(dup);
	json_decref(out);
	return -1;
}

/* Drops members that name no user or group of this portfolio (ids of
 * other portfolios' users, or made-up ones, are not stored), and the group
 * itself. One indexed lookup per member; the array is rebuilt once, not
 * shifted per removal. Returns 0 or a negative store status. */
static int drop_foreign_members(struct store_tx *tx, const char *pf, const char *self_id,
				json_t *doc)
{
	json_t *m = get_ci(doc, "members"), *keep = NULL, *e;
	const char *v;
	int64_t one;
	size_t i;
	int rc = 0;

	if (!json_array_size(m))
		return 0;
	keep = json_array();
	if (!keep)
		return STORE_ERR;
	json_array_foreach(m, i, e) {
		v = json_string_value(json_object_get(e, "value"));
		rc = store_query_int(tx,
				     "SELECT 1 FROM users WHERE portfolio_id = $1 AND id = $2"
				     " UNION ALL SELECT 1 FROM scim_groups WHERE portfolio_id = $1"
				     " AND id = $2 AND id <> $3",
				     (struct store_val[]){sv_text(pf), sv_text(v), sv_text(self_id)}, 3,
				     &one);
		if (rc < 0)
			goto out;
		if (rc == 1 && json_array_append(keep, e)) {
			rc = STORE_ERR;
			goto out;
		}
	}
	rc = 0;
	if (json_array_size(keep) != json_array_size(m) &&
	    (json_array_clear(m) || json_array_extend(m, keep)))
		rc = STORE_ERR;
out:
	json_decref(keep);
	return rc;
}

static int group_display_name(const json_t *doc, char *err, size_t cap)
{
	json_t *v = get_ci(doc, "displayName");

	if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) > 256) {
		snprintf(err, cap, "displayName is required (a string of 1-256 characters)");
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- loads */

struct res_row {
	char id[ID_MAX];
	json_t *doc;
	int64_t version, created, updated;
};

static void row_free(struct res_row *r)
{
	json_decref(r->doc);
	r->doc = NULL;
}

/* Loads one stored resource; 1 found, 0 not, < 0 store status. */
static int load_one(struct store_tx *tx, int user, const char *pf, const char *id,
		    struct res_row *out)
{
	struct store_rows *r;
	int rc;

	memset(out, 0, sizeof *out);
	rc = store_query(tx,
			 user ? "SELECT id, scim, version, created_at, updated_at FROM users"
				" WHERE portfolio_id = $1 AND id = $2"
			      : "SELECT id, scim, version, created_at, updated_at FROM scim_groups"
				" WHERE portfolio_id = $1 AND id = $2",
			 (struct store_val[]){sv_text(pf), sv_text(id)}, 2, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		snprintf(out->id, sizeof out->id, "%s", store_text(r, 0));
		out->doc = json_loads(store_text(r, 1), 0, NULL);
		out->version = store_int(r, 2);
		out->created = store_int(r, 3);
		out->updated = store_int(r, 4);
		if (!json_is_object(out->doc)) {
			json_decref(out->doc);
			out->doc = json_object();
		}
	}
	store_rows_close(r);
	return rc;
}

/* Loads every group of the portfolio as [{id, doc, version, created,
 * updated}] in creation order. */
static int load_groups(struct store_tx *tx, const char *pf, json_t **out)
{
	struct store_rows *r;
	json_t *doc;
	int rc;

	*out = json_array();
	rc = store_query(tx,
			 "SELECT id, scim, version, created_at, updated_at FROM scim_groups"
			 " WHERE portfolio_id = $1 ORDER BY id",
			 (struct store_val[]){sv_text(pf)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1) {
		doc = json_loads(store_text(r, 1), 0, NULL);
		json_array_append_new(*out, json_pack("{s:s, s:o, s:I, s:I, s:I}", "id",
						      store_text(r, 0), "doc",
						      doc ? doc : json_object(), "version",
						      (json_int_t)store_int(r, 2), "created",
						      (json_int_t)store_int(r, 3), "updated",
						      (json_int_t)store_int(r, 4)));
	}
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

static int has_member(const json_t *doc, const char *user_id)
{
	json_t *m = get_ci(doc, "members"), *v;
	size_t i;

	json_array_foreach(m, i, v)
		if (json_is_object(v) && json_is_string(get_ci(v, "value")) &&
		    !strcmp(json_string_value(get_ci(v, "value")), user_id))
			return 1;
	return 0;
}

/* Which groups list which users: (member id, group position) pairs taken
 * from load_groups() output and sorted, so that a user's groups are found
 * by binary search. Listing n users over groups that hold m members in all
 * costs O((n + m) log m), not O(n * m): a 10,000-member group made every
 * GET /Users (Okta's check before each create) take seconds. */
struct memberships {
	const json_t *groups; /* load_groups() output, or NULL when none */
	struct keyed *pairs;  /* member id (into groups), position in groups */
	size_t n;
};

/* Indexes groups (load_groups() output, which must outlive ms) by member,
 * counting members as has_member() does: objects with a string "value".
 * Returns 0, or -1 when memory runs out (ms is then empty; free it all the
 * same with memberships_free). */
static int memberships_index(struct memberships *ms, const json_t *groups)
{
	const json_t *g, *m, *v;
	size_t i, j, total = 0;

	memset(ms, 0, sizeof *ms);
	ms->groups = groups;
	json_array_foreach(groups, i, g)
		total += json_array_size(get_ci(json_object_get(g, "doc"), "members"));
	if (!total)
		return 0;
	ms->pairs = malloc(total * sizeof *ms->pairs);
	if (!ms->pairs)
		return -1;
	json_array_foreach(groups, i, g)
		json_array_foreach(get_ci(json_object_get(g, "doc"), "members"), j, m) {
			v = json_is_object(m) ? get_ci(m, "value") : NULL;
			if (json_is_string(v))
				ms->pairs[ms->n++] = (struct keyed){json_string_value(v), i};
		}
	qsort(ms->pairs, ms->n, sizeof *ms->pairs, keyed_cmp);
	return 0;
}

static void memberships_free(struct memberships *ms)
{
	free(ms->pairs);
	ms->pairs = NULL;
	ms->n = 0;
}

/* Reads every group of the portfolio under tx and indexes it: *groups
 * (json_decref it) and *ms (memberships_free it) are set either way.
 * Returns 0 or a negative store status. */
static int load_memberships(struct store_tx *tx, const char *pf, json_t **groups,
			    struct memberships *ms)
{
	int rc = load_groups(tx, pf, groups);

	if (memberships_index(ms, *groups) < 0 && rc >= 0)
		rc = STORE_ERR;
	return rc;
}

/* ------------------------------------------------------- representation */

/* The SCIM representation of a stored user (a new object; row keeps its
 * own): the document without any password, with id, the groups that list
 * it as a member (in the order of ms->groups, each once), and meta. */
static json_t *user_repr(struct ctx *c, const struct res_row *row, const struct memberships *ms)
{
	json_t *out = json_object(), *v, *list = json_array();
	const json_t *g, *gdoc;
	const char *k, *gid;
	char loc[600];
	size_t lo = 0, hi = ms->n, mid, i;

	json_object_set(out, "schemas", get_ci(row->doc, "schemas"));
	json_object_set_new(out, "id", json_string(row->id));
	json_object_foreach(row->doc, k, v)
		if (strcasecmp(k, "schemas"))
			json_object_set(out, k, v);
	drop_password(out);
	while (lo < hi) { /* the first pair of this user */
		mid = lo + (hi - lo) / 2;
		if (strcmp(ms->pairs[mid].key, row->id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = lo; i < ms->n && !strcmp(ms->pairs[i].key, row->id); i++) {
		if (i > lo && ms->pairs[i].i == ms->pairs[i - 1].i)
			continue;
		g = json_array_get(ms->groups, ms->pairs[i].i);
		gdoc = json_object_get(g, "doc");
		gid = json_string_value(json_object_get(g, "id"));
		location(c, "Groups", gid, loc, sizeof loc);
		json_array_append_new(list, json_pack("{s:s, s:s, s:O?, s:s}", "value", gid, "$ref",
						      loc, "display", get_ci(gdoc, "displayName"),
						      "type", "direct"));
	}
	json_object_set_new(out, "groups", list);
	json_object_set_new(out, "meta",
			    meta_json(c, "Users", row->id, row->version, row->created, row->updated));
	return out;
}

static json_t *group_repr(struct ctx *c, const char *id, const json_t *doc, int64_t version,
			  int64_t created, int64_t updated)
{
	json_t *out = json_object(), *v;
	const char *k;

	json_object_set(out, "schemas", get_ci(doc, "schemas"));
	json_object_set_new(out, "id", json_string(id));
	json_object_foreach((json_t *)doc, k, v)
		if (strcasecmp(k, "schemas"))
			json_object_set(out, k, v);
	json_object_set_new(out, "meta", meta_json(c, "Groups", id, version, created, updated));
	return out;
}

static json_t *project_req(struct ctx *c, json_t *repr);

/* Sends one resource with its ETag and, on creation, its Location, both
 * read from the full representation before ?attributes= projects it. */
static void send_resource(struct ctx *c, int status, json_t *repr)
{
	json_t *meta = json_object_get(repr, "meta");
	const char *etag = json_string_value(json_object_get(meta, "version"));
	const char *loc = json_string_value(json_object_get(meta, "location"));

	if (etag)
		(void)response_header(c->res, "ETag", etag);
	if (status == 201 && loc)
		(void)response_header(c->res, "Location", loc);
	send_scim(c, status, project_req(c, repr));
}

/* --------------------------------------------------------- projection */

/* The top-level attribute a projection path names: "emails[type eq
 * \"work\"]" and "emails.value" name emails; a core URN prefix is dropped;
 * the enterprise URN names the extension object. */
static void path_head(const char *path, char *head, size_t cap, char *sub, size_t subcap)
{
	const char *p = path, *end;
	size_t n;

	sub[0] = '\0';
	if (!strncasecmp(p, URN_USER ":", strlen(URN_USER) + 1))
		p += strlen(URN_USER) + 1;
	else if (!strncasecmp(p, URN_GROUP ":", strlen(URN_GROUP) + 1))
		p += strlen(URN_GROUP) + 1;
	else if (!strncasecmp(p, URN_ENT, strlen(URN_ENT))) {
		snprintf(head, cap, "%s", URN_ENT);
		if (p[strlen(URN_ENT)] == ':')
			snprintf(sub, subcap, "%s", p + strlen(URN_ENT) + 1);
		return;
	}
	end = p + strcspn(p, "[.");
	n = (size_t)(end - p) < cap - 1 ? (size_t)(end - p) : cap - 1;
	memcpy(head, p, n);
	head[n] = '\0';
	if (*end == '.')
		snprintf(sub, subcap, "%s", end + 1);
}

/* Applies ?attributes= (keep only these, plus id and schemas) or
 * ?excludedAttributes= (drop these; id and schemas stay) to repr. */
static json_t *project(json_t *repr, const char *attributes, const char *excluded)
{
	char *list, *save = NULL, *tok, head[128], sub[128];
	json_t *out, *v, *dst;

	if (attributes && *attributes) {
		out = json_object();
		json_object_set(out, "schemas", json_object_get(repr, "schemas"));
		json_object_set(out, "id", json_object_get(repr, "id"));
		list = strdup(attributes);
		for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			while (*tok == ' ')
				tok++;
			path_head(tok, head, sizeof head, sub, sizeof sub);
			v = get_ci(repr, head);
			if (!v)
				continue;
			if (!sub[0] || !json_is_object(v)) {
				json_object_set(out, head, v);
				continue;
			}
			if (!get_ci(v, sub))
				continue;
			dst = json_object_get(out, head);
			if (!json_is_object(dst)) {
				dst = json_object();
				json_object_set_new(out, head, dst);
			}
			json_object_set(dst, sub, get_ci(v, sub));
		}
		free(list);
		json_decref(repr);
		return out;
	}
	if (excluded && *excluded) {
		list = strdup(excluded);
		for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			while (*tok == ' ')
				tok++;
			path_head(tok, head, sizeof head, sub, sizeof sub);
			if (!strcasecmp(head, "id") || !strcasecmp(head, "schemas"))
				continue;
			if (!sub[0])
				del_ci(repr, head);
			else if (json_is_object(get_ci(repr, head)))
				del_ci(get_ci(repr, head), sub);
		}
		free(list);
	}
	return repr;
}

static int wants_body(struct ctx *c)
{
	return http_query(c->req, "attributes") || http_query(c->req, "excludedAttributes");
}

static json_t *project_req(struct ctx *c, json_t *repr)
{
	return project(repr, http_query(c->req, "attributes"),
		       http_query(c->req, "excludedAttributes"));
}

/* ------------------------------------------------------------- sorting */

struct sort_item {
	const char *key;
	size_t index;
	json_t *res;
};

static int sort_desc;

static const char *sort_key(const json_t *res, const char *path)
{
	char head[128], sub[128];
	json_t *v, *e;
	size_t i;

	path_head(path, head, sizeof head, sub, sizeof sub);
	v = get_ci(res, head);
	if (json_is_array(v)) {
		json_t *pick = json_array_get(v, 0);

		json_array_foreach(v, i, e)
			if (json_is_object(e) && json_is_true(get_ci(e, "primary")))
				pick = e;
		v = pick;
		if (json_is_object(v) && !sub[0])
			snprintf(sub, sizeof sub, "value");
	}
	if (sub[0] && json_is_object(v))
		v = get_ci(v, sub);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int sort_cmp(const void *a, const void *b)
{
	const struct sort_item *x = a, *y = b;
	int r;

	if (!x->key || !y->key)
		r = !x->key - !y->key; /* missing values last */
	else
		r = strcasecmp(x->key, y->key) * (sort_desc ? -1 : 1);
	if (!r)
		r = x->index < y->index ? -1 : x->index > y->index;
	return r;
}

/* --------------------------------------------------------------- lists */

static int parse_index(const char *s, long *out)
{
	char *end;
	long v;

	if (!s)
		return 0;
	v = strtol(s, &end, 10);
	if (end == s || *end)
		return -1;
	*out = v;
	return 0;
}

/* Skips the JSON string literal at s (s[0] == '"'), escapes included;
 * returns the position after it (or the end of s). */
static const char *skip_string(const char *s)
{
	for (s++; *s && *s != '"'; s++)
		if (*s == '\\' && s[1])
			s++;
	return *s ? s + 1 : s;
}

/* Characters of an attribute path token, as scim_filter.c reads them. */
static int is_path_char(int ch)
{
	return isalnum(ch) || ch == '_' || ch == '$' || ch == '-' || ch == ':' || ch == '.';
}

/* 1 if the n-byte path token w names the User's password: "password"
 * (any case, with or without a sub-attribute), bare or after the core User
 * URN. */
static int path_is_password(const char *w, size_t n)
{
	size_t colon = n, i, alen;

	for (i = 0; i < n; i++)
		if (w[i] == ':')
			colon = i;
	if (colon < n && (colon != strlen(URN_USER) || strncasecmp(w, URN_USER, colon)))
		return 0;
	if (colon < n) {
		w += colon + 1;
		n -= colon + 1;
	}
	for (alen = 0; alen < n && w[alen] != '.'; alen++)
		;
	return alen == 8 && !strncasecmp(w, "password", 8);
}

/* 1 when filter, a filter that parsed, compares the User's password: an
 * attribute path outside any value filter's brackets names it. RFC 7643
 * §7 lets a service provider refuse to filter on an attribute that is
 * never returned; revops keeps no password, so such a filter is refused
 * with 400 invalidFilter (RFC 7644 §3.12: the attribute and comparison are
 * not supported) instead of answering as if no user had one. The scan
 * follows scim_filter.c's grammar: paths, operators and "and"/"or"/"not"
 * are words of path characters; a value after an operator other than "pr"
 * is a JSON string or runs to a space, ')' or ']'; "not" is a keyword only
 * before '('; a ']' may be followed by ".sub" and an operator. */
static int filter_names_password(const char *f)
{
	enum { WANT_PATH, WANT_OP, WANT_VALUE, WANT_LOGIC } want = WANT_PATH;
	size_t n, depth = 0;
	const char *after;

	while (*f) {
		if (isspace((unsigned char)*f)) {
			f++;
		} else if (want == WANT_VALUE) {
			if (*f == '"')
				f = skip_string(f);
			else
				while (*f && !isspace((unsigned char)*f) && *f != ')' && *f != ']')
					f++;
			want = WANT_LOGIC;
		} else if (*f == '"') {
			f = skip_string(f);
		} else if (*f == '(' || *f == '[') {
			depth += *f == '[';
			want = WANT_PATH;
			f++;
		} else if (*f == ')') {
			want = WANT_LOGIC;
			f++;
		} else if (*f == ']') {
			if (depth)
				depth--;
			want = WANT_LOGIC;
			if (*++f == '.') { /* "].sub op value" */
				while (is_path_char((unsigned char)*f))
					f++;
				want = WANT_OP;
			}
		} else {
			for (n = 0; is_path_char((unsigned char)f[n]); n++)
				;
			if (!n) {
				f++;
				continue;
			}
			if (want == WANT_PATH) {
				for (after = f + n; isspace((unsigned char)*after); after++)
					;
				if (n == 3 && !strncasecmp(f, "not", 3) && *after == '(') {
					f += n;
					continue;
				}
				if (!depth && path_is_password(f, n))
					return 1;
				want = WANT_OP;
			} else if (want == WANT_OP) {
				want = n == 2 && !strncasecmp(f, "pr", 2) ? WANT_LOGIC : WANT_VALUE;
			} else {
				want = WANT_PATH; /* "and" / "or" */
			}
			f += n;
		}
	}
	return 0;
}

/* Serves a list request over all resources: filter, sortBy/sortOrder,
 * startIndex/count (1-based, as RFC 7644 §3.4.2.4), attribute projection.
 * users: the resources are users, whose password a filter may not name
 * (filter_names_password). all is consumed. */
static void send_list(struct ctx *c, json_t *all, int users)
{
	const char *filter = http_query(c->req, "filter");
	const char *sort_by = http_query(c->req, "sortBy");
	const char *order = http_query(c->req, "sortOrder");
	struct scim_filter *f = NULL;
	struct sort_item *items = NULL;
	json_t *page, *v;
	char err[256];
	long start = 1, count = SCIM_DEFAULT_COUNT;
	size_t i, n = 0, total;

	if (parse_index(http_query(c->req, "startIndex"), &start) < 0 ||
	    parse_index(http_query(c->req, "count"), &count) < 0) {
		scim_error(c, 400, "invalidValue", "startIndex and count must be integers");
		goto out;
	}
	if (start < 1)
		start = 1;
	if (count < 0)
		count = 0;
	if (count > SCIM_MAX_RESULTS)
		count = SCIM_MAX_RESULTS;
	if (filter && scim_filter_parse(filter, &f, err, sizeof err) < 0) {
		scim_error(c, 400, "invalidFilter", "%s", err);
		goto out;
	}
	if (filter && users && filter_names_password(filter)) {
		scim_error(c, 400, "invalidFilter",
			   "password cannot be filtered on: it is write-only and not kept");
		goto out;
	}
	items = calloc(json_array_size(all) + 1, sizeof *items);
	if (!items) {
		scim_error(c, 500, NULL, "internal error");
		goto out;
	}
	json_array_foreach(all, i, v)
		if (!f || scim_filter_match(f, v)) {
			items[n].res = v;
			items[n].index = i;
			items[n].key = sort_by ? sort_key(v, sort_by) : NULL;
			n++;
		}
	if (sort_by) {
		sort_desc = order && !strcasecmp(order, "descending");
		qsort(items, n, sizeof *items, sort_cmp);
	}
	total = n;
	page = json_array();
	for (i = (size_t)start - 1; i < n && json_array_size(page) < (size_t)count; i++)
		json_array_append_new(page, project_req(c, json_incref(items[i].res)));
	send_scim(c, 200,
		  json_pack("{s:[s], s:I, s:I, s:I, s:o}", "schemas", URN_LIST, "totalResults",
			    (json_int_t)total, "itemsPerPage", (json_int_t)json_array_size(page),
			    "startIndex", (json_int_t)start, "Resources", page));
out:
	free(items);
	scim_filter_free(f);
	json_decref(all);
}

void scim_h_users_list(struct ctx *c)
{
	struct store_tx *tx;
	struct store_rows *r = NULL;
	struct memberships ms = {0};
	json_t *groups = NULL, *all = json_array();
	struct res_row row;
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK)
		goto fail_notx;
	if ((rc = load_memberships(tx, c->p.portfolio_id, &groups, &ms)) < 0)
		goto fail;
	rc = store_query(tx,
			 "SELECT id, scim, version, created_at, updated_at FROM users"
			 " WHERE portfolio_id = $1 ORDER BY id",
			 (struct store_val[]){sv_text(c->p.portfolio_id)}, 1, &r);
	if (rc != STORE_OK)
		goto fail;
	while ((rc = store_next(r)) == 1) {
		memset(&row, 0, sizeof row);
		snprintf(row.id, sizeof row.id, "%s", store_text(r, 0));
		row.doc = json_loads(store_text(r, 1), 0, NULL);
		if (!json_is_object(row.doc)) {
			json_decref(row.doc);
			row.doc = json_object();
		}
		row.version = store_int(r, 2);
		row.created = store_int(r, 3);
		row.updated = store_int(r, 4);
		json_array_append_new(all, user_repr(c, &row, &ms));
		row_free(&row);
	}
	store_rows_close(r);
	r = NULL;
	if (rc < 0)
		goto fail;
	store_rollback(tx);
	memberships_free(&ms);
	json_decref(groups);
	send_list(c, all, 1);
	return;
fail:
	store_rows_close(r);
	store_rollback(tx);
fail_notx:
	memberships_free(&ms);
	json_decref(groups);
	json_decref(all);
	db_error(c, rc);
}

void scim_h_groups_list(struct ctx *c)
{
	struct store_tx *tx;
	json_t *groups = NULL, *all = json_array(), *g;
	size_t i;
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		json_decref(all);
		db_error(c, rc);
		return;
	}
	rc = load_groups(tx, c->p.portfolio_id, &groups);
	store_rollback(tx);
	if (rc < 0) {
		json_decref(groups);
		json_decref(all);
		db_error(c, rc);
		return;
	}
	json_array_foreach(groups, i, g)
		json_array_append_new(
			all, group_repr(c, json_string_value(json_object_get(g, "id")),
					json_object_get(g, "doc"),
					json_integer_value(json_object_get(g, "version")),
					json_integer_value(json_object_get(g, "created")),
					json_integer_value(json_object_get(g, "updated"))));
	json_decref(groups);
	send_list(c, all, 0);
}

/* --------------------------------------------------------------- users */

/* Checks If-Match against the stored version. Returns 0 to go on, -1 after
 * answering 412. */
static int check_if_match(struct ctx *c, int64_t version)
{
	const char *h = http_header(c->req, "If-Match");
	char weak[32], strong[32];

	if (!h || !strcmp(h, "*"))
		return 0;
	snprintf(weak, sizeof weak, "W/\"%lld\"", (long long)version);
	snprintf(strong, sizeof strong, "\"%lld\"", (long long)version);
	if (strstr(h, weak) || (!strncmp(h, "\"", 1) && strstr(h, strong)))
		return 0;
	scim_error(c, 412, NULL, "the resource has changed (its version is %s)", weak);
	return -1;
}

static int emit_user_event(struct store_tx *tx, const char *pf, const char *type,
			   const char *user_id, const char *user_name, const char *via,
			   int revoked)
{
	json_t *props = json_array(), *data;
	int rc;

	data = json_pack("{s:s, s:s, s:s}", "user_id", user_id, "user_name", user_name, "via", via);
	if (revoked >= 0)
		json_object_set_new(data, "revoked_tokens", json_integer(revoked));
	rc = outbox_append(tx, "v2", type, pf, props, data, NULL, 0);
	json_decref(props);
	json_decref(data);
	return rc;
}

static int insert_user(struct store_tx *tx, const char *pf, const char *id,
		       const struct user_cols *u, const char *doc_s, const char *via)
{
	int64_t now = clock_now_ms();

	return store_exec(tx,
			  "INSERT INTO users (id, portfolio_id, user_name, user_name_lower,"
			  " display_name, external_id, active, roles, scim, version, via,"
			  " created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1,"
			  " $10, $11, $11)",
			  (struct store_val[]){sv_text(id), sv_text(pf), sv_text(u->user_name),
					       sv_text(u->lower), sv_text(u->display_name),
					       sv_text(u->external_id), sv_int(u->active),
					       sv_text(u->roles), sv_text(doc_s), sv_text(via),
					       sv_int(now)}, 11);
}

/* The stored form of a user document, made in place: what a client cannot
 * set dropped (drop_unsettable: id, meta, groups, password), the Okta/Entra
 * quirks normalised, every attribute checked against the published schemas
 * (scim_schema_check, with before the stored user or NULL for a new one:
 * values equal to the stored ones pass as they are), the core schema first
 * in "schemas"; then the columns revops keeps in *u (pointing into doc,
 * except u->roles, which the caller frees) and the document's text in
 * *doc_s (the caller frees it). Every user write (POST, PUT, PATCH) stores
 * what this made, so none can store a password or a wrong-typed value.
 * Touches no store, so it runs before the write transaction. Returns 0, or
 * a refusal with a reason in err for prepare_refused(): SCIM_SCHEMA_INVALID_
 * SYNTAX (an attribute given twice) or SCIM_SCHEMA_INVALID_VALUE (anything
 * else). Nothing to free on a refusal. */
static int user_prepare(json_t *doc, const json_t *before, struct user_cols *u, char **doc_s,
			char *err, size_t cap)
{
	int rc = SCIM_SCHEMA_INVALID_VALUE;

	*doc_s = NULL;
	memset(u, 0, sizeof *u);
	snprintf(err, cap, "out of memory");
	drop_unsettable(doc);
	if (scim_patch_normalize(doc, err, cap) != SCIM_PATCH_OK ||
	    (rc = scim_schema_check(scim_schemas_builtin(), "User", doc, before, err, cap)) < 0)
		goto bad;
	rc = SCIM_SCHEMA_INVALID_VALUE;
	fix_schemas(doc, URN_USER);
	if (user_columns(doc, u, err, cap) < 0)
		goto bad;
	*doc_s = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!*doc_s) {
		free(u->roles);
		u->roles = NULL;
		snprintf(err, cap, "out of memory");
		return rc;
	}
	return 0;
bad:
	if (!err[0])
		snprintf(err, cap, "out of memory");
	return rc;
}

/* Answers 400 for a refusal of user_prepare() or group_prepare(). */
static void prepare_refused(struct ctx *c, int rc, const char *err)
{
	scim_error(c, 400, rc == SCIM_SCHEMA_INVALID_SYNTAX ? "invalidSyntax" : "invalidValue", "%s",
		   err);
}

void scim_h_users_create(struct ctx *c)
{
	char err[256], id[ID_MAX], *doc_s = NULL;
	struct user_cols u = {0};
	struct store_tx *tx = NULL;
	struct res_row row = {0};
	struct memberships none = {0}; /* a new user is in no group */
	json_t *doc = sanitize(c->body, 1);
	int rc;

	if ((rc = user_prepare(doc, NULL, &u, &doc_s, err, sizeof err)) < 0) {
		prepare_refused(c, rc, err);
		goto out;
	}
	if (id_new("usr_", id, sizeof id) < 0) {
		scim_error(c, 500, NULL, "internal error");
		goto out;
	}
	if ((rc = store_begin(c->svc->store, 1, &tx)) != STORE_OK) {
		tx = NULL;
		db_error(c, rc);
		goto out;
	}
	rc = insert_user(tx, c->p.portfolio_id, id, &u, doc_s, "scim");
	if (rc == STORE_CONSTRAINT) {
		scim_error(c, 409, "uniqueness", "userName \"%s\" is already taken in this portfolio",
			   u.user_name);
		goto out;
	}
	if (rc < 0 || (rc = emit_user_event(tx, c->p.portfolio_id, "sso.user.provisioned", id,
					    u.user_name, "scim", -1)) < 0 ||
	    (rc = load_one(tx, 1, c->p.portfolio_id, id, &row)) != 1) {
		db_error(c, rc);
		goto out;
	}
	rc = store_commit(tx);
	tx = NULL;
	if (rc != STORE_OK) {
		db_error(c, rc);
		goto out;
	}
	send_resource(c, 201, user_repr(c, &row, &none));
out:
	store_rollback(tx);
	row_free(&row);
	free(u.roles);
	free(doc_s);
	json_decref(doc);
}

void scim_h_user_get(struct ctx *c)
{
	struct store_tx *tx;
	struct res_row row;
	struct memberships ms = {0};
	json_t *groups = NULL;
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		db_error(c, rc);
		return;
	}
	rc = load_one(tx, 1, c->p.portfolio_id, ctx_param(c, 0), &row);
	if (rc == 1 && load_memberships(tx, c->p.portfolio_id, &groups, &ms) < 0)
		rc = STORE_ERR;
	store_rollback(tx);
	if (rc == 1)
		send_resource(c, 200, user_repr(c, &row, &ms));
	else if (rc == 0)
		scim_error(c, 404, NULL, "no user %s", ctx_param(c, 0));
	else
		db_error(c, rc);
	row_free(&row);
	memberships_free(&ms);
	json_decref(groups);
}

/* Opens a write transaction and loads the resource named by the path
 * under it, checking If-Match. Returns 1 with *tx and *row (the caller
 * finishes both), or 0 after answering (nothing left open). */
static int load_for_change(struct ctx *c, int user, struct store_tx **tx, struct res_row *row)
{
	int rc;

	memset(row, 0, sizeof *row);
	if ((rc = store_begin(c->svc->store, 1, tx)) != STORE_OK) {
		*tx = NULL;
		db_error(c, rc);
		return 0;
	}
	rc = load_one(*tx, user, c->p.portfolio_id, ctx_param(c, 0), row);
	if (rc == 1 && check_if_match(c, row->version) == 0)
		return 1;
	if (rc == 0)
		scim_error(c, 404, NULL, "no %s %s", user ? "user" : "group", ctx_param(c, 0));
	else if (rc < 0)
		db_error(c, rc);
	store_rollback(*tx);
	*tx = NULL;
	row_free(row);
	return 0;
}

/*
 * PUT and PATCH keep the write lock short. The new document is worked out
 * (PATCH applied, members merged and de-duplicated, the result checked)
 * from a snapshot read without the lock; the write transaction then only
 * confirms that the stored version is still the snapshot's and stores the
 * result. When another change came in between, the document is worked out
 * again from the current version, under the lock: that is rare, and the
 * work is O(n log n) in the number of members.
 */

/* Reads the resource the path names in a read transaction, checking
 * If-Match. Returns 1 with *row (the caller frees it), or 0 after
 * answering (404, 412 or a store error). */
static int load_snapshot(struct ctx *c, int user, struct res_row *row)
{
	struct store_tx *tx;
	int rc;

	memset(row, 0, sizeof *row);
	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		db_error(c, rc);
		return 0;
	}
	rc = load_one(tx, user, c->p.portfolio_id, ctx_param(c, 0), row);
	store_rollback(tx);
	if (rc == 1 && check_if_match(c, row->version) == 0)
		return 1;
	if (rc == 0)
		scim_error(c, 404, NULL, "no %s %s", user ? "user" : "group", ctx_param(c, 0));
	else if (rc < 0)
		db_error(c, rc);
	row_free(row);
	return 0;
}

/* Opens the write transaction of a change worked out from *row, a
 * load_snapshot() result. Returns 1 with *tx open when the stored version
 * is still row->version; 0 with *tx open and *row reloaded under the lock
 * (If-Match checked again) when it has changed, so that the caller works
 * the change out again; or -1 after answering, with nothing left open. */
static int begin_change(struct ctx *c, int user, struct res_row *row, struct store_tx **tx)
{
	int64_t version = -1;
	int rc;

	if ((rc = store_begin(c->svc->store, 1, tx)) != STORE_OK) {
		*tx = NULL;
		db_error(c, rc);
		return -1;
	}
	rc = store_query_int(*tx,
			     user ? "SELECT version FROM users WHERE portfolio_id = $1 AND id = $2"
				  : "SELECT version FROM scim_groups WHERE portfolio_id = $1 AND id = $2",
			     (struct store_val[]){sv_text(c->p.portfolio_id), sv_text(row->id)}, 2,
			     &version);
	if (rc == 1 && version == row->version)
		return 1;
	if (rc >= 0) {
		row_free(row);
		rc = load_one(*tx, user, c->p.portfolio_id, ctx_param(c, 0), row);
		if (rc == 1 && check_if_match(c, row->version) == 0)
			return 0;
		if (rc == 0)
			scim_error(c, 404, NULL, "no %s %s", user ? "user" : "group",
				   ctx_param(c, 0));
	}
	if (rc < 0)
		db_error(c, rc);
	store_rollback(*tx);
	*tx = NULL;
	return -1;
}

/* Applies a PATCH body to doc; on a refusal answers 400 with the scimType
 * of the PATCH engine's error and returns -1. */
static int apply_patch(struct ctx *c, json_t *doc, const json_t *body)
{
	static const char *types[] = {NULL, "invalidSyntax", "invalidPath", "noTarget",
				      "invalidValue", "mutability"};
	char err[256];
	int rc = scim_patch_apply(doc, body, err, sizeof err);

	if (rc == SCIM_PATCH_OK)
		return 0;
	scim_error(c, 400, rc >= -5 && rc <= -1 ? types[-rc] : "invalidValue", "%s", err);
	return -1;
}

/* The user document a PUT (the body) or PATCH (the body applied to
 * stored) makes, prepared for storing by user_prepare (*u and *doc_s as
 * there; values equal to stored's pass its schema check as they are, so a
 * user stored with a wrong type before that check existed can still be
 * changed and deactivated). Touches no store. Returns the new document,
 * or NULL after answering 400. */
static json_t *user_change(struct ctx *c, const json_t *stored, int patch, struct user_cols *u,
			   char **doc_s)
{
	char err[256];
	json_t *doc;
	int rc;

	memset(u, 0, sizeof *u);
	*doc_s = NULL;
	if (patch) {
		doc = json_deep_copy(stored);
		if (apply_patch(c, doc, c->body) < 0) {
			json_decref(doc);
			return NULL;
		}
	} else {
		doc = sanitize(c->body, 1);
	}
	if ((rc = user_prepare(doc, stored, u, doc_s, err, sizeof err)) < 0) {
		prepare_refused(c, rc, err);
		json_decref(doc);
		return NULL;
	}
	return doc;
}

/* Stores a prepared user document (user_change) over old inside tx:
 * columns, version, and on deactivation the revocation of every token of
 * the user with an sso.user.deprovisioned event. Answers and returns -1 on
 * a refusal or a store error; 0 when stored. */
static int save_user(struct ctx *c, struct store_tx *tx, const struct res_row *old,
		     const struct user_cols *u, const char *doc_s)
{
	json_t *was = get_ci(old->doc, "active");
	int was_active = !was || json_is_true(was), rc, revoked;

	rc = store_exec(tx,
			"UPDATE users SET user_name = $3, user_name_lower = $4,"
			" display_name = $5, external_id = $6, active = $7, roles = $8,"
			" scim = $9, version = version + 1, updated_at = $10"
			" WHERE portfolio_id = $1 AND id = $2",
			(struct store_val[]){sv_text(c->p.portfolio_id), sv_text(old->id),
					     sv_text(u->user_name), sv_text(u->lower),
					     sv_text(u->display_name), sv_text(u->external_id),
					     sv_int(u->active), sv_text(u->roles), sv_text(doc_s),
					     sv_int(clock_now_ms())}, 10);
	if (rc == STORE_CONSTRAINT) {
		scim_error(c, 409, "uniqueness", "userName \"%s\" is already taken in this portfolio",
			   u->user_name);
		return -1;
	}
	if (rc >= 0 && was_active && !u->active) {
		revoked = auth_revoke_user_tokens(tx, old->id, clock_now_ms());
		rc = revoked < 0 ? revoked
				 : emit_user_event(tx, c->p.portfolio_id, "sso.user.deprovisioned",
						   old->id, u->user_name, "scim", revoked);
	}
	if (rc < 0) {
		db_error(c, rc);
		return -1;
	}
	return 0;
}

/* load_memberships in a read transaction of its own. */
static int load_memberships_read(struct ctx *c, json_t **groups, struct memberships *ms)
{
	struct store_tx *tx;
	int rc;

	*groups = NULL;
	memset(ms, 0, sizeof *ms);
	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK)
		return rc;
	rc = load_memberships(tx, c->p.portfolio_id, groups, ms);
	store_rollback(tx);
	return rc;
}

/* The common frame of PUT and PATCH on a user: work the new document out
 * from a snapshot, store it under the write lock (begin_change), answer
 * with the resource (PUT; PATCH when attributes are asked for) or 204. The
 * groups of the answer are read after the commit: that reads every group
 * of the portfolio, which need not happen under the lock. */
static void modify_user(struct ctx *c, int patch)
{
	struct store_tx *tx = NULL;
	struct res_row row = {0}, fresh = {0};
	struct user_cols u = {0};
	struct memberships ms = {0};
	json_t *doc = NULL, *groups = NULL;
	char *doc_s = NULL, etag[32];
	int rc;

	if (!load_snapshot(c, 1, &row))
		return;
	doc = user_change(c, row.doc, patch, &u, &doc_s);
	if (!doc)
		goto out;
	rc = begin_change(c, 1, &row, &tx);
	if (rc < 0)
		goto out;
	if (rc == 0) {
		json_decref(doc);
		free(u.roles);
		free(doc_s);
		doc = user_change(c, row.doc, patch, &u, &doc_s);
		if (!doc)
			goto out;
	}
	if (save_user(c, tx, &row, &u, doc_s) < 0)
		goto out;
	if ((rc = load_one(tx, 1, c->p.portfolio_id, row.id, &fresh)) != 1) {
		db_error(c, rc == 0 ? STORE_ERR : rc);
		goto out;
	}
	rc = store_commit(tx);
	tx = NULL;
	if (rc != STORE_OK) {
		db_error(c, rc);
		goto out;
	}
	auth_revocation_bump(); /* entries cached while the change committed */
	if (patch && !wants_body(c)) {
		snprintf(etag, sizeof etag, "W/\"%lld\"", (long long)fresh.version);
		(void)response_header(c->res, "ETag", etag);
		c->res->status = 204;
		buf_reset(&c->res->body);
		goto out;
	}
	if ((rc = load_memberships_read(c, &groups, &ms)) < 0) {
		db_error(c, rc);
		goto out;
	}
	send_resource(c, 200, user_repr(c, &fresh, &ms));
out:
	store_rollback(tx);
	row_free(&row);
	row_free(&fresh);
	memberships_free(&ms);
	free(u.roles);
	free(doc_s);
	json_decref(doc);
	json_decref(groups);
}

void scim_h_user_put(struct ctx *c)
{
	modify_user(c, 0);
}

void scim_h_user_patch(struct ctx *c)
{
	modify_user(c, 1);
}

/* Removes user_id from every group of the portfolio inside tx. */
static int drop_memberships(struct store_tx *tx, const char *pf, const char *user_id)
{
	json_t *groups = NULL, *g, *m, *v;
	size_t i, j;
	char *doc_s;
	int rc;

	rc = load_groups(tx, pf, &groups);
	json_array_foreach(groups, i, g) {
		json_t *doc = json_object_get(g, "doc");

		if (rc < 0 || !has_member(doc, user_id))
			continue;
		m = get_ci(doc, "members");
		for (j = json_array_size(m); j-- > 0;) {
			v = get_ci(json_array_get(m, j), "value");
			if (json_is_string(v) && !strcmp(json_string_value(v), user_id))
				json_array_remove(m, j);
		}
		doc_s = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
		rc = store_exec(tx,
				"UPDATE scim_groups SET scim = $2, version = version + 1,"
				" updated_at = $3 WHERE id = $1",
				(struct store_val[]){sv_text(json_string_value(json_object_get(g, "id"))),
						     sv_text(doc_s), sv_int(clock_now_ms())}, 3);
		free(doc_s);
	}
	json_decref(groups);
	return rc < 0 ? rc : 0;
}

void scim_h_user_delete(struct ctx *c)
{
	struct store_tx *tx = NULL;
	struct res_row row = {0};
	char name[USER_NAME_MAX * 4 + 1];
	int rc, revoked;

	if (!load_for_change(c, 1, &tx, &row))
		return;
	snprintf(name, sizeof name, "%s", json_string_value(get_ci(row.doc, "userName")) ?
		 json_string_value(get_ci(row.doc, "userName")) : "");
	revoked = auth_revoke_user_tokens(tx, row.id, clock_now_ms());
	rc = revoked;
	if (rc >= 0)
		rc = drop_memberships(tx, c->p.portfolio_id, row.id);
	if (rc >= 0)
		rc = store_exec(tx, "DELETE FROM users WHERE portfolio_id = $1 AND id = $2",
				(struct store_val[]){sv_text(c->p.portfolio_id), sv_text(row.id)},
				2);
	if (rc >= 0)
		rc = emit_user_event(tx, c->p.portfolio_id, "sso.user.deprovisioned", row.id, name,
				     "scim", revoked);
	if (rc < 0) {
		db_error(c, rc);
		goto out;
	}
	rc = store_commit(tx);
	tx = NULL;
	if (rc != STORE_OK) {
		db_error(c, rc);
		goto out;
	}
	auth_revocation_bump(); /* entries cached while the change committed */
	c->res->status = 204;
	buf_reset(&c->res->body);
out:
	store_rollback(tx);
	row_free(&row);
}

/* -------------------------------------------------------------- groups */

static int save_group_doc(struct store_tx *tx, const char *pf, const char *id, json_t *doc,
			  int insert)
{
	char *doc_s = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_t *ext = get_ci(doc, "externalId");
	int64_t now = clock_now_ms();
	int rc;

	if (!doc_s)
		return STORE_ERR;
	if (insert)
		rc = store_exec(tx,
				"INSERT INTO scim_groups (id, portfolio_id, display_name, external_id,"
				" scim, version, created_at, updated_at)"
				" VALUES ($1, $2, $3, $4, $5, 1, $6, $6)",
				(struct store_val[]){sv_text(id), sv_text(pf),
						     sv_text(json_string_value(get_ci(doc, "displayName"))),
						     sv_text(json_string_value(ext)), sv_text(doc_s),
						     sv_int(now)}, 6);
	else
		rc = store_exec(tx,
				"UPDATE scim_groups SET display_name = $3, external_id = $4, scim = $5,"
				" version = version + 1, updated_at = $6"
				" WHERE portfolio_id = $2 AND id = $1",
				(struct store_val[]){sv_text(id), sv_text(pf),
						     sv_text(json_string_value(get_ci(doc, "displayName"))),
						     sv_text(json_string_value(ext)), sv_text(doc_s),
						     sv_int(now)}, 6);
	free(doc_s);
	return rc;
}

/* The stored form of a group document, made in place: every attribute
 * checked against the published schemas (scim_schema_check, with before
 * the stored group or NULL for a new one, as for users), the core schema
 * first in "schemas", displayName checked, members normalised and
 * de-duplicated (group_members). Touches no store, so it runs before the
 * write transaction. Returns 0, or a refusal with a reason in err, as
 * user_prepare(). */
static int group_prepare(json_t *doc, const json_t *before, char *err, size_t cap)
{
	int rc = scim_schema_check(scim_schemas_builtin(), "Group", doc, before, err, cap);

	if (rc < 0)
		return rc;
	fix_schemas(doc, URN_GROUP);
	if (group_display_name(doc, err, cap) < 0 || group_members(doc, err, cap) < 0)
		return SCIM_SCHEMA_INVALID_VALUE;
	return 0;
}

json_t *scim_prepare(const json_t *body, int user, const json_t *before, int *rc, char *err,
		     size_t cap)
{
	json_t *doc = sanitize(body, user);
	struct user_cols u = {0};
	char *doc_s = NULL;

	err[0] = '\0';
	*rc = SCIM_SCHEMA_INVALID_VALUE;
	if (!doc) {
		snprintf(err, cap, "out of memory");
		return NULL;
	}
	*rc = user ? user_prepare(doc, before, &u, &doc_s, err, cap)
		   : group_prepare(doc, before, err, cap);
	free(u.roles);
	free(doc_s);
	if (*rc < 0) {
		json_decref(doc);
		return NULL;
	}
	return doc;
}

/* Stores a prepared group document (group_prepare) inside tx, without the
 * members that name nothing in this portfolio, then answers with the
 * resource (status 201/200) or 204 (PATCH without attributes). Ends tx
 * either way (committed or rolled back): the caller must not use it
 * afterwards. */
static void finish_group(struct ctx *c, struct store_tx *tx, const char *id, json_t *doc,
			 int insert, int status)
{
	struct res_row row = {0};
	int64_t version = 0;
	char etag[32];
	int rc;

	if ((rc = drop_foreign_members(tx, c->p.portfolio_id, id, doc)) >= 0 &&
	    (rc = save_group_doc(tx, c->p.portfolio_id, id, doc, insert)) >= 0) {
		if (status == 204)
			rc = store_query_int(tx, "SELECT version FROM scim_groups"
					     " WHERE portfolio_id = $1 AND id = $2",
					     (struct store_val[]){sv_text(c->p.portfolio_id),
								  sv_text(id)}, 2, &version);
		else
			rc = load_one(tx, 0, c->p.portfolio_id, id, &row);
		if (rc != 1)
			rc = rc == 0 ? STORE_ERR : rc;
	}
	if ((rc = store_finish(tx, rc)) != STORE_OK) {
		db_error(c, rc);
		goto out;
	}
	if (status == 204) {
		snprintf(etag, sizeof etag, "W/\"%lld\"", (long long)version);
		(void)response_header(c->res, "ETag", etag);
		c->res->status = 204;
		buf_reset(&c->res->body);
		goto out;
	}
	send_resource(c, status, group_repr(c, id, row.doc, row.version, row.created, row.updated));
out:
	row_free(&row);
}

void scim_h_groups_create(struct ctx *c)
{
	struct store_tx *tx;
	json_t *doc = sanitize(c->body, 0);
	char id[ID_MAX], err[256];
	int rc;

	if ((rc = group_prepare(doc, NULL, err, sizeof err)) < 0) {
		prepare_refused(c, rc, err);
	} else if (id_new("grp_", id, sizeof id) < 0) {
		scim_error(c, 500, NULL, "internal error");
	} else if ((rc = store_begin(c->svc->store, 1, &tx)) != STORE_OK) {
		db_error(c, rc);
	} else {
		finish_group(c, tx, id, doc, 1, 201);
	}
	json_decref(doc);
}

void scim_h_group_get(struct ctx *c)
{
	struct store_tx *tx;
	struct res_row row;
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		db_error(c, rc);
		return;
	}
	rc = load_one(tx, 0, c->p.portfolio_id, ctx_param(c, 0), &row);
	store_rollback(tx);
	if (rc == 1)
		send_resource(c, 200, group_repr(c, row.id, row.doc, row.version, row.created,
						 row.updated));
	else if (rc == 0)
		scim_error(c, 404, NULL, "no group %s", ctx_param(c, 0));
	else
		db_error(c, rc);
	row_free(&row);
}

/* Rewrites member operations into the array form the PATCH engine expects:
 * clients send a bare id string or a single object as the value. */
static json_t *normalize_member_ops(const json_t *body)
{
	json_t *copy = json_deep_copy(body), *ops = get_ci(copy, "Operations"), *op, *v, *path;
	size_t i;

	json_array_foreach(ops, i, op) {
		path = json_is_object(op) ? get_ci(op, "path") : NULL;
		v = json_is_object(op) ? get_ci(op, "value") : NULL;
		if (!json_is_string(path) || strcasecmp(json_string_value(path), "members"))
			continue;
		if (json_is_string(v))
			json_object_set_new(op, "value", json_pack("[{s:O}]", "value", v));
		else if (json_is_object(v))
			json_object_set_new(op, "value", json_pack("[O]", v));
	}
	return copy;
}

/* The group document a PUT (the body) or PATCH (the body applied to
 * stored) makes, prepared for storing (group_prepare). Touches no store.
 * Returns the new document, or NULL after answering 400. */
static json_t *group_change(struct ctx *c, const json_t *stored, int patch)
{
	json_t *doc, *body;
	char err[256];
	int rc;

	if (patch) {
		doc = json_deep_copy(stored);
		body = normalize_member_ops(c->body);
		rc = apply_patch(c, doc, body);
		json_decref(body);
		if (rc < 0) {
			json_decref(doc);
			return NULL;
		}
		del_ci(doc, "id");
		del_ci(doc, "meta");
	} else {
		doc = sanitize(c->body, 0);
	}
	if ((rc = group_prepare(doc, stored, err, sizeof err)) < 0) {
		prepare_refused(c, rc, err);
		json_decref(doc);
		return NULL;
	}
	return doc;
}

/* The common frame of PUT and PATCH on a group: work the new document out
 * from a snapshot without the write lock, then store it under the lock
 * (begin_change, finish_group). */
static void modify_group(struct ctx *c, int patch)
{
	struct store_tx *tx = NULL;
	struct res_row row = {0};
	json_t *doc = NULL;
	int rc;

	if (!load_snapshot(c, 0, &row))
		return;
	doc = group_change(c, row.doc, patch);
	if (!doc)
		goto out;
	rc = begin_change(c, 0, &row, &tx);
	if (rc < 0)
		goto out;
	if (rc == 0) {
		json_decref(doc);
		doc = group_change(c, row.doc, patch);
		if (!doc)
			goto out;
	}
	finish_group(c, tx, row.id, doc, 0, patch && !wants_body(c) ? 204 : 200);
	tx = NULL; /* finish_group ended it */
out:
	store_rollback(tx);
	row_free(&row);
	json_decref(doc);
}

void scim_h_group_put(struct ctx *c)
{
	modify_group(c, 0);
}

void scim_h_group_patch(struct ctx *c)
{
	modify_group(c, 1);
}

void scim_h_group_delete(struct ctx *c)
{
	struct store_tx *tx;
	struct res_row row;
	int rc;

	if (!load_for_change(c, 0, &tx, &row))
		return;
	rc = store_exec(tx, "DELETE FROM scim_groups WHERE portfolio_id = $1 AND id = $2",
			(struct store_val[]){sv_text(c->p.portfolio_id), sv_text(row.id)}, 2);
	row_free(&row);
	if (rc < 0) {
		store_rollback(tx);
		db_error(c, rc);
		return;
	}
	if ((rc = store_commit(tx)) != STORE_OK) {
		db_error(c, rc);
		return;
	}
	c->res->status = 204;
	buf_reset(&c->res->body);
}

/* ------------------------------------------------------ discovery docs */

/* The embedded discovery document with meta.location filled for this
 * server. Returns a new reference to the part named key. */
static json_t *meta_doc(struct ctx *c, const char *key)
{
	json_t *all = json_loads(embedded_scim_meta, 0, NULL), *part;

	part = json_incref(json_object_get(all, key));
	json_decref(all);
	(void)c;
	return part;
}

static void add_meta(struct ctx *c, json_t *o, const char *type, const char *path)
{
	char loc[1024];

	snprintf(loc, sizeof loc, "%s/scim/v2/%s", c->svc->cfg->public_url, path);
	json_object_set_new(o, "meta", json_pack("{s:s, s:s}", "resourceType", type, "location", loc));
}

static void send_list_of(struct ctx *c, json_t *items)
{
	send_scim(c, 200, json_pack("{s:[s], s:I, s:I, s:i, s:o}", "schemas", URN_LIST,
				    "totalResults", (json_int_t)json_array_size(items),
				    "itemsPerPage", (json_int_t)json_array_size(items), "startIndex",
				    1, "Resources", items));
}

void scim_h_service_provider_config(struct ctx *c)
{
	json_t *spc = meta_doc(c, "service_provider_config");

	if (!spc) {
		scim_error(c, 500, NULL, "internal error");
		return;
	}
	add_meta(c, spc, "ServiceProviderConfig", "ServiceProviderConfig");
	send_scim(c, 200, spc);
}

/* Lists (one == NULL) or fetches one entry of a discovery collection. */
static void discovery(struct ctx *c, const char *key, const char *type, const char *path,
		      const char *one)
{
	json_t *items = meta_doc(c, key), *v;
	char loc[300];
	size_t i;

	if (!items) {
		scim_error(c, 500, NULL, "internal error");
		return;
	}
	json_array_foreach(items, i, v) {
		snprintf(loc, sizeof loc, "%s/%s", path, json_string_value(json_object_get(v, "id")));
		add_meta(c, v, type, loc);
		if (one && !strcmp(one, json_string_value(json_object_get(v, "id")))) {
			send_scim(c, 200, json_incref(v));
			json_decref(items);
			return;
		}
	}
	if (one) {
		json_decref(items);
		scim_error(c, 404, NULL, "no %s %s", type, one);
		return;
	}
	send_list_of(c, items);
}

void scim_h_resource_types(struct ctx *c)
{
	discovery(c, "resource_types", "ResourceType", "ResourceTypes", NULL);
}

void scim_h_resource_type(struct ctx *c)
{
	discovery(c, "resource_types", "ResourceType", "ResourceTypes", ctx_param(c, 0));
}

void scim_h_schemas(struct ctx *c)
{
	discovery(c, "schemas", "Schema", "Schemas", NULL);
}

void scim_h_schema(struct ctx *c)
{
	discovery(c, "schemas", "Schema", "Schemas", ctx_param(c, 0));
}

/* ------------------------------------------------------- used elsewhere */

static int is_role(const char *s)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(role_names); i++)
		if (!strcmp(role_names[i], s))
			return 1;
	return 0;
}

static void add_role(json_t *roles, const char *name)
{
	json_t *v;
	size_t i;

	if (!is_role(name))
		return;
	json_array_foreach(roles, i, v)
		if (!strcmp(json_string_value(v), name))
			return;
	json_array_append_new(roles, json_string(name));
}

int scim_user_roles(struct store_tx *tx, const char *portfolio_id, const char *user_id,
		    json_t **roles)
{
	struct store_rows *r;
	json_t *own = NULL, *groups = NULL, *v, *g;
	size_t i;
	int rc, active = 0;

	*roles = NULL;
	rc = store_query(tx, "SELECT active, roles FROM users WHERE portfolio_id = $1 AND id = $2",
			 (struct store_val[]){sv_text(portfolio_id), sv_text(user_id)}, 2, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		active = store_int(r, 0) == 1;
		own = json_loads(store_text(r, 1), 0, NULL);
	}
	store_rows_close(r);
	if (rc <= 0 || !active) {
		json_decref(own);
		return rc < 0 ? rc : 1;
	}
	rc = load_groups(tx, portfolio_id, &groups);
	if (rc < 0) {
		json_decref(own);
		json_decref(groups);
		return rc;
	}
	*roles = json_array();
	json_array_foreach(own, i, v)
		if (json_is_string(v))
			add_role(*roles, json_string_value(v));
	json_array_foreach(groups, i, g) {
		json_t *doc = json_object_get(g, "doc"), *name = get_ci(doc, "displayName");

		if (json_is_string(name) && has_member(doc, user_id))
			add_role(*roles, json_string_value(name));
	}
	json_decref(own);
	json_decref(groups);
	return 0;
}

int scim_user_provision_jit(struct store_tx *tx, const char *portfolio_id, const char *user_name,
			    const char *display_name, const json_t *roles, char *id_out,
			    size_t id_cap)
{
	json_t *doc, *v;
	struct user_cols u;
	char err[256], id[ID_MAX], *doc_s = NULL;
	size_t i;
	int rc = STORE_ERR;

	doc = json_pack("{s:[s], s:s, s:b, s:[]}", "schemas", URN_USER, "userName", user_name,
			"active", 1, "roles");
	if (display_name && *display_name)
		json_object_set_new(doc, "displayName", json_string(display_name));
	json_array_foreach(roles, i, v)
		if (json_is_string(v))
			json_array_append_new(json_object_get(doc, "roles"),
					      json_pack("{s:O}", "value", v));
	if (user_columns(doc, &u, err, sizeof err) < 0 || id_new("usr_", id, sizeof id) < 0)
		goto out;
	doc_s = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!doc_s)
		goto out;
	rc = insert_user(tx, portfolio_id, id, &u, doc_s, "saml_jit");
	if (rc >= 0)
		rc = emit_user_event(tx, portfolio_id, "sso.user.provisioned", id, user_name,
				     "saml_jit", -1);
	if (rc >= 0) {
		snprintf(id_out, id_cap, "%s", id);
		rc = 0;
	}
out:
	free(u.roles);
	free(doc_s);
	json_decref(doc);
	return rc;
}

int scim_user_set_roles(struct store_tx *tx, const char *portfolio_id, const char *user_id,
			const json_t *roles)
{
	struct res_row row;
	json_t *list = json_array(), *v;
	char *doc_s = NULL, *roles_s = NULL;
	size_t i;
	int rc;

	rc = load_one(tx, 1, portfolio_id, user_id, &row);
	if (rc <= 0) {
		json_decref(list);
		return rc < 0 ? rc : STORE_ERR;
	}
	json_array_foreach(roles, i, v)
		if (json_is_string(v))
			json_array_append_new(list, json_pack("{s:O}", "value", v));
	del_ci(row.doc, "roles");
	json_object_set_new(row.doc, "roles", list);
	drop_password(row.doc); /* one an older version stored goes now */
	doc_s = json_dumps(row.doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	roles_s = json_dumps(roles, JSON_COMPACT);
	rc = doc_s && roles_s
		     ? store_exec(tx,
				  "UPDATE users SET scim = $3, roles = $4, version = version + 1,"
				  " updated_at = $5 WHERE portfolio_id = $1 AND id = $2",
				  (struct store_val[]){sv_text(portfolio_id), sv_text(user_id),
						       sv_text(doc_s), sv_text(roles_s),
						       sv_int(clock_now_ms())}, 5)
		     : STORE_ERR;
	free(doc_s);
	free(roles_s);
	row_free(&row);
	return rc < 0 ? rc : 0;
}

static const struct route routes[] = {
	ROUTE_SCIM_ENTRY("GET", "/scim/v2/ServiceProviderConfig", scim_h_service_provider_config,
			 BODY_NONE),
	ROUTE_SCIM_ENTRY("GET", "/scim/v2/serviceConfiguration", scim_h_service_provider_config,
			 BODY_NONE),
	ROUTE_SCIM_ENTRY("GET", "/scim/v2/ResourceTypes", scim_h_resource_types, BODY_NONE),
	ROUTE_SCIM_ENTRY("GET", "/scim/v2/ResourceTypes/{id}", scim_h_resource_type, BODY_NONE),
	ROUTE_SCIM_ENTRY("GET", "/scim/v2/Schemas", scim_h_schemas, BODY_NONE),
	ROUTE_SCIM_ENTRY("GET", "/scim/v2/Schemas/{id}", scim_h_schema, BODY_NONE),
	ROUTE_SCIM_ENTRY("GET", "/scim/v2/Users", scim_h_users_list, BODY_NONE),
	ROUTE_SCIM_ENTRY("POST", "/scim/v2/Users", scim_h_users_create, BODY_SCIM),
	ROUTE_SCIM_ENTRY("GET", "/scim/v2/Users/{id}", scim_h_user_get, BODY_NONE),
	ROUTE_SCIM_ENTRY("PUT", "/scim/v2/Users/{id}", scim_h_user_put, BODY_SCIM),
	ROUTE_SCIM_ENTRY("PATCH", "/scim/v2/Users/{id}", scim_h_user_patch, BODY_SCIM),
	ROUTE_SCIM_ENTRY("DELETE", "/scim/v2/Users/{id}", scim_h_user_delete, BODY_NONE),
	ROUTE_SCIM_ENTRY("GET", "/scim/v2/Groups", scim_h_groups_list, BODY_NONE),
	ROUTE_SCIM_ENTRY("POST", "/scim/v2/Groups", scim_h_groups_create, BODY_SCIM),
	ROUTE_SCIM_ENTRY("GET", "/scim/v2/Groups/{id}", scim_h_group_get, BODY_NONE),
	ROUTE_SCIM_ENTRY("PUT", "/scim/v2/Groups/{id}", scim_h_group_put, BODY_SCIM),
	ROUTE_SCIM_ENTRY("PATCH", "/scim/v2/Groups/{id}", scim_h_group_patch, BODY_SCIM),
	ROUTE_SCIM_ENTRY("DELETE", "/scim/v2/Groups/{id}", scim_h_group_delete, BODY_NONE),
};
const struct route_table scim_routes = ROUTE_TABLE(routes);
