/* pms_sim_core: the state machine of the PMS simulator (API-CONTRACT §7),
 * free of any I/O so that tools/pms_sim.c serves it over HTTP and revopsd
 * runs it in-process when --pms-url is "sim:".
 *
 * It keeps, per (property code, room type code), the rate of every date as
 * a sorted list of disjoint date spans (a write adds at most two spans, so
 * memory grows with the number of writes, never with range lengths), the
 * response of every idempotency key (per property code) and the list of
 * accepted writes. Every function takes the simulator's mutex; values
 * handed out are copies the caller owns, never shared with the simulator. */
#ifndef REVOPS_PMS_SIM_CORE_H
#define REVOPS_PMS_SIM_CORE_H
#include <stddef.h>
#include <jansson.h>
#include "core/common.h"

/* Accepted writes (and so idempotency keys) kept at most, by default. */
#define PMS_SIM_CAPACITY 100000
/* Longest date range one write may cover, inclusive. */
#define PMS_SIM_MAX_DAYS 366
/* Longest property code, room type code and idempotency key, in characters
 * (Unicode code points). */
#define PMS_SIM_MAX_STRING 255

struct pms_sim;

/* Makes a simulator. fail_codes: comma-separated property codes whose
 * writes always fail (NULL or "" = none; empty items are ignored). Returns
 * NULL when memory runs out. */
struct pms_sim *pms_sim_new(const char *fail_codes);
/* Frees s and everything it holds; NULL is fine. */
void pms_sim_free(struct pms_sim *s);
/* Sets how many writes are accepted before the simulator answers 503
 * (pms-sim --capacity, tests; n = 0 restores PMS_SIM_CAPACITY). Writes
 * already kept stay. */
void pms_sim_set_capacity(struct pms_sim *s, size_t n);

/* Handles one rate write for property code with the request body req (the
 * parsed JSON object {"room_type_code", "from", "to", "rate": {"currency",
 * "minor_units"}, "idempotency_key"}; nothing else is allowed).
 * Returns the HTTP status and stores a new JSON object in *resp (the caller
 * json_decref()s it):
 *   200 {"pms_ref", "previous_rate": {money}|null, "at"}: every date from..to
 *       now has the rate; previous_rate is what the `from` date had before.
 *       A repeated idempotency_key with an identical body answers the stored
 *       response again and changes nothing.
 *   400 {"error": "..."}: malformed request, the message names the field.
 *   409 {"error": "idempotency key reused with a different request"}.
 *   500 {"error": "injected failure"}: code is one of the failing codes
 *       (checked first; nothing is recorded), or {"error": "out of memory"}.
 *   503 {"error": "simulator full"}: capacity reached (replays still work).
 * *resp is NULL only when memory ran out even for the error object. */
int pms_sim_write(struct pms_sim *s, const char *code, const json_t *req, json_t **resp) WUR;

/* A new array (the caller owns it) of copies of the accepted writes, oldest
 * first: [{"property_code", "room_type_code", "from", "to", "rate",
 * "idempotency_key", "pms_ref", "at", "previous_rate"}]. NULL when memory
 * runs out. */
json_t *pms_sim_written(struct pms_sim *s) WUR;

#endif
