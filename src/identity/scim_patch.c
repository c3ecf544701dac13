#include "identity/scim_patch.h"

#include <search.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "identity/scim_filter.h"

/* Deepest nesting of objects merged from a value; deeper is INVALID_VALUE. */
#define MERGE_MAX_DEPTH 32

enum patch_op { P_ADD = 1, P_REPLACE, P_REMOVE };

/* Well-known attribute names and schema URNs: a new key equal to one of
 * these ignoring case takes this spelling. */
static const char *const canonical_names[] = {
	"schemas",
	"id",
	"externalId",
	"meta",
	"userName",
	"name",
	"formatted",
	"familyName",
	"givenName",
	"middleName",
	"honorificPrefix",
	"honorificSuffix",
	"displayName",
	"nickName",
	"profileUrl",
	"title",
	"userType",
	"preferredLanguage",
	"locale",
	"timezone",
	"active",
	"password",
	"emails",
	"phoneNumbers",
	"ims",
	"photos",
	"addresses",
	"streetAddress",
	"locality",
	"region",
	"postalCode",
	"country",
	"groups",
	"entitlements",
	"roles",
	"x509Certificates",
	"members",
	"value",
	"display",
	"type",
	"primary",
	"$ref",
	"employeeNumber",
	"costCenter",
	"organization",
	"division",
	"department",
	"manager",
	"created",
	"lastModified",
	"resourceType",
	"location",
	"version",
	SCIM_URN_USER,
	SCIM_URN_GROUP,
	SCIM_URN_ENTERPRISE,
};

/* Multi-valued attributes of the core User and Group schemas. */
static const char *const multi_valued[] = {
	"emails", "phoneNumbers", "ims",   "photos",           "addresses",
	"groups", "entitlements", "roles", "x509Certificates", "members",
};

struct patch {
	json_t *res; /* the working copy */
	enum patch_op op;
	size_t idx; /* index of the operation, for messages */
	int depth;  /* merge nesting */
	char *err;
	size_t errcap;
};

static int lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

static int ci_eq(const char *a, const char *b)
{
	while (*a && lower((unsigned char)*a) == lower((unsigned char)*b)) {
		a++;
		b++;
	}
	return lower((unsigned char)*a) == lower((unsigned char)*b);
}

static const char *canonical(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(canonical_names); i++)
		if (ci_eq(name, canonical_names[i]))
			return canonical_names[i];
	return name;
}

static int is_multi(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(multi_valued); i++)
		if (ci_eq(name, multi_valued[i]))
			return 1;
	return 0;
}

/* Copies at most 40 bytes of s into out (cap > 40) without splitting a
 * UTF-8 sequence, for quoting client text in messages. */
static void quote(const char *s, char *out, size_t cap)
{
	size_t n = strlen(s);

	if (n > 40) {
		n = 40;
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
	}
	if (n >= cap)
		n = cap - 1;
	memcpy(out, s, n);
	out[n] = '\0';
}

/* Formats "Operations[i]: ..." into err and returns code. */
PRINTF(3, 4) static int fail(struct patch *pt, int code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (pt->errcap)
		snprintf(pt->err, pt->errcap, "Operations[%zu]: %s", pt->idx, msg);
	return code;
}

static int oom(struct patch *pt)
{
	return fail(pt, SCIM_PATCH_INVALID_VALUE, "out of memory");
}

/* Sets obj[name] = v (a new reference, consumed even on failure), keeping
 * the spelling of an existing key that equals name ignoring case, or else
 * using the canonical spelling of a well-known name. */
static int set_attr(json_t *obj, const char *name, json_t *v)
{
	const char *key;
	char *k;
	int rc;

	if (!v)
		return -1;
	if (!scim_object_get(obj, name, &key))
		return json_object_set_new(obj, canonical(name), v);
	k = strdup(key);
	if (!k) {
		json_decref(v);
		return -1;
	}
	rc = json_object_set_new(obj, k, v);
	free(k);
	return rc;
}

/* Removes obj's member named name ignoring case, if any. */
static void del_attr(json_t *obj, const char *name)
{
	const char *key;
	char *k;

	if (!scim_object_get(obj, name, &key))
		return;
	k = strdup(key);
	if (k)
		json_object_del(obj, k);
	free(k);
}

static int apply_attr(struct patch *pt, json_t *obj, const char *name, const json_t *value,
		      enum patch_op op);

/* Merges the members of src into the object dst with op's rules (see
 * apply_attr), keeping members of dst that src does not name. */
static int merge(struct patch *pt, json_t *dst, const json_t *src, enum patch_op op)
{
	const char *k;
	json_t *v;
	int rc = SCIM_PATCH_OK;

	if (++pt->depth > MERGE_MAX_DEPTH) {
		rc = fail(pt, SCIM_PATCH_INVALID_VALUE, "value nested deeper than %d levels",
			  MERGE_MAX_DEPTH);
		goto out;
	}
	json_object_foreach((json_t *)src, k, v) {
		rc = apply_attr(pt, dst, k, v, op);
		if (rc)
			goto out;
	}
out:
	pt->depth--;
	return rc;
}

/* ---- finding elements of a multi-valued attribute ----
 *
 * add and remove on a multi-valued attribute look elements up by two
 * relations: equality (json_equal), and "same value": two objects with
 * equal non-null "value" members and equal "type" members (strings
 * compared ignoring ASCII case, or both absent; names found as
 * scim_object_get finds them). Each relation is turned into a canonical
 * byte string, a key, such that two elements are related exactly when
 * their keys are equal, and the keys go into a balanced tree (tsearch): a
 * lookup costs O(log n) instead of a scan of the array, so adding or
 * removing n members of an m-member group is O((n + m) log(n + m)), not
 * O(n * m). */

