/* outbox: the transactional outbox. Every state change appends the events it
 * causes inside its own transaction, so an event exists if and only if the
 * change committed; delivery workers read the table afterwards. */
#ifndef REVOPS_OUTBOX_H
#define REVOPS_OUTBOX_H
#include <jansson.h>
#include <stddef.h>
#include "core/common.h"

struct store_tx;

/* Appends one event inside tx. surface is "v1" or "v2"; property_ids is a
 * JSON array of prop_ ids and data a JSON object (both borrowed). The new
 * event id ("evt_…") is written to id_out when it is not NULL. Returns 0 or
 * a negative store status. */
int outbox_append(struct store_tx *tx, const char *surface, const char *type,
		  const char *portfolio_id, const json_t *property_ids, const json_t *data,
		  char *id_out, size_t id_cap) WUR;

#endif
