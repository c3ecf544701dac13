/* Small attributes shared by every module. */
#ifndef REVOPS_COMMON_H
#define REVOPS_COMMON_H

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

#endif