/* Deepest nesting a key describes. Requests are parsed with a limit of 32
 * levels, so only a resource built otherwise can hold a deeper element; it
 * is refused (INVALID_VALUE) rather than compared. */
#define KEY_MAX_DEPTH 64

enum key_state { KEY_OK = 0, KEY_OOM, KEY_DEEP };

struct key {
	char *p;
	size_t len, cap;
	enum key_state bad; /* not KEY_OK: the key is unusable */
};

/* The error for an unusable key. */
static int key_error(struct patch *pt, const struct key *k)
{
	if (k->bad == KEY_DEEP)
		return fail(pt, SCIM_PATCH_INVALID_VALUE,
			    "an element of a multi-valued attribute is nested deeper than %d levels",
			    KEY_MAX_DEPTH);
	return oom(pt);
}

static void key_put(struct key *k, const void *s, size_t n)
{
	char *np;
	size_t cap;

	if (k->bad)
		return;
	if (k->len + n + 1 > k->cap) {
		cap = k->cap ? k->cap : 64;
		while (cap < k->len + n + 1)
			cap *= 2;
		np = realloc(k->p, cap);
		if (!np) {
			k->bad = KEY_OOM;
			return;
		}
		k->p = np;
		k->cap = cap;
	}
	memcpy(k->p + k->len, s, n);
	k->len += n;
}

/* A one-letter tag and a length (or a number) in decimal, then ':'. */
static void key_head(struct key *k, char tag, unsigned long long n)
{
	char b[32];
	int len = snprintf(b, sizeof b, "%c%llu:", tag, n);

	key_put(k, b, (size_t)len);
}

static int cmp_cstr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void key_json(struct key *k, const json_t *v, int depth);

/* Appends the canonical form of the object v at nesting depth (see
 * key_json): its member count, then each member's name and value, sorted
 * by name so that member order does not count. Out of memory marks k
 * bad. */
static void key_object(struct key *k, const json_t *v, int depth)
{
	const char **keys, *name;
	json_t *m;
	size_t i = 0, n = json_object_size(v);

	key_head(k, 'o', n);
	if (!n)
		return;
	keys = malloc(n * sizeof *keys);
	if (!keys) {
		k->bad = KEY_OOM;
		return;
	}
	json_object_foreach((json_t *)v, name, m)
		keys[i++] = name;
	qsort(keys, n, sizeof *keys, cmp_cstr);
	for (i = 0; i < n; i++) {
		key_head(k, 'k', strlen(keys[i]));
		key_put(k, keys[i], strlen(keys[i]));
		key_json(k, json_object_get(v, keys[i]), depth + 1);
	}
	free(keys);
}

/* Appends the canonical form of v: equal for two values exactly when
 * json_equal() holds. Every value is tagged with its type (an integer 1 and
 * a real 1.0 differ, as for json_equal), strings and keys carry their
 * length, object members come sorted by key, and the reals 0.0 and -0.0
 * (equal for json_equal) are written alike. */
static void key_json(struct key *k, const json_t *v, int depth)
{
	size_t i;
	char num[40];
	double d;

	if (depth > KEY_MAX_DEPTH) {
		k->bad = KEY_DEEP;
		return;
	}
	switch (json_typeof(v)) {
	case JSON_NULL:
		key_put(k, "n", 1);
		break;
	case JSON_TRUE:
		key_put(k, "t", 1);
		break;
	case JSON_FALSE:
		key_put(k, "f", 1);
		break;
	case JSON_INTEGER:
		key_put(k, num,
			(size_t)snprintf(num, sizeof num, "i%lld;", (long long)json_integer_value(v)));
		break;
	case JSON_REAL:
		d = json_real_value(v);
		key_put(k, num, (size_t)snprintf(num, sizeof num, "r%.17g;", d == 0 ? 0.0 : d));
		break;
	case JSON_STRING:
		key_head(k, 's', json_string_length(v));
		key_put(k, json_string_value(v), json_string_length(v));
		break;
	case JSON_ARRAY:
		key_head(k, 'a', json_array_size(v));
		for (i = 0; i < json_array_size(v); i++)
			key_json(k, json_array_get(v, i), depth + 1);
		break;
	case JSON_OBJECT:
		key_object(k, v, depth);
		break;
	}
}

/* The equality key of v into k (reset first). Returns 0, or -1 when the key
 * is unusable (k->bad says why). */
static int eq_key(struct key *k, const json_t *v)
{
	k->len = 0;
	k->bad = KEY_OK;
	key_json(k, v, 0);
	return k->bad ? -1 : 0;
}

/* The same-value key of v into k (reset first): its "value" and its
 * "type" (absent; a string, ASCII-lower-cased up to its first NUL as ci_eq
 * compares; or any other value as such). Returns 1 with the key, 0 when v
 * has none (not an object, or no "value", or a null one), -1 when the key
 * is unusable. */
static int sv_key(struct key *k, const json_t *v)
{
	const json_t *val = scim_object_get(v, "value", NULL), *type;
	const char *t;
	char c;
	size_t i, n;

	k->len = 0;
	k->bad = KEY_OK;
	if (!json_is_object(v) || !val || json_is_null(val))
		return 0;
	key_json(k, val, 0);
	type = scim_object_get(v, "type", NULL);
	if (!type) {
		key_put(k, "-", 1);
	} else if (json_is_string(type)) {
		t = json_string_value(type);
		n = strlen(t);
		key_head(k, 'S', n);
		for (i = 0; i < n; i++) {
			c = (char)lower((unsigned char)t[i]);
			key_put(k, &c, 1);
		}
	} else {
		key_put(k, "O", 1);
		key_json(k, type, 0);
	}
	return k->bad ? -1 : 1;
}

/* The elements of an array that share one key, by ascending index. */
struct kclass {
	char *key;
	size_t len;
	size_t *idx, n, cap;
};

