/* governance: the checks a rate change must pass before any PMS call (spec
 * "Rate decision"; API-CONTRACT §4): each property's brand ceiling, and an
 * approver who is an active revenue-approver of the portfolio and not the
 * proposer. No I/O but reads in the caller's transaction. */
#ifndef REVOPS_GOVERNANCE_H
#define REVOPS_GOVERNANCE_H
#include <jansson.h>
#include <stdint.h>
#include "core/common.h"

struct store_tx;
struct portfolio_property;
struct portfolio_ceiling;

/* A rate for a room type over days from..to (days since the epoch). */
struct governance_rate {
	const char *ceiling_id;
	const char *room_type_code;
	int64_t from_days, to_days;
	const char *currency;
	int64_t minor_units;
};

/* One property's ceiling check as its audit and API details object:
 * {property, pms_property_code, ceiling, limit, proposed, passed, reasons}.
 * ce->found 0 fails with "no such brand ceiling in this portfolio". */
json_t *governance_ceiling_check(const struct portfolio_property *p,
				 const struct portfolio_ceiling *ce,
				 const struct governance_rate *rate);

/* The API error detail of a failed check chk (governance_ceiling_check's
 * object) naming field: {field, issue (the reasons joined by "; "),
 * property, ceiling, limit, proposed}. */
json_t *governance_ceiling_detail(const json_t *chk, const char *field);

/* Checks the approver of a decision or a revert: subject names (by
 * userName, case-insensitively) an active user of the portfolio with role
 * revenue-approver who is not proposer_user_id. Returns 0 (approved:
 * user_id (ID_MAX bytes) and *roles, owned, filled), 1 (refused: *why, a
 * static sentence; *roles may be set), or a negative store status. */
int governance_check_approver(struct store_tx *tx, const char *portfolio_id, const char *subject,
			      const char *proposer_user_id, char *user_id, json_t **roles,
			      const char **why) WUR;

/* "{amount}" as the API writes money: {"currency", "minor_units"}. */
json_t *governance_money(const char *currency, int64_t minor);

#endif
