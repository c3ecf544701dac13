#include "api/identity/scim.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/ctx.h"
#include "api/identity/user_event.h"
#include "api/respond.h"
#include "core/embedded.h"
#include "core/id.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "identity/directory.h"
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
		   e == ERR_REQUEST_MALFORMED   ? "invalidSyntax"
		   : e == ERR_VALIDATION_FAILED ? "invalidValue"
						: NULL,
		   "%s", msg);
}

/* Commits *tx (which is gone afterwards), a change of a user that cached
 * token validations may hold: they are dropped once it committed. Returns
 * 0, or -1 after answering. */
static int commit(struct ctx *c, struct store_tx **tx)
{
	int rc = store_finish(*tx, auth_revocation_bump_at_commit(*tx));

	*tx = NULL;
	if (rc == STORE_OK)
		return 0;
	respond_store_error(c, rc);
	return -1;
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

/* ------------------------------------------------------- representation */

static enum directory_kind kind_of(int user)
{
	return user ? DIRECTORY_USER : DIRECTORY_GROUP;
}

/* The SCIM representation of a stored user (a new object; row keeps its
 * own): the document without any password, with id, the groups that list
 * it as a member (in the order of ms->groups, each once), and meta. */
static json_t *user_repr(struct ctx *c, const struct directory_row *row,
			 const struct directory_memberships *ms)
{
	json_t *out = json_object(), *v, *list = json_array(), *groups, *g;
	const char *k, *gid;
	char loc[600];
	size_t i;

	json_object_set(out, "schemas", directory_get_ci(row->doc, "schemas"));
	json_object_set_new(out, "id", json_string(row->id));
	json_object_foreach(row->doc, k, v)
		if (strcasecmp(k, "schemas"))
			json_object_set(out, k, v);
	directory_drop_password(out);
	groups = directory_user_groups(ms, row->id);
	json_array_foreach(groups, i, g) {
		gid = json_string_value(json_object_get(g, "id"));
		location(c, "Groups", gid, loc, sizeof loc);
		json_array_append_new(list, json_pack("{s:s, s:s, s:O?, s:s}", "value", gid, "$ref",
						      loc, "display",
						      directory_get_ci(json_object_get(g, "doc"),
								       "displayName"),
						      "type", "direct"));
	}
	json_decref(groups);
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

	json_object_set(out, "schemas", directory_get_ci(doc, "schemas"));
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
			v = directory_get_ci(repr, head);
			if (!v)
				continue;
			if (!sub[0] || !json_is_object(v)) {
				json_object_set(out, head, v);
				continue;
			}
			if (!directory_get_ci(v, sub))
				continue;
			dst = json_object_get(out, head);
			if (!json_is_object(dst)) {
				dst = json_object();
				json_object_set_new(out, head, dst);
			}
			json_object_set(dst, sub, directory_get_ci(v, sub));
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
				directory_del_ci(repr, head);
			else if (json_is_object(directory_get_ci(repr, head)))
				directory_del_ci(directory_get_ci(repr, head), sub);
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
	v = directory_get_ci(res, head);
	if (json_is_array(v)) {
		json_t *pick = json_array_get(v, 0);

		json_array_foreach(v, i, e)
			if (json_is_object(e) && json_is_true(directory_get_ci(e, "primary")))
				pick = e;
		v = pick;
		if (json_is_object(v) && !sub[0])
			snprintf(sub, sizeof sub, "value");
	}
	if (sub[0] && json_is_object(v))
		v = directory_get_ci(v, sub);
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
	struct directory_memberships ms = {0};
	struct directory_row row = {0};
	json_t *users = NULL, *all = json_array(), *u;
	size_t i;
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK)
		goto fail;
	if ((rc = directory_memberships_load(tx, c->p.portfolio_id, &ms)) >= 0)
		rc = directory_list(tx, DIRECTORY_USER, c->p.portfolio_id, &users);
	store_rollback(tx);
	if (rc < 0)
		goto fail;
	json_array_foreach(users, i, u) {
		snprintf(row.id, sizeof row.id, "%s", json_string_value(json_object_get(u, "id")));
		row.doc = json_object_get(u, "doc");
		row.version = json_integer_value(json_object_get(u, "version"));
		row.created = json_integer_value(json_object_get(u, "created"));
		row.updated = json_integer_value(json_object_get(u, "updated"));
		json_array_append_new(all, user_repr(c, &row, &ms));
	}
	directory_memberships_free(&ms);
	json_decref(users);
	send_list(c, all, 1);
	return;
fail:
	directory_memberships_free(&ms);
	json_decref(users);
	json_decref(all);
	respond_store_error(c, rc);
}

