#include "core/validate.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for a detail's field path; longer paths are cut at a character
 * boundary (only unknown keys can make them long, and those are shortened
 * to VALIDATE_MAX_KEY_IN_PATH bytes first). */
#define PATH_MAX_LEN 512

/* Length (1-4) of the well-formed UTF-8 sequence at p, which has n > 0
 * bytes left, or 0 when it is ill-formed: a stray continuation byte, an
 * overlong form (C0, C1, E0 80-9F, F0 80-8F), a surrogate (ED A0-BF), a value
 * above U+10FFFF (F4 90-BF, F5-FF) or a sequence cut short. */
size_t validate_utf8_step(const unsigned char *p, size_t n)
{
	unsigned char c = p[0], lo = 0x80, hi = 0xBF;
	size_t len, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xBF)
			return 0;
	return len;
}

/* Counts the code points of n bytes at s. Returns 0, or -1 on ill-formed
 * UTF-8. */
static int utf8_count(const char *s, size_t n, size_t *codepoints)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, cp = 0, k;

	while (i < n) {
		k = validate_utf8_step(p + i, n - i);
		if (!k)
			return -1;
		i += k;
		cp++;
	}
	if (codepoints)
		*codepoints = cp;
	return 0;
}

int validate_utf8_len(const char *s, size_t *codepoints)
{
	return utf8_count(s, strlen(s), codepoints);
}

/* The largest length <= m of a prefix of the n bytes at s that does not
 * split a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t n, size_t m)
{
	if (n <= m)
		return n;
	while (m > 0 && ((unsigned char)s[m] & 0xC0) == 0x80)
		m--;
	return m;
}

/* Line and column (both 1-based, the column in code points, as jansson
 * counts them) of byte off in body. */
static void locate(const char *body, size_t off, int *line, int *col)
{
	size_t i;
	int l = 1, c = 1;

	for (i = 0; i < off; i++) {
		if (body[i] == '\n') {
			l++;
			c = 1;
		} else if (((unsigned char)body[i] & 0xC0) != 0x80) {
			c++;
		}
	}
	*line = l;
	*col = c;
}

/* Replaces err's contents with the formatted message. A message that does
 * not fit err's cap leaves err empty. */
PRINTF(2, 3) static void set_err(struct buf *err, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int n;

	if (!err)
		return;
	buf_reset(err);
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (buf_puts(err, msg) < 0)
		buf_reset(err);
}

static void set_err_at(struct buf *err, const char *body, size_t off, const char *what)
{
	int line, col;

	locate(body, off, &line, &col);
	set_err(err, "%s at line %d column %d", what, line, col);
}

/* One pass over the raw body before jansson sees it: rejects NUL bytes,
 * ill-formed UTF-8 and nesting deeper than VALIDATE_MAX_DEPTH, counting
 * '[' and '{' only outside strings (a backslash inside a string hides the
 * next byte). Where the body is not valid JSON this count may differ from
 * the parser's, but only after a point where the parser stops with an error,
 * so it never lets deeper input through. Returns 0, or -1 with err set. */
static int prescan(const char *body, size_t len, struct buf *err)
{
	const unsigned char *p = (const unsigned char *)body;
	size_t i = 0, depth = 0, k;
	int in_str = 0, esc = 0, any = 0;
	unsigned char c;
	char what[64];

	while (i < len) {
		c = p[i];
		if (c == '\0') {
			set_err_at(err, body, i, "request body contains a NUL byte");
			return -1;
		}
		if (c >= 0x80) {
			k = validate_utf8_step(p + i, len - i);
			if (!k) {
				set_err_at(err, body, i, "request body is not valid UTF-8");
				return -1;
			}
			i += k;
			esc = 0;
			any = 1;
			continue;
		}
		i++;
		if (esc) {
			esc = 0;
		} else if (in_str) {
			if (c == '\\')
				esc = 1;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '[' || c == '{') {
			if (++depth > VALIDATE_MAX_DEPTH) {
				snprintf(what, sizeof what, "JSON nesting deeper than %d levels",
					 VALIDATE_MAX_DEPTH);
				set_err_at(err, body, i - 1, what);
				return -1;
			}
		} else if (c == ']' || c == '}') {
			if (depth)
				depth--;
		}
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			any = 1;
	}
	if (!any) {
		set_err(err, "request body is empty");
		return -1;
	}
	return 0;
}

/* Copies jansson's message into out (outcap > 0 bytes) with control
 * characters turned into '?' and nothing that is not UTF-8: its "near '...'"
 * context quotes raw input. */
static void clean_text(const char *text, char *out, size_t outcap)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t n = strlen(text), i = 0, o = 0, k;

	while (i < n && o + 4 < outcap) {
		if (p[i] < 0x20 || p[i] == 0x7F) {
			out[o++] = '?';
			i++;
		} else if (p[i] < 0x80) {
			out[o++] = (char)p[i++];
		} else if ((k = validate_utf8_step(p + i, n - i)) != 0) {
			memcpy(out + o, p + i, k);
			o += k;
			i += k;
		} else {
			out[o++] = '?';
			i++;
		}
	}
	out[o] = '\0';
}

