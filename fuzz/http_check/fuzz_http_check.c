/* libFuzzer driver for the request-head checks of http_check.h alone: the
 * input is a request head without its request line's method and version.
 * Its first line is the request-target as sent (http_check_target, then
 * http_query_parse over what follows the first '?'); each further line up
 * to an empty one is a header field "name: value" (split at the first
 * ':', the value's leading spaces and tabs dropped), and the fields go to
 * http_check_fields with the real body cap. Lines end at LF, one CR before
 * it is dropped; a NUL ends a string. Fields whose name or value the
 * parser would refuse are left out, as http_server.c never hands such
 * fields over; fuzz/http_parse covers the parser's syntax itself.
 *
 * Besides memory errors, leaks and undefined behaviour it aborts when a
 * promise of the module is broken: a refusal is 400 (or 413 for a
 * Content-Length over the cap) with a reason, and what is accepted obeys
 * every rule the contracts list (checked here independently); a decoded
 * query has at most HTTP_QUERY_MAX pairs, holds every pair unless it is
 * marked malformed, and is emptied by http_query_free. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http.h"
#include "http/http_check.h"
#include "http/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* As many fields as the parser accepts in one head. */
#define MAX_FIELDS HTTP_FIELDS_MAX

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The target rules, restated: what an accepted target may not hold. */
static void check_accepted_target(const char *t)
{
	const char *p;
	int in_path = 1;

	for (p = t; *p; p++) {
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			abort();
		if (*p == '?')
			in_path = 0;
		if (!in_path || *p != '%')
			continue;
		if (!is_hex(p[1]) || !is_hex(p[2]))
			abort();
		if ((p[1] == '0' && p[2] == '0') || (p[1] == '2' && (p[2] == 'f' || p[2] == 'F')))
			abort();
	}
}

static int token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* 1 when http_parse_head could hand over this field: a token name and a
 * value without control bytes other than HTAB. http_check_fields is only
 * ever given such fields; the parser's own syntax is fuzz/http_parse's. */
static int parser_would_keep(const char *name, const char *value)
{
	const char *p;

	if (!name[0])
		return 0;
	for (p = name; *p; p++)
		if (!token_char(*p))
			return 0;
	for (p = value; *p; p++)
		if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
			return 0;
	return 1;
}

/* The field rules, restated: what an accepted head may not hold. */
static void check_accepted_fields(const struct http_field *f, size_t n)
{
	int host = 0, cl = 0, te = 0;
	const char *len = NULL, *coding = NULL, *p;
	unsigned long long v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!strcasecmp(f[i].name, "Host"))
			host++;
		else if (!strcasecmp(f[i].name, "Content-Length"))
			cl++, len = f[i].value;
		else if (!strcasecmp(f[i].name, "Transfer-Encoding"))
			te++, coding = f[i].value;
	}
	if (host > 1 || cl > 1 || te > 1 || (cl && te))
		abort();
	if (te && strcasecmp(coding, "chunked"))
		abort();
	if (cl) {
		if (!len[0] || strlen(len) > 19)
			abort();
		for (p = len; *p; p++) {
			if (*p < '0' || *p > '9')
				abort();
			v = v * 10 + (unsigned long long)(*p - '0');
		}
		if (v > HTTP_BODY_MAX)
			abort();
	}
}

/* The non-empty '&'-separated pairs of raw. */
static int count_pairs(const char *raw)
{
	int n = 0;

	for (; raw && *raw; raw++)
		if (*raw != '&' && (raw[1] == '&' || raw[1] == '\0'))
			n++;
	return n;
}

static void check_query(const char *raw)
{
	struct http_query q;
	int i, pairs = count_pairs(raw);

	http_query_parse(raw, &q);
	if (q.n < 0 || q.n > HTTP_QUERY_MAX)
		abort();
	/* No pair is dropped without marking the query malformed. */
	if (!q.malformed && q.n != pairs)
		abort();
	if (pairs >= HTTP_QUERY_MAX && !q.malformed)
		abort();
	for (i = 0; i < q.n; i++)
		if (!q.name[i] || !q.value[i])
			abort();
	http_query_free(&q);
	if (q.n != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_field f[MAX_FIELDS];
	char *text, *line, *next, *colon, *q;
	const char *msg = NULL;
	size_t n = 0, len;
	int st;

	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	/* Cut the input into NUL-terminated lines in place. */
	line = text;
	next = memchr(text, '\n', size);
	if (next)
		*next++ = '\0';
	len = strlen(line);
	if (len && line[len - 1] == '\r')
		line[len - 1] = '\0';

	msg = NULL;
	st = http_check_target(line, &msg);
	if (st == 0)
		check_accepted_target(line);
	else if (st != 400 || !msg || !*msg)
		abort();
	q = strchr(line, '?');
	check_query(q ? q + 1 : NULL);

	while (next && n < MAX_FIELDS) {
		line = next;
		next = memchr(line, '\n', size - (size_t)(line - text));
		if (next)
			*next++ = '\0';
		len = strlen(line);
		if (len && line[len - 1] == '\r')
			line[--len] = '\0';
		if (!len)
			break;
		colon = strchr(line, ':');
		if (colon) {
			*colon++ = '\0';
			while (*colon == ' ' || *colon == '\t')
				colon++;
		}
		if (!parser_would_keep(line, colon ? colon : ""))
			continue;
		f[n].name = line;
		f[n++].value = colon ? colon : "";
	}
	msg = NULL;
	st = http_check_fields(f, n, HTTP_BODY_MAX, &msg);
	if (st == 0)
		check_accepted_fields(f, n);
	else if ((st != 400 && st != 413) || !msg || !*msg)
		abort();
	free(text);
	return 0;
}
