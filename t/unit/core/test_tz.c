/* Unit tests for tz: offsets and wall times of real zones against known
 * truths (2026's transitions to the millisecond, the footer's rules in
 * 2090, half- and quarter-hour zones), ambiguous wall times, bad names,
 * corrupt files, the POSIX TZ string forms, and glibc's localtime_r (TZ set
 * here only: this test is single-threaded but for the cache test) over
 * thousands of instants. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "core/clock.h"
#include "core/tz.h"

#define S 1000LL
#define MIN (60 * S)
#define H (60 * MIN)

/* Unix ms of y-mo-d h:mi (UTC, or a wall time read as if UTC). */
static int64_t at(int64_t y, unsigned mo, unsigned d, int h, int mi)
{
	return clock_days_from_civil(y, mo, d) * 86400 * S + h * H + mi * MIN;
}

/* The zone name, loaded; fails the test when it does not load. */
static struct tz *load(const char *name)
{
	struct tz *z = NULL;

	if (tz_load(name, &z) != 0)
		fail_msg("%s did not load", name);
	return z;
}

static void test_warsaw(void **state)
{
	struct tz *z = load("Europe/Warsaw");
	int64_t spring = at(2026, 3, 29, 1, 0), autumn = at(2026, 10, 25, 1, 0);

	(void)state;
	assert_int_equal(spring, 1774746000000LL);
	assert_int_equal(tz_offset_ms(z, at(2026, 1, 15, 12, 0)), 1 * H);
	assert_int_equal(tz_offset_ms(z, at(2026, 7, 15, 12, 0)), 2 * H);
	/* 2026-03-29 01:00Z to CEST, 2026-10-25 01:00Z back to CET */
	assert_int_equal(tz_offset_ms(z, spring - 1), 1 * H);
	assert_int_equal(tz_offset_ms(z, spring), 2 * H);
	assert_int_equal(tz_offset_ms(z, autumn - 1), 2 * H);
	assert_int_equal(tz_offset_ms(z, autumn), 1 * H);
	/* before the first transition: local mean time, +1:24 */
	assert_int_equal(tz_offset_ms(z, at(1800, 1, 1, 0, 0)), 84 * MIN);
	tz_free(z);
}

static void test_new_york(void **state)
{
	struct tz *z = load("America/New_York");
	int64_t spring = at(2026, 3, 8, 7, 0), autumn = at(2026, 11, 1, 6, 0);

	(void)state;
	assert_int_equal(tz_offset_ms(z, at(2026, 1, 15, 12, 0)), -5 * H);
	assert_int_equal(tz_offset_ms(z, at(2026, 7, 15, 12, 0)), -4 * H);
	assert_int_equal(tz_offset_ms(z, spring - 1), -5 * H);
	assert_int_equal(tz_offset_ms(z, spring), -4 * H);
	assert_int_equal(tz_offset_ms(z, autumn - 1), -4 * H);
	assert_int_equal(tz_offset_ms(z, autumn), -5 * H);
	tz_free(z);
}

/* 2090 is past the files' last transition (2037): the footer's rules. */
static void test_footer_2090(void **state)
{
	struct tz *w = load("Europe/Warsaw"), *ny = load("America/New_York");

	(void)state;
	assert_int_equal(tz_offset_ms(w, at(2090, 7, 1, 12, 0)), 2 * H);
	assert_int_equal(tz_offset_ms(w, at(2090, 1, 15, 12, 0)), 1 * H);
	assert_int_equal(tz_offset_ms(w, at(2090, 3, 26, 1, 0) - 1), 1 * H);
	assert_int_equal(tz_offset_ms(w, at(2090, 3, 26, 1, 0)), 2 * H);
	assert_int_equal(tz_offset_ms(w, at(2090, 10, 29, 1, 0) - 1), 2 * H);
	assert_int_equal(tz_offset_ms(w, at(2090, 10, 29, 1, 0)), 1 * H);
	assert_int_equal(tz_offset_ms(ny, at(2090, 7, 1, 12, 0)), -4 * H);
	assert_int_equal(tz_offset_ms(ny, at(2090, 3, 12, 7, 0) - 1), -5 * H);
	assert_int_equal(tz_offset_ms(ny, at(2090, 3, 12, 7, 0)), -4 * H);
	assert_int_equal(tz_offset_ms(ny, at(2090, 11, 5, 6, 0) - 1), -4 * H);
	assert_int_equal(tz_offset_ms(ny, at(2090, 11, 5, 6, 0)), -5 * H);
	/* wall times too: the 2090 gap and overlap in Warsaw */
	assert_int_equal(tz_local_to_utc_ms(w, at(2090, 3, 26, 2, 30)), at(2090, 3, 26, 1, 30));
	assert_int_equal(tz_local_to_utc_ms(w, at(2090, 10, 29, 2, 30)), at(2090, 10, 29, 0, 30));
	/* and far beyond: the year 9999, the ends of int64_t */
	assert_int_equal(tz_offset_ms(w, at(9999, 7, 1, 0, 0)), 2 * H);
	assert_int_equal(tz_offset_ms(w, at(9999, 12, 1, 0, 0)), 1 * H);
	(void)tz_offset_ms(w, INT64_MAX);
	(void)tz_offset_ms(w, INT64_MIN);
	assert_int_equal(tz_local_to_utc_ms(w, INT64_MIN), INT64_MIN);
	assert_int_equal(tz_local_to_utc_ms(ny, INT64_MAX), INT64_MAX);
	tz_free(w);
	tz_free(ny);
}

