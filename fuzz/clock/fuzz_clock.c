/* libFuzzer driver: the RFC 3339 date-times and dates the feeds accept
 * (clock_parse_time, clock_parse_date) must never crash, and whatever they
 * accept must name one instant: formatted back (UTC, milliseconds) it
 * parses to the same value, and a date formats back to itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[64], out[CLOCK_RFC3339_LEN], day[11];
	int64_t ms, again, d;

	if (size >= sizeof s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (clock_parse_time(s, &ms) == 0) {
		/* an accepted time is at least "YYYY-MM-DDTHH:MM:SSZ" */
		if (strlen(s) < 20)
			abort();
		/* years 0001-9999 with offsets up to a day either side */
		if (ms < -62135683200000LL || ms > 253402387200000LL)
			abort();
		if (ms >= 0 && ms < 253402300800000LL) {
			clock_format_ms(ms, out);
			if (clock_parse_time(out, &again) != 0 || again != ms)
				abort();
		}
	}
	if (clock_parse_date(s, &d) == 0) {
		clock_format_date(d, day);
		if (strcmp(day, s))
			abort();
	}
	return 0;
}
