/* libFuzzer driver: pagination_cursor_decode must refuse everything that
 * was not made by pagination_cursor_encode with the same key and scope. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pagination.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned char key[32] = {1, 2, 3};
	char in[PAGINATION_CURSOR_MAX + 2], last[160], again[PAGINATION_CURSOR_MAX + 1];

	if (size > PAGINATION_CURSOR_MAX + 1)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	if (pagination_cursor_decode(key, "scope", in, last, sizeof last) < 0)
		return 0;
	/* Accepted: it must be exactly the canonical encoding of last. */
	if (pagination_cursor_encode(key, "scope", last, again, sizeof again) < 0 ||
	    strcmp(again, in) != 0)
		abort();
	return 0;
}
