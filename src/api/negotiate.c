#include "api/negotiate.h"

#include <stdio.h>
#include <string.h>

#include "api/ctx.h"
#include "core/crypto.h"
#include "http/http_gzip.h"

#define ETAG_HEX 32 /* 128 bits of SHA-256 */
#define GZIP_SUFFIX "-gzip"

/* The length of body's data part: everything before the envelope's last
 * `,"meta":{` (meta comes last and holds the request id, which differs
 * per request), or the whole body when there is none. */
static size_t data_part(const struct buf *b)
{
	static const char mark[] = ",\"meta\":{";
	size_t n = sizeof mark - 1, i;

	for (i = b->len >= n ? b->len - n + 1 : 0; i-- > 0;)
		if (!memcmp(b->data + i, mark, n))
			return i;
	return b->len;
}

static int is_read(const char *method)
{
	return !strcmp(method, "GET") || !strcmp(method, "HEAD");
}

/* The ETag stage of negotiate_answer; the opaque tag goes to tag. Returns
 * 1 when it answered 304. */
static int etag_stage(struct ctx *c, char tag[ETAG_HEX + 1])
{
	char hex[2 * CRYPTO_SHA256_LEN + 1], v[ETAG_HEX + 3];

	tag[0] = '\0';
	if (!c->match.route || !c->match.route->etag || c->res->status != 200 ||
	    !is_read(c->req->method) || !c->res->body.data)
		return 0;
	crypto_sha256_hex(c->res->body.data, data_part(&c->res->body), hex);
	memcpy(tag, hex, ETAG_HEX);
	tag[ETAG_HEX] = '\0';
	snprintf(v, sizeof v, "\"%s\"", tag);
	(void)response_header(c->res, "ETag", v);
	if (!http_etag_match(http_header(c->req, "If-None-Match"), tag, GZIP_SUFFIX))
		return 0;
	/* RFC 9110 §15.4.5: a 304 sends the Vary the 200 would have sent. */
	if (c->res->body.len >= NEGOTIATE_GZIP_MIN)
		(void)response_header(c->res, "Vary", "Accept-Encoding");
	c->res->status = 304;
	buf_reset(&c->res->body);
	return 1;
}

void negotiate_answer(struct ctx *c)
{
	struct response *res = c->res;
	char tag[ETAG_HEX + 1], v[ETAG_HEX + sizeof GZIP_SUFFIX + 3];
	struct buf z;

	if (etag_stage(c, tag) || res->body.len < NEGOTIATE_GZIP_MIN || res->status == 204 ||
	    res->status == 304)
		return;
	(void)response_header(res, "Vary", "Accept-Encoding");
	if (c->encoded || !http_accepts_gzip(http_header(c->req, "Accept-Encoding")))
		return;
	buf_init(&z, 0);
	if (http_gzip(res->body.data, res->body.len, 1, &z) < 0) {
		buf_free(&z);
		return;
	}
	buf_free(&res->body);
	res->body = z;
	(void)response_header(res, "Content-Encoding", "gzip");
	if (tag[0]) {
		snprintf(v, sizeof v, "\"%s" GZIP_SUFFIX "\"", tag);
		(void)response_header(res, "ETag", v);
	}
}

int negotiate_wants_gzip(const struct ctx *c)
{
	return http_accepts_gzip(http_header(c->req, "Accept-Encoding"));
}

void negotiate_mark_encoded(struct ctx *c)
{
	c->encoded = 1;
	(void)response_header(c->res, "Content-Encoding", "gzip");
}
