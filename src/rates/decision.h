/* decision: governed rate decisions (spec "Rate decision"; API-CONTRACT
 * §4), the one owner of the rate_decisions table. A decision is checked
 * against its brand ceiling for every property and against the approver's
 * role BEFORE any PMS call, written to every property's PMS in parallel,
 * compensated if any write fails, and recorded in a hash-chained audit
 * trail together with the events it causes. No HTTP here: the handlers in
 * api/rates/ (and later feeds and the console) call these. */
#ifndef REVOPS_DECISION_H
#define REVOPS_DECISION_H
#include <jansson.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"

struct store;
struct store_tx;
struct store_rows;
struct pms;
struct decision_outcome;

#define DECISION_MAX_PROPERTIES 64

/* Who asks, and which properties their credentials reach. */
struct decision_who {
	const char *portfolio_id;
	const char *user_id; /* "" for a client */
	const char *client_id;
	int (*reaches)(void *arg, const char *property_id);
	void *arg;
	const char *node; /* the node running it (cluster_node_id), NULL: none */
	/* NULL, or called with arg inside each transaction that records an
	 * outcome (*o as it will be returned), before its commit: the caller
	 * adds its own rows to commit with the record (the stored answer of
	 * an Idempotency-Key). May run again when the record is tried
	 * again. Returns a store status; a negative one fails the record. */
	int (*record)(void *arg, struct store_tx *tx, const struct decision_outcome *o);
};

/* A proposed decision (a body the API has validated; dates YYYY-MM-DD). */
struct decision_proposal {
	const json_t *properties; /* array of property ids */
	const char *room_type_code, *from, *to, *currency;
	int64_t minor_units;
	const char *ceiling_id, *approver, *justification;
};

enum decision_result {
	DECISION_DONE,                /* body: publish: the short answer; revert: the decision */
	DECISION_NOT_IN_PORTFOLIO,    /* properties[index] is not a property of the portfolio */
	DECISION_CEILING_EXCEEDED,    /* recorded as rejected; body: details, one per property */
	DECISION_GOVERNANCE_REJECTED, /* why; publish: recorded as rejected */
	DECISION_PMS_FAILED,          /* body: the failure {stage, failed_writes} */
	DECISION_UNSENT,             /* as PMS_FAILED, but no write could be sent (a local fault) */
	DECISION_UNRECORDED,         /* the writes were made, not recorded, and undone */
	DECISION_NOT_FOUND,          /* revert: no such decision */
	DECISION_OTHER_PORTFOLIO,    /* revert: it belongs to another portfolio */
	DECISION_OUT_OF_REACH,       /* revert: a property outside the credentials */
	DECISION_NOT_PUBLISHED,      /* revert: status says what it is */
	DECISION_REVERTED_MEANWHILE, /* revert: another revert won */
};

struct decision_outcome {
	enum decision_result result;
	char id[ID_MAX]; /* the decision recorded or named */
	size_t index;
	const char *why; /* a static sentence */
	char status[16];
	json_t *body; /* owned by the caller */
};

/* Proposes, governs and publishes a decision. Returns 0 with *out, or a
 * negative store status (STORE_ERR also for a local failure). */
int decision_publish(struct store *st, struct pms *pms, const struct decision_who *who,
		     const struct decision_proposal *p, struct decision_outcome *out) WUR;

/* Reverts published decision id: each property's previous rate is written
 * back (properties that had none stay and are listed). Returns 0 with
 * *out, or a negative store status. */
int decision_revert(struct store *st, struct pms *pms, const struct decision_who *who, const char *id,
		    const char *reason, const char *approver, struct decision_outcome *out) WUR;

/* Loads one decision of the portfolio as its API representation. Returns
 * 1, 0 (no such decision in any portfolio), 2 (it belongs to another
 * portfolio), or a negative store status. */
int decision_load(struct store_tx *tx, const char *portfolio_id, const char *id, json_t **out) WUR;
/* 1 when every property of decision d (a decision_load result) is reached
 * by who, else 0. */
int decision_reached(const struct decision_who *who, const json_t *d);

/* The decisions of the portfolio after id after in id order, of one status
 * or all (status NULL), for the caller to page through with
 * decision_from_row. Returns a store status. */
int decision_list(struct store_tx *tx, const char *portfolio_id, const char *after,
		  const char *status, struct store_rows **rows) WUR;
/* The decision of the current decision_list row, and its id. */
json_t *decision_from_row(struct store_rows *r);
const char *decision_row_id(struct store_rows *r);

/* A decision left "pending" by a node that stopped during its PMS writes
 * (its last heartbeat at or before alive_after, or no node recorded) is
 * marked failed, with an audit entry saying so (the PMS state of its
 * properties is unknown; nothing is compensated automatically). Run at
 * start and, where nodes share the database, every second. Returns how
 * many were marked, or -1. */
int decision_recover(struct store *st, int64_t alive_after);

#endif
