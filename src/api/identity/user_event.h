/* user_event: the sso.* user events (sso.user.provisioned,
 * sso.user.deprovisioned) that directory changes cause, appended to the
 * outbox. The directory (identity/, below events/) describes each event;
 * the SCIM handlers and the SAML grant append it with this, inside the
 * transaction of the change. */
#ifndef REVOPS_USER_EVENT_H
#define REVOPS_USER_EVENT_H
#include "core/common.h"

struct store_tx;
struct directory_event;

/* Appends ev to the v2 outbox of portfolio_id inside tx: data {user_id,
 * user_name, via} and, when ev->revoked >= 0, revoked_tokens. Nothing when
 * ev->type is NULL. Returns 0 or a negative store status. */
int user_event_append(struct store_tx *tx, const char *portfolio_id,
		      const struct directory_event *ev) WUR;

#endif
