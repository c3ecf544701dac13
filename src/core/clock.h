/* clock: wall and monotonic time, RFC 3339 formatting, and the test-only
 * --time-scale that divides business durations. */
#ifndef REVOPS_CLOCK_H
#define REVOPS_CLOCK_H
#include <stdint.h>
#include "core/common.h"

#define CLOCK_RFC3339_LEN 25 /* "2026-11-22T08:00:00.123Z" + NUL */

int64_t clock_now_ms(void);  /* Unix time in ms */
int64_t clock_mono_ms(void); /* monotonic ms, for durations and limiters */
int64_t clock_mono_us(void);
/* Sets the divisor for business durations (>= 1). Call once at start. */
void clock_set_time_scale(double scale);
double clock_time_scale(void);
/* A business duration (retry backoff, windows, retention) scaled down. */
int64_t clock_business_ms(int64_t ms);
/* Formats ms as "YYYY-MM-DDTHH:MM:SS.mmmZ". */
void clock_format_ms(int64_t ms, char out[CLOCK_RFC3339_LEN]);
/* Formats ms as an IMF-fixdate (RFC 9110), e.g. for Sunset. out >= 30 bytes. */
void clock_format_http_date(int64_t ms, char out[30]);
/* Parses "YYYY-MM-DD" strictly (real calendar day). Returns 0 and the day
 * number since 1970-01-01 in *days, or -1. */
int clock_parse_date(const char *s, int64_t *days) WUR;
/* Parses an RFC 3339 date-time strictly: "YYYY-MM-DDTHH:MM:SS", an
 * optional fraction of 1 to 9 digits (kept to the millisecond, truncated),
 * then "Z" or an offset "+HH:MM" / "-HH:MM" ("T" and "Z" in either case;
 * no leap second). Returns 0 and Unix ms in *ms, or -1. */
int clock_parse_time(const char *s, int64_t *ms) WUR;
/* Formats a day number as "YYYY-MM-DD". */
void clock_format_date(int64_t days, char out[11]);
/* Days since 1970-01-01 of the proleptic Gregorian date y-m-d (m 1-12). */
int64_t clock_days_from_civil(int64_t y, unsigned m, unsigned d);
/* Days in month m (1-12) of year y; 0 for a bad month. */
int clock_days_in_month(int64_t y, unsigned m);
/* Adds months to a ms timestamp, clamping the day of month. */
int64_t clock_add_months(int64_t ms, int months);

#endif
