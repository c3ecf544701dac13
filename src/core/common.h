/* Small attributes shared by every module. */
#ifndef REVOPS_COMMON_H
#define REVOPS_COMMON_H
#include <string.h>

#define WUR __attribute__((warn_unused_result))
#define PRINTF(f, a) __attribute__((format(printf, f, a)))
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The value of one hex digit, either case, or -1. */
static inline int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Copies src into dst (cap bytes), cut to fit and always terminated: what
 * snprintf(dst, cap, "%s", src) does, without the format machinery, for
 * loops on hot paths. */
static inline void str_copy(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

#endif
