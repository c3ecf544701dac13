/* group: group commit. Writes handed to a group (store_group_submit) queue;
 * the group's own thread takes every write queued (up to the group's
 * max), runs them through the group's fn in one write transaction,
 * commits once, and then reports each write's outcome to its callback.
 * So n writes arriving together pay one begin, one writers' turn and one
 * commit, fn can read what all n need in one statement each, and no
 * thread of the caller waits meanwhile: an event loop can hand a write in
 * and go on serving.
 *
 * While a transaction runs, the writes handed in meanwhile queue for the
 * next: a lone write starts at once, nothing waits for company.
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
/* A job's outcome, on the group's thread: STORE_OK when its transaction
 * committed, else a negative store status. Must be quick: the next
 * transaction waits for it. */
typedef void (*store_group_done_fn)(void *done_arg, int rc);

/* A group writing to st, at most max jobs a transaction, with its thread
 * (named name, at most 15 characters) started. Returns 0 or -1 (no
 * memory, no thread). */
int store_group_new(struct store *st, size_t max, store_group_fn fn, void *arg, const char *name,
		    struct store_group **out) WUR;
/* Runs what is queued, then stops the thread and frees g. Nothing may
 * submit meanwhile. NULL is ignored. */
void store_group_free(struct store_group *g);
/* Queues job; done(done_arg, rc) is called once its transaction ended.
 * job and done_arg must live until then. Returns 0, or -1 (no memory:
 * done is not called). */
int store_group_submit(struct store_group *g, void *job, store_group_done_fn done, void *done_arg) WUR;
/* store_group_submit, and waits for the outcome, which it returns. Not
 * inside a store scope (store_scope_open), nor on the group's thread. */
int store_group_run(struct store_group *g, void *job) WUR;

#endif
