/* webhooks/due_sql: the statements by which the webhook engine finds due
 * deliveries, apart from engine.c so that a unit test can check how each
 * backend plans them (t/unit/webhooks/test_due_plans.c). The same text on
 * both backends. Their plans must not follow the statistics of
 * webhook_deliveries: an ANALYZE in a quiet hour finds no row due (the
 * due index empty), and a burst then comes with those statistics. */
#ifndef REVOPS_WEBHOOKS_DUE_SQL_H
#define REVOPS_WEBHOOKS_DUE_SQL_H
#include "store/store.h"

/* The lanes with deliveries waiting, each with its earliest due row, read
 * from the due index one lane hash at a time (a loose index scan: each
 * step is the first index entry past the previous hash). It reads a few
 * entries per lane however many deliveries wait: the GROUP BY over every
 * due row it replaced took 376 ms with 80,000 waiting, and two worker
 * nodes spent more than a core on it during a burst. Two lanes of one
 * hash (63 bits: not expected) show the one due first; the other is found
 * by a later rescan once the first has nothing due before it. Scalar
 * subqueries throughout, not a join, and the first hash as an ORDER BY
 * ... LIMIT 1, not a MIN(): a join's or an aggregate's plan follows the
 * table's statistics, and stale ones (an ANALYZE in a quiet hour finds no
 * row due) brought back the full scan, 33 ms with 40,000 waiting. */
#define LANES_SQL                                                                             \
	"WITH RECURSIVE hashes(h) AS ("                                                       \
	" SELECT (SELECT lane_hash FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL" \
	" ORDER BY lane_hash LIMIT 1)"                                                        \
	" UNION ALL SELECT (SELECT MIN(lane_hash) FROM webhook_deliveries"                    \
	" WHERE next_attempt_at IS NOT NULL AND lane_hash > hashes.h)"                        \
	" FROM hashes WHERE hashes.h IS NOT NULL)"                                            \
	" SELECT (SELECT lane FROM webhook_deliveries WHERE seq = f.seq),"                    \
	" (SELECT rate_per_s FROM webhook_deliveries WHERE seq = f.seq),"                     \
	" (SELECT next_attempt_at FROM webhook_deliveries WHERE seq = f.seq)"                 \
	" FROM (SELECT (SELECT s.seq FROM webhook_deliveries s"                               \
	" WHERE s.lane_hash = hashes.h AND s.next_attempt_at IS NOT NULL"                     \
	" ORDER BY s.next_attempt_at LIMIT 1) AS seq FROM hashes"                             \
	" WHERE hashes.h IS NOT NULL) f"

/* The seqs of up to $3 due deliveries of the lane hashed $1 (due at $2),
 * earliest first: from the due index alone, so the lane's deliveries in
 * flight, which still look due, cost an index entry each to skip. Read
 * outside the write lock: only the lane's own sender claims from it. */
#define DUE_SEQS_SQL                                                                      \
	"SELECT seq FROM webhook_deliveries WHERE lane_hash = $1 AND"                     \
	" next_attempt_at IS NOT NULL AND next_attempt_at <= $2 ORDER BY next_attempt_at" \
	" LIMIT $3"
#define DUE_COLS                                                                  \
	"SELECT seq, id, surface, event_id, event_type, portfolio_id, url, body," \
	" attempt_count, schedule_origin, manual, subscription_id, traceparent"   \
	" FROM webhook_deliveries"
/* Those of a group of them ($1..$16) that are the lane's ($17; a hash
 * collision is not), by their keys. Due they are: DUE_SEQS_SQL found them
 * in the same read snapshot. Saying so again ("next_attempt_at IS NOT
 * NULL") would let the planner take the due index instead of the keys,
 * and after an ANALYZE that found no row due it did: 40-68 ms per claim
 * with 40,000 waiting, against 0.1. */
#define DUE_ROWS_SQL                                                                         \
	DUE_COLS " WHERE seq IN " STORE_IDS_LIST " AND lane = $17 ORDER BY next_attempt_at," \
		 " seq"
/* The lane's ($4) due deliveries by the text: used when the hash is shared
 * with another lane, whose rows would otherwise fill DUE_SEQS_SQL's LIMIT
 * (hash collisions are rare, but lane text comes partly from users). */
#define DUE_LANE_SQL                                                         \
	DUE_COLS " WHERE lane_hash = $1 AND next_attempt_at IS NOT NULL AND" \
		 " next_attempt_at <= $2 AND lane = $4 ORDER BY next_attempt_at LIMIT $3"

#endif
