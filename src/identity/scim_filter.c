#include "core/clock.h"
#include "core/validate.h"
#include "identity/scim_filter.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum node_kind { N_CMP = 1, N_PR, N_VPATH, N_AND, N_OR, N_NOT };

enum cmp_op { OP_NONE = 0, OP_EQ, OP_NE, OP_CO, OP_SW, OP_EW, OP_GT, OP_GE, OP_LT, OP_LE, OP_PR };

enum lit_kind { L_STR = 1, L_NUM, L_TRUE, L_FALSE, L_NULL };

static const struct {
	const char *name;
	enum cmp_op op;
} ops[] = {
	{"eq", OP_EQ}, {"ne", OP_NE}, {"co", OP_CO}, {"sw", OP_SW}, {"ew", OP_EW},
	{"gt", OP_GT}, {"ge", OP_GE}, {"lt", OP_LT}, {"le", OP_LE}, {"pr", OP_PR},
};

static const char *const known_urns[] = {SCIM_URN_USER, SCIM_URN_GROUP, SCIM_URN_ENTERPRISE};

/* A point in time: whole seconds since the epoch (UTC) and the fraction's
 * decimal digits without trailing zeros. */
struct instant {
	int64_t sec;
	char frac[24];
};

struct apath {
	char urn[128];
	char attr[64];
	char sub[64];
};

struct lit {
	enum lit_kind kind;
	char *text; /* the string, or a bare token as written; owned */
	double num; /* L_NUM */
	int is_dt;  /* L_STR that parses as a date-time */
	struct instant dt;
};

/* N_CMP / N_PR: path op lit. N_VPATH: path.urn, path.attr [left] and, when
 * op != OP_NONE, ".path.sub op lit" on each element. N_AND / N_OR: left,
 * right. N_NOT: left. */
struct node {
	enum node_kind kind;
	enum cmp_op op;
	int left, right;
	struct apath path;
	struct lit lit;
};

struct scim_filter {
	int n;
	int root;
	struct node node[SCIM_FILTER_MAX_NODES];
};

struct parser {
	const char *s;
	size_t pos;
	int depth;
	struct scim_filter *f;
	char *err;
	size_t errcap;
	int failed;
};

/* ---- characters and strings ---- */

static int is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int is_space(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Characters of an attribute path token: names, '.', and URN prefixes. */
static int is_word(int c)
{
	return is_alpha(c) || is_digit(c) || c == '_' || c == '$' || c == '-' || c == ':' || c == '.';
}

static int lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* ASCII case-insensitive strcmp. */
static int ci_cmp(const char *a, const char *b)
{
	const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;

	while (*x && lower(*x) == lower(*y)) {
		x++;
		y++;
	}
	return lower(*x) - lower(*y);
}

static int ci_ncmp(const char *a, const char *b, size_t n)
{
	const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
	size_t i;

	for (i = 0; i < n; i++) {
		if (lower(x[i]) != lower(y[i]))
			return lower(x[i]) - lower(y[i]);
		if (!x[i])
			break;
	}
	return 0;
}

/* 1 if needle occurs in haystack (both NUL-terminated), ignoring ASCII case
 * unless exact. */
static int contains(const char *hay, const char *needle, int exact)
{
	size_t n = strlen(needle), h = strlen(hay), i;

	if (exact)
		return strstr(hay, needle) != NULL;
	if (n > h)
		return 0;
	for (i = 0; i + n <= h; i++)
		if (!ci_ncmp(hay + i, needle, n))
			return 1;
	return 0;
}

static int utf8_valid(const char *s, size_t n)
{
	size_t i = 0, k;

	while (i < n) {
		k = validate_utf8_step((const unsigned char *)s + i, n - i);
		if (!k)
			return 0;
		i += k;
	}
	return 1;
}

/* 1 if the n bytes at s are exactly one JSON number. */
static int is_json_number(const char *s, size_t n)
{
	size_t i = 0, d;

	if (i < n && s[i] == '-')
		i++;
	if (i >= n || !is_digit(s[i]))
		return 0;
	if (s[i] == '0')
		i++;
	else
		while (i < n && is_digit(s[i]))
			i++;
	if (i < n && s[i] == '.') {
		for (d = ++i; i < n && is_digit(s[i]); i++)
			;
		if (i == d)
			return 0;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		for (d = i; i < n && is_digit(s[i]); i++)
			;
		if (i == d)
			return 0;
	}
	return i == n;
}

/* ---- date-times ---- */

/* Reads n decimal digits at s into *v; 0 when one is missing. */
static int digits(const char *s, int n, int *v)
{
	int i;

	*v = 0;
	for (i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return 0;
		*v = *v * 10 + (s[i] - '0');
	}
	return 1;
}

/* Parses an RFC 3339 / ISO 8601 date-time, YYYY-MM-DDTHH:MM:SS[.f+][Z|±HH[:]MM]
 * (no offset = UTC, fraction of any length). Returns 0 and *out, or -1. */
static int parse_datetime(const char *s, struct instant *out)
{
	int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
	size_t n = 0;
	const char *p;

	if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
	    !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) ||
	    s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
		return -1;
	p = s + 19;
	memset(out->frac, 0, sizeof out->frac);
	if (*p == '.') {
		p++;
		if (!is_digit(*p))
			return -1;
		for (; is_digit(*p); p++)
			if (n < sizeof out->frac - 1)
				out->frac[n++] = *p;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p == '-' ? -1 : 1;
		if (!digits(p + 1, 2, &oh))
			return -1;
		p += 3;
		if (*p == ':')
			p++;
		if (!digits(p, 2, &om))
			return -1;
		p += 2;
	}
	if (*p || mo < 1 || mo > 12 || d < 1 || d > clock_days_in_month(y, (unsigned)mo) ||
	    h > 23 || mi > 59 || sec > 60 || oh > 23 || om > 59)
		return -1;
	while (n > 0 && out->frac[n - 1] == '0')
		out->frac[--n] = '\0';
	out->sec = clock_days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 +
		   mi * 60 + sec - sign * (oh * 3600 + om * 60);
	return 0;
}

