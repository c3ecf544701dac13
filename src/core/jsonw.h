/* jsonw: writes JSON text straight into a buf, for the hot paths (access
 * log, list bodies) where building a jansson tree costs more than the work
 * itself. Output is always valid JSON: strings are escaped, and bytes that
 * are not valid UTF-8 become U+FFFD. */
#ifndef REVOPS_JSONW_H
#define REVOPS_JSONW_H
#include <jansson.h>
#include <stdint.h>
#include "core/buf.h"
#include "core/common.h"

/* Appends s as a quoted JSON string (NULL appends null). 0 or -1 (cap). */
int jsonw_str(struct buf *b, const char *s) WUR;
/* Appends "key": (with a leading comma unless first). */
int jsonw_key(struct buf *b, const char *key, int first) WUR;
int jsonw_int(struct buf *b, int64_t v) WUR;
/* Replaces, in place, every byte of s that is not part of valid UTF-8 (or
 * is a control character) with '?', so s can go into any JSON string.
 * For messages that echo client input. */
void jsonw_sanitize(char *s);
/* A jansson string holding ms as the API writes every timestamp,
 * "YYYY-MM-DDTHH:MM:SS.mmmZ" (NULL on out-of-memory). */
json_t *jsonw_time(int64_t ms);

/* How the API writes a JSON tree (answers, event bodies, revopsctl):
 * compact, keys in their order, and reals to 15 significant digits, so a
 * score of 8.2 reads 8.2 (jansson's default, 17 digits, writes
 * 8.1999999999999993). */
#define JSONW_DUMP (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

#endif
