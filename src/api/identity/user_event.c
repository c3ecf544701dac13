#include "api/identity/user_event.h"

#include <jansson.h>

#include "events/outbox.h"
#include "identity/directory.h"
#include "store/store.h"

int user_event_append(struct store_tx *tx, const char *portfolio_id, const struct directory_event *ev)
{
	json_t *props = json_array(), *data;
	int rc = STORE_ERR;

	if (!ev->type) {
		json_decref(props);
		return 0;
	}
	data = json_pack("{s:s, s:s, s:s}", "user_id", ev->user_id, "user_name", ev->user_name,
			 "via", ev->via);
	if (!props || !data)
		goto out;
	if (ev->revoked >= 0)
		json_object_set_new(data, "revoked_tokens", json_integer(ev->revoked));
	rc = outbox_append(tx, "v2", ev->type, portfolio_id, props, data, NULL, 0);
out:
	json_decref(props);
	json_decref(data);
	return rc;
}
