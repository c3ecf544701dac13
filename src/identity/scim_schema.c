#include "identity/scim_schema.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/embedded.h"
#include "identity/scim_filter.h"

/* ---------------------------------------------------------------- model */

enum attr_type {
	T_STRING,
	T_BOOLEAN,
	T_DECIMAL,
	T_INTEGER,
	T_DATETIME,
	T_REFERENCE,
	T_BINARY,
	T_COMPLEX
};

static const struct {
	const char *name;
	enum attr_type type;
	const char *one, *many; /* how a message names one value, and several */
} types[] = {
	{"string", T_STRING, "a string", "strings"},
	{"boolean", T_BOOLEAN, "a boolean", "booleans"},
	{"decimal", T_DECIMAL, "a number", "numbers"},
	{"integer", T_INTEGER, "an integer", "integers"},
	{"dateTime", T_DATETIME, "a dateTime string (xsd:dateTime)",
	 "dateTime strings (xsd:dateTime)"},
	{"reference", T_REFERENCE, "a reference (a URI string)", "references (URI strings)"},
	{"binary", T_BINARY, "a binary value (a base64 string)", "binary values (base64 strings)"},
	{"complex", T_COMPLEX, "a complex value (a JSON object)", "complex values (JSON objects)"},
};

struct attr {
	char *name;
	enum attr_type type;
	int multi; /* multiValued */
	int required;
	int bare_ok; /* elements may be bare strings meaning {"value": s} */
	struct attr *sub;
	size_t nsub;
};

struct schema {
	char *urn;
	struct attr *attrs;
	size_t nattrs;
};

struct restype {
	char *name;
	const struct schema *core;
	const struct schema **ext;
	size_t next;
};

struct scim_schemas {
	struct schema *schemas;
	size_t nschemas;
	struct restype *types;
	size_t ntypes;
};

/* The multi-valued complex attributes whose elements may be bare strings:
 * Okta and other clients send "roles": ["finance-operator"], and group
 * "members" as bare ids; both are documented in docs/openapi.json. */
static const struct {
	const char *urn, *attr;
} bare_ok[] = {
	{SCIM_URN_USER, "roles"},
	{SCIM_URN_GROUP, "members"},
};

/* --------------------------------------------------------------- loading */

static void attrs_free(struct attr *a, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(a[i].name);
		attrs_free(a[i].sub, a[i].nsub);
	}
	free(a);
}

void scim_schemas_free(struct scim_schemas *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->nschemas; i++) {
		free(s->schemas[i].urn);
		attrs_free(s->schemas[i].attrs, s->schemas[i].nattrs);
	}
	for (i = 0; i < s->ntypes; i++) {
		free(s->types[i].name);
		free(s->types[i].ext);
	}
	free(s->schemas);
	free(s->types);
	free(s);
}

static int load_fail(char *err, size_t errcap, const char *fmt, ...) PRINTF(3, 4);

static int load_fail(char *err, size_t errcap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errcap, fmt, ap);
	va_end(ap);
	return -1;
}

/* Fills *out[0..*n) from a JSON array of attribute definitions (RFC 7643
 * §7: name, type, multiValued, required, subAttributes). depth 0 is a
 * schema's attributes, 1 their sub-attributes (a complex attribute has no
 * complex sub-attributes, §2.3.8). Returns 0 or -1 with err set; on error
 * what was built so far is in *out and *n, for the caller to free. */
static int load_attrs(const json_t *defs, int depth, struct attr **out, size_t *n, char *err,
		      size_t errcap)
{
	const json_t *d, *name, *type;
	struct attr *a;
	size_t i, k;

	*out = NULL;
	*n = 0;
	if (!json_is_array(defs))
		return load_fail(err, errcap, "attributes must be an array");
	*out = calloc(json_array_size(defs) ? json_array_size(defs) : 1, sizeof **out);
	if (!*out)
		return load_fail(err, errcap, "out of memory");
	json_array_foreach(defs, i, d) {
		a = &(*out)[i];
		name = json_object_get(d, "name");
		type = json_object_get(d, "type");
		if (!json_is_string(name) || !json_string_length(name))
			return load_fail(err, errcap, "an attribute has no name");
		for (k = 0; k < ARRAY_LEN(types); k++)
			if (json_is_string(type) && !strcmp(json_string_value(type), types[k].name))
				break;
		if (k == ARRAY_LEN(types))
			return load_fail(err, errcap, "attribute %s has an unknown type",
					 json_string_value(name));
		if (!(a->name = strdup(json_string_value(name))))
			return load_fail(err, errcap, "out of memory");
		(*n)++;
		a->type = types[k].type;
		a->multi = json_is_true(json_object_get(d, "multiValued"));
		a->required = json_is_true(json_object_get(d, "required"));
		if (a->type != T_COMPLEX)
			continue;
		if (depth > 0)
			return load_fail(err, errcap, "sub-attribute %s is complex", a->name);
		if (load_attrs(json_object_get(d, "subAttributes"), depth + 1, &a->sub, &a->nsub,
			       err, errcap) < 0)
			return -1;
	}
	return 0;
}