struct kindex {
	void *root; /* tsearch tree of struct kclass * */
};

static int kclass_cmp(const void *a, const void *b)
{
	const struct kclass *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int r = memcmp(x->key, y->key, n);

	return r ? r : (x->len > y->len) - (x->len < y->len);
}

static void kclass_free(void *p)
{
	struct kclass *c = p;

	free(c->key);
	free(c->idx);
	free(c);
}

static void kindex_free(struct kindex *ix)
{
	tdestroy(ix->root, kclass_free);
	ix->root = NULL;
}

static struct kclass *kindex_find(const struct kindex *ix, const struct key *k)
{
	struct kclass probe = {.key = k->p, .len = k->len};
	void *node = tfind(&probe, &ix->root, kclass_cmp);

	return node ? *(struct kclass **)node : NULL;
}

/* The smallest index filed under k, or SIZE_MAX. */
static size_t kindex_first(const struct kindex *ix, const struct key *k)
{
	const struct kclass *c = kindex_find(ix, k);

	return c && c->n ? c->idx[0] : SIZE_MAX;
}

/* Files index i under key k (kept in ascending order). Returns 0 or -1 (out
 * of memory). */
static int kindex_add(struct kindex *ix, const struct key *k, size_t i)
{
	struct kclass *c = kindex_find(ix, k), **node;
	size_t *np, at;

	if (!c) {
		c = calloc(1, sizeof *c);
		if (!c || !(c->key = malloc(k->len ? k->len : 1))) {
			free(c);
			return -1;
		}
		memcpy(c->key, k->p, k->len);
		c->len = k->len;
		node = tsearch(c, &ix->root, kclass_cmp);
		if (!node) {
			kclass_free(c);
			return -1;
		}
	}
	if (c->n == c->cap) {
		np = realloc(c->idx, (c->cap ? c->cap * 2 : 1) * sizeof *np);
		if (!np)
			return -1;
		c->idx = np;
		c->cap = c->cap ? c->cap * 2 : 1;
	}
	for (at = c->n; at > 0 && c->idx[at - 1] > i; at--)
		;
	memmove(c->idx + at + 1, c->idx + at, (c->n - at) * sizeof *c->idx);
	c->idx[at] = i;
	c->n++;
	return 0;
}

/* Removes index i from key k's class, if it is there. */
static void kindex_del(struct kindex *ix, const struct key *k, size_t i)
{
	struct kclass *c = kindex_find(ix, k);
	size_t at;

	if (!c)
		return;
	for (at = 0; at < c->n && c->idx[at] != i; at++)
		;
	if (at == c->n)
		return;
	memmove(c->idx + at, c->idx + at + 1, (c->n - at - 1) * sizeof *c->idx);
	c->n--;
}

/* The equality and same-value indexes of one array. */
struct elements {
	struct kindex eq, sv;
	struct key k;
};

static void elements_free(struct elements *el)
{
	kindex_free(&el->eq);
	kindex_free(&el->sv);
	free(el->k.p);
}

/* Files (add) or unfiles (!add) element e, at index i, under its keys.
 * Returns 0, or -1 when a key cannot be made or filed (el->k.bad says
 * why). */
static int elements_file(struct elements *el, const json_t *e, size_t i, int add)
{
	int rc;

	if (eq_key(&el->k, e) < 0)
		return -1;
	if (!add)
		kindex_del(&el->eq, &el->k, i);
	else if (kindex_add(&el->eq, &el->k, i) < 0)
		goto oom;
	rc = sv_key(&el->k, e);
	if (rc <= 0)
		return rc;
	if (!add)
		kindex_del(&el->sv, &el->k, i);
	else if (kindex_add(&el->sv, &el->k, i) < 0)
		goto oom;
	return 0;
oom:
	el->k.bad = KEY_OOM;
	return -1;
}

/* Sets *at to the index of the first element equal to item or, when item is
 * an object, with the same value (and type), or to SIZE_MAX.
 * Returns 0, or -1 when a key cannot be made (el->k.bad says why). */
static int elements_match(struct elements *el, const json_t *item, size_t *at)
{
	size_t sv = SIZE_MAX;
	int rc;

	*at = SIZE_MAX;
	if (eq_key(&el->k, item) < 0)
		return -1;
	*at = kindex_first(&el->eq, &el->k);
	rc = sv_key(&el->k, item);
	if (rc < 0)
		return -1;
	if (rc == 1)
		sv = kindex_first(&el->sv, &el->k);
	if (sv < *at)
		*at = sv;
	return 0;
}

/* Appends value (an array's elements, or one value) to arr. An element
 * equal to one already there is skipped; one with the same "value" and
 * "type" as an existing object is merged into it. "Already there" includes
 * elements appended earlier in the same call, and the first such element
 * by position is the one that takes the merge: the result is that of
 * scanning arr for each item in turn, found in O((n + m) log(n + m)). */
static int append_values(struct patch *pt, json_t *arr, const json_t *value)
{
	struct elements el = {0};
	const json_t *item;
	json_t *e;
	size_t i, j, n = json_is_array(value) ? json_array_size(value) : 1;
	int rc = SCIM_PATCH_OK;

	for (j = 0; j < json_array_size(arr); j++)
		if (elements_file(&el, json_array_get(arr, j), j, 1) < 0)
			goto bad_key;
	for (i = 0; i < n; i++) {
		item = json_is_array(value) ? json_array_get(value, i) : value;
		if (json_is_null(item))
			continue;
		if (elements_match(&el, item, &j) < 0)
			goto bad_key;
		if (j == SIZE_MAX) {
			j = json_array_size(arr);
			if (json_array_append_new(arr, json_deep_copy(item))) {
				rc = oom(pt);
				goto out;
			}
			if (elements_file(&el, json_array_get(arr, j), j, 1) < 0)
				goto bad_key;
			continue;
		}
		e = json_array_get(arr, j);
		if (json_equal(e, item))
			continue;
		/* The merge changes the element: file it anew. */
		if (elements_file(&el, e, j, 0) < 0)
			goto bad_key;
		rc = merge(pt, e, item, P_REPLACE);
		if (rc)
			goto out;
		if (elements_file(&el, e, j, 1) < 0)
			goto bad_key;
	}
	goto out;
bad_key:
	rc = key_error(pt, &el.k);
out:
	elements_free(&el);
	return rc;
}

