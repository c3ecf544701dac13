/* tz: UTC <-> the wall-clock time of an IANA time zone ("Europe/Warsaw"),
 * read from the system's compiled TZif files (RFC 8536; Debian's tzdata in
 * /usr/share/zoneinfo, or the directory REVOPS_ZONEINFO names). Thread-safe:
 * no TZ variable, no tzset or localtime; a loaded zone is immutable, so any
 * number of threads may read one at once. */
#ifndef REVOPS_TZ_H
#define REVOPS_TZ_H
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"

#define TZ_NAME_MAX 64           /* longest zone name accepted */
#define TZ_FILE_MAX (512 * 1024) /* largest TZif file read */
#define TZ_CACHE_MAX 64          /* distinct zones tz_get keeps */
#define TZ_ZONEINFO "/usr/share/zoneinfo"

struct tz;

/* Loads the zone name ("Europe/Warsaw", "UTC") from $REVOPS_ZONEINFO, or
 * TZ_ZONEINFO when that is unset or empty. The name is 1 to TZ_NAME_MAX
 * characters of [A-Za-z0-9_+-/], with no "..", no leading "/". Returns 0
 * and a zone the caller frees with tz_free in *out, or -1: a bad name, no
 * such zone, or a file that is not a valid TZif file (see tz_parse). */
int tz_load(const char *name, struct tz **out) WUR;

/* Frees a zone from tz_load or tz_parse; NULL is allowed. */
void tz_free(struct tz *z);

/* The zone name from the process-wide cache, loaded by tz_load on its
 * first use. Returns 0 and a shared zone in *out, never freed, which every
 * thread may use; or -1 when tz_load fails, or when TZ_CACHE_MAX other
 * zones are already cached (a caller that needs more uses tz_load). A
 * failed name is not remembered. The cache is keyed by name alone: set
 * REVOPS_ZONEINFO before the first call. */
int tz_get(const char *name, const struct tz **out) WUR;

/* The zone's UTC offset in ms at the instant utc_ms (Unix ms): local wall
 * time = utc_ms + offset. */
int64_t tz_offset_ms(const struct tz *z, int64_t utc_ms);

/* The instant (Unix ms) of the wall-clock time local_ms (the wall time's
 * fields read as if it were UTC, e.g. 2026-03-29T02:30 as Unix ms). Where a
 * transition makes the wall time ambiguous, the offset in effect *before*
 * the transition is used:
 * - a wall time that occurs twice (clocks set back) gives the earlier
 *   instant (Warsaw 2026-10-25 02:30 is 00:30Z, in CEST);
 * - a wall time skipped by a gap (clocks set forward) gives local_ms minus
 *   the offset before the gap, i.e. the wall time moved forward by the gap
 *   (Warsaw 2026-03-29 02:30 is 01:30Z, which is 03:30 CEST).
 * Saturates at the ends of int64_t. */
int64_t tz_local_to_utc_ms(const struct tz *z, int64_t local_ms);

/* For tests and fuzzing; tz_load calls it on the file's bytes. Parses a
 * TZif file (RFC 8536) of len bytes at buf: version 1 (32-bit data only) or
 * 2 and later (the version 1 block skipped, the 64-bit block and the
 * footer's POSIX TZ string read). Every count, index and offset is checked:
 * anything malformed, a file over TZ_FILE_MAX, a leap-second table ("right/"
 * zones, whose times are not POSIX times), a UT offset outside
 * -24:59:59..+25:59:59 or a footer that does not parse gives -1, never a
 * read outside buf. Returns 0 and a zone for tz_free in *out, or -1. */
int tz_parse(const unsigned char *buf, size_t len, struct tz **out) WUR;

#endif