static const struct schema *find_schema(const struct scim_schemas *s, const char *urn)
{
	size_t i;

	for (i = 0; urn && i < s->nschemas; i++)
		if (!strcasecmp(s->schemas[i].urn, urn))
			return &s->schemas[i];
	return NULL;
}

static int load_types(struct scim_schemas *s, const json_t *defs, char *err, size_t errcap)
{
	const json_t *d, *id, *exts, *e;
	struct restype *t;
	size_t i, j;

	if (!json_is_array(defs))
		return load_fail(err, errcap, "resource_types must be an array");
	s->types = calloc(json_array_size(defs) ? json_array_size(defs) : 1, sizeof *s->types);
	if (!s->types)
		return load_fail(err, errcap, "out of memory");
	json_array_foreach(defs, i, d) {
		t = &s->types[i];
		id = json_object_get(d, "id");
		if (!json_is_string(id))
			return load_fail(err, errcap, "a resource type has no id");
		if (!(t->name = strdup(json_string_value(id))))
			return load_fail(err, errcap, "out of memory");
		s->ntypes++;
		t->core = find_schema(s, json_string_value(json_object_get(d, "schema")));
		if (!t->core)
			return load_fail(err, errcap, "resource type %s names no known schema",
					 t->name);
		exts = json_object_get(d, "schemaExtensions");
		t->ext = calloc(json_array_size(exts) ? json_array_size(exts) : 1, sizeof *t->ext);
		if (!t->ext)
			return load_fail(err, errcap, "out of memory");
		json_array_foreach(exts, j, e) {
			t->ext[j] = find_schema(s, json_string_value(json_object_get(e, "schema")));
			if (!t->ext[j])
				return load_fail(err, errcap,
						 "resource type %s names an unknown extension",
						 t->name);
			t->next++;
		}
	}
	return 0;
}

static void mark_bare_ok(struct scim_schemas *s)
{
	const struct schema *sc;
	size_t i, j;

	for (i = 0; i < ARRAY_LEN(bare_ok); i++) {
		sc = find_schema(s, bare_ok[i].urn);
		for (j = 0; sc && j < sc->nattrs; j++)
			if (!strcasecmp(sc->attrs[j].name, bare_ok[i].attr) && sc->attrs[j].multi)
				sc->attrs[j].bare_ok = 1;
	}
}

int scim_schemas_load(const char *meta_json, struct scim_schemas **out, char *err, size_t errcap)
{
	struct scim_schemas *s = NULL;
	json_t *meta, *defs, *d;
	json_error_t je;
	size_t i;
	int rc = -1;

	*out = NULL;
	meta = json_loads(meta_json, 0, &je);
	if (!meta) {
		load_fail(err, errcap, "not JSON: %s", je.text);
		goto out;
	}
	defs = json_object_get(meta, "schemas");
	s = calloc(1, sizeof *s);
	if (!s) {
		load_fail(err, errcap, "out of memory");
		goto out;
	}
	if (!json_is_array(defs)) {
		load_fail(err, errcap, "schemas must be an array");
		goto out;
	}
	s->schemas = calloc(json_array_size(defs) ? json_array_size(defs) : 1, sizeof *s->schemas);
	if (!s->schemas) {
		load_fail(err, errcap, "out of memory");
		goto out;
	}
	json_array_foreach(defs, i, d) {
		if (!json_is_string(json_object_get(d, "id"))) {
			load_fail(err, errcap, "a schema has no id");
			goto out;
		}
		s->schemas[i].urn = strdup(json_string_value(json_object_get(d, "id")));
		s->nschemas++;
		if (!s->schemas[i].urn) {
			load_fail(err, errcap, "out of memory");
			goto out;
		}
		if (load_attrs(json_object_get(d, "attributes"), 0, &s->schemas[i].attrs,
			       &s->schemas[i].nattrs, err, errcap) < 0)
			goto out;
	}
	if (load_types(s, json_object_get(meta, "resource_types"), err, errcap) < 0)
		goto out;
	mark_bare_ok(s);
	*out = s;
	s = NULL;
	rc = 0;
out:
	scim_schemas_free(s);
	json_decref(meta);
	return rc;
}