/* Removes the elements of arr that value (an array of items, or one item)
 * names (Entra's {"op":"Remove","path":"members","value":[{"value":id}]}):
 * an element equal to an item, or whose "value" equals an item's non-null
 * "value" (an item that is not an object is its own value). The items are
 * indexed and arr filtered in one pass, keeping the order of what stays.
 * Returns SCIM_PATCH_OK or an error code. */
static int remove_values(struct patch *pt, json_t *arr, const json_t *value)
{
	struct kindex whole = {0}, values = {0};
	struct key k = {0};
	const json_t *item, *iv, *ev;
	json_t *keep = NULL, *e;
	size_t i, n = json_is_array(value) ? json_array_size(value) : 1;
	int rc = SCIM_PATCH_OK, named;

	for (i = 0; i < n; i++) {
		item = json_is_array(value) ? json_array_get(value, i) : value;
		iv = json_is_object(item) ? scim_object_get(item, "value", NULL) : item;
		if (eq_key(&k, item) < 0)
			goto bad_key;
		if (kindex_add(&whole, &k, i) < 0)
			goto oom;
		if (!iv || json_is_null(iv))
			continue;
		if (eq_key(&k, iv) < 0)
			goto bad_key;
		if (kindex_add(&values, &k, i) < 0)
			goto oom;
	}
	keep = json_array();
	if (!keep)
		goto oom;
	for (i = 0; i < json_array_size(arr); i++) {
		e = json_array_get(arr, i);
		if (eq_key(&k, e) < 0)
			goto bad_key;
		named = kindex_find(&whole, &k) != NULL;
		ev = scim_object_get(e, "value", NULL);
		if (!named && ev) {
			if (eq_key(&k, ev) < 0)
				goto bad_key;
			named = kindex_find(&values, &k) != NULL;
		}
		if (!named && json_array_append(keep, e))
			goto oom;
	}
	if (json_array_size(keep) != json_array_size(arr) &&
	    (json_array_clear(arr) || json_array_extend(arr, keep)))
		goto oom;
	goto out;
oom:
	rc = oom(pt);
	goto out;
bad_key:
	rc = key_error(pt, &k);
out:
	json_decref(keep);
	kindex_free(&whole);
	kindex_free(&values);
	free(k.p);
	return rc;
}

/* add / replace / remove of obj[name] (no filter, no sub-attribute):
 * - remove: drops the member, or with a value and an array member, only
 *   the elements the value names (an emptied array is dropped too);
 * - a null value drops the member;
 * - an array member: add appends (append_values), replace sets the whole
 *   array (a single value becomes a one-element array);
 * - an object member and an object value merge;
 * - otherwise the value is set (wrapped in an array for a well-known
 *   multi-valued attribute, duplicates dropped). */
static int apply_attr(struct patch *pt, json_t *obj, const char *name, const json_t *value,
		      enum patch_op op)
{
	json_t *cur = scim_object_get(obj, name, NULL), *arr;
	int rc;

	if (op == P_REMOVE) {
		if (!cur)
			return SCIM_PATCH_OK;
		if (value && !json_is_null(value) && json_is_array(cur)) {
			rc = remove_values(pt, cur, value);
			if (rc || json_array_size(cur))
				return rc;
		}
		del_attr(obj, name);
		return SCIM_PATCH_OK;
	}
	if (json_is_null(value)) {
		del_attr(obj, name);
		return SCIM_PATCH_OK;
	}
	if (json_is_array(cur) && op == P_ADD)
		return append_values(pt, cur, value);
	if (json_is_object(cur) && json_is_object(value))
		return merge(pt, cur, value, op);
	if (!json_is_array(value) && !json_is_array(cur) && !is_multi(name))
		return set_attr(obj, name, json_deep_copy(value)) ? oom(pt) : SCIM_PATCH_OK;
	arr = json_array();
	if (!arr)
		return oom(pt);
	rc = append_values(pt, arr, value);
	if (rc) {
		json_decref(arr);
		return rc;
	}
	return set_attr(obj, name, arr) ? oom(pt) : SCIM_PATCH_OK;
}

/* attr.sub: on each element of a multi-valued attr (creating one when the
 * array is empty), on a complex attr, or creating attr. */
static int apply_sub(struct patch *pt, json_t *base, const char *attr, const char *sub,
		     const json_t *value)
{
	json_t *cur = scim_object_get(base, attr, NULL), *e;
	size_t i;
	int rc;

	if (!cur || json_is_null(cur)) {
		if (pt->op == P_REMOVE || json_is_null(value))
			return SCIM_PATCH_OK;
		e = json_object();
		if (!e)
			return oom(pt);
		rc = apply_attr(pt, e, sub, value, pt->op);
		if (!rc && is_multi(attr))
			e = json_pack("[o]", e);
		if (!rc && set_attr(base, attr, e))
			return oom(pt);
		if (rc)
			json_decref(e);
		return rc;
	}
	if (json_is_object(cur))
		return apply_attr(pt, cur, sub, value, pt->op);
	if (!json_is_array(cur))
		return fail(pt, SCIM_PATCH_INVALID_PATH, "\"%s\" is not a complex attribute", attr);
	if (!json_array_size(cur) && pt->op != P_REMOVE && !json_is_null(value)) {
		e = json_object();
		if (!e || json_array_append_new(cur, e))
			return oom(pt);
	}
	for (i = 0; i < json_array_size(cur); i++) {
		e = json_array_get(cur, i);
		if (!json_is_object(e))
			continue;
		rc = apply_attr(pt, e, sub, value, pt->op);
		if (rc)
			return rc;
	}
	return SCIM_PATCH_OK;
}

