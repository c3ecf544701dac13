#include "core/tz.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"

#define TZIF_HEADER 44
#define TYPES_MAX 256      /* a transition's type is one byte */
#define UTOFF_MIN (-89999) /* -24:59:59, RFC 8536 section 3.2 */
#define UTOFF_MAX 93599    /* +25:59:59 */
#define FOOTER_MAX 255     /* a POSIX TZ string, without its newlines */
#define RULE_TIME_MAX 167  /* hours of a rule's /time (RFC 8536 section 3.3.1) */
#define CHANGES_MAX 16     /* footer changes of up to 8 years */
/* Every instant whose UT offset can decide a wall time's lies within this
 * many seconds of it (offsets are within UTOFF_MIN..UTOFF_MAX). */
#define LOCAL_WINDOW (2 * 86400)

/* One transition date of a POSIX TZ rule, in local time. */
struct rule_date {
	char kind;   /* 'J': Julian day 1-365 without Feb 29; 'D': day 0-365; 'M' */
	int m, w, d; /* 'M': month 1-12, week 1-5 (5 = last), weekday 0-6 (Sunday 0); J/D: day in d */
	int32_t time; /* seconds after local midnight, -167 h to 167 h */
};

/* The footer's POSIX TZ string, for instants past the last transition. */
struct posix_tz {
	int32_t std_off; /* UT offsets in seconds, east positive */
	int32_t dst_off;
	int has_dst;
	struct rule_date start; /* into DST, in standard local time */
	struct rule_date end;   /* out of DST, in DST local time */
};

struct tz {
	size_t timecnt;
	size_t typecnt;
	int has_footer;
	struct posix_tz footer;
	int32_t utoff[TYPES_MAX]; /* per type, seconds */
	const uint8_t *idx;       /* per transition, its type; points past times */
	int64_t times[];          /* transitions, Unix seconds, strictly ascending */
};

/* A TZif header's version and counts. */
struct tzif_header {
	unsigned char version;
	uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
};

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* Reads the header at pos into h. Returns 0, or -1 when fewer than 44 bytes
 * are left or the magic is wrong. */
static int read_header(const unsigned char *buf, size_t len, size_t pos, struct tzif_header *h)
{
	const unsigned char *p;

	if (pos > len || len - pos < TZIF_HEADER || memcmp(buf + pos, "TZif", 4) != 0)
		return -1;
	p = buf + pos;
	h->version = p[4];
	h->isutcnt = be32(p + 20);
	h->isstdcnt = be32(p + 24);
	h->leapcnt = be32(p + 28);
	h->timecnt = be32(p + 32);
	h->typecnt = be32(p + 36);
	h->charcnt = be32(p + 40);
	return 0;
}

/* The size of the data block that follows h, with ts-byte times (4 in the
 * version 1 block, 8 in the version 2+ block). Cannot overflow: every
 * count is below 2^32. */
static uint64_t block_size(const struct tzif_header *h, unsigned ts)
{
	return (uint64_t)h->timecnt * (ts + 1) + (uint64_t)h->typecnt * 6 + h->charcnt +
	       (uint64_t)h->leapcnt * (ts + 4) + h->isstdcnt + h->isutcnt;
}

/* Reads the data block at p (block_size(h, ts) bytes, already known to be
 * inside the buffer) into a new zone, checking every count, index and
 * value. Returns the zone (footer not yet set), or NULL. */
static struct tz *read_block(const unsigned char *p, const struct tzif_header *h, unsigned ts)
{
	const unsigned char *isstd, *isut;
	struct tz *z = NULL;
	uint8_t *idx;
	size_t i;

