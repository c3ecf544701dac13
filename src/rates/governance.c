#include "rates/governance.h"

#include <stdio.h>
#include <string.h>

#include "core/id.h"
#include "identity/directory.h"
#include "portfolio/portfolio.h"

json_t *governance_money(const char *currency, int64_t minor)
{
	return json_pack("{s:s, s:I}", "currency", currency, "minor_units", (json_int_t)minor);
}

/* Appends to reasons each way the rate breaks the ceiling for p. */
static void ceiling_reasons(const struct portfolio_property *p, const struct portfolio_ceiling *ce,
			    const struct governance_rate *rt, json_t *reasons)
{
	json_t *v;
	size_t i;
	int covered = 0;

	if (strcmp(p->brand, ce->brand))
		json_array_append_new(reasons,
				      json_string("the property's brand is not the ceiling's brand"));
	json_array_foreach(ce->room_types, i, v)
		covered |= json_is_string(v) && !strcmp(json_string_value(v), rt->room_type_code);
	if (json_array_size(ce->room_types) && !covered)
		json_array_append_new(reasons,
				      json_string("the room type is not covered by the ceiling"));
	if (strcmp(rt->currency, ce->currency))
		json_array_append_new(reasons,
				      json_string("the currency is not the ceiling's currency"));
	if (strcmp(rt->currency, p->currency))
		json_array_append_new(reasons,
				      json_string("the currency is not the property's currency"));
	if (rt->from_days < ce->from_days || (ce->has_to && rt->to_days > ce->to_days))
		json_array_append_new(reasons,
				      json_string("the dates are outside the ceiling's validity"));
	if (rt->minor_units > ce->max)
		json_array_append_new(reasons, json_string("the proposed rate is above the ceiling"));
}

json_t *governance_ceiling_check(const struct portfolio_property *p,
				 const struct portfolio_ceiling *ce, const struct governance_rate *rt)
{
	json_t *reasons = json_array();

	if (!ce->found)
		json_array_append_new(reasons,
				      json_string("no such brand ceiling in this portfolio"));
	else
		ceiling_reasons(p, ce, rt, reasons);
	return json_pack("{s:s, s:s, s:s, s:o, s:o, s:b, s:o}", "property", p->id,
			 "pms_property_code", p->code, "ceiling", rt->ceiling_id, "limit",
			 ce->found ? governance_money(ce->currency, ce->max) : json_null(),
			 "proposed", governance_money(rt->currency, rt->minor_units), "passed",
			 json_array_size(reasons) == 0, "reasons", reasons);
}

json_t *governance_ceiling_detail(const json_t *chk, const char *field)
{
	json_t *reasons = json_object_get(chk, "reasons");
	char issue[400] = "";
	size_t j;

	for (j = 0; j < json_array_size(reasons); j++)
		snprintf(issue + strlen(issue), sizeof issue - strlen(issue), "%s%s", j ? "; " : "",
			 json_string_value(json_array_get(reasons, j)));
	return json_pack("{s:s, s:s, s:O, s:O, s:O, s:O}", "field", field, "issue", issue,
			 "property", json_object_get(chk, "property"), "ceiling",
			 json_object_get(chk, "ceiling"), "limit", json_object_get(chk, "limit"),
			 "proposed", json_object_get(chk, "proposed"));
}

int governance_check_approver(struct store_tx *tx, const char *pf, const char *subject,
			      const char *proposer_user_id, char *user_id, json_t **roles,
			      const char **why)
{
	size_t i;
	json_t *v;
	int rc, has = 0;

	*roles = NULL;
	rc = directory_user_find_roles(tx, pf, subject, user_id, ID_MAX, roles);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		*why = "the approver is not a user of this portfolio";
		return 1;
	}
	if (rc == 2) {
		*why = "the approver is deactivated";
		return 1;
	}
	json_array_foreach(*roles, i, v)
		has |= !strcmp(json_string_value(v), "revenue-approver");
	if (!has) {
		*why = "the approver lacks the revenue-approver role";
		return 1;
	}
	if (proposer_user_id && proposer_user_id[0] && !strcmp(proposer_user_id, user_id)) {
		*why = "the approver is the proposer";
		return 1;
	}
	return 0;
}
