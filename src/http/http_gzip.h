/* http_gzip: gzip content coding of response bodies (RFC 9110 §8.4.1.3);
 * the only file that includes zlib. */
#ifndef REVOPS_HTTP_GZIP_H
#define REVOPS_HTTP_GZIP_H
#include <stddef.h>
#include "core/buf.h"
#include "core/common.h"

/* Compresses in[0..n) into out (reset first) as one gzip member, at
 * level (1 fast .. 9 small). Returns 0, or -1 (out empty) when zlib or
 * memory fails. */
int http_gzip(const void *in, size_t n, int level, struct buf *out) WUR;

#endif