static void test_fixed_offsets(void **state)
{
	struct tz *z;

	(void)state;
	z = load("Asia/Kolkata");
	assert_int_equal(tz_offset_ms(z, at(2026, 1, 15, 0, 0)), 5 * H + 30 * MIN);
	assert_int_equal(tz_offset_ms(z, at(2090, 7, 1, 0, 0)), 5 * H + 30 * MIN);
	assert_int_equal(tz_local_to_utc_ms(z, at(2026, 7, 15, 12, 0)), at(2026, 7, 15, 6, 30));
	tz_free(z);
	z = load("UTC");
	assert_int_equal(tz_offset_ms(z, at(2026, 7, 15, 0, 0)), 0);
	assert_int_equal(tz_offset_ms(z, -1), 0);
	assert_int_equal(tz_local_to_utc_ms(z, 123456789), 123456789);
	tz_free(z);
	/* POSIX signs are inverted in Etc/ names: GMT+5 is five hours west */
	z = load("Etc/GMT+5");
	assert_int_equal(tz_offset_ms(z, at(2026, 7, 15, 0, 0)), -5 * H);
	tz_free(z);
	z = load("Asia/Kathmandu");
	assert_int_equal(tz_offset_ms(z, at(2026, 7, 15, 0, 0)), 5 * H + 45 * MIN);
	tz_free(z);
}

/* Lord Howe Island: +10:30, and +11 in summer (a 30-minute DST). */
static void test_lord_howe(void **state)
{
	struct tz *z = load("Australia/Lord_Howe");
	int64_t end = at(2026, 4, 4, 15, 0), start = at(2026, 10, 3, 15, 30);

	(void)state;
	assert_int_equal(tz_offset_ms(z, at(2026, 1, 15, 0, 0)), 11 * H);
	assert_int_equal(tz_offset_ms(z, at(2026, 7, 15, 0, 0)), 10 * H + 30 * MIN);
	assert_int_equal(tz_offset_ms(z, end - 1), 11 * H);
	assert_int_equal(tz_offset_ms(z, end), 10 * H + 30 * MIN);
	assert_int_equal(tz_offset_ms(z, start - 1), 10 * H + 30 * MIN);
	assert_int_equal(tz_offset_ms(z, start), 11 * H);
	assert_int_equal(tz_offset_ms(z, at(2090, 1, 15, 0, 0)), 11 * H);
	/* 01:30-02:00 on 2026-04-05 occurs twice: the earlier, at +11 */
	assert_int_equal(tz_local_to_utc_ms(z, at(2026, 4, 5, 1, 45)), at(2026, 4, 4, 14, 45));
	/* 02:00-02:30 on 2026-10-04 is skipped: +10:30, the offset before */
	assert_int_equal(tz_local_to_utc_ms(z, at(2026, 10, 4, 2, 15)), at(2026, 10, 3, 15, 45));
	tz_free(z);
}