static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;
static struct scim_schemas *builtin;

static void builtin_load(void)
{
	char err[128];

	if (scim_schemas_load(embedded_scim_meta, &builtin, err, sizeof err) < 0)
		builtin = NULL;
}

const struct scim_schemas *scim_schemas_builtin(void)
{
	pthread_once(&builtin_once, builtin_load);
	return builtin;
}

/* -------------------------------------------------------------- checking */

struct check {
	char *err;
	size_t errcap;
	char path[320]; /* the attribute being checked, as a message names it */
	size_t len;
};

/* Appends to the path: fmt as printf. Returns the length to restore. */
static size_t path_push(struct check *ck, const char *fmt, ...) PRINTF(2, 3);

static size_t path_push(struct check *ck, const char *fmt, ...)
{
	size_t was = ck->len;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(ck->path + ck->len, sizeof ck->path - ck->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		ck->len += (size_t)n < sizeof ck->path - ck->len ? (size_t)n
								 : sizeof ck->path - ck->len - 1;
	return was;
}

static void path_pop(struct check *ck, size_t was)
{
	ck->len = was;
	ck->path[was] = '\0';
}

static const char *type_says(enum attr_type t, int many)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(types); i++)
		if (types[i].type == t)
			return many ? types[i].many : types[i].one;
	return "?";
}

