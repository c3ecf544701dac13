/* floors: the approved rate floors (issue 15, parity), the one owner of
 * the rate_floors table. The approved floor of a property, room type and
 * stay date is the rate of the latest published rate decision covering
 * that date, or of the latest approved rate suggestion for it, whichever
 * was set last; a reverted decision stops counting. Writers call these
 * inside the transaction that publishes, reverts or approves. */
#ifndef REVOPS_FLOORS_H
#define REVOPS_FLOORS_H
#include <jansson.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"

struct store_tx;

/* A rate set for a room type over dates from..to (YYYY-MM-DD). */
struct floor_rate {
	const char *source_id; /* rd_... or rs_... */
	const char *room_type_code, *from, *to, *currency;
	int64_t minor_units;
	int64_t set_at; /* ms */
};

/* Records r for each property id of the JSON array properties inside tx.
 * Returns 0 or a negative store status. */
int floors_set(struct store_tx *tx, const json_t *properties, const struct floor_rate *r) WUR;
/* Withdraws every floor source_id set (a reverted decision). Returns 0 or
 * a negative store status. */
int floors_withdraw(struct store_tx *tx, const char *source_id, int64_t at) WUR;

/* The floor in force, as a reader of FLOORS_IN_FORCE keeps it. */
struct floor {
	char source_id[ID_MAX];
	char currency[4];
	int64_t minor_units;
};

/* The statement of the floor in force for property p, room type r and
 * date d (SQL expressions: placeholders, or a correlated query's columns):
 * its columns source_id, currency, minor_units, at most one row (the
 * latest set, withdrawn floors left out). For a caller that reads the
 * floor within a statement of its own (feeds/ota.c: one statement for the
 * observations of many keys, not three per observation). */
#define FLOORS_IN_FORCE(p, r, d)                                                          \
	"SELECT source_id, currency, minor_units FROM rate_floors WHERE property_id = " p \
	" AND room_type_code = " r " AND date_from <= " d " AND date_to >= " d " AND"     \
	" withdrawn_at IS NULL ORDER BY set_at DESC, source_id DESC LIMIT 1"

#endif