/* Writes the duplicate-key message. jansson reports the error with its
 * position just past the repeated key's closing quote; the key is found by
 * scanning back to the opening quote (one not preceded by an odd run of
 * backslashes) and decoded, so the message names the key as the client
 * wrote it, shortened to VALIDATE_MAX_KEY_IN_PATH bytes. */
static void dup_key_err(const char *body, size_t len, const json_error_t *je, struct buf *err)
{
	json_t *key = NULL, *shown = NULL;
	char *quoted = NULL;
	size_t end = (size_t)je->position, start, bs, klen, cut;
	const char *k;
	int line, col;

	if (je->position < 2 || end > len || body[end - 1] != '"')
		goto generic;
	for (start = end - 1; start-- > 0;) {
		if (body[start] != '"')
			continue;
		for (bs = 0; bs < start && body[start - 1 - bs] == '\\'; bs++)
			;
		if (bs % 2 == 0)
			break;
	}
	if (start == (size_t)-1)
		goto generic;
	key = json_loadb(body + start, end - start, JSON_DECODE_ANY, NULL);
	if (!json_is_string(key))
		goto generic;
	k = json_string_value(key);
	klen = json_string_length(key);
	cut = utf8_cut(k, klen, VALIDATE_MAX_KEY_IN_PATH);
	shown = json_stringn(k, cut);
	quoted = shown ? json_dumps(shown, JSON_ENCODE_ANY) : NULL;
	if (!quoted)
		goto generic;
	locate(body, start, &line, &col);
	set_err(err, "duplicate object key %s%s at line %d column %d", quoted,
		cut < klen ? " (shortened)" : "", line, col);
	goto out;
generic:
	set_err(err, "duplicate object key at line %d column %d", je->line, je->column);
out:
	free(quoted);
	json_decref(shown);
	json_decref(key);
}

int validate_parse_body(const char *body, size_t len, json_t **out, struct buf *err)
{
	json_error_t je;
	json_t *root = NULL;
	char text[sizeof je.text + 8];
	int ret = -1;

	*out = NULL;
	if (!body || len == 0) {
		set_err(err, "request body is empty");
		goto out;
	}
	if (prescan(body, len, err) < 0)
		goto out;
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!root) {
		switch (json_error_code(&je)) {
		case json_error_out_of_memory:
			set_err(err, "out of memory");
			ret = -2;
			break;
		case json_error_duplicate_key:
			dup_key_err(body, len, &je, err);
			break;
		case json_error_null_character:
		case json_error_null_byte_in_key:
			set_err(err,
				"invalid JSON at line %d column %d: \\u0000 is not "
				"allowed in strings",
				je.line, je.column);
			break;
		case json_error_invalid_utf8:
			set_err(err, "request body is not valid UTF-8 at line %d column %d",
				je.line, je.column);
			break;
		case json_error_stack_overflow:
			set_err(err, "JSON nesting deeper than %d levels", VALIDATE_MAX_DEPTH);
			break;
		default:
			clean_text(je.text, text, sizeof text);
			set_err(err, "invalid JSON at line %d column %d: %s", je.line, je.column,
				text);
			break;
		}
		goto out;
	}
	if (!json_is_object(root)) {
		set_err(err, "request body must be a JSON object");
		goto out;
	}
	*out = root;
	root = NULL;
	ret = 0;
out:
	json_decref(root);
	return ret;
}

void validate_add_detail(json_t *details, const char *field, const char *issue)
{
	json_t *d;

	if (!json_is_array(details) || json_array_size(details) >= VALIDATE_MAX_DETAILS)
		return;
	if (!field || !issue)
		return;
	/* json_pack refuses strings that are not UTF-8; the append frees d if
	 * it fails. */
	d = json_pack("{s:s, s:s}", "field", field, "issue", issue);
	if (d)
		json_array_append_new(details, d);
}

/* Appends up to n bytes of s to the path in out (cap bytes, len used),
 * cutting at a character boundary when it does not fit. */
static void path_put(char *out, size_t cap, size_t *len, const char *s, size_t n)
{
	n = utf8_cut(s, n, cap - 1 - *len);
	memcpy(out + *len, s, n);
	*len += n;
	out[*len] = '\0';
}

/* out = prefix "." name (just name when prefix is empty). With shorten, a
 * name longer than VALIDATE_MAX_KEY_IN_PATH bytes is cut and "..." added. */
static void path_key(char *out, const char *prefix, const char *name, int shorten)
{
	size_t len = 0, n = strlen(name), cut = n;

	out[0] = '\0';
	path_put(out, PATH_MAX_LEN, &len, prefix, strlen(prefix));
	if (*prefix)
		path_put(out, PATH_MAX_LEN, &len, ".", 1);
	if (shorten)
		cut = utf8_cut(name, n, VALIDATE_MAX_KEY_IN_PATH);
	path_put(out, PATH_MAX_LEN, &len, name, cut);
	if (cut < n)
		path_put(out, PATH_MAX_LEN, &len, "...", 3);
}

