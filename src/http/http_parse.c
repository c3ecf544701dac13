/* http_parse: strict HTTP/1.1 request heads and chunked bodies. */
#include "http/http_parse.h"

#include <string.h>
#include <strings.h>

/* Byte classes (RFC 9110 §5.6.2, §5.5): T_TOKEN may be in a method or a
 * field name; T_TARGET may be in a request-target (visible ASCII and
 * obs-text); T_VALUE may be in a field value (T_TARGET, SP, HTAB). */
enum { T_TOKEN = 1, T_TARGET = 2, T_VALUE = 4 };
#define TOK (T_TOKEN | T_TARGET | T_VALUE)
#define VIS (T_TARGET | T_VALUE)
static const unsigned char cls[256] = {
	['\t'] = T_VALUE,     [' '] = T_VALUE,     ['!'] = TOK,         ['"'] = VIS,
	['#' ... '\''] = TOK, ['(' ... ')'] = VIS, ['*' ... '+'] = TOK, [','] = VIS,
	['-' ... '.'] = TOK,  ['/'] = VIS,         ['0' ... '9'] = TOK, [':' ... '@'] = VIS,
	['A' ... 'Z'] = TOK,  ['[' ... ']'] = VIS, ['^' ... 'z'] = TOK, ['{'] = VIS,
	['|'] = TOK,          ['}'] = VIS,         ['~'] = TOK,         [0x80 ... 0xff] = VIS,
};
#undef TOK
#undef VIS

int http_head_plausible(const char *buf, size_t len)
{
	const char *lf = memchr(buf, '\n', len), *sp1, *sp2;
	size_t i, n;

	for (i = 0; i < len && i <= 32 && buf[i] != ' '; i++)
		if (!(cls[(unsigned char)buf[i]] & T_TOKEN))
			return 0;
	if (i > 32 || (i < len && i == 0))
		return 0;
	if (!lf)
		return 1;
	/* The whole request line is here: it must have three parts, the last
	 * naming an HTTP version (an HTTP/0.9 "GET /" never gets fields). */
	n = (size_t)(lf - buf);
	if (n && buf[n - 1] == '\r')
		n--;
	sp1 = memchr(buf, ' ', n);
	sp2 = sp1 ? memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - buf)) : NULL;
	return sp2 && n - (size_t)(sp2 + 1 - buf) >= 5 && !strncmp(sp2 + 1, "HTTP/", 5);
}

size_t http_head_end(const char *buf, size_t len, size_t *scan)
{
	const char *p;
	size_t i = *scan;

	while (i < len) {
		p = memchr(buf + i, '\n', len - i);
		if (!p) {
			i = len; /* nothing to look at again next time */
			break;
		}
		i = (size_t)(p - buf);
		if (i + 1 >= len)
			break;
		if (buf[i + 1] == '\n')
			return i + 2;
		if (buf[i + 1] == '\r') {
			if (i + 2 >= len)
				break;
			if (buf[i + 2] == '\n')
				return i + 3;
		}
		i++;
	}
	*scan = i < len ? i : len;
	return 0;
}

/* Ends the line that starts at p (within end): writes a NUL over its CR
 * (if any) or LF and returns where the next line starts, or NULL when a
 * CR stands anywhere but right before the LF. */
static char *end_line(char *p, char *end, char **line_end)
{
	char *lf = memchr(p, '\n', (size_t)(end - p));
	char *e;

	if (!lf)
		return NULL;
	e = (lf > p && lf[-1] == '\r') ? lf - 1 : lf;
	if (memchr(p, '\r', (size_t)(e - p)))
		return NULL;
	*e = '\0';
	*line_end = e;
	return lf + 1;
}

/* Parses "HTTP/1.x" exactly; returns 0 with the minor version, 505 for a
 * major version above 1, or 400. */
