#include "events/outbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/id.h"
#include "store/store.h"

int outbox_append(struct store_tx *tx, const char *surface, const char *type,
		  const char *portfolio_id, const json_t *property_ids, const json_t *data,
		  char *id_out, size_t id_cap)
{
	char id[ID_MAX], *props = NULL, *body = NULL;
	int rc = STORE_ERR;

	if ((strcmp(surface, "v1") && strcmp(surface, "v2")) || !json_is_array(property_ids) ||
	    !json_is_object(data))
		return STORE_ERR;
	if (id_new("evt_", id, sizeof id) < 0)
		return STORE_ERR;
	props = json_dumps(property_ids, JSON_COMPACT);
	body = json_dumps(data, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!props || !body)
		goto out;
	rc = store_exec(tx,
			"INSERT INTO events (id, surface, type, portfolio_id, property_ids, data,"
			" created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
			(struct store_val[]){sv_text(id), sv_text(surface), sv_text(type),
					     sv_text(portfolio_id), sv_text(props), sv_text(body),
					     sv_int(clock_now_ms())}, 7);
	if (rc < 0)
		goto out;
	rc = 0;
	if (id_out)
		snprintf(id_out, id_cap, "%s", id);
out:
	free(props);
	free(body);
	return rc;
}
