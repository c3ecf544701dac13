#include "http/http_fields.h"

#include <string.h>
#include <strings.h>

int http_request_id_ok(const char *v)
{
	size_t i;

	if (!v || !*v)
		return 0;
	for (i = 0; v[i]; i++)
		if (i == HTTP_REQUEST_ID_MAX || v[i] < 0x21 || v[i] > 0x7e || v[i] == '"' ||
		    v[i] == '\\')
			return 0;
	return 1;
}

static const char *skip_ows(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* A qvalue (RFC 9110 §12.4.2: "0" ["." 0-3 digits] or "1" ["." 0-3 "0"])
 * at p..end as thousandths, or -1 when malformed. */
static int parse_qvalue(const char *p, const char *end)
{
	int q, i, d = 100;

	if (p == end || (*p != '0' && *p != '1'))
		return -1;
	q = (*p++ - '0') * 1000;
	if (p == end)
		return q;
	if (*p++ != '.' || end - p > 3)
		return -1;
	for (i = 0; p + i < end; i++, d /= 10) {
		if (p[i] < '0' || p[i] > '9' || (q == 1000 && p[i] != '0'))
			return -1;
		q += (p[i] - '0') * d;
	}
	return q;
}

/* The q of one Accept-Encoding member's parameters p..end (";q=0.5";
 * other parameters are ignored): 1000 when absent, 0 when malformed. */
static int member_q(const char *p, const char *end)
{
	const char *v, *ve;
	int q;

	while (p < end) {
		p = skip_ows(p);
		if (p >= end || *p != ';')
			return p >= end ? 1000 : 0;
		p = skip_ows(p + 1);
		ve = memchr(p, ';', (size_t)(end - p));
		ve = ve ? ve : end;
		v = ve;
		while (v > p && (v[-1] == ' ' || v[-1] == '\t'))
			v--;
		if (ve - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
			q = parse_qvalue(p + 2, v);
			return q < 0 ? 0 : q;
		}
		p = ve;
	}
	return 1000;
}

/* The coding names of Accept-Encoding this server tells apart. */
enum coding { C_OTHER, C_GZIP, C_IDENTITY, C_ANY };

static enum coding coding_of(const char *p, size_t n)
{
	if ((n == 4 && !strncasecmp(p, "gzip", 4)) || (n == 6 && !strncasecmp(p, "x-gzip", 6)))
		return C_GZIP;
	if (n == 8 && !strncasecmp(p, "identity", 8))
		return C_IDENTITY;
	if (n == 1 && *p == '*')
		return C_ANY;
	return C_OTHER;
}

int http_accepts_gzip(const char *v)
{
	int q[4] = {-1, -1, -1, -1}, mq;
	const char *end, *name_end;
	enum coding k;

	while (v && *v) {
		v = skip_ows(v);
		end = strchr(v, ',');
		end = end ? end : v + strlen(v);
		name_end = v;
		while (name_end < end && *name_end != ';' && *name_end != ' ' && *name_end != '\t')
			name_end++;
		k = coding_of(v, (size_t)(name_end - v));
		mq = member_q(name_end, end);
		if (name_end > v && (q[k] < 0 || mq > q[k]))
			q[k] = mq; /* a coding listed twice: the higher q */
		v = *end ? end + 1 : end;
	}
	mq = q[C_GZIP] >= 0 ? q[C_GZIP] : q[C_ANY];
	return mq > 0 && (q[C_IDENTITY] < 0 || mq >= q[C_IDENTITY]);
}

/* One entity-tag member at p (after OWS): sets *op and *on to its opaque
 * part and returns the end of the member, or NULL when malformed. */
static const char *entity_tag(const char *p, const char **op, size_t *on)
{
	const char *q;

	if (p[0] == 'W' && p[1] == '/')
		p += 2;
	if (*p != '"')
		return NULL;
	q = strchr(p + 1, '"');
	if (!q)
		return NULL;
	*op = p + 1;
	*on = (size_t)(q - p - 1);
	return q + 1;
}

int http_etag_match(const char *v, const char *tag, const char *suffix)
{
	size_t tn = strlen(tag), sn = suffix ? strlen(suffix) : 0, on;
	const char *o, *e;

	if (!v)
		return 0;
	if (!strcmp(skip_ows(v), "*"))
		return 1;
	while (*v) {
		v = skip_ows(v);
		e = entity_tag(v, &o, &on);
		if (e && ((on == tn && !memcmp(o, tag, tn)) ||
			  (sn && on == tn + sn && !memcmp(o, tag, tn) && !memcmp(o + tn, suffix, sn))))
			return 1;
		v = e ? e : v;
		while (*v && *v != ',')
			v++;
		if (*v == ',')
			v++;
	}
	return 0;
}