/* The element a value filter describes (its and-ed eq comparisons) with
 * well-known names in canonical case; NULL when the filter has another
 * shape or memory runs out. */
static json_t *template_of(const struct scim_filter *f)
{
	json_t *t = json_object(), *out = json_object(), *v;
	const char *k;

	if (!t || !out || scim_filter_template(f, t) < 0)
		goto bad;
	json_object_foreach(t, k, v)
		if (json_object_set(out, canonical(k), v))
			goto bad;
	json_decref(t);
	return out;
bad:
	json_decref(t);
	json_decref(out);
	return NULL;
}

/* remove on attr[filter] and attr[filter].sub: drops each element of cur
 * (the attribute's array, or NULL) that matches the filter, or only its
 * sub-attribute, and then drops the attribute from base if it is left an
 * empty array. */
static void remove_filtered(json_t *base, const struct scim_path *sp, json_t *cur)
{
	json_t *e;
	size_t i;

	for (i = json_array_size(cur); i-- > 0;) {
		e = json_array_get(cur, i);
		if (!json_is_object(e) || !scim_filter_match(sp->filter, e))
			continue;
		if (sp->sub[0])
			del_attr(e, sp->sub);
		else
			json_array_remove(cur, i);
	}
	if (cur && json_is_array(cur) && !json_array_size(cur))
		del_attr(base, sp->attr);
}

/* replace on attr[filter] for the matching element cur[i]: it becomes the
 * element the filter describes (template_of, or an empty object) with value
 * merged in. Returns SCIM_PATCH_OK or an error code, cur[i] unchanged. */
static int replace_element(struct patch *pt, json_t *cur, size_t i, const struct scim_filter *f,
			   const json_t *value)
{
	json_t *fresh = template_of(f);
	int rc;

	if (!fresh)
		fresh = json_object();
	if (!fresh)
		return oom(pt);
	rc = merge(pt, fresh, value, P_REPLACE);
	if (!rc && json_array_set_new(cur, i, fresh))
		return oom(pt);
	if (rc)
		json_decref(fresh);
	return rc;
}

/* add / replace on each element of cur (the attribute's array, or NULL)
 * that matches the filter: value goes to the element's sub-attribute
 * (attr[filter].sub), merges into it (add), or replaces it (replace).
 * Sets *matched to the number of matching elements. Returns SCIM_PATCH_OK
 * or the first error code, elements before it already changed. */
static int update_matches(struct patch *pt, json_t *cur, const struct scim_path *sp,
			  const json_t *value, size_t *matched)
{
	json_t *e;
	size_t i;
	int rc;

	*matched = 0;
	for (i = 0; i < json_array_size(cur); i++) {
		e = json_array_get(cur, i);
		if (!json_is_object(e) || !scim_filter_match(sp->filter, e))
			continue;
		(*matched)++;
		if (sp->sub[0])
			rc = apply_attr(pt, e, sp->sub, value, pt->op);
		else if (pt->op == P_ADD)
			rc = merge(pt, e, value, P_ADD);
		else
			rc = replace_element(pt, cur, i, sp->filter, value);
		if (rc)
			return rc;
	}
	return SCIM_PATCH_OK;
}

/* add / replace on attr[filter] when no element matches: appends the
 * element the filter describes (template_of) with value set at the
 * sub-attribute or merged in, creating the attribute's array in base when
 * cur is absent or null. Returns SCIM_PATCH_OK, NO_TARGET when the filter
 * describes no element, or another error code. */
static int create_filtered(struct patch *pt, json_t *base, const struct scim_path *sp, json_t *cur,
			   const json_t *value)
{
	json_t *fresh = template_of(sp->filter);
	int rc;

	if (!fresh)
		return fail(pt, SCIM_PATCH_NO_TARGET,
			    "no element of \"%s\" matches the filter, and the filter does not describe one to create",
			    sp->attr);
	rc = sp->sub[0] ? apply_attr(pt, fresh, sp->sub, value, P_REPLACE)
			: merge(pt, fresh, value, P_REPLACE);
	if (rc) {
		json_decref(fresh);
		return rc;
	}
	if (!cur || json_is_null(cur)) {
		cur = json_array();
		if (!cur || set_attr(base, sp->attr, cur)) {
			json_decref(fresh);
			return oom(pt);
		}
	}
	return json_array_append_new(cur, fresh) ? oom(pt) : SCIM_PATCH_OK;
}

/* attr[filter] and attr[filter].sub: the attribute must be absent, null or
 * an array. remove drops what matches (remove_filtered); add and replace
 * change the matching elements (update_matches) or, when none matches and
 * the value is not a null for a sub-attribute, create one
 * (create_filtered). Returns SCIM_PATCH_OK or an error code. */
static int apply_filtered(struct patch *pt, json_t *base, const struct scim_path *sp,
			  const json_t *value)
{
	json_t *cur = scim_object_get(base, sp->attr, NULL);
	size_t matched;
	int rc;

	if (cur && !json_is_null(cur) && !json_is_array(cur))
		return fail(pt, SCIM_PATCH_INVALID_PATH,
			    "a value filter needs a multi-valued attribute; \"%s\" is not one",
			    sp->attr);
	if (pt->op == P_REMOVE) {
		remove_filtered(base, sp, cur);
		return SCIM_PATCH_OK;
	}
	if (!sp->sub[0] && !json_is_object(value))
		return fail(pt, SCIM_PATCH_INVALID_VALUE,
			    "the value for \"%s[...]\" must be an object", sp->attr);
	rc = update_matches(pt, cur, sp, value, &matched);
	if (rc)
		return rc;
	if (matched || (sp->sub[0] && json_is_null(value)))
		return SCIM_PATCH_OK;
	return create_filtered(pt, base, sp, cur, value);
}

