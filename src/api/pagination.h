/* pagination: limit parsing and opaque, tamper-evident cursors.
 *
 * Lists are keyset-paginated on the item id (ids are time-ordered), so a
 * list that grows while a client pages never repeats or skips an item. A
 * cursor is base64url(last_id || HMAC-SHA256(key, scope NUL last_id)[0..16])
 * where scope names the list (route, portfolio, filters): a cursor edited
 * by hand, or taken from another list, is refused. */
#ifndef REVOPS_PAGINATION_H
#define REVOPS_PAGINATION_H
#include <stddef.h>
#include "core/common.h"

#define PAGINATION_DEFAULT_LIMIT 50
#define PAGINATION_CURSOR_MAX 256

/* Parses ?limit: NULL gives the default; otherwise 1..max in plain decimal.
 * Returns 0, or -1 (the caller answers 400). */
int pagination_limit(const char *s, int max, int *out) WUR;
/* Writes the cursor resuming after last_id. Returns 0 or -1 (too long). */
int pagination_cursor_encode(const unsigned char key[32], const char *scope, const char *last_id,
			     char *out, size_t cap) WUR;
/* Verifies and opens a cursor. Returns 0 with last_id filled, or -1. */
int pagination_cursor_decode(const unsigned char key[32], const char *scope, const char *cursor,
			     char *last_id, size_t cap) WUR;

#endif
