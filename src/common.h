/* Small attributes shared by every module. */
#ifndef REVOPS_COMMON_H
#define REVOPS_COMMON_H

#define WUR __attribute__((warn_unused_result))
#define PRINTF(f, a) __attribute__((format(printf, f, a)))
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
