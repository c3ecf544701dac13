/* libFuzzer driver: the bytes of a TZif file (RFC 8536), as tz_load would
 * read it from /usr/share/zoneinfo, through tz_parse. It must never crash
 * or read outside the input. Whatever it accepts keeps its promises at
 * every instant tried (fixed ones from year 1 to the ends of int64_t, and
 * some taken from the input): a UT offset is whole seconds within
 * -24:59:59..+25:59:59, a wall time maps to an instant that far from it,
 * and every shorter prefix of an accepted file is refused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/tz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OFF_MIN (-89999 * 1000LL)
#define OFF_MAX (93599 * 1000LL)

/* The promises of tz_offset_ms and tz_local_to_utc_ms at ms. */
static void check_instant(const struct tz *z, int64_t ms)
{
	int64_t off = tz_offset_ms(z, ms), utc = tz_local_to_utc_ms(z, ms), d;

	if (off < OFF_MIN || off > OFF_MAX || off % 1000 != 0)
		abort();
	/* away from the ends of int64_t, where it saturates */
	if (ms > INT64_MIN / 2 && ms < INT64_MAX / 2) {
		d = ms - utc;
		if (d < OFF_MIN || d > OFF_MAX || d % 1000 != 0)
			abort();
	}
}

/* tz_parse on an exact-size copy of the first len bytes, so ASan sees a
 * read past them. Returns what tz_parse does. */
static int parse_copy(const uint8_t *data, size_t len, struct tz **z)
{
	unsigned char *copy = malloc(len ? len : 1);
	int rc;

	if (!copy)
		abort();
	memcpy(copy, data, len);
	rc = tz_parse(copy, len, z);
	free(copy);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int64_t fixed[] = {
		INT64_MIN,
		-62135596800000LL, /* 0001-01-01 */
		-2208988800000LL,  /* 1900-01-01 */
		-1,
		0,
		1774746000000LL - 1, /* 2026-03-29T01:00Z, Europe's spring change */
		1774746000000LL,
		1792890000000LL,   /* 2026-10-25T01:00Z */
		2145916800000LL,   /* 2038-01-01 */
		3802204800000LL,   /* 2090-06-25, footer rules */
		253402300800000LL, /* 10000-01-01 */
		INT64_MAX,
	};
	struct tz *z, *again;
	int64_t ms;
	size_t i;

	if (tz_parse(data, size, &z) < 0) {
		if (z)
			abort();
		return 0;
	}
	for (i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		check_instant(z, fixed[i]);
	/* instants from the input's last bytes: often transition times */
	for (i = 0; i + 8 <= size && i < 64; i += 8) {
		memcpy(&ms, data + size - 8 - i, 8);
		check_instant(z, ms);
		check_instant(z, ms / 1000 * 1000);
		check_instant(z, (int64_t)(int32_t)ms * 1000);
	}
	tz_free(z);
	/* the footer runs to the end of the file: no prefix is a whole file */
	if (size > 0 &&
	    (parse_copy(data, size - 1, &again) == 0 || parse_copy(data, size / 2, &again) == 0))
		abort();
	return 0;
}