/* out = prefix "[" i "]". */
static void path_index(char *out, const char *prefix, size_t i)
{
	char idx[32];
	size_t len = 0;

	out[0] = '\0';
	path_put(out, PATH_MAX_LEN, &len, prefix, strlen(prefix));
	snprintf(idx, sizeof idx, "[%zu]", i);
	path_put(out, PATH_MAX_LEN, &len, idx, strlen(idx));
}

static const char *type_issue(enum vtype t)
{
	switch (t) {
	case V_STRING:
		return "must be a string";
	case V_INT:
		return "must be an integer";
	case V_NUMBER:
		return "must be a number";
	case V_BOOL:
		return "must be a boolean";
	case V_OBJECT:
		return "must be an object";
	case V_ARRAY:
		return "must be an array";
	case V_ANY:
		break;
	}
	return "must not be null";
}

static int type_ok(const json_t *v, enum vtype t)
{
	switch (t) {
	case V_STRING:
		return json_is_string(v);
	case V_INT:
		return json_is_integer(v);
	case V_NUMBER:
		return json_is_number(v);
	case V_BOOL:
		return json_is_boolean(v);
	case V_OBJECT:
		return json_is_object(v);
	case V_ARRAY:
		return json_is_array(v);
	case V_ANY:
		break;
	}
	return 1;
}

/* Checks one present value v at path against f (its name is not used).
 * Returns the number of problems found, appending them to details. */
static int check_value(const json_t *v, const struct vfield *f, const char *path, json_t *details)
{
	struct vfield item;
	char sub[PATH_MAX_LEN], issue[64];
	size_t max, n, i;
	int problems = 0;

	if (json_is_null(v)) {
		if (f->nullable)
			return 0;
		validate_add_detail(details, path, type_issue(f->type));
		return 1;
	}
	if (!type_ok(v, f->type)) {
		validate_add_detail(details, path, type_issue(f->type));
		return 1;
	}
	switch (f->type) {
	case V_STRING:
		max = f->max ? f->max : VALIDATE_DEFAULT_MAX_STRING;
		if (utf8_count(json_string_value(v), json_string_length(v), &n) < 0) {
			validate_add_detail(details, path, "must be valid UTF-8");
			return 1;
		}
		if (n > max) {
			snprintf(issue, sizeof issue, "must be at most %zu characters", max);
			validate_add_detail(details, path, issue);
			return 1;
		}
		return 0;
	case V_OBJECT:
		if (!f->fields)
			return 0;
		return validate_object(v, f->fields, path, details);
	case V_ARRAY:
		max = f->max ? f->max : VALIDATE_DEFAULT_MAX_ITEMS;
		n = json_array_size(v);
		if (n > max) {
			snprintf(issue, sizeof issue, "must have at most %zu items", max);
			validate_add_detail(details, path, issue);
			problems++;
		}
		if (!f->items)
			return problems;
		memset(&item, 0, sizeof item);
		item.type = f->items;
		item.fields = f->item_fields;
		for (i = 0; i < n; i++) {
			path_index(sub, path, i);
			problems += check_value(json_array_get(v, i), &item, sub, details);
		}
		return problems;
	default:
		return 0;
	}
}

static const struct vfield *spec_find(const struct vfield *spec, const char *key)
{
	for (; spec && spec->name; spec++)
		if (strcmp(spec->name, key) == 0)
			return spec;
	return NULL;
}

int validate_object(const json_t *obj, const struct vfield *spec, const char *prefix, json_t *details)
{
	/* json_object_foreach takes a non-const object; nothing is modified. */
	json_t *o = (json_t *)obj, *v;
	const struct vfield *f;
	char path[PATH_MAX_LEN];
	const char *key;
	int problems = 0;

	if (!prefix)
		prefix = "";
	if (!json_is_object(o)) {
		validate_add_detail(details, prefix, "must be an object");
		return 1;
	}
	json_object_foreach(o, key, v) {
		f = spec_find(spec, key);
		path_key(path, prefix, key, !f);
		if (!f) {
			validate_add_detail(details, path, "is not a known field");
			problems++;
			continue;
		}
		problems += check_value(v, f, path, details);
	}
	for (f = spec; f && f->name; f++) {
		if (!f->required || json_object_get(o, f->name))
			continue;
		path_key(path, prefix, f->name, 0);
		validate_add_detail(details, path, "is required");
		problems++;
	}
	return problems;
}

int validate_code(const char *s)
{
	size_t i;

	if (!s || !*s || strlen(s) > 32)
		return 0;
	for (i = 0; s[i]; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("-_.", s[i]))
			return 0;
	return 1;
}

int validate_blank(const char *s)
{
	for (; s && *s; s++)
		if (!isspace((unsigned char)*s))
			return 0;
	return 1;
}
