#include "core/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

static int buf_reserve(struct buf *b, size_t extra)
{
	size_t need, ncap;
	char *p;

	if (extra > (size_t)-1 / 2 - b->len)
		return -1;
	need = b->len + extra + 1;
	if (b->max && need - 1 > b->max)
		return -1;
	if (need <= b->cap)
		return 0;
	ncap = b->cap ? b->cap : 256;
	while (ncap < need)
		ncap *= 2;
	p = realloc(b->data, ncap);
	if (!p)
		return -1;
	b->data = p;
	b->cap = ncap;
	return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n) < 0)
		return -1;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_putc(struct buf *b, char c)
{
	return buf_append(b, &c, 1);
}

size_t buf_format_int(int64_t v, char out[BUF_INT_MAX])
{
	char tmp[BUF_INT_MAX];
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	size_t n = 0, len = 0;

	do
		tmp[n++] = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	if (v < 0)
		out[len++] = '-';
	while (n)
		out[len++] = tmp[--n];
	out[len] = '\0';
	return len;
}

int buf_put_int(struct buf *b, int64_t v)
{
	char d[BUF_INT_MAX];

	return buf_append(b, d, buf_format_int(v, d));
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n) < 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

char *buf_steal(struct buf *b)
{
	char *p = b->data;

	if (!p)
		p = calloc(1, 1);
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}
