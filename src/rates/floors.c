#include "rates/floors.h"

#include <string.h>

#include "store/store.h"

int floors_set(struct store_tx *tx, const json_t *properties, const struct floor_rate *r)
{
	size_t i;
	int rc = 0;

	for (i = 0; rc == 0 && i < json_array_size(properties); i++)
		rc = store_send_row(
			tx,
			"INSERT INTO rate_floors (source_id, property_id, room_type_code, date_from,"
			" date_to, currency, minor_units, set_at)",
			"", 8,
			(struct store_val[]){sv_text(r->source_id),
					     sv_text(json_string_value(json_array_get(properties, i))),
					     sv_text(r->room_type_code), sv_text(r->from),
					     sv_text(r->to), sv_text(r->currency),
					     sv_int(r->minor_units), sv_int(r->set_at)});
	return rc < 0 ? rc : 0;
}

int floors_withdraw(struct store_tx *tx, const char *source_id, int64_t at)
{
	int rc = store_send(tx,
			    "UPDATE rate_floors SET withdrawn_at = $2 WHERE source_id = $1"
			    " AND withdrawn_at IS NULL",
			    (struct store_val[]){sv_text(source_id), sv_int(at)}, 2);

	return rc < 0 ? rc : 0;
}