static void test_local_to_utc(void **state)
{
	struct tz *w = load("Europe/Warsaw"), *ny = load("America/New_York");

	(void)state;
	/* ordinary wall times */
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 7, 15, 12, 0)), at(2026, 7, 15, 10, 0));
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 1, 15, 12, 0) + 123),
			 at(2026, 1, 15, 11, 0) + 123);
	/* the gap, 02:00-03:00 on 2026-03-29: moved forward by the hour */
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 3, 29, 2, 30)), at(2026, 3, 29, 1, 30));
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 3, 29, 2, 0) - 1), at(2026, 3, 29, 1, 0) - 1);
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 3, 29, 2, 0)), at(2026, 3, 29, 1, 0));
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 3, 29, 3, 0) - 1), at(2026, 3, 29, 2, 0) - 1);
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 3, 29, 3, 0)), at(2026, 3, 29, 1, 0));
	/* the overlap, 02:00-03:00 on 2026-10-25 twice: the earlier (CEST) */
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 10, 25, 2, 30)), at(2026, 10, 25, 0, 30));
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 10, 25, 2, 0) - 1),
			 at(2026, 10, 25, 0, 0) - 1);
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 10, 25, 2, 0)), at(2026, 10, 25, 0, 0));
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 10, 25, 3, 0) - 1),
			 at(2026, 10, 25, 1, 0) - 1);
	assert_int_equal(tz_local_to_utc_ms(w, at(2026, 10, 25, 3, 0)), at(2026, 10, 25, 2, 0));
	/* New York: the gap 02:00-03:00 on 03-08, the overlap 01:00-02:00 on 11-01 */
	assert_int_equal(tz_local_to_utc_ms(ny, at(2026, 3, 8, 2, 30)), at(2026, 3, 8, 7, 30));
	assert_int_equal(tz_local_to_utc_ms(ny, at(2026, 11, 1, 1, 30)), at(2026, 11, 1, 5, 30));
	assert_int_equal(tz_local_to_utc_ms(ny, at(2026, 11, 1, 2, 0)), at(2026, 11, 1, 7, 0));
	tz_free(w);
	tz_free(ny);
}

static void test_bad_names(void **state)
{
	static const char *const bad[] = {
		"",
		"../etc/passwd",
		"Europe/../UTC",
		"/usr/share/zoneinfo/UTC",
		"Nope/Zone",
		"Europe/Warsaw ",
		"Europe/Warsaw\n",
		"Europe\\Warsaw",
		"Europe",   /* a directory */
		"UTC/",     /* not a directory */
		"zone.tab", /* a text file, and '.' is refused */
		"Europe/Warsaw;",
		"Europe/Wa%72saw",
	};
	char longname[TZ_NAME_MAX + 2];
	const struct tz *shared;
	struct tz *z;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		z = (struct tz *)1;
		if (tz_load(bad[i], &z) != -1 || z != NULL)
			fail_msg("\"%s\" was accepted", bad[i]);
		if (tz_get(bad[i], &shared) != -1 || shared != NULL)
			fail_msg("\"%s\" was accepted by tz_get", bad[i]);
	}
	/* a name of TZ_NAME_MAX + 1 characters, and one of TZ_NAME_MAX */
	memset(longname, 'A', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	assert_int_equal(tz_load(longname, &z), -1);
	longname[TZ_NAME_MAX] = '\0';
	assert_int_equal(tz_load(longname, &z), -1);
	/* "right/" zones count leap seconds: refused */
	if (access(TZ_ZONEINFO "/right/UTC", R_OK) == 0)
		assert_int_equal(tz_load("right/UTC", &z), -1);
	tz_free(NULL);
}

/* Reads the file at path into buf (cap bytes). Returns its length. */
static size_t read_file(const char *path, unsigned char *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, cap, f);
	fclose(f);
	assert_true(n > 0 && n < cap);
	return n;
}