int scim_datetime_valid(const char *s)
{
	struct instant t;

	return s && parse_datetime(s, &t) == 0;
}

static int instant_cmp(const struct instant *a, const struct instant *b)
{
	size_t i;
	char x, y;

	if (a->sec != b->sec)
		return a->sec < b->sec ? -1 : 1;
	for (i = 0; i < sizeof a->frac; i++) {
		x = a->frac[i] ? a->frac[i] : '0';
		y = b->frac[i] ? b->frac[i] : '0';
		if (x != y)
			return x < y ? -1 : 1;
		if (!a->frac[i] && !b->frac[i])
			break;
	}
	return 0;
}

/* ---- shared helpers ---- */

json_t *scim_object_get(const json_t *obj, const char *name, const char **key)
{
	const char *k;
	json_t *v;

	if (!json_is_object(obj) || !name)
		return NULL;
	v = json_object_get(obj, name);
	if (v) {
		if (key)
			*key = json_object_iter_key(json_object_iter_at((json_t *)obj, name));
		return v;
	}
	json_object_foreach((json_t *)obj, k, v) {
		if (!ci_cmp(k, name)) {
			if (key)
				*key = k;
			return v;
		}
	}
	return NULL;
}

const char *scim_json_kind(const json_t *v)
{
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number with a fraction or exponent";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

int scim_urn_is_core(const char *urn)
{
	return !urn[0] || !ci_cmp(urn, SCIM_URN_USER) || !ci_cmp(urn, SCIM_URN_GROUP);
}

static int is_known_urn(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(known_urns); i++)
		if (strlen(known_urns[i]) == n && !ci_ncmp(s, known_urns[i], n))
			return 1;
	return 0;
}

/* ---- parser ---- */

/* Records the first error only; later calls (from callers unwinding) keep
 * the innermost, most precise message. */
PRINTF(2, 3) static void fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;

	if (p->failed)
		return;
	p->failed = 1;
	if (!p->errcap)
		return;
	va_start(ap, fmt);
	vsnprintf(p->err, p->errcap, fmt, ap);
	va_end(ap);
}

/* Copies up to 24 bytes of input at s into out (cap >= 32) for a message,
 * printable ASCII only (anything else becomes '?'), so messages stay valid
 * UTF-8 whatever the input holds. */