static int parse_version(const char *v, int *minor)
{
	if (strncmp(v, "HTTP/", 5) || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' ||
	    v[7] > '9' || v[8])
		return 400;
	if (v[5] != '1')
		return v[5] == '0' ? 400 : 505;
	*minor = v[7] == '0' ? 0 : 1;
	return 0;
}

/* The request line: method SP target SP version, nothing else. */
static int parse_request_line(char *line, char *line_end, struct http_head *h, const char **msg)
{
	char *p = line;
	int st;

	h->method = p;
	while (cls[(unsigned char)*p] & T_TOKEN)
		p++;
	if (p == line || *p != ' ')
		goto bad;
	*p++ = '\0';
	h->target = p;
	while (cls[(unsigned char)*p] & T_TARGET)
		p++;
	if (p == h->target || *p != ' ')
		goto bad;
	*p++ = '\0';
	if (line_end - p > 8)
		goto bad;
	if ((st = parse_version(p, &h->minor)) != 0) {
		*msg = st == 505 ? "HTTP version not supported: only HTTP/1.x"
				 : "malformed HTTP version in the request line";
		return st;
	}
	return 0;
bad:
	*msg = "malformed request line: expected METHOD SP request-target SP HTTP/1.x";
	return 400;
}

/* 1 for the fields that frame a message: their values are taken exactly
 * as sent, since front ends disagree on whitespace after them. */
static int is_framing(const char *name)
{
	return !strcasecmp(name, "Transfer-Encoding") || !strcasecmp(name, "Content-Length");
}

/* One field line "name:OWS value OWS" (already NUL-terminated at its end).
 * The value is trimmed, but for the framing fields (see is_framing). */
static int parse_field(char *line, char *line_end, struct http_field *f, const char **msg)
{
	char *p = line, *v, *e;

	if (*p == ' ' || *p == '\t') {
		*msg = "obs-fold (a header line starting with a space or tab) is not accepted";
		return 400;
	}
	while (cls[(unsigned char)*p] & T_TOKEN)
		p++;
	if (p == line || *p != ':') {
		*msg = p == line ? "a header field name is empty or not a token"
				 : "a header field name is not a token, or is not followed by ':'";
		return 400;
	}
	*p++ = '\0';
	while (*p == ' ' || *p == '\t')
		p++;
	v = p;
	while (cls[(unsigned char)*p] & T_VALUE)
		p++;
	if (p != line_end) {
		*msg = "a header field value contains a control character";
		return 400;
	}
	e = p;
	while (e > v && (e[-1] == ' ' || e[-1] == '\t') && !is_framing(line))
		e--;
	*e = '\0';
	f->name = line;
	f->value = v;
	return 0;
}

int http_parse_head(char *buf, size_t len, struct http_head *h, const char **msg)
{
	char *p = buf, *end = buf + len, *line, *line_end;
	int st;

	h->nfields = 0;
	line = p;
	if (!(p = end_line(line, end, &line_end)))
		goto bad_line;
	if ((st = parse_request_line(line, line_end, h, msg)) != 0)
		return st;
	for (;;) {
		line = p;
		if (!(p = end_line(line, end, &line_end)))
			goto bad_line;
		if (line == line_end)
			return 0; /* the empty line */
		if (h->nfields == HTTP_FIELDS_MAX) {
			*msg = "more than 100 header fields";
			return 431;
		}
		if ((st = parse_field(line, line_end, &h->fields[h->nfields], msg)) != 0)
			return st;
		h->nfields++;
	}
bad_line:
	*msg = "a CR in the request head that does not end a line";
	return 400;
}

enum {
	C_SIZE,
	C_SIZE_WS,
	C_EXT,
	C_SIZE_LF,
	C_DATA,
	C_DATA_CR,
	C_DATA_LF,
	C_TRAILER_START,
	C_TRAILER,
	C_TRAILER_LF,
	C_DONE
};

#define CHUNK_DIGITS_MAX 16
#define CHUNK_ASIDE_MAX 4096