static void write_file(const char *dir, const char *name, const void *data, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* tz_parse of len bytes of buf must fail. */
static void refused(const unsigned char *buf, size_t len, const char *what)
{
	struct tz *z = (struct tz *)1;

	if (tz_parse(buf, len, &z) != -1 || z != NULL)
		fail_msg("%s was accepted", what);
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static void test_corrupt(void **state)
{
	static unsigned char good[8192], bad[8192];
	unsigned char *big;
	char dir[64];
	size_t len, i, v2, data, ttinfo, footer;
	uint32_t timecnt, typecnt;
	struct tz *z;

	(void)state;
	len = read_file(TZ_ZONEINFO "/Europe/Warsaw", good, sizeof good);
	assert_int_equal(tz_parse(good, len, &z), 0);
	tz_free(z);
	/* every prefix, each in a buffer of its exact size for valgrind */
	for (i = 0; i < len; i++) {
		unsigned char *copy = malloc(i ? i : 1);

		memcpy(copy, good, i);
		refused(copy, i, "a prefix");
		free(copy);
	}
	/* where the 64-bit block's parts begin */
	v2 = 44 + get32(good + 32) * 5 + get32(good + 36) * 6 + get32(good + 40) +
	     get32(good + 28) * 8 + get32(good + 24) + get32(good + 20);
	timecnt = get32(good + v2 + 32);
	typecnt = get32(good + v2 + 36);
	data = v2 + 44;
	ttinfo = data + timecnt * 9;
	footer = len - strlen("\nCET-1CEST,M3.5.0,M10.5.0/3\n");
	assert_memory_equal(good + footer, "\nCET-1CEST", 10);
#define MUTATE(what, ...)                \
	do {                             \
		memcpy(bad, good, len);  \
		__VA_ARGS__;             \
		refused(bad, len, what); \
	} while (0)
	MUTATE("version '1'", bad[4] = '1');
	MUTATE("second magic", bad[v2] = 'X');
	MUTATE("second version 0", bad[v2 + 4] = 0);
	MUTATE("v1 timecnt too large", put32(bad + 32, 0xffffffff));
	MUTATE("v1 typecnt + 1", put32(bad + 36, get32(good + 36) + 1));
	MUTATE("typecnt 0", put32(bad + v2 + 36, 0));
	MUTATE("typecnt 257", put32(bad + v2 + 36, 257));
	MUTATE("charcnt 0", put32(bad + v2 + 40, 0));
	MUTATE("timecnt + 1", put32(bad + v2 + 32, timecnt + 1));
	MUTATE("timecnt huge", put32(bad + v2 + 32, 0x80000000u));
	MUTATE("isutcnt not typecnt", put32(bad + v2 + 20, 1));
	MUTATE("leapcnt 1", put32(bad + v2 + 28, 1));
	MUTATE("times not ascending", memcpy(bad + data + 8 * 5, good + data + 8 * 4, 8));
	MUTATE("type index out of range", bad[data + timecnt * 8 + 3] = (unsigned char)typecnt);
	MUTATE("UT offset 26 h", put32(bad + ttinfo, 26 * 3600));
	MUTATE("UT offset -2^31", put32(bad + ttinfo, 0x80000000u));
	MUTATE("isdst 2", bad[ttinfo + 4] = 2);
	MUTATE("desigidx past the chars", bad[ttinfo + 5] = 0xff);
	MUTATE("footer without its newline", bad[footer] = 'X');
	MUTATE("footer not a TZ string", memcpy(bad + footer + 1, "C1", 2));
	MUTATE("footer NUL", bad[footer + 4] = 0);
	MUTATE("footer month 13", memcpy(bad + footer + 12, "13", 2));
	/* bytes after the footer */
	memcpy(bad, good, len);
	bad[len] = 'x';
	refused(bad, len + 1, "bytes after the footer");
	/* a version 1 file is read whole: a byte after it is refused */
	memcpy(bad, good, v2);
	bad[4] = 0;
	assert_int_equal(tz_parse(bad, v2, &z), 0);
	assert_int_equal(tz_offset_ms(z, at(2026, 7, 15, 12, 0)), 2 * H);
	tz_free(z);
	refused(bad, v2 + 1, "a version 1 file with a byte more");
	/* the same through tz_load, in a directory of our own */
	snprintf(dir, sizeof dir, "/tmp/revops-tz-XXXXXX");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(setenv("REVOPS_ZONEINFO", dir, 1), 0);
	write_file(dir, "Good", good, len);
	write_file(dir, "Truncated", good, len / 2);
	write_file(dir, "Garbage", "TZif2 this is not a zone at all, only words", 44);
	write_file(dir, "Empty", "", 0);
	big = calloc(1, TZ_FILE_MAX + 1);
	assert_non_null(big);
	memcpy(big, good, len);
	write_file(dir, "Big", big, TZ_FILE_MAX + 1);
	free(big);
	assert_int_equal(tz_load("Good", &z), 0);
	assert_int_equal(tz_offset_ms(z, at(2026, 7, 15, 12, 0)), 2 * H);
	tz_free(z);
	assert_int_equal(tz_load("Truncated", &z), -1);
	assert_int_equal(tz_load("Garbage", &z), -1);
	assert_int_equal(tz_load("Empty", &z), -1);
	assert_int_equal(tz_load("Big", &z), -1);
	assert_int_equal(tz_load("Europe/Warsaw", &z), -1); /* not in dir */
	assert_int_equal(unsetenv("REVOPS_ZONEINFO"), 0);
	assert_int_equal(tz_load("Europe/Warsaw", &z), 0);
	tz_free(z);
	{
		char cmd[128];

		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
}

/* A version 2 file with no transitions and footer as its TZ string (a
 * footer of NULL: none) into buf; returns its length. */
static size_t footer_only(unsigned char *buf, const char *footer)
{
	static const unsigned char block[] = {0, 0, 0, 0, 0, 0, 'L', 'M', 'T', 0};
	unsigned char *p = buf;
	int i;

	for (i = 0; i < 2; i++) {
		memset(p, 0, 44);
		memcpy(p, "TZif2", 5);
		put32(p + 36, 1);
		put32(p + 40, 4);
		memcpy(p + 44, block, sizeof block);
		p += 44 + sizeof block;
	}
	p += sprintf((char *)p, "\n%s\n", footer ? footer : "");
	return (size_t)(p - buf);
}

static struct tz *from_footer(const char *footer)
{
	unsigned char buf[512];
	struct tz *z = NULL;

	if (tz_parse(buf, footer_only(buf, footer), &z) != 0)
		fail_msg("footer \"%s\" was refused", footer ? footer : "(none)");
	return z;
}

/* glibc's UT offset in ms at ms, for the zone TZ names now. */
static int64_t glibc_offset(int64_t ms)
{
	time_t t = (time_t)(ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000));
	struct tm tm;

	assert_non_null(localtime_r(&t, &tm));
	return (int64_t)tm.tm_gmtoff * 1000;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* z against glibc with TZ=tzvar (unless NULL): n random instants from the
 * year from to 2100, then every half hour of 2025 and 2026 and the second before it.
 * Also that a wall time maps back to an instant with that wall time (the
 * earliest), or, in a gap, to the first instant after it. */
static void compare_glibc(const struct tz *z, const char *tzvar, int64_t from, int n)
{
	int64_t lo = at(from, 1, 1, 0, 0), hi = at(2100, 1, 1, 0, 0), ms, local, utc, off;
	const char *what = tzvar ? tzvar : "a rule";
	int i;

	if (tzvar) {
		assert_int_equal(setenv("TZ", tzvar, 1), 0);
		tzset();
	}
	for (i = 0; i < n; i++) {
		ms = lo + (int64_t)(next_random() % (uint64_t)(hi - lo));
		if (tzvar && tz_offset_ms(z, ms) != glibc_offset(ms))
			fail_msg("%s at %lld: %lld, glibc %lld", tzvar, (long long)ms,
				 (long long)tz_offset_ms(z, ms), (long long)glibc_offset(ms));
		/* the wall time at ms maps back to ms or to an earlier instant */
		local = ms + tz_offset_ms(z, ms);
		utc = tz_local_to_utc_ms(z, local);
		if (utc > ms || utc + tz_offset_ms(z, utc) != local)
			fail_msg("%s: wall time %lld gave %lld, not %lld", what, (long long)local,
				 (long long)utc, (long long)ms);
		/* any wall time: it exists, or is moved forward past a gap */
		local = lo + (int64_t)(next_random() % (uint64_t)(hi - lo));
		utc = tz_local_to_utc_ms(z, local);
		off = tz_offset_ms(z, utc);
		if (utc + off != local &&
		    (utc + off < local || tz_offset_ms(z, utc - (utc + off - local)) != local - utc))
			fail_msg("%s: wall time %lld gave %lld", what, (long long)local,
				 (long long)utc);
	}
	if (!tzvar)
		return;
	for (ms = at(2025, 1, 1, 0, 0); ms < at(2027, 1, 1, 0, 0); ms += 30 * MIN) {
		if (tz_offset_ms(z, ms) != glibc_offset(ms) ||
		    tz_offset_ms(z, ms - S) != glibc_offset(ms - S))
			fail_msg("%s near %lld: %lld, glibc %lld", tzvar, (long long)ms,
				 (long long)tz_offset_ms(z, ms), (long long)glibc_offset(ms));
	}
	assert_int_equal(unsetenv("TZ"), 0);
	tzset();
}

static void test_glibc_zones(void **state)
{
	static const char *const zones[] = {
		"Europe/Warsaw",       "America/New_York",
		"Australia/Lord_Howe", "America/Nuuk", /* the footer's times -1 and 0 */
		"Asia/Jerusalem",                      /* 26:00 */
		"Europe/Dublin",                       /* negative DST: winter is the "DST" */
		"Pacific/Chatham",                     /* +12:45 / +13:45 */
		"Antarctica/Troll",                    /* +00 / +02 */
		"America/Sao_Paulo",                   /* DST until 2019 */
		"Africa/Casablanca",                   /* Ramadan changes listed to 2087 */
		"Asia/Kolkata",        "UTC",
	};
	char tzvar[80];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof zones / sizeof zones[0]; i++) {
		struct tz *z = load(zones[i]);

		snprintf(tzvar, sizeof tzvar, ":%s", zones[i]);
		compare_glibc(z, tzvar, 1850, 500);
		tz_free(z);
	}
}

static void test_footer_forms(void **state)
{
	static const char *const good[] = {
		"CET-1CEST,M3.5.0,M10.5.0/3",
		"<+1030>-10:30<+11>-11,M10.1.0,M4.1.0",
		"<-02>2<-01>,M3.5.0/-1,M10.5.0/0",
		"<-03>3<-02>,M3.5.0/-2,M10.5.0/-1",
		"IST-2IDT,M3.4.4/26,M10.5.0",
		"IST-1GMT0,M10.5.0,M3.5.0/1",
		"<+0330>-3:30<+0430>,J79/24,J263/24",
		"<+1245>-12:45<+1345>,M9.5.0/2:45,M4.1.0/3:45",
		"AAA3BBB,59/1:30,300/0:15:30",
		"AAA+3BBB+2:30,J60/-30,J300/100",
		"XXX-5:45:30YYY-6:45,M1.1.1/100,M12.5.6/-100",
		"<UTC-7>7<UTC-6>,M3.2.0,M11.1.0",
	};
	static const char *const bad[] = {
		"CE",
		"CET",
		"CET-",
		"CET-1CEST,M3.5.0",
		"CET-1CEST,M3.5.0,",
		"CET-1CEST,M13.1.0,M10.5.0",
		"CET-1CEST,M3.6.0,M10.5.0",
		"CET-1CEST,M3.0.0,M10.5.0",
		"CET-1CEST,M3.5.7,M10.5.0",
		"CET-1CEST,J0,J365",
		"CET-1CEST,366,J1",
		"CET-1CEST,M3.5.0/168,M10.5.0",
		"CET-1CEST,M3.5.0/-168,M10.5.0",
		"CET-1CEST,M3.5.0,M10.5.0/3x",
		"CET-1CEST,M3.5.0,M10.5.0,",
		"CET-25",
		"CET-1:60",
		"CET-1:00:60",
		"CET-1CEST-25",
		"<+1>-1",
		"<+10",
		"<+1 0>-1",
		"CE1",
		"CET-1C",
		" UTC0",
	};
	struct tz *z;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		z = from_footer(good[i]);
		/* glibc applies a TZ string's rules from 1970 only */
		compare_glibc(z, good[i], 1970, 300);
		tz_free(z);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		unsigned char buf[512];

		refused(buf, footer_only(buf, bad[i]), bad[i]);
	}
	/* rules reaching into the next year, with DST periods that overlap
	 * (northern) or cross the new year (southern): no glibc to compare
	 * (it reads each year alone), but wall times must still map back */
	z = from_footer("XXX-1YYY,M1.1.1/-100,M12.5.6/150");
	compare_glibc(z, NULL, 1850, 2000);
	tz_free(z);
	z = from_footer("XXX-10YYY,M12.5.0/167,M1.1.0/-100");
	compare_glibc(z, NULL, 1850, 2000);
	tz_free(z);
	/* DST all year (RFC 8536 section 3.3.1): EDT at every instant */
	z = from_footer("EST5EDT,0/0,J365/25");
	for (i = 0; i < 200; i++) {
		int64_t ms =
			at(1970, 1, 1, 0, 0) + (int64_t)(next_random() % (200ULL * 365 * 86400000));

		assert_int_equal(tz_offset_ms(z, ms), -4 * H);
	}
	assert_int_equal(tz_offset_ms(z, at(2027, 1, 1, 5, 0)), -4 * H);
	assert_int_equal(tz_offset_ms(z, at(2027, 1, 1, 5, 0) - 1), -4 * H);
	tz_free(z);
	/* a DST name without rules: the US rules, as glibc's default */
	z = from_footer("EST5EDT");
	assert_int_equal(tz_offset_ms(z, at(2026, 3, 8, 7, 0) - 1), -5 * H);
	assert_int_equal(tz_offset_ms(z, at(2026, 3, 8, 7, 0)), -4 * H);
	assert_int_equal(tz_offset_ms(z, at(2026, 11, 1, 6, 0) - 1), -4 * H);
	assert_int_equal(tz_offset_ms(z, at(2026, 11, 1, 6, 0)), -5 * H);
	tz_free(z);
	/* no footer, no transitions: type 0 at every instant */
	z = from_footer(NULL);
	assert_int_equal(tz_offset_ms(z, at(2090, 1, 1, 0, 0)), 0);
	assert_int_equal(tz_local_to_utc_ms(z, 42), 42);
	tz_free(z);
}

#define THREADS 4

static void *cache_reader(void *arg)
{
	const struct tz *z = NULL, **out = arg;
	int i;

	for (i = 0; i < 2000; i++) {
		if (tz_get(i % 2 ? "Europe/Warsaw" : "America/New_York", &z) != 0)
			return NULL;
		if (i % 2 && tz_offset_ms(z, at(2026, 7, 15, 12, 0)) != 2 * H)
			return NULL;
		if (i % 2)
			*out = z;
	}
	return arg;
}

static void test_cache(void **state)
{
	const struct tz *seen[THREADS], *a, *b;
	pthread_t th[THREADS];
	void *ret;
	int i;

	(void)state;
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, cache_reader, &seen[i]), 0);
	for (i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(th[i], &ret), 0);
		assert_ptr_equal(ret, &seen[i]);
	}
	assert_int_equal(tz_get("Europe/Warsaw", &a), 0);
	for (i = 0; i < THREADS; i++)
		assert_ptr_equal(seen[i], a);
	assert_int_equal(tz_get("America/New_York", &b), 0);
	assert_ptr_not_equal(a, b);
	assert_int_equal(tz_offset_ms(b, at(2026, 1, 15, 12, 0)), -5 * H);
	assert_int_equal(tz_get("Nope/Zone", &b), -1);
	assert_null(b);
}