/* 1 if s is base64 with padding (RFC 7643 §2.3.6, RFC 4648 §4). */
static int is_base64(const char *s, size_t n)
{
	size_t i, pad = 0;

	if (n % 4)
		return 0;
	for (i = 0; i < n; i++) {
		if (s[i] == '=') {
			if (i < n - 2)
				return 0;
			pad++;
		} else if (pad || !((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
				    (s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '/')) {
			return 0;
		}
	}
	return 1;
}

static int bad(struct check *ck, const char *what, const json_t *got)
{
	snprintf(ck->err, ck->errcap, "%s must be %s (got %s)", ck->path, what, scim_json_kind(got));
	return -1;
}

static const struct attr *find_attr(const struct attr *a, size_t n, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strlen(a[i].name) == len && !strncasecmp(a[i].name, name, len))
			return &a[i];
	return NULL;
}

/* before's member named key: the same spelling first, then any case. */
static const json_t *before_of(const json_t *before, const char *key)
{
	return before ? scim_object_get(before, key, NULL) : NULL;
}

static int check_value(struct check *ck, const struct attr *a, const json_t *v, const json_t *before);

/* Two keys of one object, k1 and k2, name the same attribute (names are
 * case-insensitive, RFC 7643 §2.1): which one counts is ambiguous, as with
 * a repeated JSON key, so the body is malformed (invalidSyntax) unless
 * before already held both (a row stored before this check). */
static int duplicate(struct check *ck, const char *sep, const char *name, const char *k1,
		     const char *k2, const json_t *before)
{
	if (before && json_object_get(before, k1) && json_object_get(before, k2))
		return 0;
	snprintf(ck->err, ck->errcap,
		 "%s%s%s is given twice, as \"%s\" and \"%s\" (attribute names are case-insensitive)",
		 ck->path, sep, name, k1, k2);
	return SCIM_SCHEMA_INVALID_SYNTAX;
}

/* The members of obj checked against the attributes a[0..n): a complex
 * value's sub-attributes (sep "."), or a schema's attributes, at the top
 * level (sep "") or nested under the schema's URN (sep ":"). Known names
 * are typed, unknown ones kept, nulls are unassigned; with required, the
 * required attributes must be there. */
static int check_members(struct check *ck, const struct attr *a, size_t n, const json_t *obj,
			 const json_t *before, const char *sep, int required)
{
	const char *small[32], **seen = small, *k;
	const struct attr *sa;
	json_t *m;
	size_t i, was;
	int rc = SCIM_SCHEMA_OK;

	if (n > ARRAY_LEN(small) && !(seen = calloc(n, sizeof *seen))) {
		snprintf(ck->err, ck->errcap, "out of memory");
		return SCIM_SCHEMA_INVALID_VALUE;
	}
	if (seen == small)
		memset(small, 0, sizeof small);
	json_object_foreach((json_t *)obj, k, m) {
		sa = find_attr(a, n, k, strlen(k));
		if (!sa)
			continue;
		if (seen[sa - a] && (rc = duplicate(ck, sep, sa->name, seen[sa - a], k, before)) < 0)
			goto out;
		seen[sa - a] = k;
		if (json_is_null(m))
			continue;
		was = path_push(ck, "%s%s", sep, sa->name);
		if ((rc = check_value(ck, sa, m, before_of(before, k))) < 0)
			goto out;
		path_pop(ck, was);
	}
	for (i = 0; required && i < n; i++) {
		if (!a[i].required)
			continue;
		m = scim_object_get(obj, a[i].name, NULL);
		if (!m || json_is_null(m)) {
			snprintf(ck->err, ck->errcap, "%s%s%s is required", ck->path, sep, a[i].name);
			rc = SCIM_SCHEMA_INVALID_VALUE;
			goto out;
		}
	}
out:
	if (seen != small)
		free(seen);
	return rc;
}

/* One (single) value v of attribute a. */
static int check_single(struct check *ck, const struct attr *a, const json_t *v, const json_t *before)
{
	int ok;

	switch (a->type) {
	case T_STRING:
	case T_REFERENCE:
		ok = json_is_string(v);
		break;
	case T_BINARY:
		ok = json_is_string(v) && is_base64(json_string_value(v), json_string_length(v));
		break;
	case T_BOOLEAN:
		ok = json_is_boolean(v);
		break;
	case T_DECIMAL:
		ok = json_is_number(v);
		break;
	case T_INTEGER:
		ok = json_is_integer(v);
		break;
	case T_DATETIME:
		ok = json_is_string(v) && scim_datetime_valid(json_string_value(v));
		break;
	case T_COMPLEX:
		if (!json_is_object(v))
			return bad(ck, type_says(a->type, 0), v);
		return check_members(ck, a->sub, a->nsub, v, json_is_object(before) ? before : NULL,
				     ".", 1);
	default:
		ok = 0;
	}
	return ok ? 0 : bad(ck, type_says(a->type, 0), v);
}

/* The value v of attribute a, multi-valued or not. Values equal to
 * before's at the same place pass as they are. */
static int check_value(struct check *ck, const struct attr *a, const json_t *v, const json_t *before)
{
	char what[96];
	const json_t *e, *be;
	size_t i, was;
	int rc;

	if (before && json_equal((json_t *)v, (json_t *)before))
		return 0;
	if (!a->multi)
		return check_single(ck, a, v, before);
	if (!json_is_array(v)) {
		snprintf(what, sizeof what, "an array of %s", type_says(a->type, 1));
		return bad(ck, what, v);
	}
	json_array_foreach(v, i, e) {
		be = json_is_array(before) ? json_array_get(before, i) : NULL;
		if (be && json_equal((json_t *)e, (json_t *)be))
			continue;
		if (a->bare_ok && json_is_string(e))
			continue;
		was = path_push(ck, "[%zu]", i);
		if (json_is_null(e)) {
			snprintf(what, sizeof what, "%s%s", type_says(a->type, 0),
				 a->bare_ok ? " or a string" : "");
			return bad(ck, what, e);
		}
		if (a->bare_ok && !json_is_object(e))
			return bad(ck, "a complex value (a JSON object) or a string", e);
		if ((rc = check_single(ck, a, e, be)) < 0)
			return rc;
		path_pop(ck, was);
	}
	return 0;
}

/* The common attribute "schemas" (RFC 7643 §3): an array of URI strings. */
static int check_schemas(struct check *ck, const json_t *v)
{
	const json_t *e;
	size_t i;

	path_push(ck, "schemas");
	if (!json_is_array(v))
		return bad(ck, "an array of schema URIs (strings)", v);
	json_array_foreach(v, i, e) {
		if (!json_is_string(e) || !json_string_length(e)) {
			path_push(ck, "[%zu]", i);
			return bad(ck, "a schema URI (a non-empty string)", e);
		}
	}
	return 0;
}

/* A top-level key that names an attribute by its fully qualified URN
 * (RFC 7644 §3.10), "URN:attr" or "URN:attr.sub", of the core schema or
 * an extension of t: checks v against that attribute. Returns 0 also when
 * the key is no such name. */
static int check_qualified(struct check *ck, const struct restype *t, const char *key,
			   const json_t *v, const json_t *before)
{
	const struct schema *sc;
	const struct attr *a;
	const char *rest, *dot;
	size_t i, ulen;

	for (i = 0; i <= t->next; i++) {
		sc = i == 0 ? t->core : t->ext[i - 1];
		ulen = strlen(sc->urn);
		if (strncasecmp(key, sc->urn, ulen) || key[ulen] != ':')
			continue;
		rest = key + ulen + 1;
		dot = strchr(rest, '.');
		a = find_attr(sc->attrs, sc->nattrs, rest, dot ? (size_t)(dot - rest) : strlen(rest));
		if (a && dot) {
			if (a->type != T_COMPLEX || a->multi)
				return 0;
			a = find_attr(a->sub, a->nsub, dot + 1, strlen(dot + 1));
		}
		if (!a)
			return 0;
		path_push(ck, "%s", key);
		return check_value(ck, a, v, before);
	}
	return 0;
}

/* The value v of the top-level key k that is not a core attribute: the
 * common attributes, a schema's attributes nested under its URN, or an
 * attribute named by its qualified URN; anything else is kept as it is. */
static int check_other(struct check *ck, const struct restype *t, const char *k, const json_t *v,
		       const json_t *before)
{
	const struct schema *sc = NULL;
	size_t i;

	if (!strcasecmp(k, "schemas"))
		return check_schemas(ck, v);
	if (!strcasecmp(k, "externalId")) {
		path_push(ck, "externalId");
		return json_is_string(v) ? 0 : bad(ck, "a string", v);
	}
	for (i = 0; i <= t->next && !sc; i++)
		if (!strcasecmp(k, i ? t->ext[i - 1]->urn : t->core->urn))
			sc = i ? t->ext[i - 1] : t->core;
	if (!sc)
		return check_qualified(ck, t, k, v, before);
	/* an extension's attributes under its URN (RFC 7643 §3.3); the core
	 * attributes may come so too, and then are not required there */
	path_push(ck, "%s", sc->urn);
	if (!json_is_object(v))
		return bad(ck,
			   sc == t->core ? "a JSON object of attributes"
					 : "a JSON object of the extension's attributes",
			   v);
	return check_members(ck, sc->attrs, sc->nattrs, v, json_is_object(before) ? before : NULL,
			     ":", sc != t->core);
}

/* The slot of a top-level key that check_other() knows by name (schemas,
 * externalId, a schema URN), to find two spellings of one; -1 for others. */
static int other_slot(const struct restype *t, const char *k)
{
	size_t i;

	if (!strcasecmp(k, "schemas"))
		return 0;
	if (!strcasecmp(k, "externalId"))
		return 1;
	for (i = 0; i <= t->next; i++)
		if (!strcasecmp(k, i ? t->ext[i - 1]->urn : t->core->urn))
			return (int)i + 2;
	return -1;
}

int scim_schema_check(const struct scim_schemas *s, const char *type, const json_t *doc,
		      const json_t *before, char *err, size_t errcap)
{
	struct check ck = {.err = err, .errcap = errcap};
	const struct restype *t = NULL;
	const char **seen = NULL, *k;
	const json_t *bv;
	json_t *v;
	size_t i;
	int rc = SCIM_SCHEMA_INVALID_VALUE, slot;

	if (errcap)
		err[0] = '\0';
	for (i = 0; s && type && i < s->ntypes; i++)
		if (!strcmp(s->types[i].name, type))
			t = &s->types[i];
	if (!t) {
		snprintf(err, errcap, "no schema for resource type %s", type ? type : "(none)");
		goto out;
	}
	if (!json_is_object(doc)) {
		snprintf(err, errcap, "a %s must be a JSON object", t->name);
		goto out;
	}
	if (!(seen = calloc(t->next + 3, sizeof *seen))) {
		snprintf(err, errcap, "out of memory");
		goto out;
	}
	if (!json_is_object(before))
		before = NULL;
	if ((rc = check_members(&ck, t->core->attrs, t->core->nattrs, doc, before, "", 1)) < 0)
		goto out;
	json_object_foreach((json_t *)doc, k, v) {
		if (find_attr(t->core->attrs, t->core->nattrs, k, strlen(k)))
			continue;
		path_pop(&ck, 0);
		slot = other_slot(t, k);
		if (slot >= 0 && seen[slot] &&
		    (rc = duplicate(&ck, "",
				    slot == 0   ? "schemas"
				    : slot == 1 ? "externalId"
				    : slot == 2 ? t->core->urn
						: t->ext[slot - 3]->urn,
				    seen[slot], k, before)) < 0)
			goto out;
		if (slot >= 0)
			seen[slot] = k;
		bv = before_of(before, k);
		if (json_is_null(v) || (bv && json_equal(v, (json_t *)bv)))
			continue;
		if ((rc = check_other(&ck, t, k, v, bv)) < 0)
			goto out;
	}
	rc = SCIM_SCHEMA_OK;
out:
	free(seen);
	return rc;
}
