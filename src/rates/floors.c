#include "rates/floors.h"

#include <stdio.h>
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

int floors_get(struct store_tx *tx, const char *property_id, const char *room_type_code,
	       const char *date, struct floor *out)
{
	struct store_rows *r;
	int rc;

	memset(out, 0, sizeof *out);
	rc = store_query(tx, FLOORS_IN_FORCE_SQL,
			 (struct store_val[]){sv_text(property_id), sv_text(room_type_code),
					      sv_text(date)},
			 3, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		snprintf(out->source_id, sizeof out->source_id, "%s", store_text(r, 0));
		snprintf(out->currency, sizeof out->currency, "%s", store_text(r, 1));
		out->minor_units = store_int(r, 2);
	}
	store_rows_close(r);
	return rc;
}
