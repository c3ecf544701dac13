/* negotiate: what the pipeline does to an answer after its handler, for
 * the representation the client asked for (docs/api-guide.md, "HTTP
 * behaviour"): the ETag of single-resource reads and their 304, and the
 * gzip content coding. Handlers never see either. */
#ifndef REVOPS_NEGOTIATE_H
#define REVOPS_NEGOTIATE_H
#include <stddef.h>
#include "core/buf.h"
#include "core/common.h"

struct ctx;

/* Bodies below this many bytes are sent as they are. */
#define NEGOTIATE_GZIP_MIN 1024

/* On a 200 to GET or HEAD of a route flagged etag: sets ETag (a quoted
 * SHA-256 prefix of the body's data, without meta, which carries the
 * request id) and answers 304 without a body when If-None-Match holds it.
 * Then, on a body of NEGOTIATE_GZIP_MIN bytes or more: Vary:
 * Accept-Encoding, and the body gzip-coded with Content-Encoding when
 * Accept-Encoding allows (unless the handler coded it itself, c->encoded).
 * A compression failure leaves the body as it was. */
void negotiate_answer(struct ctx *c);

/* A body the handler serves gzip-coded as it is (made once, e.g. the
 * OpenAPI document at start-up): 1 when the request accepts gzip, so the
 * handler may answer with it and set c->encoded through
 * negotiate_mark_encoded. */
int negotiate_wants_gzip(const struct ctx *c);
void negotiate_mark_encoded(struct ctx *c);

#endif