/* One byte of the chunk-size line (size, optional BWS and extensions,
 * CRLF). Returns 0, or 400 with *msg. */
static int size_byte(struct http_chunked *d, char c, const char **msg)
{
	int v = hex_value(c);

	if (d->state == C_SIZE && v >= 0) {
		if (++d->digits > CHUNK_DIGITS_MAX) {
			*msg = "a chunk-size has more than 16 hex digits";
			return 400;
		}
		d->left = d->left << 4 | (uint64_t)v;
		return 0;
	}
	if (d->state == C_SIZE && !d->digits)
		goto bad;
	if (d->state == C_EXT && c != '\r' && c != '\n') {
		if (++d->aside > CHUNK_ASIDE_MAX) {
			*msg = "chunk extensions longer than 4 KiB";
			return 400;
		}
		if (!(cls[(unsigned char)c] & T_VALUE)) {
			*msg = "a chunk extension contains a control character";
			return 400;
		}
		return 0;
	}
	if (d->state == C_SIZE_LF && c != '\n')
		goto bad;
	if (c == ' ' || c == '\t')
		d->state = d->state == C_SIZE ? C_SIZE_WS : d->state;
	else if (c == ';')
		d->state = C_EXT;
	else if (c == '\r')
		d->state = C_SIZE_LF;
	else if (c == '\n')
		d->state = d->left ? C_DATA : C_TRAILER_START;
	else
		goto bad;
	return 0;
bad:
	*msg = "malformed chunk-size line";
	return 400;
}

/* One byte of the trailer section: field lines, skipped, up to an empty
 * line. Returns 0, or 400 with *msg. */
static int trailer_byte(struct http_chunked *d, char c, const char **msg)
{
	if (++d->aside > CHUNK_ASIDE_MAX) {
		*msg = "a trailer section longer than 4 KiB";
		return 400;
	}
	if (c != '\r' && c != '\n' && !(cls[(unsigned char)c] & T_VALUE)) {
		*msg = "a trailer field contains a control character";
		return 400;
	}
	if (d->state == C_TRAILER_START)
		d->state = c == '\r' ? C_TRAILER_LF : c == '\n' ? C_DONE : C_TRAILER;
	else if (d->state == C_TRAILER_LF)
		d->state = c == '\n' ? C_DONE : -1;
	else if (c == '\n')
		d->state = C_TRAILER_START;
	if (d->state < 0) {
		*msg = "malformed trailer section";
		return 400;
	}
	return 0;
}

int http_chunked_feed(struct http_chunked *d, const char *in, size_t len, size_t *used,
		      struct buf *out, const char **msg)
{
	size_t i = 0, n;
	int st = 0;

	while (i < len && d->state != C_DONE && !st) {
		if (d->state == C_DATA) {
			n = len - i < d->left ? len - i : (size_t)d->left;
			if (buf_append(out, in + i, n) < 0) {
				*msg = "request body larger than 1 MiB";
				st = 413;
				break;
			}
			i += n;
			d->left -= n;
			if (!d->left)
				d->state = C_DATA_CR;
			continue;
		}
		if (d->state == C_DATA_CR || d->state == C_DATA_LF) {
			if (in[i] == '\n')
				d->state = C_SIZE, d->digits = 0, d->aside = 0;
			else if (in[i] == '\r' && d->state == C_DATA_CR)
				d->state = C_DATA_LF;
			else
				*msg = "chunk data not followed by CRLF", st = 400;
		} else if (d->state >= C_TRAILER_START) {
			st = trailer_byte(d, in[i], msg);
		} else {
			st = size_byte(d, in[i], msg);
			if (!st && d->state == C_DATA && out->max && d->left > out->max - out->len) {
				*msg = "request body larger than 1 MiB";
				st = 413;
			}
		}
		i++;
	}
	*used = i;
	if (st)
		return st;
	return d->state == C_DONE;
}
