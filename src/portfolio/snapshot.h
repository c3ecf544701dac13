/* portfolio/snapshot: this node's copy of each busy portfolio's
 * properties and brand ceilings, so that the reads made on every request
 * (the property list, the X-Service-Property check, a rate decision's
 * targets and ceiling) need not ask a shared database each time.
 *
 * Properties and ceilings are added (revopsctl, any process, any node)
 * and never changed or removed: portfolio.c has no UPDATE or DELETE of
 * them, and portfolio_property_add and portfolio_ceiling_add announce each
 * addition on STORE_CH_PROPERTIES. So a property or ceiling found in a
 * snapshot is exactly what the database holds, and the one thing a
 * snapshot can lack is one added since it was loaded. A snapshot is
 * loaded again once store_changes says the channel has news since it was
 * made (PostgreSQL: the adding
 * transaction's NOTIFY, normally well under a millisecond after its
 * commit; SQLite: a count in the database file that the adding
 * transaction raises, read on every request), and in any case after
 * PORTFOLIO_SNAPSHOT_TTL_MS (the bound while a PostgreSQL listener
 * session is lost and not yet known to be). A
 * lookup that misses asks the database, so nothing that names a new
 * property or ceiling waits for it.
 *
 * A portfolio of more than PORTFOLIO_SNAPSHOT_MAX properties is not kept;
 * of its ceilings, the first PORTFOLIO_SNAPSHOT_MAX (by id) are.
 * At most 1024 portfolios are kept (SNAPSHOT_SLOTS; a portfolio hashing
 * to a busy slot replaces it). */
#ifndef REVOPS_PORTFOLIO_SNAPSHOT_H
#define REVOPS_PORTFOLIO_SNAPSHOT_H
#include <stddef.h>
#include "core/common.h"
#include "portfolio/portfolio.h"

struct store;

#define PORTFOLIO_SNAPSHOT_TTL_MS 1000
#define PORTFOLIO_SNAPSHOT_MAX 256

/* One property: what portfolio_property_get reads, and its API
 * representation (portfolio_property_write's text, not NUL-terminated). */
struct portfolio_snap_prop {
	struct portfolio_property p;
	const char *json;
	size_t json_len;
};

/* The properties and brand ceilings of one portfolio in id order.
 * Immutable once made; held by reference (portfolio_snapshot_put). */
struct portfolio_snapshot {
	size_t n;
	const struct portfolio_snap_prop *props;
	size_t n_ceilings;
	const struct portfolio_ceiling *ceilings;
};

/* The portfolio's snapshot, loaded (one read transaction) when this node has
 * no valid one. Returns 1 with *out (release it with portfolio_snapshot_put),
 * 0 when none is kept (more than PORTFOLIO_SNAPSHOT_MAX properties; *out
 * NULL: read the database), or a negative store status. A
 * portfolio that does not exist has an empty snapshot. Thread-safe. */
int portfolio_snapshot_get(struct store *st, const char *portfolio_id,
			   const struct portfolio_snapshot **out) WUR;
void portfolio_snapshot_put(const struct portfolio_snapshot *s);

/* The property with the given id, or NULL. */
const struct portfolio_snap_prop *portfolio_snapshot_find(const struct portfolio_snapshot *s,
							  const char *id);

/* The brand ceiling with the given id, or NULL. */
const struct portfolio_ceiling *portfolio_snapshot_ceiling(const struct portfolio_snapshot *s,
							   const char *id);

/* Whether property_id is a property of the portfolio: from the snapshot,
 * or on a miss from the database (a read of its own). Returns 1, 0 or a
 * negative store status. */
int portfolio_known_property(struct store *st, const char *portfolio_id, const char *property_id) WUR;

#endif
