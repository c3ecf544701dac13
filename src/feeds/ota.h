/* ota: OTA rate observations from a rate shopper and the parity alerts
 * they open (issue 15), the one owner of the ota_observations and
 * parity_alerts tables. An observation below the property's approved rate
 * floor (rates/floors.h) for its room type and date opens a parity alert
 * and emits v2 parity.breach.detected, once per breach: later
 * observations still below it only update the open alert. An observation
 * at or above the floor, or one finding no floor any more (its decision
 * was reverted), resolves it. An observation older than one already
 * recorded for the same property, OTA, room type and date is kept as
 * history but changes no alert. */
#ifndef REVOPS_OTA_H
#define REVOPS_OTA_H
#include <jansson.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"

struct store_tx;
struct store_rows;

/* One observation, validated by the caller (in the property's currency). */
struct ota_new {
	const char *property_id, *ota, *room_type_code, *date, *currency;
	int64_t minor_units;
	int64_t observed_at; /* ms */
};

/* What an observation did to parity. */
enum ota_parity {
	OTA_NO_FLOOR,          /* no approved floor to compare with */
	OTA_AT_OR_ABOVE,       /* at or above the floor, no alert was open */
	OTA_BREACH_OPENED,     /* below the floor: a new alert (alert_id) */
	OTA_BREACH_CONTINUES,  /* below the floor, the alert (alert_id) stays open */
	OTA_BREACH_RESOLVED,   /* the open alert (alert_id) is resolved */
	OTA_STALE,             /* older than an observation already recorded */
	OTA_FLOOR_OTHER_MONEY, /* the floor is in another currency: not compared */
};

struct ota_outcome {
	enum ota_parity parity;
	char alert_id[ID_MAX];
};

/* The outcome's name in a feed result ("breach_opened", ...). */
const char *ota_parity_name(enum ota_parity p);

/* The observations of one feed batch. */
struct ota_batch;

int ota_batch_begin(struct ota_batch **out) WUR;
/* Stages o (its other strings must live until ota_batch_end). Returns its
 * index in the batch, or < 0. */
int ota_batch_add(struct ota_batch *b, const struct ota_new *o) WUR;
/* Records the staged observations inside tx, in order, each acting on
 * parity as above and appending its event; tx must be in the writers'
 * turn (STORE_WRITE). What the database holds of the batch's keys (latest
 * observation, open alert, floor in force) is read first, a statement per
 * READ_KEYS keys, and carried from item to item of a key, so an
 * observation sees the earlier ones of its batch. Returns 0 or a
 * negative store status. */
int ota_batch_end(struct store_tx *tx, const char *portfolio_id, struct ota_batch *b, int64_t now) WUR;
/* The outcome of staged observation i, after ota_batch_end (NULL: no such). */
const struct ota_outcome *ota_batch_outcome(const struct ota_batch *b, int i);
void ota_batch_free(struct ota_batch *b);

/* Filters of the parity alert list; NULL or "" for none. props: the
 * property ids the caller reaches, or NULL for all. */
struct ota_alert_filter {
	const char *status, *property_id, *ota;
	const char *const *props;
	int nprops;
};
/* The portfolio's parity alerts after id after in id order, at most limit.
 * Returns a store status. */
int ota_alert_list(struct store_tx *tx, const char *portfolio_id, const char *after,
		   const struct ota_alert_filter *f, int limit, struct store_rows **rows) WUR;
json_t *ota_alert_from_row(struct store_rows *r);
const char *ota_alert_row_id(struct store_rows *r);
/* One alert of the portfolio: 1, 0 (none), 2 (another portfolio's) or < 0. */
int ota_alert_load(struct store_tx *tx, const char *portfolio_id, const char *id, json_t **out) WUR;

#endif