	if (h->typecnt == 0 || h->typecnt > TYPES_MAX || h->charcnt == 0 || h->leapcnt != 0 ||
	    (h->isutcnt != 0 && h->isutcnt != h->typecnt) ||
	    (h->isstdcnt != 0 && h->isstdcnt != h->typecnt))
		goto fail;
	z = calloc(1, sizeof *z + (size_t)h->timecnt * (sizeof z->times[0] + 1));
	if (!z)
		goto fail;
	z->timecnt = h->timecnt;
	z->typecnt = h->typecnt;
	idx = (uint8_t *)(z->times + z->timecnt);
	z->idx = idx;
	for (i = 0; i < z->timecnt; i++, p += ts) {
		z->times[i] = ts == 8 ? be64(p) : (int64_t)(int32_t)be32(p);
		if (i > 0 && z->times[i] <= z->times[i - 1])
			goto fail;
	}
	for (i = 0; i < z->timecnt; i++, p++) {
		if (*p >= z->typecnt)
			goto fail;
		idx[i] = *p;
	}
	for (i = 0; i < z->typecnt; i++, p += 6) {
		int32_t off = (int32_t)be32(p);

		if (off < UTOFF_MIN || off > UTOFF_MAX || p[4] > 1 || p[5] >= h->charcnt)
			goto fail;
		z->utoff[i] = off;
	}
	p += h->charcnt;
	isstd = p;
	isut = p + h->isstdcnt;
	for (i = 0; i < z->typecnt; i++) {
		int std = h->isstdcnt ? isstd[i] : 0, ut = h->isutcnt ? isut[i] : 0;

		/* a UT indicator set needs the standard one set too */
		if (std > 1 || ut > 1 || (ut && !std))
			goto fail;
	}
	return z;
fail:
	free(z);
	return NULL;
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int is_alpha(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* 1 to maxd decimal digits at *p: their value, *p moved past them; or -1. */
static int parse_num(const char **p, int maxd)
{
	const char *s = *p;
	int v = 0, n = 0;

	while (n < maxd && is_digit(*s)) {
		v = v * 10 + (*s++ - '0');
		n++;
	}
	if (n == 0)
		return -1;
	*p = s;
	return v;
}

/* A zone abbreviation at *p: three or more letters, or <...> quoting three
 * or more of [A-Za-z0-9+-]. Moves *p past it. Returns 0 or -1. */
static int parse_name(const char **p)
{
	const char *s = *p;
	size_t n = 0;

	if (*s == '<') {
		for (s++; is_alpha(*s) || is_digit(*s) || *s == '+' || *s == '-'; s++)
			n++;
		if (*s != '>' || n < 3)
			return -1;
		s++;
	} else {
		for (; is_alpha(*s); s++)
			n++;
		if (n < 3)
			return -1;
	}
	*p = s;
	return 0;
}

/* [+-]hh[:mm[:ss]] at *p, hours at most max_h (3 digits at most), minutes
 * and seconds at most 59: its signed value in seconds in *secs, *p moved
 * past it. Returns 0 or -1. */
static int parse_hms(const char **p, int max_h, int32_t *secs)
{
	const char *s = *p;
	int sign = 1, h, m = 0, sec = 0;

	if (*s == '+' || *s == '-')
		sign = *s++ == '-' ? -1 : 1;
	h = parse_num(&s, 3);
	if (h < 0 || h > max_h)
		return -1;
	if (*s == ':') {
		s++;
		m = parse_num(&s, 2);
		if (m < 0 || m > 59)
			return -1;
		if (*s == ':') {
			s++;
			sec = parse_num(&s, 2);
			if (sec < 0 || sec > 59)
				return -1;
		}
	}
	*secs = sign * (h * 3600 + m * 60 + sec);
	*p = s;
	return 0;
}

/* A rule date at *p: Jn (1-365), n (0-365) or Mm.w.d, then an optional
 * /time (RFC 8536's extension: -167 to 167 hours; 02:00 when absent).
 * Returns 0 or -1. */
static int parse_date(const char **p, struct rule_date *r)
{
	const char *s = *p;

	memset(r, 0, sizeof *r);
	r->time = 7200;
	if (*s == 'J') {
		s++;
		r->kind = 'J';
		r->d = parse_num(&s, 3);
		if (r->d < 1 || r->d > 365)
			return -1;
	} else if (*s == 'M') {
		s++;
		r->kind = 'M';
		r->m = parse_num(&s, 2);
		if (r->m < 1 || r->m > 12 || *s++ != '.')
			return -1;
		r->w = parse_num(&s, 1);
		if (r->w < 1 || r->w > 5 || *s++ != '.')
			return -1;
		r->d = parse_num(&s, 1);
		if (r->d < 0 || r->d > 6)
			return -1;
	} else {
		r->kind = 'D';
		r->d = parse_num(&s, 3);
		if (r->d < 0 || r->d > 365)
			return -1;
	}
	if (*s == '/') {
		s++;
		if (parse_hms(&s, RULE_TIME_MAX, &r->time) < 0)
			return -1;
	}
	*p = s;
	return 0;
}

/* Parses a POSIX TZ string (NUL-terminated): std offset [dst [offset]
 * [,start[/time],end[/time]]]. A DST name without rules takes the US rules
 * (M3.2.0,M11.1.0), as glibc does. Returns 0 and the rule in *r, or -1. */
static int parse_posix(const char *s, struct posix_tz *r)
{
	int32_t off;

	memset(r, 0, sizeof *r);
	if (parse_name(&s) < 0 || parse_hms(&s, 24, &off) < 0)
		return -1;
	r->std_off = -off;
	if (!*s)
		return 0;
	if (parse_name(&s) < 0)
		return -1;
	r->has_dst = 1;
	r->dst_off = r->std_off + 3600;
	if (*s && *s != ',') {
		if (parse_hms(&s, 24, &off) < 0)
			return -1;
		r->dst_off = -off;
	}
	if (!*s) {
		r->start = (struct rule_date){.kind = 'M', .m = 3, .w = 2, .d = 0, .time = 7200};
		r->end = (struct rule_date){.kind = 'M', .m = 11, .w = 1, .d = 0, .time = 7200};
		return 0;
	}
	if (*s++ != ',' || parse_date(&s, &r->start) < 0)
		return -1;
	if (*s++ != ',' || parse_date(&s, &r->end) < 0)
		return -1;
	return *s ? -1 : 0;
}

/* Reads the footer of a version 2+ file: the n bytes at p, "\n" TZ "\n",
 * running to the end of the file. An empty TZ string leaves no footer.
 * Returns 0 or -1. */
static int read_footer(const unsigned char *p, size_t n, struct tz *z)
{
	char s[FOOTER_MAX + 1];

	if (n < 2 || n - 2 > FOOTER_MAX || p[0] != '\n' || p[n - 1] != '\n')
		return -1;
	memcpy(s, p + 1, n - 2);
	s[n - 2] = '\0';
	if (strlen(s) != n - 2 || strchr(s, '\n'))
		return -1;
	if (n == 2)
		return 0;
	if (parse_posix(s, &z->footer) < 0)
		return -1;
	z->has_footer = 1;
	return 0;
}

int tz_parse(const unsigned char *buf, size_t len, struct tz **out)
{
	struct tzif_header h;
	struct tz *z = NULL;
	uint64_t size;
	size_t pos;
	int rc = -1;

	*out = NULL;
	if (len > TZ_FILE_MAX || read_header(buf, len, 0, &h) < 0)
		goto out;
	size = block_size(&h, 4);
	if (size > len - TZIF_HEADER)
		goto out;
	pos = TZIF_HEADER + (size_t)size;
	if (h.version == 0) {
		/* version 1: the 32-bit block is all there is */
		if (pos != len || !(z = read_block(buf + TZIF_HEADER, &h, 4)))
			goto out;
	} else if (h.version >= '2' && h.version <= '9') {
		/* version 2+: skip the 32-bit block, read the 64-bit one */
		if (read_header(buf, len, pos, &h) < 0 || h.version < '2' || h.version > '9')
			goto out;
		pos += TZIF_HEADER;
		size = block_size(&h, 8);
		if (size > len - pos || !(z = read_block(buf + pos, &h, 8)))
			goto out;
		pos += (size_t)size;
		if (read_footer(buf + pos, len - pos, z) < 0)
			goto out;
	} else {
		goto out;
	}
	*out = z;
	z = NULL;
	rc = 0;
out:
	free(z);
	return rc;
}

void tz_free(struct tz *z)
{
	free(z);
}

/* The year (proleptic Gregorian) of day number days since 1970-01-01. */
static int64_t year_of_day(int64_t days)
{
	int64_t y = 1970 + floor_div(days * 400, 146097);

	while (clock_days_from_civil(y, 1, 1) > days)
		y--;
	while (clock_days_from_civil(y + 1, 1, 1) <= days)
		y++;
	return y;
}

/* The Unix time of rule date r in year y, r's local time being off seconds
 * east of UT. */
static int64_t rule_time(const struct rule_date *r, int64_t y, int32_t off)
{
	int64_t day = clock_days_from_civil(y, 1, 1), first;
	int dim;

	switch (r->kind) {
	case 'J':
		day += r->d - 1 + (r->d >= 60 && clock_days_in_month(y, 2) == 29);
		break;
	case 'D':
		day += r->d;
		break;
	default:
		first = clock_days_from_civil(y, (unsigned)r->m, 1);
		dim = clock_days_in_month(y, (unsigned)r->m);
		/* 1970-01-01 was a Thursday (4) */
		day = first + ((r->d - (first % 7 + 11) % 7) + 7) % 7 + (int64_t)(r->w - 1) * 7;
		while (day - first >= dim)
			day -= 7;
		break;
	}
	return day * 86400 + r->time - off;
}

/* The footer's DST period of year y, [*s, *e): from the start rule of y to
 * the end rule of y, or of y + 1 when that of y comes first (the southern
 * hemisphere). Empty when both fall at once. */
static void dst_period(const struct posix_tz *r, int64_t y, int64_t *s, int64_t *e)
{
	*s = rule_time(&r->start, y, r->std_off);
	*e = rule_time(&r->end, y, r->dst_off);
	if (*e < *s)
		*e = rule_time(&r->end, y + 1, r->dst_off);
}

/* The footer's UT offset at Unix time t: DST within any year's DST period
 * (with /time beyond 24 h or below 0 one may reach into the next year or
 * overlap another: DST all year, RFC 8536 section 3.3.1), standard time
 * outside them. */
static int32_t footer_offset(const struct posix_tz *r, int64_t t)
{
	int64_t y0, y, s, e;

	if (!r->has_dst)
		return r->std_off;
	/* a rule's transition lies within 8 days of its date */
	y0 = year_of_day(floor_div(t, 86400));
	for (y = y0 - 2; y <= y0 + 1; y++) {
		dst_period(r, y, &s, &e);
		if (s <= t && t < e)
			return r->dst_off;
	}
	return r->std_off;
}

/* The instants where the footer's offset may change, from the years y0
 * to y1 (at most CHANGES_MAX / 2 of them), sorted, into c. Returns how
 * many. */
static size_t footer_changes(const struct posix_tz *r, int64_t y0, int64_t y1, int64_t c[CHANGES_MAX])
{
	size_t n = 0, i, j;
	int64_t y, t;

	for (y = y0; y <= y1 && n + 2 <= CHANGES_MAX; y++) {
		dst_period(r, y, &c[n], &c[n + 1]);
		n += 2;
	}
	for (i = 1; i < n; i++) {
		t = c[i];
		for (j = i; j > 0 && c[j - 1] > t; j--)
			c[j] = c[j - 1];
		c[j] = t;
	}
	return n;
}

/* The index of the first transition after t (timecnt when none is). */
static size_t first_after(const struct tz *z, int64_t t)
{
	size_t lo = 0, hi = z->timecnt;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (z->times[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether the footer rules at t: from the last transition on (and always
 * when there is none). */
static int footer_rules(const struct tz *z, int64_t t)
{
	return z->has_footer && (z->timecnt == 0 || t >= z->times[z->timecnt - 1]);
}

/* The UT offset in seconds at Unix time t: type 0 before the first
 * transition (RFC 8536 section 3.2), the footer from the last one on, the
 * latest transition's type between. */
static int32_t offset_at(const struct tz *z, int64_t t)
{
	size_t i;

	if (footer_rules(z, t))
		return footer_offset(&z->footer, t);
	i = first_after(z, t);
	return i == 0 ? z->utoff[0] : z->utoff[z->idx[i - 1]];
}

int64_t tz_offset_ms(const struct tz *z, int64_t utc_ms)
{
	return (int64_t)offset_at(z, floor_div(utc_ms, 1000)) * 1000;
}

/* One step of tz_local_to_utc_ms's walk: a transition at t from *cur to
 * off applies to wall time ls (seconds) when ls is at or past t plus the
 * larger of the two offsets, so that the ambiguous wall times around it,
 * repeated or skipped, keep the offset before it. Returns 0 when it
 * applies (or changes nothing), -1 when the walk stops. */
static int walk_step(int64_t ls, int64_t t, int32_t off, int32_t *cur)
{
	if (off == *cur)
		return 0;
	if (ls < t + (off > *cur ? off : *cur))
		return -1;
	*cur = off;
	return 0;
}

int64_t tz_local_to_utc_ms(const struct tz *z, int64_t local_ms)
{
	int64_t ls = floor_div(local_ms, 1000), lo = ls - LOCAL_WINDOW, hi = ls + LOCAL_WINDOW;
	int32_t cur = offset_at(z, lo);
	int64_t changes[CHANGES_MAX], utc, last;
	size_t i, n;

	/* The offset at lo, then the transitions of (lo, hi] in order, each
	 * applied when the wall time is past it. */
	for (i = first_after(z, lo); i < z->timecnt && z->times[i] <= hi; i++) {
		int64_t t = z->times[i];
		int32_t off = footer_rules(z, t) ? footer_offset(&z->footer, t) : z->utoff[z->idx[i]];

		if (walk_step(ls, t, off, &cur) < 0)
			goto done;
	}
	if (z->has_footer && z->footer.has_dst && footer_rules(z, hi)) {
		last = z->timecnt ? z->times[z->timecnt - 1] : INT64_MIN;
		n = footer_changes(&z->footer, year_of_day(floor_div(lo, 86400)) - 2,
				   year_of_day(floor_div(hi, 86400)) + 1, changes);
		for (i = 0; i < n; i++)
			if (changes[i] > lo && changes[i] > last && changes[i] <= hi &&
			    walk_step(ls, changes[i], footer_offset(&z->footer, changes[i]), &cur) < 0)
				goto done;
	}
done:
	if (__builtin_sub_overflow(local_ms, (int64_t)cur * 1000, &utc))
		return cur > 0 ? INT64_MIN : INT64_MAX;
	return utc;
}

/* Whether name may name a zone file: 1 to TZ_NAME_MAX of [A-Za-z0-9_+-/],
 * not starting with "/", without "..". */
static int name_ok(const char *name)
{
	size_t n = strnlen(name, TZ_NAME_MAX + 1), i;

	if (n == 0 || n > TZ_NAME_MAX || name[0] == '/' || strstr(name, ".."))
		return 0;
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!is_alpha(c) && !is_digit(c) && c != '_' && c != '+' && c != '-' && c != '/')
			return 0;
	}
	return 1;
}

int tz_load(const char *name, struct tz **out)
{
	const char *dir = getenv("REVOPS_ZONEINFO");
	unsigned char *buf = NULL;
	char path[PATH_MAX];
	size_t got = 0, cap;
	struct stat st;
	int fd = -1, rc = -1;
	ssize_t r;

	*out = NULL;
	if (!name_ok(name))
		goto out;
	if (!dir || !*dir)
		dir = TZ_ZONEINFO;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
		goto out;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > TZ_FILE_MAX)
		goto out;
	/* one byte more than the size, to see a file that grew */
	cap = (size_t)st.st_size + 1;
	buf = malloc(cap);
	if (!buf)
		goto out;
	while (got < cap) {
		r = read(fd, buf + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto out;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got == cap)
		goto out;
	rc = tz_parse(buf, got, out);
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char name[TZ_NAME_MAX + 1];
	struct tz *z;
} cache[TZ_CACHE_MAX];
static size_t cache_len;

/* The cached zone of name, or NULL. Call with cache_lock held. */
static struct tz *cache_find(const char *name)
{
	size_t i;

	for (i = 0; i < cache_len; i++)
		if (strcmp(cache[i].name, name) == 0)
			return cache[i].z;
	return NULL;
}

int tz_get(const char *name, const struct tz **out)
{
	struct tz *z = NULL, *found;
	int rc = -1;

	*out = NULL;
	if (!name_ok(name))
		return -1;
	pthread_mutex_lock(&cache_lock);
	found = cache_find(name);
	pthread_mutex_unlock(&cache_lock);
	if (found) {
		*out = found;
		return 0;
	}
	/* loaded unlocked; another thread may cache the same zone meanwhile */
	if (tz_load(name, &z) < 0)
		return -1;
	pthread_mutex_lock(&cache_lock);
	found = cache_find(name);
	if (found) {
		*out = found;
		rc = 0;
	} else if (cache_len < TZ_CACHE_MAX) {
		str_copy(cache[cache_len].name, sizeof cache[cache_len].name, name);
		cache[cache_len].z = z;
		cache_len++;
		*out = z;
		z = NULL;
		rc = 0;
	}
	pthread_mutex_unlock(&cache_lock);
	tz_free(z);
	return rc;
}