/* Adds urn to the resource's "schemas" array when that exists and lacks it. */
static int list_schema(struct patch *pt, const char *urn)
{
	json_t *schemas = scim_object_get(pt->res, "schemas", NULL);
	size_t i;

	if (!json_is_array(schemas))
		return SCIM_PATCH_OK;
	for (i = 0; i < json_array_size(schemas); i++)
		if (json_is_string(json_array_get(schemas, i)) &&
		    ci_eq(json_string_value(json_array_get(schemas, i)), urn))
			return SCIM_PATCH_OK;
	return json_array_append_new(schemas, json_string(urn)) ? oom(pt) : SCIM_PATCH_OK;
}

/* The object urn selects in the resource: the top level for the core
 * schemas, else the extension object, created (and listed in "schemas")
 * when create is set. Returns SCIM_PATCH_OK with *base (NULL when absent and
 * not created) or an error. */
static int base_for(struct patch *pt, const char *urn, int create, json_t **base)
{
	json_t *ext;

	*base = NULL;
	if (scim_urn_is_core(urn)) {
		*base = pt->res;
		return SCIM_PATCH_OK;
	}
	ext = scim_object_get(pt->res, urn, NULL);
	if (json_is_object(ext)) {
		*base = ext;
		return SCIM_PATCH_OK;
	}
	if (ext && !json_is_null(ext))
		return fail(pt, SCIM_PATCH_INVALID_PATH, "\"%s\" is not an extension object", urn);
	if (!create)
		return SCIM_PATCH_OK;
	ext = json_object();
	if (!ext || set_attr(pt->res, urn, ext))
		return oom(pt);
	*base = ext;
	return list_schema(pt, canonical(urn));
}

/* Core-level "id", "meta" and "schemas" are not changed by PATCH. */
static int read_only(const char *name)
{
	return ci_eq(name, "id") || ci_eq(name, "meta") || ci_eq(name, "schemas");
}

static int apply_nopath(struct patch *pt, const json_t *value);

/* One operation on a parsed path. in_value: the path is a key of a
 * path-less value, so read-only attributes are skipped silently instead of
 * being a mutability error. */
static int apply_path(struct patch *pt, const struct scim_path *sp, const json_t *value, int in_value)
{
	json_t *base;
	int rc;

	if (!sp->attr[0]) {
		if (scim_urn_is_core(sp->urn)) {
			if (pt->op == P_REMOVE)
				return fail(pt, SCIM_PATCH_MUTABILITY,
					    "the core schema cannot be removed");
			return apply_nopath(pt, value);
		}
		if (pt->op == P_REMOVE) {
			del_attr(pt->res, sp->urn);
			return SCIM_PATCH_OK;
		}
		if (!json_is_object(value))
			return fail(pt, SCIM_PATCH_INVALID_VALUE,
				    "the value for \"%s\" must be an object", sp->urn);
		rc = base_for(pt, sp->urn, 1, &base);
		return rc ? rc : merge(pt, base, value, pt->op);
	}
	if (scim_urn_is_core(sp->urn) && read_only(sp->attr)) {
		if (in_value || ci_eq(sp->attr, "schemas"))
			return SCIM_PATCH_OK;
		return fail(pt, SCIM_PATCH_MUTABILITY, "\"%s\" is read-only", sp->attr);
	}
	rc = base_for(pt, sp->urn, pt->op != P_REMOVE && !json_is_null(value), &base);
	if (rc || !base)
		return rc;
	if (sp->filter)
		return apply_filtered(pt, base, sp, value);
	if (sp->sub[0])
		return apply_sub(pt, base, sp->attr, sp->sub, value);
	return apply_attr(pt, base, sp->attr, value, pt->op);
}

/* 1 when key, a key of a path-less value holding an object, names a whole
 * schema: a known schema URN, an existing member of the resource, or a URN
 * that is not a known schema's URN plus an attribute and whose last segment
 * starts with an upper-case letter ("urn:acme:2.0:User"; attribute names
 * start lower-case). */
static int names_schema(struct patch *pt, const char *key)
{
	const char *last = strrchr(key, ':'), *u;
	size_t i;

	for (i = 0; i < ARRAY_LEN(canonical_names); i++) {
		u = canonical_names[i];
		if (!strchr(u, ':'))
			continue;
		if (ci_eq(key, u))
			return 1;
		if (last && (size_t)(last - key) == strlen(u) && !strncasecmp(key, u, strlen(u)))
			return 0;
	}
	if (!last || strchr(key, '['))
		return 0;
	return scim_object_get(pt->res, key, NULL) != NULL || (last[1] >= 'A' && last[1] <= 'Z');
}

/* add / replace without a path: value's keys are attribute names, dotted
 * or URN-prefixed paths, or schema URNs whose object merges into that
 * schema's attributes. */
