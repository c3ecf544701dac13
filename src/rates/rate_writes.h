/* rate_writes: one batch of rate writes to the properties' PMSs and its
 * compensation (spec "Rate decision": a failed write undoes the writes
 * already made). The same sequence serves a decision's publication and its
 * revert; only what is written differs. */
#ifndef REVOPS_RATE_WRITES_H
#define REVOPS_RATE_WRITES_H
#include <jansson.h>
#include <stdint.h>
#include "core/common.h"
#include "pms/pms.h"
#include "portfolio/portfolio.h"

#define RATE_WRITES_MAX 64

struct store_tx;
struct audit_chain;

/* n writes: w[i] writes property t[i]. After rate_writes_run, comp[i] says
 * for each write made whether it was compensated (1), had nothing to
 * restore (2) or the compensation itself failed (3); cw holds the
 * compensating writes in order. */
struct rate_batch {
	size_t n;
	struct portfolio_property t[RATE_WRITES_MAX];
	struct pms_write w[RATE_WRITES_MAX];
	struct pms_write cw[RATE_WRITES_MAX];
	int comp[RATE_WRITES_MAX];
	int unsent;      /* no write could be sent: a local fault, nothing written */
	const char *why; /* the failure's reason beyond its writes, or NULL (static) */
};

/* Adds a write of currency/minor to property t over room/from/to, with the
 * idempotency key "<decision_id>:<property id>:<purpose>". The strings are
 * borrowed until the batch is run. */
void rate_batch_add(struct rate_batch *b, const struct portfolio_property *t, const char *room,
		    const char *from, const char *to, const char *currency, int64_t minor,
		    const char *decision_id, const char *purpose);

/* Runs the writes; when any fails, writes already made are compensated
 * with their previous rates. Returns 0 when all succeeded, 1 when any
 * failed (compensation attempted). A batch this server could not send at
 * all (a local fault, such as no descriptor for a connection) fails every
 * write with that reason and sets unsent; compensating writes that could
 * not be sent are failed restores, so the record says what the PMS holds. */
int rate_batch_run(struct pms *pms, struct rate_batch *b) WUR;

/* Undoes the writes of b that succeeded (their previous rates written
 * back, as a failed batch's are), setting comp[]. */
void rate_batch_undo(struct pms *pms, struct rate_batch *b);

/* The audit details of write i: property, code, purpose, pms_ref, at,
 * rate, previous_rate, idempotency_key. */
json_t *rate_batch_entry(const struct rate_batch *b, size_t i, const char *purpose);

/* Records a failed batch inside tx: a pms_write entry per write made, a
 * pms_compensation entry per compensation, a "failed" entry with the
 * failure, and v1 connection.d_edge.failed per failing property in the
 * outbox. Returns the failure object {stage, failed_writes} (owned), or
 * NULL on a store error (*rc says which). */
json_t *rate_batch_record_failure(struct store_tx *tx, struct audit_chain *ch,
				  const char *portfolio_id, const char *decision_id,
				  const struct rate_batch *b, const char *purpose, int64_t now,
				  int *rc);

#endif