/* Last: it fills the process-wide cache. */
static void test_cache_bound(void **state)
{
	static unsigned char utc[512];
	const struct tz *warsaw, *z;
	char dir[64], name[16], cmd[128];
	size_t len = read_file(TZ_ZONEINFO "/UTC", utc, sizeof utc);
	int i, ok = 0;

	(void)state;
	assert_int_equal(tz_get("Europe/Warsaw", &warsaw), 0);
	snprintf(dir, sizeof dir, "/tmp/revops-tz-XXXXXX");
	assert_non_null(mkdtemp(dir));
	for (i = 0; i < TZ_CACHE_MAX + 1; i++) {
		snprintf(name, sizeof name, "Z%02d", i);
		write_file(dir, name, utc, len);
	}
	assert_int_equal(setenv("REVOPS_ZONEINFO", dir, 1), 0);
	for (i = 0; i < TZ_CACHE_MAX + 1; i++) {
		snprintf(name, sizeof name, "Z%02d", i);
		ok += tz_get(name, &z) == 0;
	}
	/* some were cached (Warsaw and New York took two places), then none */
	assert_true(ok > 0 && ok <= TZ_CACHE_MAX - 2);
	assert_int_equal(tz_get("Z64", &z), -1);
	/* what is cached stays, whatever the directory now */
	assert_int_equal(tz_get("Europe/Warsaw", &z), 0);
	assert_ptr_equal(z, warsaw);
	assert_int_equal(tz_get("Z00", &z), 0);
	assert_int_equal(unsetenv("REVOPS_ZONEINFO"), 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_warsaw),       cmocka_unit_test(test_new_york),
		cmocka_unit_test(test_footer_2090),  cmocka_unit_test(test_fixed_offsets),
		cmocka_unit_test(test_lord_howe),    cmocka_unit_test(test_local_to_utc),
		cmocka_unit_test(test_bad_names),    cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_footer_forms), cmocka_unit_test(test_glibc_zones),
		cmocka_unit_test(test_cache),        cmocka_unit_test(test_cache_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
