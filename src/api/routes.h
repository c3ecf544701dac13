/* routes: the list of areas the API serves, in match order. The pipeline
 * names no handler; main.c (and the fuzzers) build the table here and hand
 * it to it. */
#ifndef REVOPS_ROUTES_H
#define REVOPS_ROUTES_H
#include <stddef.h>
#include "core/common.h"
#include "http/router.h"

/* Concatenates every area's table into one array in match order, or only
 * the platform's (health, readiness, metrics: a worker node's) when
 * health_only. Returns it (the caller frees it) with its length in *n, or
 * NULL on out-of-memory. */
struct route *api_routes_build(int health_only, size_t *n) WUR;

#endif