static void snip(const char *s, char *out, size_t cap)
{
	size_t i;
	unsigned char c;

	for (i = 0; i < 24 && i + 1 < cap && s[i]; i++) {
		c = (unsigned char)s[i];
		out[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	out[i] = '\0';
}

static char cur(const struct parser *p)
{
	return p->s[p->pos];
}

static void skip_ws(struct parser *p)
{
	while (is_space((unsigned char)cur(p)))
		p->pos++;
}

static int enter(struct parser *p)
{
	if (++p->depth > SCIM_FILTER_MAX_DEPTH) {
		fail(p, "filter nests deeper than %d levels at position %zu", SCIM_FILTER_MAX_DEPTH,
		     p->pos + 1);
		return -1;
	}
	return 0;
}

static int new_node(struct parser *p, enum node_kind kind)
{
	struct node *nd;

	if (p->f->n >= SCIM_FILTER_MAX_NODES) {
		fail(p, "filter has more than %d expressions", SCIM_FILTER_MAX_NODES);
		return -1;
	}
	nd = &p->f->node[p->f->n];
	memset(nd, 0, sizeof *nd);
	nd->kind = kind;
	nd->left = nd->right = -1;
	return p->f->n++;
}

/* Length of the path token at the current position (0 if none). */
static size_t word_len(const struct parser *p)
{
	size_t n = 0;

	while (is_word((unsigned char)p->s[p->pos + n]))
		n++;
	return n;
}

/* 1 if the next token (at pos, no leading space) is keyword kw in any case,
 * followed by something that cannot continue a word. */
static int at_keyword(const struct parser *p, const char *kw)
{
	size_t n = strlen(kw);

	return !ci_ncmp(p->s + p->pos, kw, n) && !is_word((unsigned char)p->s[p->pos + n]);
}

/* ATTRNAME = (ALPHA / "$") *(ALPHA / DIGIT / "_" / "-" / "$"), n bytes. */
static int valid_name(const char *s, size_t n)
{
	size_t i;

	if (!n || !(is_alpha((unsigned char)s[0]) || s[0] == '$'))
		return 0;
	for (i = 1; i < n; i++)
		if (!is_alpha((unsigned char)s[i]) && !is_digit(s[i]) && s[i] != '_' &&
		    s[i] != '-' && s[i] != '$')
			return 0;
	return 1;
}

/* Splits the len-byte path token at start into [urn ":"] attr ["." sub]:
 * the URN is everything before the last ':' (URNs contain dots, names
 * after the last colon do not). Returns 0, or -1 with the error set. */
static int split_path(struct parser *p, size_t start, size_t len, struct apath *ap)
{
	const char *w = p->s + start, *dot;
	size_t i, colon = len, alen;

	memset(ap, 0, sizeof *ap);
	for (i = 0; i < len; i++)
		if (w[i] == ':')
			colon = i;
	if (colon < len) {
		/* The prefix is a schema URI (RFC 7644 3.10), so it has a scheme
		 * of its own: "meta:created" names no schema, and would otherwise
		 * reach "meta" as if it were an extension's object. */
		if (colon == 0 || colon + 1 == len || !memchr(w, ':', colon)) {
			fail(p, "invalid attribute path \"%.*s\" at position %zu",
			     (int)(len > 64 ? 64 : len), w, start + 1);
			return -1;
		}
		if (colon >= sizeof ap->urn) {
			fail(p, "schema URN longer than %zu characters at position %zu",
			     sizeof ap->urn - 1, start + 1);
			return -1;
		}
		memcpy(ap->urn, w, colon);
		w += colon + 1;
		len -= colon + 1;
		start += colon + 1;
	}
	dot = memchr(w, '.', len);
	alen = dot ? (size_t)(dot - w) : len;
	if (!valid_name(w, alen) || (dot && !valid_name(dot + 1, len - alen - 1))) {
		fail(p, "invalid attribute name \"%.*s\" at position %zu",
		     (int)(len > 64 ? 64 : len), w, start + 1);
		return -1;
	}
	if (alen >= sizeof ap->attr || (dot && len - alen - 1 >= sizeof ap->sub)) {
		fail(p, "attribute name longer than %zu characters at position %zu",
		     sizeof ap->attr - 1, start + 1);
		return -1;
	}
	memcpy(ap->attr, w, alen);
	if (dot)
		memcpy(ap->sub, dot + 1, len - alen - 1);
	return 0;
}

/* Reads "." ATTRNAME right after a value filter's ']' into sub. */
static int parse_sub_after(struct parser *p, char *sub, size_t cap)
{
	size_t start = ++p->pos, n = 0;

	while (is_alpha((unsigned char)p->s[start + n]) || is_digit(p->s[start + n]) ||
	       p->s[start + n] == '_' || p->s[start + n] == '-' || p->s[start + n] == '$')
		n++;
	if (!valid_name(p->s + start, n)) {
		fail(p, "expected a sub-attribute name after '.' at position %zu", start + 1);
		return -1;
	}
	if (n >= cap) {
		fail(p, "attribute name longer than %zu characters at position %zu", cap - 1,
		     start + 1);
		return -1;
	}
	memcpy(sub, p->s + start, n);
	sub[n] = '\0';
	p->pos += n;
	return 0;
}

static void put_utf8(char *o, size_t *n, unsigned long cp)
{
	if (cp < 0x80) {
		o[(*n)++] = (char)cp;
	} else if (cp < 0x800) {
		o[(*n)++] = (char)(0xC0 | (cp >> 6));
		o[(*n)++] = (char)(0x80 | (cp & 0x3F));
	} else if (cp < 0x10000) {
		o[(*n)++] = (char)(0xE0 | (cp >> 12));
		o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[(*n)++] = (char)(0x80 | (cp & 0x3F));
	} else {
		o[(*n)++] = (char)(0xF0 | (cp >> 18));
		o[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
		o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[(*n)++] = (char)(0x80 | (cp & 0x3F));
	}
}

static int hex4(const char *s, unsigned long *v)
{
	int i, c;

	*v = 0;
	for (i = 0; i < 4; i++) {
		c = lower((unsigned char)s[i]);
		if (is_digit(c))
			*v = *v * 16 + (unsigned long)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v = *v * 16 + (unsigned long)(c - 'a' + 10);
		else
			return -1;
	}
	return 0;
}

/* Records "invalid escape" at pos, which as a 1-based position names the
 * byte just before pos. Returns -1. */
static int bad_escape(struct parser *p)
{
	fail(p, "invalid escape in string at position %zu", p->pos);
	return -1;
}

/* Decodes a \u escape whose four hex digits start at pos, and the low half
 * that must follow a high surrogate, into *cp, moving pos past them.
 * Returns 0, or -1 with the error set (a lone or unpaired surrogate, a bad
 * hex digit, or \u0000, which would end a C string). */
static int parse_u_escape(struct parser *p, unsigned long *cp)
{
	unsigned long lo;

	if (hex4(p->s + p->pos, cp) < 0)
		return bad_escape(p);
	p->pos += 4;
	if (*cp >= 0xDC00 && *cp <= 0xDFFF)
		return bad_escape(p);
	if (*cp >= 0xD800 && *cp <= 0xDBFF) {
		if (p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u' ||
		    hex4(p->s + p->pos + 2, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
			return bad_escape(p);
		p->pos += 6;
		*cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
	}
	if (!*cp) {
		fail(p, "\\u0000 is not allowed in a string at position %zu", p->pos - 5);
		return -1;
	}
	return 0;
}

/* Decodes the escape whose letter is under pos (just past the backslash),
 * appending what it stands for to o at *n (as UTF-8 for \u) and moving pos
 * past it. Returns 0, or -1 with the error set. */
static int parse_escape(struct parser *p, char *o, size_t *n)
{
	static const char letter[] = "\"\\/bfnrt", meaning[] = "\"\\/\b\f\n\r\t";
	const char *at;
	unsigned long cp;
	char c = cur(p);

	p->pos++;
	if (c == 'u') {
		if (parse_u_escape(p, &cp) < 0)
			return -1;
		put_utf8(o, n, cp);
		return 0;
	}
	at = c ? strchr(letter, c) : NULL;
	if (!at) {
		p->pos--;
		return bad_escape(p);
	}
	o[(*n)++] = meaning[at - letter];
	return 0;
}

/* Parses the JSON string literal starting at the '"' under pos into a new
 * malloc'd UTF-8 string (\u0000 refused, so it is a C string). Returns it,
 * or NULL with the error set. The output never outgrows the input: every
 * escape is at least as long as what it stands for. */
static char *parse_string(struct parser *p)
{
	size_t start = p->pos, n = 0, rest = strlen(p->s + p->pos);
	char *o = malloc(rest + 1), c;

	if (!o) {
		fail(p, "out of memory");
		return NULL;
	}
	p->pos++;
	for (;;) {
		c = cur(p);
		if (!c) {
			fail(p, "unterminated string starting at position %zu", start + 1);
			goto bad;
		}
		if ((unsigned char)c < 0x20) {
			fail(p, "control character in string at position %zu", p->pos + 1);
			goto bad;
		}
		p->pos++;
		if (c == '"')
			break;
		if (c != '\\')
			o[n++] = c;
		else if (parse_escape(p, o, &n) < 0)
			goto bad;
	}
	o[n] = '\0';
	return o;
bad:
	free(o);
	return NULL;
}

/* A byte a bare comparison value may not hold: the ones that open or
 * close another token, an escape that only a quoted string has, and
 * control bytes. */
static int bare_forbidden(unsigned char c)
{
	return c == '"' || c == '\\' || c == '(' || c == '[' || c < 0x20 || c == 0x7f;
}

/* Reads the comparison value after an operator into lit: a JSON string
 * (RFC 7644 §3.4.2.2), or a bare token up to whitespace, ')' or ']' that
 * is true/false/null (any case), a JSON number, or else taken as a string.
 * Bare strings are beyond the RFC's grammar and accepted because
 * Microsoft's SCIM reference collection filters with them
 * (`userName sw O`, `name.FamilyName eq Employee and (emails.Value co
 * example.com ...)`, `meta.Created gt 2015-10-10T14:38:21.8617979-07:00`)
 * and some clients send them; a bare token holding a quote, a backslash,
 * '(' or '[' or a control byte, or one that is a keyword (and, or, not),
 * is refused: that is a malformed filter, not a value. Returns 0 or -1. */
static int parse_value(struct parser *p, struct lit *lit, const char *opname)
{
	size_t start, n = 0;

	skip_ws(p);
	start = p->pos;
	if (!cur(p) || cur(p) == ')' || cur(p) == ']') {
		fail(p, "missing value after '%s' at position %zu", opname, start + 1);
		return -1;
	}
	if (cur(p) == '"') {
		lit->text = parse_string(p);
		if (!lit->text)
			return -1;
		lit->kind = L_STR;
		lit->is_dt = parse_datetime(lit->text, &lit->dt) == 0;
		return 0;
	}
	while (p->s[start + n] && !is_space((unsigned char)p->s[start + n]) &&
	       p->s[start + n] != ')' && p->s[start + n] != ']') {
		if (bare_forbidden((unsigned char)p->s[start + n])) {
			fail(p,
			     "invalid character in the value after '%s' at position %zu"
			     " (quote string values: \"...\")",
			     opname, start + n + 1);
			return -1;
		}
		n++;
	}
	if ((n == 3 && (!ci_ncmp(p->s + start, "and", 3) || !ci_ncmp(p->s + start, "not", 3))) ||
	    (n == 2 && !ci_ncmp(p->s + start, "or", 2))) {
		fail(p, "missing value after '%s' at position %zu", opname, start + 1);
		return -1;
	}
	lit->text = strndup(p->s + start, n);
	if (!lit->text) {
		fail(p, "out of memory");
		return -1;
	}
	p->pos += n;
	if (!ci_cmp(lit->text, "true")) {
		lit->kind = L_TRUE;
	} else if (!ci_cmp(lit->text, "false")) {
		lit->kind = L_FALSE;
	} else if (!ci_cmp(lit->text, "null")) {
		lit->kind = L_NULL;
	} else if (is_json_number(lit->text, n)) {
		lit->kind = L_NUM;
		lit->num = strtod(lit->text, NULL);
	} else {
		lit->kind = L_STR;
		lit->is_dt = parse_datetime(lit->text, &lit->dt) == 0;
	}
	return 0;
}

/* Reads an operator (and unless it is "pr", a value) into node i, whose
 * path is named by what in messages. Returns 0 or -1. */
static int parse_op(struct parser *p, int i, const char *what)
{
	size_t n, k, start;
	char near[32];

	skip_ws(p);
	start = p->pos;
	if (!cur(p)) {
		fail(p, "missing operator after \"%s\"", what);
		return -1;
	}
	n = word_len(p);
	if (!n) {
		snip(p->s + start, near, sizeof near);
		fail(p, "expected an operator after \"%s\" at position %zu, found \"%s\"", what,
		     start + 1, near);
		return -1;
	}
	for (k = 0; k < ARRAY_LEN(ops); k++)
		if (n == 2 && !ci_ncmp(p->s + start, ops[k].name, 2))
			break;
	if (k == ARRAY_LEN(ops)) {
		fail(p, "unknown operator \"%.*s\" at position %zu", (int)(n > 24 ? 24 : n),
		     p->s + start, start + 1);
		return -1;
	}
	p->pos += n;
	p->f->node[i].op = ops[k].op;
	if (ops[k].op == OP_PR)
		return 0;
	return parse_value(p, &p->f->node[i].lit, ops[k].name);
}

static int parse_or(struct parser *p);

/* Skips whitespace and the closing bracket close (')' or ']') that must
 * follow. Returns 0, or -1 with the error set ("expected" when something
 * else is there, "missing" at the end of the text). */
static int expect_close(struct parser *p, char close)
{
	skip_ws(p);
	if (cur(p) != close) {
		fail(p, cur(p) ? "expected '%c' at position %zu" : "missing '%c' at position %zu",
		     close, p->pos + 1);
		return -1;
	}
	p->pos++;
	return 0;
}

/* attrExp / valuePath: [URN:]attr[.sub] op value, [URN:]attr[.sub] pr, or
 * [URN:]attr[filter] optionally followed by ".sub op value" or ".sub pr". */
static int parse_attr_exp(struct parser *p)
{
	size_t start = p->pos, n = word_len(p), save;
	struct apath ap;
	int i, inner;

	if (split_path(p, start, n, &ap) < 0)
		return -1;
	p->pos += n;
	save = p->pos;
	skip_ws(p);
	if (cur(p) != '[') {
		p->pos = save;
		i = new_node(p, N_CMP);
		if (i < 0)
			return -1;
		p->f->node[i].path = ap;
		if (parse_op(p, i, ap.attr) < 0)
			return -1;
		if (p->f->node[i].op == OP_PR)
			p->f->node[i].kind = N_PR;
		return i;
	}
	if (ap.sub[0]) {
		fail(p,
		     "a value filter '[' must follow the attribute name, not a sub-attribute, at position %zu",
		     p->pos + 1);
		return -1;
	}
	i = new_node(p, N_VPATH);
	if (i < 0 || enter(p) < 0)
		return -1;
	p->pos++;
	inner = parse_or(p);
	if (inner < 0 || expect_close(p, ']') < 0)
		return -1;
	p->depth--;
	p->f->node[i].left = inner;
	p->f->node[i].path = ap;
	if (cur(p) != '.')
		return i;
	if (parse_sub_after(p, p->f->node[i].path.sub, sizeof ap.sub) < 0)
		return -1;
	if (parse_op(p, i, p->f->node[i].path.sub) < 0)
		return -1;
	return i;
}

/* "(" filter ")", "not" "(" filter ")", or an attribute expression. */
static int parse_unary(struct parser *p)
{
	size_t save;
	int i, inner;
	char near[32];

	skip_ws(p);
	if (cur(p) == '(') {
		if (enter(p) < 0)
			return -1;
		p->pos++;
		inner = parse_or(p);
		if (inner < 0 || expect_close(p, ')') < 0)
			return -1;
		p->depth--;
		return inner;
	}
	if (at_keyword(p, "not")) {
		save = p->pos;
		p->pos += 3;
		skip_ws(p);
		if (cur(p) == '(') {
			i = new_node(p, N_NOT);
			if (i < 0 || enter(p) < 0)
				return -1;
			inner = parse_unary(p);
			if (inner < 0)
				return -1;
			p->depth--;
			p->f->node[i].left = inner;
			return i;
		}
		p->pos = save; /* an attribute that happens to be called "not" */
	}
	if (word_len(p))
		return parse_attr_exp(p);
	if (!cur(p)) {
		fail(p, "unexpected end of filter at position %zu, expected an expression",
		     p->pos + 1);
		return -1;
	}
	snip(p->s + p->pos, near, sizeof near);
	fail(p, "expected an attribute path at position %zu, found \"%s\"", p->pos + 1, near);
	return -1;
}

/* Left-associative chain of `sub` joined by keyword kw into kind nodes. */
static int parse_chain(struct parser *p, int (*sub)(struct parser *), const char *kw,
		       enum node_kind kind)
{
	int left, right, i;
	size_t save;

	left = sub(p);
	while (left >= 0) {
		save = p->pos;
		skip_ws(p);
		if (!at_keyword(p, kw)) {
			p->pos = save;
			break;
		}
		p->pos += strlen(kw);
		right = sub(p);
		if (right < 0)
			return -1;
		i = new_node(p, kind);
		if (i < 0)
			return -1;
		p->f->node[i].left = left;
		p->f->node[i].right = right;
		left = i;
	}
	return left;
}

static int parse_and(struct parser *p)
{
	return parse_chain(p, parse_unary, "and", N_AND);
}

static int parse_or(struct parser *p)
{
	return parse_chain(p, parse_and, "or", N_OR);
}

/* Checks text's length, encoding and emptiness before parsing. */
static int precheck(struct parser *p, const char *text, const char *what)
{
	size_t len;

	if (!text) {
		fail(p, "empty %s", what);
		return -1;
	}
	len = strnlen(text, SCIM_FILTER_MAX_LEN + 1);
	if (len > SCIM_FILTER_MAX_LEN) {
		fail(p, "%s longer than %d bytes", what, SCIM_FILTER_MAX_LEN);
		return -1;
	}
	if (!utf8_valid(text, len)) {
		fail(p, "%s is not valid UTF-8", what);
		return -1;
	}
	p->s = text;
	skip_ws(p);
	if (!cur(p)) {
		fail(p, "empty %s", what);
		return -1;
	}
	return 0;
}

/* Fails unless only whitespace is left. */
static int expect_end(struct parser *p)
{
	char near[32];

	skip_ws(p);
	if (!cur(p))
		return 0;
	snip(p->s + p->pos, near, sizeof near);
	fail(p, "unexpected \"%s\" at position %zu", near, p->pos + 1);
	return -1;
}

static struct scim_filter *filter_new(struct parser *p)
{
	struct scim_filter *f = malloc(sizeof *f);

	if (!f) {
		fail(p, "out of memory");
		return NULL;
	}
	f->n = 0;
	f->root = -1;
	return f;
}

int scim_filter_parse(const char *text, struct scim_filter **out, char *err, size_t errcap)
{
	struct parser p = {.err = err, .errcap = errcap};
	int rc = -1;

	*out = NULL;
	if (errcap)
		err[0] = '\0';
	if (precheck(&p, text, "filter") < 0)
		goto out;
	p.f = filter_new(&p);
	if (!p.f)
		goto out;
	p.f->root = parse_or(&p);
	if (p.f->root < 0 || expect_end(&p) < 0)
		goto out;
	*out = p.f;
	p.f = NULL;
	rc = 0;
out:
	scim_filter_free(p.f);
	return rc;
}

void scim_filter_free(struct scim_filter *f)
{
	int i;

	if (!f)
		return;
	for (i = 0; i < f->n; i++)
		free(f->node[i].lit.text);
	free(f);
}

/* Reads a path's value filter, "[" filter "]" and an optional "." subAttr,
 * from the '[' under pos into a new p->f and ap->sub; ap is the attribute
 * path before the '[', which may not name a sub-attribute. Returns 0, or -1
 * with the error set; p->f, once allocated, is the caller's to free either
 * way. */
static int parse_path_filter(struct parser *p, struct apath *ap)
{
	if (ap->sub[0]) {
		fail(p,
		     "a value filter '[' must follow the attribute name, not a sub-attribute, at position %zu",
		     p->pos + 1);
		return -1;
	}
	p->f = filter_new(p);
	if (!p->f || enter(p) < 0)
		return -1;
	p->pos++;
	p->f->root = parse_or(p);
	if (p->f->root < 0 || expect_close(p, ']') < 0)
		return -1;
	if (cur(p) == '.' && parse_sub_after(p, ap->sub, sizeof ap->sub) < 0)
		return -1;
	return 0;
}

int scim_path_parse(const char *text, struct scim_path *out, char *err, size_t errcap)
{
	struct parser p = {.err = err, .errcap = errcap};
	struct apath ap;
	size_t start, n;
	char near[32];
	int rc = -1;

	memset(out, 0, sizeof *out);
	if (errcap)
		err[0] = '\0';
	if (precheck(&p, text, "path") < 0)
		goto out;
	start = p.pos;
	n = word_len(&p);
	if (!n) {
		snip(p.s + start, near, sizeof near);
		fail(&p, "expected an attribute path at position %zu, found \"%s\"", start + 1, near);
		goto out;
	}
	p.pos += n;
	skip_ws(&p);
	if (!cur(&p) && is_known_urn(text + start, n)) {
		memcpy(out->urn, text + start, n);
		return 0;
	}
	p.pos = start;
	if (split_path(&p, start, n, &ap) < 0)
		goto out;
	p.pos += n;
	skip_ws(&p);
	if (cur(&p) == '[' && parse_path_filter(&p, &ap) < 0)
		goto out;
	if (expect_end(&p) < 0)
		goto out;
	memcpy(out->urn, ap.urn, sizeof out->urn);
	memcpy(out->attr, ap.attr, sizeof out->attr);
	memcpy(out->sub, ap.sub, sizeof out->sub);
	out->filter = p.f;
	p.f = NULL;
	rc = 0;
out:
	scim_filter_free(p.f);
	return rc;
}

void scim_path_free(struct scim_path *p)
{
	if (!p)
		return;
	scim_filter_free(p->filter);
	p->filter = NULL;
}

/* ---- evaluation ---- */

struct test {
	const struct node *nd;
	int exact;   /* caseExact strings */
	int dt_attr; /* a dateTime attribute: ordering needs two date-times */
	int seen;    /* non-null leaf values visited */
};

static int order_ok(enum cmp_op op, int c)
{
	switch (op) {
	case OP_EQ:
		return c == 0;
	case OP_NE:
		return c != 0;
	case OP_GT:
		return c > 0;
	case OP_GE:
		return c >= 0;
	case OP_LT:
		return c < 0;
	case OP_LE:
		return c <= 0;
	default:
		return 0;
	}
}

static int num_cmp(double a, double b)
{
	return a < b ? -1 : a > b ? 1 : 0;
}

/* The literal as a number: 0 and *d, or -1. */
static int lit_number(const struct lit *l, double *d)
{
	if (l->kind == L_NUM) {
		*d = l->num;
		return 0;
	}
	if (l->kind == L_STR && is_json_number(l->text, strlen(l->text))) {
		*d = strtod(l->text, NULL);
		return 0;
	}
	return -1;
}

/* The literal as a boolean: 1, 0, or -1 when it is none ("True" counts). */
static int lit_bool(const struct lit *l)
{
	if (l->kind == L_TRUE || (l->kind == L_STR && !ci_cmp(l->text, "true")))
		return 1;
	if (l->kind == L_FALSE || (l->kind == L_STR && !ci_cmp(l->text, "false")))
		return 0;
	return -1;
}

static int test_string(const struct test *t, const char *s)
{
	const struct lit *l = &t->nd->lit;
	enum cmp_op op = t->nd->op;
	size_t sl, ll;
	struct instant dt;

	switch (op) {
	case OP_CO:
		return contains(s, l->text, t->exact);
	case OP_SW:
		ll = strlen(l->text);
		return t->exact ? !strncmp(s, l->text, ll) : !ci_ncmp(s, l->text, ll);
	case OP_EW:
		sl = strlen(s);
		ll = strlen(l->text);
		if (ll > sl)
			return 0;
		return t->exact ? !strcmp(s + sl - ll, l->text) : !ci_cmp(s + sl - ll, l->text);
	default:
		break;
	}
	if (l->is_dt && parse_datetime(s, &dt) == 0)
		return order_ok(op, instant_cmp(&dt, &l->dt));
	if (op != OP_EQ && op != OP_NE) {
		if (t->dt_attr)
			return 0;
		if (l->kind == L_NUM && is_json_number(s, strlen(s)))
			return order_ok(op, num_cmp(strtod(s, NULL), l->num));
	}
	return order_ok(op, t->exact ? strcmp(s, l->text) : ci_cmp(s, l->text));
}

/* One non-null leaf value against the node's operator and literal. */
static int test_leaf(const struct test *t, const json_t *v)
{
	enum cmp_op op = t->nd->op;
	double d;
	int b;

	switch (json_typeof(v)) {
	case JSON_STRING:
		return test_string(t, json_string_value(v));
	case JSON_INTEGER:
	case JSON_REAL:
		if (lit_number(&t->nd->lit, &d) < 0)
			return op == OP_NE;
		return order_ok(op, num_cmp(json_number_value(v), d));
	case JSON_TRUE:
	case JSON_FALSE:
		b = lit_bool(&t->nd->lit);
		if (op == OP_EQ)
			return b == (json_is_true(v) ? 1 : 0);
		if (op == OP_NE)
			return b != (json_is_true(v) ? 1 : 0);
		return 0;
	default:
		return op == OP_NE;
	}
}

/* 1 if any leaf of v satisfies the test: array elements each count, an
 * object stands for its "value" member. depth stops arrays of arrays. */
static int any_value(struct test *t, const json_t *v, int depth)
{
	size_t i;

	if (!v || json_is_null(v) || depth > 3)
		return 0;
	if (json_is_array(v)) {
		for (i = 0; i < json_array_size(v); i++)
			if (any_value(t, json_array_get(v, i), depth + 1))
				return 1;
		return 0;
	}
	if (json_is_object(v))
		return any_value(t, scim_object_get(v, "value", NULL), depth + 1);
	t->seen++;
	return test_leaf(t, v);
}

static int present(const json_t *v)
{
	if (!v || json_is_null(v))
		return 0;
	if (json_is_string(v))
		return json_string_length(v) > 0;
	if (json_is_array(v))
		return json_array_size(v) > 0;
	if (json_is_object(v))
		return json_object_size(v) > 0;
	return 1;
}

/* Applies the node's test to v (an attribute's value); with sub, to the
 * sub-attribute of v or of each of v's elements. leaf names the compared
 * attribute (for caseExact and dateTime rules). */
static int test_attr(const struct node *nd, const json_t *v, const char *sub, const char *leaf)
{
	struct test t = {.nd = nd};
	const json_t *e;
	size_t i;
	int r = 0, has = 0;

	t.exact = !ci_cmp(leaf, "id") || !ci_cmp(leaf, "externalId");
	t.dt_attr = !ci_cmp(leaf, "created") || !ci_cmp(leaf, "lastModified");
	if (nd->op == OP_PR || nd->lit.kind == L_NULL) {
		if (!sub[0]) {
			r = present(v);
			has = v && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v));
		} else if (json_is_array(v)) {
			for (i = 0; i < json_array_size(v); i++) {
				e = scim_object_get(json_array_get(v, i), sub, NULL);
				r |= present(e);
				has |= e && !json_is_null(e);
			}
		} else {
			e = scim_object_get(v, sub, NULL);
			r = present(e);
			has = e && !json_is_null(e);
		}
		if (nd->op == OP_PR)
			return r;
		return nd->op == OP_EQ ? !has : nd->op == OP_NE ? has : 0;
	}
	if (!sub[0]) {
		r = any_value(&t, v, 0);
	} else if (json_is_array(v)) {
		for (i = 0; i < json_array_size(v) && !r; i++)
			if (json_is_object(json_array_get(v, i)))
				r = any_value(&t, scim_object_get(json_array_get(v, i), sub, NULL),
					      1);
	} else if (json_is_object(v)) {
		r = any_value(&t, scim_object_get(v, sub, NULL), 1);
	}
	if (nd->op == OP_NE && !t.seen)
		return 1;
	return r;
}

/* The object an attribute path's URN selects within ctx, or NULL. */
static const json_t *select_base(const json_t *ctx, const char *urn)
{
	const json_t *b;

	if (scim_urn_is_core(urn))
		return ctx;
	b = scim_object_get(ctx, urn, NULL);
	return json_is_object(b) ? b : NULL;
}

static int match_node(const struct scim_filter *f, int i, const json_t *ctx);

/* attr[filter] and attr[filter].sub op value against one element. */
static int match_element(const struct scim_filter *f, const struct node *nd, const json_t *e)
{
	if (!json_is_object(e) || !match_node(f, nd->left, e))
		return 0;
	if (nd->op == OP_NONE)
		return 1;
	return test_attr(nd, scim_object_get(e, nd->path.sub, NULL), "", nd->path.sub);
}

static int match_node(const struct scim_filter *f, int i, const json_t *ctx)
{
	const struct node *nd = &f->node[i];
	const json_t *base, *v;
	size_t k;

	switch (nd->kind) {
	case N_AND:
		return match_node(f, nd->left, ctx) && match_node(f, nd->right, ctx);
	case N_OR:
		return match_node(f, nd->left, ctx) || match_node(f, nd->right, ctx);
	case N_NOT:
		return !match_node(f, nd->left, ctx);
	case N_CMP:
	case N_PR:
		base = select_base(ctx, nd->path.urn);
		return test_attr(nd, base ? scim_object_get(base, nd->path.attr, NULL) : NULL,
				 nd->path.sub, nd->path.sub[0] ? nd->path.sub : nd->path.attr);
	case N_VPATH:
		base = select_base(ctx, nd->path.urn);
		v = base ? scim_object_get(base, nd->path.attr, NULL) : NULL;
		if (json_is_object(v))
			return match_element(f, nd, v);
		for (k = 0; k < json_array_size(v); k++)
			if (match_element(f, nd, json_array_get(v, k)))
				return 1;
		return 0;
	}
	return 0;
}

int scim_filter_match(const struct scim_filter *f, const json_t *resource)
{
	if (!f)
		return 1;
	if (!json_is_object(resource) || f->root < 0)
		return 0;
	return match_node(f, f->root, resource);
}

/* ---- templates ---- */

static json_t *lit_json(const struct lit *l)
{
	long long v;
	char *end;

	switch (l->kind) {
	case L_STR:
		return json_string(l->text);
	case L_TRUE:
		return json_true();
	case L_FALSE:
		return json_false();
	case L_NUM:
		if (!strpbrk(l->text, ".eE")) {
			errno = 0;
			v = strtoll(l->text, &end, 10);
			if (!errno && !*end)
				return json_integer(v);
		}
		return json_real(l->num);
	default:
		return NULL;
	}
}

static int template_node(const struct scim_filter *f, int i, json_t *obj)
{
	const struct node *nd = &f->node[i];

	if (nd->kind == N_AND)
		return template_node(f, nd->left, obj) < 0 || template_node(f, nd->right, obj) < 0
			       ? -1
			       : 0;
	if (nd->kind != N_CMP || nd->op != OP_EQ || nd->path.urn[0] || nd->path.sub[0])
		return -1;
	return json_object_set_new(obj, nd->path.attr, lit_json(&nd->lit));
}

int scim_filter_template(const struct scim_filter *f, json_t *obj)
{
	if (!f || f->root < 0 || !json_is_object(obj))
		return -1;
	return template_node(f, f->root, obj);
}
