/* pms: the property-management-platform connector (API-CONTRACT §7), and
 * the booking-engine connector, which speaks the same protocol at its own
 * base URL (docs/booking-engine.md).
 * "sim:" runs the simulator in-process (the demo); an http(s) base URL
 * writes over HTTP, every property of a batch in parallel, each write with
 * its own idempotency key and a 10 s limit. */
#ifndef REVOPS_PMS_H
#define REVOPS_PMS_H
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"

#define PMS_TIMEOUT_MS 10000

struct pms;

struct pms_write {
	/* in */
	const char *property_code;
	const char *room_type_code;
	const char *from;
	const char *to;
	const char *currency;
	int64_t minor_units;
	char idempotency_key[160];
	/* out */
	int ok;           /* 1: the PMS accepted the write (200 with a receipt) */
	long http_status; /* 0 when no answer */
	char pms_ref[128];
	char at[40];
	int has_previous; /* previous_rate was a money object (not null) */
	char prev_currency[4];
	int64_t prev_minor_units;
	char error[200]; /* why it failed, when !ok */
};

/* Opens the connector for url ("sim:" or an http(s) base URL). Returns 0
 * or -1 (unsupported URL). */
int pms_open(const char *url, struct pms **out) WUR;
/* What a connector writes to; it names the other end in messages. */
enum pms_role { PMS_ROLE_PMS, PMS_ROLE_BOOKING_ENGINE };
/* pms_open for a connector of role (pms_open is PMS_ROLE_PMS). */
int pms_open_as(const char *url, enum pms_role role, struct pms **out) WUR;
void pms_close(struct pms *p);
/* Performs the n writes (in parallel over HTTP) and fills their results.
 * Returns 0 when every write was attempted, -1 on a local failure (no
 * connection could be made, out of memory), in which case nothing was
 * sent and no result is meaningful. */
int pms_write_all(struct pms *p, struct pms_write *w, size_t n) WUR;
/* The simulator behind "sim:" (NULL for HTTP); for the demo and tests. */
struct pms_sim *pms_simulator(struct pms *p);

#endif
