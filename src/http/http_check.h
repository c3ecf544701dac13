/* http_check: the checks on a request's head that need no HTTP library.
 * Pure functions over strings, so they are unit-tested and fuzzed alone
 * (fuzz/http_check); http_server.c feeds them what http_parse.c parsed. */
#ifndef REVOPS_HTTP_CHECK_H
#define REVOPS_HTTP_CHECK_H
#include <stddef.h>
#include "core/common.h"

/* One header field as received: name and value, NUL-terminated. */
struct http_field {
	const char *name;
	const char *value;
};

/* Decides what the header fields of one request mean for its framing,
 * before any body is read. The fields are as http_parse_head leaves them
 * (token names, values without control bytes): the syntax is the parser's,
 * the meaning is here. One Host at most, and a valid one (uri-host
 * [":" port]); one Authorization at most (which would be used is
 * ambiguous); one Content-Length at most, all digits and at most
 * body_max; one Transfer-Encoding at most, exactly "chunked" (any other
 * coding, list or spelling cannot be framed here, RFC 9112 §6.3); never
 * both. Returns 0 when the head is acceptable, else the status to answer
 * (400, or 413 for a Content-Length over body_max) with *msg set to a
 * static reason. */
int http_check_fields(const struct http_field *f, size_t n, unsigned long long body_max,
		      const char **msg) WUR;

/* Checks a request-target exactly as sent (before any decoding). Refused
 * with 400: raw control bytes or spaces anywhere; in the path (before
 * '?'), a malformed %XX escape, an encoded NUL (%00) or an encoded '/'
 * (%2F), since decoding either would route the request somewhere its
 * bytes did not say. The query is checked when it is decoded. Returns 0
 * or 400 with *msg set. */
int http_check_target(const char *target, const char **msg) WUR;

#define HTTP_QUERY_MAX 32

/* A decoded query string ('+' is a space, then %XX). */
struct http_query {
	int n;
	int malformed;               /* a pair did not decode, or too many pairs */
	char *name[HTTP_QUERY_MAX];  /* owned */
	char *value[HTTP_QUERY_MAX]; /* owned */
};

/* Decodes raw (may be NULL) into q. More than HTTP_QUERY_MAX - 1 pairs,
 * an undecodable escape or an encoded NUL marks q malformed; the pairs
 * decoded so far stay usable. */
void http_query_parse(const char *raw, struct http_query *q);
void http_query_free(struct http_query *q);

#endif