static int apply_nopath(struct patch *pt, const json_t *value)
{
	struct scim_path sp = {0};
	char perr[160], q[48];
	const char *k;
	json_t *v;
	int rc = SCIM_PATCH_OK;

	if (!json_is_object(value))
		return fail(pt, SCIM_PATCH_INVALID_VALUE,
			    "without a path the value must be an object of attributes");
	if (++pt->depth > MERGE_MAX_DEPTH) {
		rc = fail(pt, SCIM_PATCH_INVALID_VALUE, "value nested deeper than %d levels",
			  MERGE_MAX_DEPTH);
		goto out;
	}
	json_object_foreach((json_t *)value, k, v) {
		if (read_only(k))
			continue;
		if (json_is_object(v) && names_schema(pt, k)) {
			memset(&sp, 0, sizeof sp);
			if (strlen(k) >= sizeof sp.urn) {
				rc = fail(pt, SCIM_PATCH_INVALID_PATH, "schema URN too long");
				goto out;
			}
			strcpy(sp.urn, k);
			rc = apply_path(pt, &sp, v, 1);
		} else {
			if (scim_path_parse(k, &sp, perr, sizeof perr) < 0) {
				quote(k, q, sizeof q);
				rc = fail(pt, SCIM_PATCH_INVALID_PATH,
					  "invalid attribute \"%s\": %s", q, perr);
				goto out;
			}
			rc = apply_path(pt, &sp, v, 1);
			scim_path_free(&sp);
		}
		if (rc)
			goto out;
	}
out:
	pt->depth--;
	return rc;
}

/* Decodes and runs Operations[pt->idx]. */
static int apply_one(struct patch *pt, const json_t *opj)
{
	const json_t *opv, *pathv, *value;
	struct scim_path sp = {0};
	char perr[160], q[48];
	const char *o, *path = NULL;
	int rc;

	if (!json_is_object(opj))
		return fail(pt, SCIM_PATCH_INVALID_SYNTAX, "an operation must be an object");
	opv = scim_object_get(opj, "op", NULL);
	pathv = scim_object_get(opj, "path", NULL);
	value = scim_object_get(opj, "value", NULL);
	if (!json_is_string(opv))
		return fail(pt, SCIM_PATCH_INVALID_SYNTAX, "\"op\" must be add, replace or remove");
	o = json_string_value(opv);
	if (ci_eq(o, "add")) {
		pt->op = P_ADD;
	} else if (ci_eq(o, "replace")) {
		pt->op = P_REPLACE;
	} else if (ci_eq(o, "remove")) {
		pt->op = P_REMOVE;
	} else {
		quote(o, q, sizeof q);
		return fail(pt, SCIM_PATCH_INVALID_SYNTAX,
			    "unknown op \"%s\" (expected add, replace or remove)", q);
	}
	if (pathv && !json_is_null(pathv)) {
		if (!json_is_string(pathv))
			return fail(pt, SCIM_PATCH_INVALID_PATH, "\"path\" must be a string");
		path = json_string_value(pathv);
		if (strspn(path, " \t\r\n") == strlen(path))
			path = NULL;
	}
	if (!path) {
		if (pt->op == P_REMOVE)
			return fail(pt, SCIM_PATCH_NO_TARGET, "remove requires a path");
		if (!value)
			return fail(pt, SCIM_PATCH_INVALID_VALUE, "%s requires a value", o);
		return apply_nopath(pt, value);
	}
	if (pt->op != P_REMOVE && !value)
		return fail(pt, SCIM_PATCH_INVALID_VALUE, "%s requires a value", o);
	if (scim_path_parse(path, &sp, perr, sizeof perr) < 0)
		return fail(pt, SCIM_PATCH_INVALID_PATH, "invalid path: %s", perr);
	rc = apply_path(pt, &sp, value, 0);
	scim_path_free(&sp);
	return rc;
}

/* Checks the PatchOp message around the operations: "schemas", when
 * present, must list the PatchOp URN, and "Operations" must be an array of
 * one to SCIM_PATCH_MAX_OPS operations, which *ops is set to. Returns
 * SCIM_PATCH_OK, or with err set INVALID_SYNTAX, or INVALID_VALUE for too
 * many operations. */
static int check_message(const json_t *body, const json_t **ops, char *err, size_t errcap)
{
	const json_t *schemas = scim_object_get(body, "schemas", NULL);
	size_t i;

	if (schemas) {
		for (i = 0; i < json_array_size(schemas); i++)
			if (json_is_string(json_array_get(schemas, i)) &&
			    ci_eq(json_string_value(json_array_get(schemas, i)), SCIM_PATCH_URN))
				break;
		if (i == json_array_size(schemas)) {
			snprintf(err, errcap, "schemas must contain \"%s\"", SCIM_PATCH_URN);
			return SCIM_PATCH_INVALID_SYNTAX;
		}
	}
	*ops = scim_object_get(body, "Operations", NULL);
	if (!json_is_array(*ops)) {
		snprintf(err, errcap, "\"Operations\" must be an array");
		return SCIM_PATCH_INVALID_SYNTAX;
	}
	/* RFC 7644 §3.5.2: "an array of one or more PATCH operations"; an
	 * empty one does not conform to the PatchOp message, as a missing one
	 * does not: both are invalidSyntax. */
	if (!json_array_size(*ops)) {
		snprintf(err, errcap, "\"Operations\" must hold one or more operations");
		return SCIM_PATCH_INVALID_SYNTAX;
	}
	if (json_array_size(*ops) > SCIM_PATCH_MAX_OPS) {
		snprintf(err, errcap, "too many operations (at most %d)", SCIM_PATCH_MAX_OPS);
		return SCIM_PATCH_INVALID_VALUE;
	}
	return SCIM_PATCH_OK;
}

