/* libFuzzer driver for the HTTP/1.1 request parser (http_parse.h), fed a
 * connection's bytes the way http_server.c feeds them: empty lines before
 * a request skipped, http_head_plausible on what has arrived,
 * http_head_end until the head is complete (at most HTTP_HEAD_MAX),
 * http_parse_head, http_check_target and http_check_fields on the parsed
 * head, then the body, by Content-Length or through http_chunked_feed
 * capped at HTTP_BODY_MAX, then the next pipelined request, until the
 * input ends or a request is refused (the server then closes).
 *
 * The server reads whatever the network delivers, so the oracle is above
 * all that the split does not matter: the head end found a byte at a time
 * (resuming with *scan) is the one found at once; a chunked body fed in
 * pieces of 1, 2, 3, 5, 8 ... bytes decodes to the same bytes, ends at the
 * same place and fails with the same status as fed at once, and every
 * piece before its end is consumed whole. Besides that, and memory errors,
 * leaks and undefined behaviour, it aborts when a promise is broken: a
 * prefix found implausible never becomes plausible, and a head that
 * parses was plausible; a refusal is 400, 431 or 505 (413 for a body)
 * with a reason; a parsed head has a token method, a target of visible
 * bytes, HTTP/1.0 or 1.1, at most HTTP_FIELDS_MAX fields with token names
 * and values free of control bytes but HTAB, all inside the head. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "http/http.h"
#include "http/http_check.h"
#include "http/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Requests on one connection the driver follows before it stops. */
#define MAX_REQUESTS 16

static int is_token(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr("!#$%&'*+-.^_`|~", *s)))
			return 0;
	return 1;
}

static int inside(const char *p, const char *buf, size_t len)
{
	return p >= buf && p < buf + len;
}

/* The promises of a head http_parse_head accepted, in buf[0..len). */
static void check_head(const struct http_head *h, const char *buf, size_t len)
{
	const char *p;
	size_t i;

	if (!inside(h->method, buf, len) || !is_token(h->method) || !inside(h->target, buf, len) ||
	    !h->target[0] || (h->minor != 0 && h->minor != 1) || h->nfields > HTTP_FIELDS_MAX)
		abort();
	for (p = h->target; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			abort();
	for (i = 0; i < h->nfields; i++) {
		if (!inside(h->fields[i].name, buf, len) || !is_token(h->fields[i].name) ||
		    !inside(h->fields[i].value, buf, len))
			abort();
		for (p = h->fields[i].value; *p; p++)
			if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
				abort();
	}
}

static const char *field(const struct http_head *h, const char *name)
{
	size_t i;

	for (i = 0; i < h->nfields; i++)
		if (!strcasecmp(h->fields[i].name, name))
			return h->fields[i].value;
	return NULL;
}

/* Finds the end of the head in in[0..len) at once and a byte at a time;
 * both must agree. Returns it, or 0 when incomplete. */
static size_t head_end(const char *in, size_t len)
{
	size_t scan = 0, once, n, step = 0;

	once = http_head_end(in, len, &scan);
	if (once > len || (once && once < 2))
		abort();
	scan = 0;
	for (n = 1; n <= len; n++) {
		if (scan > n - 1)
			abort(); /* resumes inside what it has seen */
		step = http_head_end(in, n, &scan);
		if (step)
			break;
	}
	if (step != once)
		abort();
	return once;
}

/* Decodes a chunked body from in[0..len) at once and in pieces; both must
 * agree. Returns the status (1 ended, 0 needs more, else the refusal) and
 * the bytes used in *used. */
static int chunked(const char *in, size_t len, size_t *used)
{
	static const size_t piece[] = {1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233};
	struct http_chunked a, b;
	struct buf ba, bb;
	const char *msg = NULL;
	size_t ua = 0, ub = 0, n, u, k = 0;
	int ra, rb = 0;

	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	buf_init(&ba, HTTP_BODY_MAX);
	buf_init(&bb, HTTP_BODY_MAX);
	ra = http_chunked_feed(&a, in, len, &ua, &ba, &msg);
	if (ra < 0 || (ra > 1 && ra != 400 && ra != 413) || (ra > 1 && (!msg || !*msg)) ||
	    ua > len || (ra == 0 && ua != len) || ba.len > HTTP_BODY_MAX)
		abort();
	while (ub < len) {
		n = piece[k++ % (sizeof piece / sizeof *piece)];
		if (n > len - ub)
			n = len - ub;
		u = 0;
		rb = http_chunked_feed(&b, in + ub, n, &u, &bb, &msg);
		if (u > n || (rb == 0 && u != n))
			abort();
		ub += u;
		if (rb)
			break;
	}
	if (ra != rb || (ra == 1 && ua != ub) ||
	    (ra <= 1 && (ba.len != bb.len || (ba.len && memcmp(ba.data, bb.data, ba.len)))))
		abort();
	buf_free(&ba);
	buf_free(&bb);
	*used = ua;
	return ra;
}

/* Serves one request from in[0..len) as the server would. Returns the
 * bytes it took, or 0 when the connection ends (a refusal, or the input
 * ends inside the request). */
static size_t one_request(const char *in, size_t len)
{
	struct http_head h;
	const char *msg = NULL, *te, *cl;
	char *head;
	size_t end, i, used = 0;
	unsigned long long body;
	int st, was, now;

	/* Every prefix a short request line arrives in, then doubling ones:
	 * the answer only ever turns from 1 to 0. */
	for (i = 1, was = 1; i <= len; i = i < 512 ? i + 1 : (i * 2 < len || i == len ? i * 2 : len)) {
		now = http_head_plausible(in, i);
		if (now && !was)
			abort(); /* implausible, then plausible again */
		was = now;
	}
	if (!http_head_plausible(in, len))
		return 0;
	end = head_end(in, len);
	if (!end || end > HTTP_HEAD_MAX)
		return 0;
	head = malloc(end); /* exactly the head: ASan sees a read past it */
	if (!head)
		return 0;
	memcpy(head, in, end);
	st = http_parse_head(head, end, &h, &msg);
	if (st == 0) {
		check_head(&h, head, end);
		st = http_check_target(h.target, &msg);
	} else if ((st != 400 && st != 431 && st != 505) || !msg || !*msg) {
		abort();
	}
	if (!st && h.minor >= 1 && !field(&h, "Host"))
		st = 400;
	if (!st)
		st = http_check_fields(h.fields, h.nfields, HTTP_BODY_MAX, &msg);
	if (st) {
		free(head);
		return 0;
	}
	te = field(&h, "Transfer-Encoding");
	cl = field(&h, "Content-Length");
	free(head);
	if (te) {
		st = chunked(in + end, len - end, &used);
		return st == 1 ? end + used : 0;
	}
	body = cl ? strtoull(cl, NULL, 10) : 0;
	if (body > len - end)
		return 0;
	return end + (size_t)body;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	size_t pos = 0, n;
	int k;

	for (k = 0; k < MAX_REQUESTS && pos < size; k++) {
		while (pos < size && (in[pos] == '\r' || in[pos] == '\n'))
			pos++;
		if (pos == size)
			break;
		n = one_request(in + pos, size - pos);
		if (!n)
			break;
		pos += n;
	}
	return 0;
}
