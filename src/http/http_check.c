/* http_check: request-head checks with no HTTP library in them. */
#include "http/http_check.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/form.h"

/* Parses a Content-Length value: 1 to 19 digits, nothing else. Returns 0
 * and the number, or -1. */
static int parse_length(const char *s, unsigned long long *out)
{
	unsigned long long n = 0;
	size_t i;

	for (i = 0; s[i]; i++) {
		if (s[i] < '0' || s[i] > '9' || i == 19)
			return -1;
		n = n * 10 + (unsigned long long)(s[i] - '0');
	}
	if (i == 0)
		return -1;
	*out = n;
	return 0;
}

struct field_counts {
	int host, cl, te, authz;
	const char *host_value, *cl_value, *te_value;
};

/* 1 when a Host value is uri-host [":" port] (RFC 9112 §3.2, RFC 3986):
 * reg-name or IPv4 characters, or an IP literal in brackets, then an
 * optional port. Empty is allowed (no authority). */
static int is_host(const char *s)
{
	const char *p = s;

	if (*p == '[') {
		p += strcspn(p, "]");
		if (*p++ != ']')
			return 0;
	} else {
		p += strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			       "0123456789-._~%!$&'()*+;=");
	}
	if (*p == ':')
		p += 1 + strspn(p + 1, "0123456789");
	return *p == '\0' && strlen(s) <= 255;
}

int http_check_fields(const struct http_field *f, size_t n, unsigned long long body_max,
		      const char **msg)
{
	struct field_counts k = {0, 0, 0, 0, NULL, NULL, NULL};
	unsigned long long len;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!strcasecmp(f[i].name, "Host"))
			k.host++, k.host_value = f[i].value;
		else if (!strcasecmp(f[i].name, "Authorization"))
			k.authz++;
		else if (!strcasecmp(f[i].name, "Content-Length"))
			k.cl++, k.cl_value = f[i].value;
		else if (!strcasecmp(f[i].name, "Transfer-Encoding"))
			k.te++, k.te_value = f[i].value;
	}
	*msg = NULL;
	if (k.host > 1)
		*msg = "more than one Host header";
	else if (k.host && !is_host(k.host_value))
		*msg = "the Host header is not a host name or address with an optional port";
	else if (k.authz > 1)
		*msg = "more than one Authorization header";
	else if (k.cl > 1)
		*msg = "more than one Content-Length header";
	else if (k.te > 1)
		*msg = "more than one Transfer-Encoding header";
	else if (k.cl && k.te)
		*msg = "Content-Length together with Transfer-Encoding";
	else if (k.te && strcasecmp(k.te_value, "chunked"))
		*msg = "unsupported Transfer-Encoding: only \"chunked\" is accepted";
	else if (k.cl && parse_length(k.cl_value, &len) < 0)
		*msg = "invalid Content-Length";
	else if (k.cl && len > body_max) {
		*msg = "request body larger than 1 MiB";
		return 413;
	}
	return *msg ? 400 : 0;
}

int http_check_target(const char *target, const char **msg)
{
	const char *p;
	int in_path = 1;

	for (p = target; *p; p++) {
		if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
			*msg = "the request target contains a control character or a space";
			return 400;
		}
		if (*p == '?')
			in_path = 0;
		if (!in_path || *p != '%')
			continue;
		if (hex_value(p[1]) < 0 || hex_value(p[2]) < 0) {
			*msg = "the path has a malformed percent-escape";
			return 400;
		}
		if ((p[1] == '0' && p[2] == '0') || (p[1] == '2' && (p[2] == 'f' || p[2] == 'F'))) {
			*msg = "the path contains an encoded NUL or '/'";
			return 400;
		}
	}
	return 0;
}

void http_query_parse(const char *raw, struct http_query *q)
{
	const char *p = raw, *amp, *eq;
	char *name, *value;

	memset(q, 0, sizeof *q);
	while (p && *p && q->n < HTTP_QUERY_MAX) {
		amp = strchr(p, '&');
		if (!amp)
			amp = p + strlen(p);
		eq = memchr(p, '=', (size_t)(amp - p));
		if (amp > p && form_decode(p, (size_t)((eq ? eq : amp) - p), &name) == 0) {
			if (form_decode(eq ? eq + 1 : amp, eq ? (size_t)(amp - eq - 1) : 0,
					&value) == 0) {
				q->name[q->n] = name;
				q->value[q->n++] = value;
			} else {
				free(name);
				q->malformed = 1;
			}
		} else if (amp > p) {
			q->malformed = 1;
		}
		p = *amp ? amp + 1 : amp;
	}
	if (q->n == HTTP_QUERY_MAX)
		q->malformed = 1;
}

void http_query_free(struct http_query *q)
{
	for (int i = 0; i < q->n; i++) {
		free(q->name[i]);
		free(q->value[i]);
	}
	q->n = 0;
}
