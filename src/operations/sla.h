/* sla: the minutes of a portfolio's SLA tiers (issue 16;
 * docs/operations-tasks.md, "SLA tiers"), the one owner of the
 * sla_tier_settings table. A tier a portfolio has not set uses the
 * built-in defaults. The minutes are business durations: callers scale
 * them with clock_business_ms (--time-scale). */
#ifndef REVOPS_SLA_H
#define REVOPS_SLA_H
#include <stdint.h>
#include "core/common.h"

struct store_tx;

#define SLA_MAX_MINUTES 10080 /* a week */

struct sla_settings {
	int64_t task_ack_minutes;      /* a new task must be acknowledged within */
	int64_t task_escalate_minutes; /* then each further escalation level after */
	int64_t guest_reply_minutes;   /* an inbound guest message must be answered within */
};

/* 1 when tier is standard, gold or platinum. */
int sla_tier_valid(const char *tier);
/* The built-in minutes of a valid tier. */
void sla_defaults(const char *tier, struct sla_settings *out);
/* The portfolio's minutes for tier (its own, else the defaults). Returns 0
 * or a negative store status. */
int sla_get(struct store_tx *tx, const char *portfolio_id, const char *tier,
	    struct sla_settings *out) WUR;
/* Sets the portfolio's minutes for tier (each 1..SLA_MAX_MINUTES, checked
 * by the caller). Returns 0 or a negative store status. */
int sla_set(struct store_tx *tx, const char *portfolio_id, const char *tier,
	    const struct sla_settings *s, int64_t now) WUR;

#endif
