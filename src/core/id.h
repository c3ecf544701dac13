/* id: opaque, prefixed, time-ordered identifiers such as
 * "pf_01JD3X5Q7E9ZK4M2N6P8R0T2V4": 48 bits of Unix ms and 80 random bits in
 * Crockford base32. Ids made by one process sort in creation order, even
 * within the same millisecond (the random part is incremented). */
#ifndef REVOPS_ID_H
#define REVOPS_ID_H
#include <stddef.h>
#include "core/common.h"

#define ID_BODY_LEN 26
#define ID_MAX 40 /* longest prefix we use plus body plus NUL, with room */

/* Writes prefix + body into out. Returns 0, or -1 if outcap is too small or
 * the random source fails. */
int id_new(const char *prefix, char *out, size_t outcap) WUR;
/* 1 when s is prefix followed by a well-formed body, else 0. */
int id_valid(const char *prefix, const char *s);

#endif