int scim_patch_apply(json_t *resource, const json_t *body, char *err, size_t errcap)
{
	struct patch pt = {.err = err, .errcap = errcap};
	const json_t *ops;
	size_t i;
	int rc = SCIM_PATCH_INVALID_SYNTAX;

	if (errcap)
		err[0] = '\0';
	if (!json_is_object(resource) || !json_is_object(body)) {
		snprintf(err, errcap, "the PATCH body must be a JSON object");
		goto out;
	}
	rc = check_message(body, &ops, err, errcap);
	if (rc)
		goto out;
	pt.res = json_deep_copy(resource);
	if (!pt.res) {
		snprintf(err, errcap, "out of memory");
		rc = SCIM_PATCH_INVALID_VALUE;
		goto out;
	}
	for (i = 0; i < json_array_size(ops); i++) {
		pt.idx = i;
		rc = apply_one(&pt, json_array_get(ops, i));
		if (rc)
			goto out;
	}
	rc = scim_patch_normalize(pt.res, err, errcap);
	if (rc)
		goto out;
	/* The swap: only allocation can fail here, and then resource may be
	 * left partly filled. */
	json_object_clear(resource);
	if (json_object_update(resource, pt.res)) {
		snprintf(err, errcap, "out of memory");
		rc = SCIM_PATCH_INVALID_VALUE;
	}
out:
	json_decref(pt.res);
	return rc;
}

/* ---- normalisation ---- */

/* Turns obj[key] (a string "true"/"false" in any case) into a boolean.
 * Returns 0, or -1 when it is another string or not a boolean at all. */
static int boolify(json_t *obj, const char *key, const json_t *v)
{
	if (json_is_boolean(v) || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return -1;
	if (ci_eq(json_string_value(v), "true"))
		return json_object_set_new(obj, key, json_true());
	if (ci_eq(json_string_value(v), "false"))
		return json_object_set_new(obj, key, json_false());
	return -1;
}

/* The message of a value boolify() refused, at path. */
static void not_boolean(char *err, size_t errcap, const char *path, const json_t *v)
{
	snprintf(err, errcap, "%s must be a boolean, or the string \"true\" or \"false\" (got %s)",
		 path, scim_json_kind(v));
}

/* Normalises every "primary" member at any depth below v, whose path (as
 * a message names it: emails[0]) is path[0..len). Returns 0 or -1 (err
 * set, naming the member). */
static int normalize_primary(json_t *v, int depth, char *path, size_t len, size_t cap, char *err,
			     size_t errcap)
{
	const char *k;
	json_t *m;
	size_t i;
	int n;

	if (depth > 64)
		return 0;
	if (json_is_array(v)) {
		for (i = 0; i < json_array_size(v); i++) {
			n = snprintf(path + len, cap - len, "[%zu]", i);
			if (normalize_primary(json_array_get(v, i), depth + 1, path,
					      n > 0 && (size_t)n < cap - len ? len + (size_t)n : len,
					      cap, err, errcap) < 0)
				return -1;
			path[len] = '\0';
		}
		return 0;
	}
	if (!json_is_object(v))
		return 0;
	json_object_foreach(v, k, m) {
		n = snprintf(path + len, cap - len, "%s%s", len ? "." : "", k);
		if (ci_eq(k, "primary")) {
			if (boolify(v, k, m) < 0) {
				not_boolean(err, errcap, path, m);
				return -1;
			}
		} else if (normalize_primary(m, depth + 1, path,
					     n > 0 && (size_t)n < cap - len ? len + (size_t)n : len,
					     cap, err, errcap) < 0) {
			return -1;
		}
		path[len] = '\0';
	}
	return 0;
}

/* Rewrites the enterprise "manager" of ext, ext[key] = m, to
 * {"value": id}. Returns 0, or -1 (err set, or not for no memory). */
static int normalize_manager(json_t *ext, const char *key, json_t *m, char *err, size_t errcap)
{
	json_t *e;

	if (json_is_object(m))
		return 0;
	e = m;
	if (json_is_array(m)) {
		if (json_array_size(m) > 1) {
			snprintf(err, errcap, "\"manager\" must be a single value");
			return -1;
		}
		e = json_array_get(m, 0);
		if (json_is_object(e))
			return json_object_set(ext, key, e);
	}
	if (!e || json_is_null(e) || (json_is_string(e) && !json_string_length(e)))
		return json_object_del(ext, key);
	if (!json_is_string(e)) {
		snprintf(err, errcap, "\"manager\" must be an id or an object with \"value\"");
		return -1;
	}
	return json_object_set_new(ext, key, json_pack("{s:O}", "value", e));
}

int scim_patch_normalize(json_t *resource, char *err, size_t errcap)
{
	char path[256];
	const char *key, *mkey;
	json_t *v, *ext;
	void *tmp, *tmp2;

	if (errcap)
		err[0] = '\0';
	if (!json_is_object(resource)) {
		snprintf(err, errcap, "a resource must be a JSON object");
		return SCIM_PATCH_INVALID_VALUE;
	}
	/* every spelling: names are case-insensitive (RFC 7643 §2.1), and
	 * one left a string would be stored as one (two spellings of one
	 * attribute are then refused by the schema check, scim_schema.h) */
	json_object_foreach_safe(resource, tmp, key, v) {
		if (ci_eq(key, "active") && boolify(resource, key, v) < 0) {
			not_boolean(err, errcap, "active", v);
			return SCIM_PATCH_INVALID_VALUE;
		}
	}
	path[0] = '\0';
	if (normalize_primary(resource, 0, path, 0, sizeof path, err, errcap) < 0)
		return SCIM_PATCH_INVALID_VALUE;
	json_object_foreach_safe(resource, tmp, key, ext) {
		if (!ci_eq(key, SCIM_URN_ENTERPRISE) || !json_is_object(ext))
			continue;
		json_object_foreach_safe(ext, tmp2, mkey, v) {
			if (ci_eq(mkey, "manager") &&
			    normalize_manager(ext, mkey, v, err, errcap) < 0) {
				if (!err[0])
					snprintf(err, errcap, "out of memory");
				return SCIM_PATCH_INVALID_VALUE;
			}
		}
	}
	return SCIM_PATCH_OK;
}
