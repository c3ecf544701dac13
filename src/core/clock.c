#include "core/clock.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static double time_scale = 1.0;

int64_t clock_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_ms(void)
{
	return clock_mono_us() / 1000;
}

int64_t clock_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void clock_set_time_scale(double scale)
{
	time_scale = scale >= 1.0 ? scale : 1.0;
}

double clock_time_scale(void)
{
	return time_scale;
}

int64_t clock_business_ms(int64_t ms)
{
	return (int64_t)((double)ms / time_scale);
}

/* Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's
 * days_from_civil), and its inverse; valid for any year we store. */
int64_t clock_days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t era;
	unsigned doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (unsigned)(z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

void clock_format_ms(int64_t ms, char out[CLOCK_RFC3339_LEN])
{
	int64_t days = floor_div(ms, 86400000), rem = ms - days * 86400000, y;
	unsigned m, d;

	char tmp[64];

	civil_from_days(days, &y, &m, &d);
	snprintf(tmp, sizeof tmp, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", (int)y, m, d,
		 (int)(rem / 3600000), (int)(rem / 60000 % 60), (int)(rem / 1000 % 60),
		 (int)(rem % 1000));
	memcpy(out, tmp, CLOCK_RFC3339_LEN - 1);
	out[CLOCK_RFC3339_LEN - 1] = '\0';
}

void clock_format_http_date(int64_t ms, char out[30])
{
	static const char *wd[] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
	static const char *mn[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
				   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	int64_t days = floor_div(ms, 86400000), rem = ms - days * 86400000, y;
	unsigned m, d;

	char tmp[64];

	civil_from_days(days, &y, &m, &d);
	snprintf(tmp, sizeof tmp, "%s, %02u %s %04d %02d:%02d:%02d GMT", wd[(days % 7 + 7) % 7], d,
		 mn[m - 1], (int)y, (int)(rem / 3600000), (int)(rem / 60000 % 60),
		 (int)(rem / 1000 % 60));
	memcpy(out, tmp, 29);
	out[29] = '\0';
}

static int is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int clock_days_in_month(int64_t y, unsigned m)
{
	static const unsigned mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	return m >= 1 && m <= 12 ? (int)(mdays[m - 1] + (m == 2 && is_leap(y))) : 0;
}

int clock_parse_date(const char *s, int64_t *days)
{
	static const unsigned mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	unsigned y = 0, m, d, i;

	if (strlen(s) != 10 || s[4] != '-' || s[7] != '-')
		return -1;
	for (i = 0; i < 10; i++)
		if (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9'))
			return -1;
	for (i = 0; i < 4; i++)
		y = y * 10 + (unsigned)(s[i] - '0');
	m = (unsigned)(s[5] - '0') * 10 + (unsigned)(s[6] - '0');
	d = (unsigned)(s[8] - '0') * 10 + (unsigned)(s[9] - '0');
	if (y < 1 || m < 1 || m > 12 || d < 1)
		return -1;
	if (d > mdays[m - 1] + (m == 2 && is_leap(y)))
		return -1;
	*days = clock_days_from_civil(y, m, d);
	return 0;
}

/* n decimal digits at s as an unsigned number, or -1. */
static int digits(const char *s, int n)
{
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

int clock_parse_time(const char *s, int64_t *ms)
{
	char date[11];
	int64_t days, frac = 0;
	int h, mi, sec, n = 0, oh, om;
	const char *p;

	if (strlen(s) < 20 || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':')
		return -1;
	memcpy(date, s, 10);
	date[10] = '\0';
	h = digits(s + 11, 2);
	mi = digits(s + 14, 2);
	sec = digits(s + 17, 2);
	if (clock_parse_date(date, &days) < 0 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 ||
	    sec > 59)
		return -1;
	p = s + 19;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, n++)
			if (n < 3)
				frac = frac * 10 + (*p - '0');
		if (n < 1 || n > 9)
			return -1;
		for (; n < 3; n++)
			frac *= 10;
	}
	*ms = ((days * 24 + h) * 60 + mi) * 60000 + (int64_t)sec * 1000 + frac;
	if ((*p == 'Z' || *p == 'z') && !p[1])
		return 0;
	if ((*p != '+' && *p != '-') || strlen(p) != 6 || p[3] != ':' ||
	    (oh = digits(p + 1, 2)) < 0 || oh > 23 || (om = digits(p + 4, 2)) < 0 || om > 59)
		return -1;
	*ms -= (*p == '+' ? 1 : -1) * ((int64_t)oh * 60 + om) * 60000;
	return 0;
}

void clock_format_date(int64_t days, char out[11])
{
	int64_t y;
	unsigned m, d;

	char tmp[64];

	civil_from_days(days, &y, &m, &d);
	snprintf(tmp, sizeof tmp, "%04d-%02u-%02u", (int)y, m, d);
	memcpy(out, tmp, 10);
	out[10] = '\0';
}

int64_t clock_add_months(int64_t ms, int months)
{
	static const unsigned mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int64_t days = floor_div(ms, 86400000), rem = ms - days * 86400000, y, total;
	unsigned m, d, dim;

	civil_from_days(days, &y, &m, &d);
	total = y * 12 + (m - 1) + months;
	y = floor_div(total, 12);
	m = (unsigned)(total - y * 12) + 1;
	dim = mdays[m - 1] + (m == 2 && is_leap(y));
	if (d > dim)
		d = dim;
	return clock_days_from_civil(y, m, d) * 86400000 + rem;
}
