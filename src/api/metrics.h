/* metrics: request counts and latency histograms by route, method and
 * status, rendered in the Prometheus text format (0.0.4). */
#ifndef REVOPS_METRICS_H
#define REVOPS_METRICS_H
#include "core/buf.h"
#include "core/common.h"

struct metrics;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);
/* Records one request. route must be a string that lives as long as m
 * (a route pattern or a literal); lock-free after a series exists. */
void metrics_observe(struct metrics *m, const char *route, const char *method, int status,
		     double seconds);
/* Appends the exposition text. Returns 0 or -1. */
int metrics_render(struct metrics *m, struct buf *out) WUR;

#endif
