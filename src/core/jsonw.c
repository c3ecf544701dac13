#include "core/jsonw.h"

#include "core/clock.h"
#include "core/validate.h"

#include <stdio.h>
#include <string.h>

/* The sequence at p, bounded by the terminating NUL. */
static int utf8_len(const unsigned char *p)
{
	return (int)validate_utf8_step(p, strnlen((const char *)p, 4));
}

int jsonw_str(struct buf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s, *run;
	char esc[8];
	int n;

	if (!s)
		return buf_puts(b, "null");
	if (buf_putc(b, '"') < 0)
		return -1;
	while (*p) {
		run = p;
		while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
			p++;
		if (p > run && buf_append(b, run, (size_t)(p - run)) < 0)
			return -1;
		if (!*p)
			break;
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			if (buf_append(b, esc, 2) < 0)
				return -1;
			p++;
		} else if (*p < 0x20) {
			snprintf(esc, sizeof esc, "\\u%04x", *p);
			if (buf_append(b, esc, 6) < 0)
				return -1;
			p++;
		} else if ((n = utf8_len(p)) > 0) {
			if (buf_append(b, p, (size_t)n) < 0)
				return -1;
			p += n;
		} else {
			if (buf_puts(b, "\\ufffd") < 0)
				return -1;
			p++;
		}
	}
	return buf_putc(b, '"');
}

int jsonw_key(struct buf *b, const char *key, int first)
{
	if (!first && buf_putc(b, ',') < 0)
		return -1;
	if (jsonw_str(b, key) < 0)
		return -1;
	return buf_putc(b, ':');
}

int jsonw_int(struct buf *b, int64_t v)
{
	return buf_put_int(b, v);
}

void jsonw_sanitize(char *s)
{
	unsigned char *p = (unsigned char *)s;
	int n;

	while (*p) {
		n = *p < 0x20 ? 0 : utf8_len(p);
		if (n == 0) {
			*p++ = '?';
			continue;
		}
		p += n;
	}
}

json_t *jsonw_time(int64_t ms)
{
	char ts[CLOCK_RFC3339_LEN];

	clock_format_ms(ms, ts);
	return json_string(ts);
}
