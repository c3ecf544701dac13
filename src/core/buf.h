/* buf: a growable byte buffer with a hard cap, for anything fed by input. */
#ifndef REVOPS_BUF_H
#define REVOPS_BUF_H
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"

struct buf {
	char *data; /* NUL-terminated after every successful append */
	size_t len;
	size_t cap; /* allocated bytes */
	size_t max; /* largest len allowed; 0 = no cap */
};

void buf_init(struct buf *b, size_t max);
/* Appends n bytes. Returns 0, or -1 (buffer unchanged) when the result would
 * exceed b->max or memory runs out. */
int buf_append(struct buf *b, const void *p, size_t n) WUR;
int buf_puts(struct buf *b, const char *s) WUR;
int buf_putc(struct buf *b, char c) WUR;
int buf_printf(struct buf *b, const char *fmt, ...) PRINTF(2, 3) WUR;
/* Appends v in decimal. */
int buf_put_int(struct buf *b, int64_t v) WUR;
void buf_reset(struct buf *b);
void buf_free(struct buf *b);
/* Writes v in decimal and a NUL into out (BUF_INT_MAX bytes); returns
 * the digits' length. As "%lld" writes, without printf's cost on hot paths
 * (SQL text and parameters, the access log). */
#define BUF_INT_MAX 21
size_t buf_format_int(int64_t v, char out[BUF_INT_MAX]);
/* Hands the bytes to the caller (free() them); b is left empty. */
char *buf_steal(struct buf *b);

#endif
