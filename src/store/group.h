/* group: group commit. Threads that each have a write to make hand it to
 * a group (store_group_run) and wait; one of them, the leader, takes every
 * write handed in meanwhile (up to the group's max), runs them through
 * the group's fn in one write transaction and commits once. So n
 * writers arriving together pay one begin, one writers' turn and one
 * commit, and fn can read what all n need in one statement each, where
 * one at a time they would queue for the turn and pay each in full.
 *
 * A lone writer is its own leader at once: nothing waits for company.
 * When a transaction of several writes fails, each is run again alone,
 * so one bad write fails only itself; fn must therefore leave a job as it
 * found it when its transaction fails (write results only into the job,
 * overwritten on the next run).
 *
 * The transaction is STORE_WRITE_OWN: fn reads what it may read beside
 * other writers (settings, say) first, then takes the writers' turn
 * (store_turn) before it reads what they change, so the turn is held
 * for the fewest round trips. */
#ifndef REVOPS_GROUP_H
#define REVOPS_GROUP_H
#include <stddef.h>
#include "core/common.h"

struct store;
struct store_tx;
struct store_group;

/* Runs jobs[0..n) inside tx. Returns 0 or a negative store status (the
 * transaction then rolls back). */
typedef int (*store_group_fn)(struct store_tx *tx, void *const *jobs, size_t n, void *arg);

/* A group writing to st, at most max jobs a transaction. Returns 0 or -1
 * (no memory). */
int store_group_new(struct store *st, size_t max, store_group_fn fn, void *arg,
		    struct store_group **out) WUR;
/* No thread may be in store_group_run. NULL is ignored. */
void store_group_free(struct store_group *g);
/* Runs job (with whatever others hand in meanwhile) and returns once its
 * transaction ended: STORE_OK when it committed, else a negative store
 * status. Not inside a store scope (store_scope_open): a leader's held
 * commit would hold the other callers' too. */
int store_group_run(struct store_group *g, void *job) WUR;

#endif
