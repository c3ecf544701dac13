/* oncall: a portfolio's on-call rota (issue 16; docs/operations-tasks.md,
 * "The on-call rota"), the one owner of the oncall_rotas table.
 *
 * The rota is a JSON document an operator sets with `revopsctl oncall
 * set --portfolio ID --file rota.json`:
 *
 *   {"rotations": [{"name": "duty managers", "level": 1,
 *                   "properties": ["prop_…"],            (optional: all)
 *                   "first_handover": "2026-11-02T09:00", (wall time)
 *                   "every_days": 7,                      (optional: 7)
 *                   "people": [{"name": "…", "email": "…", "phone": "…"}]}],
 *    "overrides": [{"level": 1, "properties": […],         (optional: all)
 *                   "from": "2026-12-24T18:00", "to": "2026-12-26T09:00",
 *                   "person": {"name": "…"}}]}
 *
 * Wall times without an offset are read in each property's time zone, so
 * one rota hands over at 09:00 in Warsaw and at 09:00 in Lisbon; an
 * override may instead give "from"/"to" with an offset or Z (one instant
 * for every property). Who is on call for a property, a level and an
 * instant: the first override of that level covering the property and
 * the instant, else the first rotation of that level covering the
 * property, whose person is people[k mod n] for the k-th hand-over period
 * since first_handover (negative before it). */
#ifndef REVOPS_ONCALL_H
#define REVOPS_ONCALL_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"

struct store_tx;
struct portfolio_property;

#define ONCALL_MAX_LEVELS 5
#define ONCALL_MAX_ROTATIONS 100
#define ONCALL_MAX_PEOPLE 100
#define ONCALL_MAX_OVERRIDES 500
#define ONCALL_MAX_BYTES (256 * 1024)

/* Checks doc against the rules above and the portfolio (every property
 * named is the portfolio's; every property's time zone is known).
 * Returns 0, 1 with the first problem in err, or a negative store status. */
int oncall_check(struct store_tx *tx, const char *portfolio_id, const json_t *doc, char *err,
		 size_t cap) WUR;
/* Replaces the portfolio's rota with doc (checked). Returns 0 or < 0. */
int oncall_set(struct store_tx *tx, const char *portfolio_id, const json_t *doc, int64_t now) WUR;

/* The person on call for property p at level and instant at (Unix ms):
 * *person = {name, email?, phone?, source: "rotation"|"override", from:
 * the rotation's or override's name or index} (owned), or NULL when no
 * one is; *levels = the rota's highest level (0: no rota). Returns 0 or a
 * negative store status. */
int oncall_who(struct store_tx *tx, const char *portfolio_id, const struct portfolio_property *p,
	       int level, int64_t at, json_t **person, int *levels) WUR;
/* The same on a document, for tests and revopsctl: no database. */
json_t *oncall_pick(const json_t *doc, const struct portfolio_property *p, int level, int64_t at);
/* The highest level of doc's rotations and overrides (0: none). */
int oncall_levels(const json_t *doc);

#endif
