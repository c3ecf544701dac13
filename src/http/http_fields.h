/* http_fields: what some request fields mean to the answer, as pure
 * functions over the field value (unit-tested, fuzzed: fuzz/http_fields):
 * a client's X-Request-Id, Accept-Encoding (may the answer be gzip?) and
 * If-None-Match (does the client hold this entity tag?). */
#ifndef REVOPS_HTTP_FIELDS_H
#define REVOPS_HTTP_FIELDS_H
#include <stddef.h>
#include "core/common.h"

/* The longest client X-Request-Id honoured. */
#define HTTP_REQUEST_ID_MAX 128

/* 1 when v may be used as the request id: 1 to HTTP_REQUEST_ID_MAX
 * visible ASCII characters (0x21-0x7e) other than '"' and '\' (so it
 * needs no escaping in JSON, the log or a header); else 0. NULL is 0. */
int http_request_id_ok(const char *v);

/* 1 when an Accept-Encoding value lets the answer be gzip-coded, else 0
 * (RFC 9110 §12.5.3): gzip (or x-gzip) with q > 0, or, unlisted, '*' with
 * q > 0; and, when identity is listed, gzip's q at least identity's. A
 * member with a malformed q-value counts as q=0. NULL (no header) is 0. */
int http_accepts_gzip(const char *v);

/* 1 when an If-None-Match value matches the entity tag whose opaque part
 * (between the quotes) is tag: '*', or a member of the comma-separated
 * list whose opaque part is tag or tag followed by suffix (the gzip-coded
 * representation's tag; may be NULL), weak ("W/") or strong (the weak
 * comparison of RFC 9110 §13.1.2). Malformed members never match. NULL
 * is 0. */
int http_etag_match(const char *v, const char *tag, const char *suffix);

#endif
