/* libFuzzer driver for the pagination parameters (pagination.h):
 * pagination_cursor_decode must refuse everything that was not made by
 * pagination_cursor_encode with the same key and scope, and
 * pagination_limit must accept only plain decimal from 1 to the plan's
 * page maximum. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/pagination.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ?limit=s for a plan whose page maximum is 200: accepted exactly when s
 * is 1-6 decimal digits worth 1..200, and then worth *out. */
static void check_limit(const char *s)
{
	int out = -1, rc = pagination_limit(s, 200, &out);
	size_t i;
	long v = 0;

	for (i = 0; s[i] && s[i] >= '0' && s[i] <= '9' && i < 7; i++)
		v = v * 10 + (s[i] - '0');
	if ((rc == 0) != (i > 0 && i <= 6 && !s[i] && v >= 1 && v <= 200) || (rc == 0 && out != v))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned char key[32] = {1, 2, 3};
	char in[PAGINATION_CURSOR_MAX + 2], last[160], again[PAGINATION_CURSOR_MAX + 1];

	if (size > PAGINATION_CURSOR_MAX + 1)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	check_limit(in);
	if (pagination_cursor_decode(key, "scope", in, last, sizeof last) < 0)
		return 0;
	/* Accepted: it must be exactly the canonical encoding of last. */
	if (pagination_cursor_encode(key, "scope", last, again, sizeof again) < 0 ||
	    strcmp(again, in) != 0)
		abort();
	return 0;
}
