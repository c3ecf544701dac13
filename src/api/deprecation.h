/* deprecation: the registry of deprecated routes (the deprecations table),
 * held in memory and refreshed from the database every second, so an
 * operator's change takes effect without a restart. */
#ifndef REVOPS_DEPRECATION_H
#define REVOPS_DEPRECATION_H
#include <stdint.h>
#include "core/common.h"

struct deprecation;
struct store;

struct deprecation *deprecation_new(void);
void deprecation_free(struct deprecation *d);
/* Reloads the table. Returns 0 or -1 (the old snapshot is kept). */
int deprecation_reload(struct deprecation *d, struct store *st);
/* 1 with *announced_ms set when method + route pattern is deprecated. */
int deprecation_lookup(struct deprecation *d, const char *method, const char *route,
		       int64_t *announced_ms);
/* Records (or replaces) the announcement of route (a pattern) for method
 * at announced_ms inside tx. Returns 0 or a negative store status. */
struct store_tx;
int deprecation_record(struct store_tx *tx, const char *method, const char *route,
		       int64_t announced_ms, const char *note) WUR;
/* The Sunset time: announcement + 18 months (enterprise) or 12 months. */
int64_t deprecation_sunset_ms(int64_t announced_ms, const char *plan);

#endif
