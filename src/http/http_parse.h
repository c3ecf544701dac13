/* http_parse: a strict HTTP/1.1 request parser (RFC 9112) with no I/O in
 * it: the request head, parsed in place, and a chunked body decoder fed
 * in pieces. http_server.c owns the sockets; this file owns the bytes, so
 * it is unit-tested and fuzzed alone (fuzz/http_parse). */
#ifndef REVOPS_HTTP_PARSE_H
#define REVOPS_HTTP_PARSE_H
#include <stddef.h>
#include <stdint.h>
#include "core/buf.h"
#include "core/common.h"
#include "http/http_check.h"

#define HTTP_HEAD_MAX (32 * 1024) /* request line and fields, with line ends */
#define HTTP_FIELDS_MAX 100

struct http_head {
	char *method;
	char *target; /* as sent: not decoded */
	int minor;    /* HTTP/1.<minor>: 0, or 1 (1.x for x >= 1) */
	size_t nfields;
	struct http_field fields[HTTP_FIELDS_MAX];
};

/* 0 when buf[0..len), the start of a request head, cannot become a
 * request line: its method is empty, longer than 32 bytes or not a token.
 * Lets a stream that is not HTTP (a TLS ClientHello, say) be refused at
 * once instead of at the idle timeout. */
int http_head_plausible(const char *buf, size_t len);

/* Finds where a request head ends in buf[0..len): returns its length
 * through the empty line, or 0 while it is incomplete. *scan (0 at first)
 * is where the next call resumes, so a head that arrives a byte at a time
 * is still scanned once. */
size_t http_head_end(const char *buf, size_t len, size_t *scan);

/* Parses the head buf[0..len) (len from http_head_end) in place, writing
 * NULs after the method, target, field names and values; h points into
 * buf. Strict: one space between the request line's parts, a token
 * method, no control bytes, HTTP/1.x only, field names that are tokens
 * with the colon right after them, no obs-fold, no control byte in a
 * value but HTAB; lines end in CRLF or LF. Field values are trimmed of
 * spaces and tabs, but for Transfer-Encoding and Content-Length, which are
 * kept as sent after the colon's whitespace (so "chunked " is refused by
 * http_check_fields, as front ends may read it either way). Returns 0, or the status to answer (400, 431 for more
 * than HTTP_FIELDS_MAX fields, 505 for HTTP/2 and later) with *msg set. */
int http_parse_head(char *buf, size_t len, struct http_head *h, const char **msg) WUR;

/* The chunked transfer coding, decoded as it arrives. Zero it to start. */
struct http_chunked {
	int state;
	uint64_t left;   /* bytes left in the current chunk */
	unsigned digits; /* characters of the chunk-size so far */
	size_t aside;    /* bytes of chunk extensions or trailers so far */
};

/* Decodes in[0..len), appending chunk data to out (whose cap is the body
 * limit). Sets *used to the bytes consumed. Returns 1 when the body ended
 * (*used stops right after it, so a pipelined request stays unread), 0
 * when all of in was consumed and more is needed, or the status to answer:
 * 400 for a malformed coding (a chunk-size of more than 16 digits, a chunk
 * extension or trailer section over 4 KiB, a missing CRLF), 413 when the
 * data passes out's cap; *msg says why. */
int http_chunked_feed(struct http_chunked *d, const char *in, size_t len, size_t *used,
		      struct buf *out, const char **msg) WUR;

#endif
