#include "http/http_gzip.h"

#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

/* windowBits 15 + 16: a gzip header and trailer around the deflate data. */
#define GZIP_WINDOW (15 + 16)

int http_gzip(const void *in, size_t n, int level, struct buf *out)
{
	z_stream z = {0};
	unsigned char *tmp = NULL;
	uLong bound;
	int rc = -1;

	buf_reset(out);
	if (n > UINT32_MAX / 2 ||
	    deflateInit2(&z, level, Z_DEFLATED, GZIP_WINDOW, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	bound = deflateBound(&z, (uLong)n);
	tmp = malloc(bound);
	if (!tmp)
		goto out;
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = tmp;
	z.avail_out = (uInt)bound;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END || buf_append(out, tmp, z.total_out) < 0)
		goto out;
	rc = 0;
out:
	deflateEnd(&z);
	free(tmp);
	if (rc < 0)
		buf_reset(out);
	return rc;
}