void scim_h_groups_list(struct ctx *c)
{
	struct store_tx *tx;
	json_t *groups = NULL, *all = json_array(), *g;
	size_t i;
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		json_decref(all);
		respond_store_error(c, rc);
		return;
	}
	rc = directory_list(tx, DIRECTORY_GROUP, c->p.portfolio_id, &groups);
	store_rollback(tx);
	if (rc < 0) {
		json_decref(groups);
		json_decref(all);
		respond_store_error(c, rc);
		return;
	}
	json_array_foreach(groups, i, g)
		json_array_append_new(all,
				      group_repr(c, json_string_value(json_object_get(g, "id")),
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

/* Answers 400 for a refusal of directory_user_prepare() or
 * directory_group_prepare(). */
static void prepare_refused(struct ctx *c, int rc, const char *err)
{
	scim_error(c, 400, rc == SCIM_SCHEMA_INVALID_SYNTAX ? "invalidSyntax" : "invalidValue",
		   "%s", err);
}

/* Answers 409 when a user write found its userName taken, else the store
 * error rc. */
static void user_write_failed(struct ctx *c, int rc, const struct directory_user *u)
{
	if (rc == STORE_CONSTRAINT)
		scim_error(c, 409, "uniqueness",
			   "userName \"%s\" is already taken in this portfolio", u->user_name);
	else
		respond_store_error(c, rc);
}

void scim_h_users_create(struct ctx *c)
{
	char err[256], id[ID_MAX];
	struct directory_user u = {0};
	struct directory_event ev;
	struct store_tx *tx = NULL;
	struct directory_row row = {0};
	struct directory_memberships none = {0}; /* a new user is in no group */
	json_t *doc = directory_sanitize(c->body, 1);
	int rc;

	if ((rc = directory_user_prepare(doc, NULL, &u, err, sizeof err)) < 0) {
		prepare_refused(c, rc, err);
		goto out;
	}
	if ((rc = store_begin(c->svc->store, 1, &tx)) != STORE_OK) {
		tx = NULL;
		respond_store_error(c, rc);
		goto out;
	}
	rc = directory_user_add(tx, c->p.portfolio_id, &u, id, sizeof id, &ev);
	if (rc < 0) {
		user_write_failed(c, rc, &u);
		goto out;
	}
	if ((rc = user_event_append(tx, c->p.portfolio_id, &ev)) < 0 ||
	    (rc = directory_load(tx, DIRECTORY_USER, c->p.portfolio_id, id, &row)) != 1) {
		respond_store_error(c, rc);
		goto out;
	}
	if (commit(c, &tx) < 0)
		goto out;
	send_resource(c, 201, user_repr(c, &row, &none));
out:
	store_rollback(tx);
	directory_row_free(&row);
	directory_user_release(&u);
	json_decref(doc);
}

void scim_h_user_get(struct ctx *c)
{
	struct store_tx *tx;
	struct directory_row row;
	struct directory_memberships ms = {0};
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = directory_load(tx, DIRECTORY_USER, c->p.portfolio_id, ctx_param(c, 0), &row);
	if (rc == 1 && directory_memberships_load(tx, c->p.portfolio_id, &ms) < 0)
		rc = STORE_ERR;
	store_rollback(tx);
	if (rc == 1)
		send_resource(c, 200, user_repr(c, &row, &ms));
	else if (rc == 0)
		scim_error(c, 404, NULL, "no user %s", ctx_param(c, 0));
	else
		respond_store_error(c, rc);
	directory_row_free(&row);
	directory_memberships_free(&ms);
}

/* Loads the resource the path names, checking If-Match: under a write
 * transaction left open in *keep for the change (keep non-NULL: the caller
 * finishes it), or from a read snapshot (keep NULL). Returns 1 with *row
 * (the caller frees it), or 0 after answering (404, 412 or a store error;
 * nothing left open). */
static int load_checked(struct ctx *c, int user, struct store_tx **keep, struct directory_row *row)
{
	struct store_tx *tx;
	int rc;

	memset(row, 0, sizeof *row);
	if (keep)
		*keep = NULL;
	if ((rc = store_begin(c->svc->store, keep != NULL, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return 0;
	}
	rc = directory_load(tx, kind_of(user), c->p.portfolio_id, ctx_param(c, 0), row);
	if (rc == 1 && check_if_match(c, row->version) == 0) {
		if (keep)
			*keep = tx;
		else
			store_rollback(tx);
		return 1;
	}
	store_rollback(tx);
	if (rc == 0)
		scim_error(c, 404, NULL, "no %s %s", user ? "user" : "group", ctx_param(c, 0));
	else if (rc < 0)
		respond_store_error(c, rc);
	directory_row_free(row);
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

/* Opens the write transaction of a change worked out from *row, a
 * load_checked() snapshot. Returns 1 with *tx open when the stored version
 * is still row->version; 0 with *tx open and *row reloaded under the lock
 * (If-Match checked again) when it has changed, so that the caller works
 * the change out again; or -1 after answering, with nothing left open. */
static int begin_change(struct ctx *c, int user, struct directory_row *row, struct store_tx **tx)
{
	int64_t version = -1;
	int rc;

	if ((rc = store_begin(c->svc->store, 1, tx)) != STORE_OK) {
		*tx = NULL;
		respond_store_error(c, rc);
		return -1;
	}
	rc = directory_version(*tx, kind_of(user), c->p.portfolio_id, row->id, &version);
	if (rc == 1 && version == row->version)
		return 1;
	if (rc >= 0) {
		directory_row_free(row);
		rc = directory_load(*tx, kind_of(user), c->p.portfolio_id, ctx_param(c, 0), row);
		if (rc == 1 && check_if_match(c, row->version) == 0)
			return 0;
		if (rc == 0)
			scim_error(c, 404, NULL, "no %s %s", user ? "user" : "group",
				   ctx_param(c, 0));
	}
	if (rc < 0)
		respond_store_error(c, rc);
	store_rollback(*tx);
	*tx = NULL;
	return -1;
}

/* Applies a PATCH body to doc; on a refusal answers 400 with the scimType
 * of the PATCH engine's error and returns -1. */
static int apply_patch(struct ctx *c, json_t *doc, const json_t *body)
{
	static const char *types[] = {NULL,       "invalidSyntax", "invalidPath",
				      "noTarget", "invalidValue",  "mutability"};
	char err[256];
	int rc = scim_patch_apply(doc, body, err, sizeof err);

	if (rc == SCIM_PATCH_OK)
		return 0;
	scim_error(c, 400, rc >= -5 && rc <= -1 ? types[-rc] : "invalidValue", "%s", err);
	return -1;
}

/* The user document a PUT (the body) or PATCH (the body applied to
 * stored) makes, prepared for storing by directory_user_prepare (*u as
 * there; values equal to stored's pass its schema check as they are, so a
 * user stored with a wrong type before that check existed can still be
 * changed and deactivated). Touches no store. Returns the new document,
 * or NULL after answering 400. */
static json_t *user_change(struct ctx *c, const json_t *stored, int patch, struct directory_user *u)
{
	char err[256];
	json_t *doc;
	int rc;

	memset(u, 0, sizeof *u);
	if (patch) {
		doc = json_deep_copy(stored);
		if (apply_patch(c, doc, c->body) < 0) {
			json_decref(doc);
			return NULL;
		}
	} else {
		doc = directory_sanitize(c->body, 1);
	}
	if ((rc = directory_user_prepare(doc, stored, u, err, sizeof err)) < 0) {
		prepare_refused(c, rc, err);
		json_decref(doc);
		return NULL;
	}
	return doc;
}

/* Stores a prepared user document (user_change) over old inside tx, with
 * the sso.user.deprovisioned event of a deactivation. Answers and returns
 * -1 on a refusal or a store error; 0 when stored. */
static int save_user(struct ctx *c, struct store_tx *tx, const struct directory_row *old,
		     const struct directory_user *u)
{
	struct directory_event ev;
	int rc = directory_user_update(tx, c->p.portfolio_id, old, u, &ev);

	if (rc < 0) {
		user_write_failed(c, rc, u);
		return -1;
	}
	if ((rc = user_event_append(tx, c->p.portfolio_id, &ev)) < 0) {
		respond_store_error(c, rc);
		return -1;
	}
	return 0;
}

/* directory_memberships_load in a read transaction of its own. */
static int load_memberships_read(struct ctx *c, struct directory_memberships *ms)
{
	struct store_tx *tx;
	int rc;

	memset(ms, 0, sizeof *ms);
	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK)
		return rc;
	rc = directory_memberships_load(tx, c->p.portfolio_id, ms);
	store_rollback(tx);
	return rc;
}

/* Answers a PATCH that asked for no attributes: 204 with the new ETag. */
static void send_no_content(struct ctx *c, int64_t version)
{
	char etag[32];

	snprintf(etag, sizeof etag, "W/\"%lld\"", (long long)version);
	(void)response_header(c->res, "ETag", etag);
	c->res->status = 204;
	buf_reset(&c->res->body);
}

/* Stores the user change worked out from *row (user_change) under the
 * write lock (begin_change, working it out again if the user changed in
 * between). Returns 0 with the stored user in *fresh (the caller frees
 * it), or -1 after answering. */
static int store_user_change(struct ctx *c, int patch, struct directory_row *row,
			     struct directory_row *fresh)
{
	struct store_tx *tx = NULL;
	struct directory_user u = {0};
	json_t *doc = user_change(c, row->doc, patch, &u);
	int rc = -1;

	if (!doc)
		goto out;
	rc = begin_change(c, 1, row, &tx);
	if (rc == 0) {
		json_decref(doc);
		directory_user_release(&u);
		doc = user_change(c, row->doc, patch, &u);
	}
	rc = -1;
	if (!doc || !tx || save_user(c, tx, row, &u) < 0)
		goto out;
	if ((rc = directory_load(tx, DIRECTORY_USER, c->p.portfolio_id, row->id, fresh)) != 1) {
		respond_store_error(c, rc == 0 ? STORE_ERR : rc);
		rc = -1;
		goto out;
	}
	rc = commit(c, &tx);
out:
	store_rollback(tx);
	directory_user_release(&u);
	json_decref(doc);
	return rc;
}

/* The common frame of PUT and PATCH on a user: work the new document out
 * from a snapshot, store it under the write lock (store_user_change),
 * answer with the resource (PUT; PATCH when attributes are asked for) or
 * 204. The groups of the answer are read after the commit: that reads
 * every group of the portfolio, which need not happen under the lock. */
static void modify_user(struct ctx *c, int patch)
{
	struct directory_row row = {0}, fresh = {0};
	struct directory_memberships ms = {0};
	int rc;

	if (!load_checked(c, 1, NULL, &row))
		return;
	if (store_user_change(c, patch, &row, &fresh) < 0)
		goto out;
	if (patch && !wants_body(c)) {
		send_no_content(c, fresh.version);
		goto out;
	}
	if ((rc = load_memberships_read(c, &ms)) < 0) {
		respond_store_error(c, rc);
		goto out;
	}
	send_resource(c, 200, user_repr(c, &fresh, &ms));
out:
	directory_row_free(&row);
	directory_row_free(&fresh);
	directory_memberships_free(&ms);
}

void scim_h_user_put(struct ctx *c)
{
	modify_user(c, 0);
}

void scim_h_user_patch(struct ctx *c)
{
	modify_user(c, 1);
}

void scim_h_user_delete(struct ctx *c)
{
	struct store_tx *tx = NULL;
	struct directory_row row = {0};
	struct directory_event ev;
	int rc;

	if (!load_checked(c, 1, &tx, &row))
		return;
	rc = directory_user_delete(tx, c->p.portfolio_id, &row, &ev);
	if (rc >= 0)
		rc = user_event_append(tx, c->p.portfolio_id, &ev);
	if (rc < 0) {
		respond_store_error(c, rc);
		goto out;
	}
	if (commit(c, &tx) < 0)
		goto out;
	c->res->status = 204;
	buf_reset(&c->res->body);
out:
	store_rollback(tx);
	directory_row_free(&row);
}

/* -------------------------------------------------------------- groups */

/* Stores a prepared group document (directory_group_prepare) inside tx,
 * then answers with the resource (status 201/200) or 204 (PATCH without
 * attributes). Ends tx either way (committed or rolled back): the caller
 * must not use it afterwards. */
static void finish_group(struct ctx *c, struct store_tx *tx, const char *id, json_t *doc,
			 int insert, int status)
{
	struct directory_row row = {0};
	int64_t version = 0;
	int rc;

	if ((rc = directory_group_save(tx, c->p.portfolio_id, id, doc, insert)) >= 0) {
		if (status == 204)
			rc = directory_version(tx, DIRECTORY_GROUP, c->p.portfolio_id, id, &version);
		else
			rc = directory_load(tx, DIRECTORY_GROUP, c->p.portfolio_id, id, &row);
		if (rc != 1)
			rc = rc == 0 ? STORE_ERR : rc;
	}
	if ((rc = store_finish(tx, rc)) != STORE_OK) {
		respond_store_error(c, rc);
		goto out;
	}
	if (status == 204) {
		send_no_content(c, version);
		goto out;
	}
	send_resource(c, status, group_repr(c, id, row.doc, row.version, row.created, row.updated));
out:
	directory_row_free(&row);
}

void scim_h_groups_create(struct ctx *c)
{
	struct store_tx *tx;
	json_t *doc = directory_sanitize(c->body, 0);
	char id[ID_MAX], err[256];
	int rc;

	if ((rc = directory_group_prepare(doc, NULL, err, sizeof err)) < 0) {
		prepare_refused(c, rc, err);
	} else if (id_new("grp_", id, sizeof id) < 0) {
		scim_error(c, 500, NULL, "internal error");
	} else if ((rc = store_begin(c->svc->store, 1, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
	} else {
		finish_group(c, tx, id, doc, 1, 201);
	}
	json_decref(doc);
}

void scim_h_group_get(struct ctx *c)
{
	struct store_tx *tx;
	struct directory_row row;
	int rc;

	if ((rc = store_begin(c->svc->store, 0, &tx)) != STORE_OK) {
		respond_store_error(c, rc);
		return;
	}
	rc = directory_load(tx, DIRECTORY_GROUP, c->p.portfolio_id, ctx_param(c, 0), &row);
	store_rollback(tx);
	if (rc == 1)
		send_resource(c, 200,
			      group_repr(c, row.id, row.doc, row.version, row.created, row.updated));
	else if (rc == 0)
		scim_error(c, 404, NULL, "no group %s", ctx_param(c, 0));
	else
		respond_store_error(c, rc);
	directory_row_free(&row);
}

/* Rewrites member operations into the array form the PATCH engine expects:
 * clients send a bare id string or a single object as the value. */
static json_t *normalize_member_ops(const json_t *body)
{
	json_t *copy = json_deep_copy(body), *ops = directory_get_ci(copy, "Operations"), *op, *v,
	       *path;
	size_t i;

	json_array_foreach(ops, i, op) {
		path = json_is_object(op) ? directory_get_ci(op, "path") : NULL;
		v = json_is_object(op) ? directory_get_ci(op, "value") : NULL;
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
 * stored) makes, prepared for storing (directory_group_prepare). Touches
 * no store. Returns the new document, or NULL after answering 400. */
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
		directory_del_ci(doc, "id");
		directory_del_ci(doc, "meta");
	} else {
		doc = directory_sanitize(c->body, 0);
	}
	if ((rc = directory_group_prepare(doc, stored, err, sizeof err)) < 0) {
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
	struct directory_row row = {0};
	json_t *doc = NULL;
	int rc;

	if (!load_checked(c, 0, NULL, &row))
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
	directory_row_free(&row);
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
	struct directory_row row;
	int rc;

	if (!load_checked(c, 0, &tx, &row))
		return;
	rc = directory_group_delete(tx, c->p.portfolio_id, row.id);
	directory_row_free(&row);
	if (rc < 0) {
		store_rollback(tx);
		respond_store_error(c, rc);
		return;
	}
	if ((rc = store_commit(tx)) != STORE_OK) {
		respond_store_error(c, rc);
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
	json_object_set_new(o, "meta",
			    json_pack("{s:s, s:s}", "resourceType", type, "location", loc));
}

static void send_list_of(struct ctx *c, json_t *items)
{
	send_scim(c, 200,
		  json_pack("{s:[s], s:I, s:I, s:i, s:o}", "schemas", URN_LIST, "totalResults",
			    (json_int_t)json_array_size(items), "itemsPerPage",
			    (json_int_t)json_array_size(items), "startIndex", 1, "Resources", items));
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
