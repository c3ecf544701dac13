/* backend: what a database backend provides to store.c. store.c chooses
 * the backend by URL, then implements every store.h call by one indirect
 * call through the backend's operations, and runs what all backends share
 * (migrations, the ping); a backend calls nothing of store.c, so the
 * dependency runs one way.
 *
 * Each backend's handles start with the generic ones defined here: its
 * store with a struct store, its transaction with a struct store_tx, its
 * rows with a struct store_rows, each holding the backend's operations.
 * The backend converts the generic pointer it is given back to its own
 * type (the generic part is the first member). */
#ifndef REVOPS_STORE_BACKEND_H
#define REVOPS_STORE_BACKEND_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"
#include "core/embedded.h"
#include "store/channel.h"

struct store_val;
struct store_backend;

/* Where this process's waiters learn of notifications (store_wait): a
 * count per channel, raised by the backend as notifications arrive. */
struct store_hub {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	uint64_t count[STORE_CHANNELS];
	int listening; /* the backend's listen was called */
};

/* The backends' side of store_full_since: begin on a write that found no
 * room, end on a write that committed. */
void store_full_begin(void);
void store_full_end(void);

struct store {
	const struct store_backend *be;
	struct store_hub hub;
};

/* A backend's open and close set the hub up and tear it down (after its
 * listener stopped). */
static inline void store_hub_init(struct store_hub *h)
{
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cond, NULL);
}

static inline void store_hub_destroy(struct store_hub *h)
{
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->mu);
}

/* Counts one notification on each channel of mask (bit 1 << channel) and
 * wakes the waiters. */
static inline void store_hub_raise(struct store_hub *h, unsigned mask)
{
	pthread_mutex_lock(&h->mu);
	for (int i = 0; i < STORE_CHANNELS; i++)
		if (mask & 1u << i)
			h->count[i]++;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->mu);
}

struct store_defer;
struct store_after;

struct store_tx {
	const struct store_backend *be;
	int one;                   /* STORE_READ_ONE: store.c refuses a second statement */
	int write;                 /* a write mode (a scope holds it at commit) */
	int runs;                  /* statements run so far */
	struct store_defer *defer; /* store.c's rows of store_send_row not yet sent */
	struct store_after *after; /* store.c's store_after_commit list */
};

struct store_rows {
	const struct store_backend *be;
};

/* The operations behind store.h; each has the contract of the store.h
 * call of the same name. */
struct store_backend {
	const char *name; /* "sqlite", "postgres" */
	/* Its migrations, applied by store.c in order. */
	const struct embedded_migration *migrations;
	/* mode: enum store_mode. */
	int (*begin)(struct store *st, int mode, struct store_tx **out);
	int (*commit)(struct store_tx *tx);
	void (*rollback)(struct store_tx *tx);
	int (*exec)(struct store_tx *tx, const char *sql, const struct store_val *params,
		    int nparams);
	/* NULL: store_send runs exec. */
	int (*send)(struct store_tx *tx, const char *sql, const struct store_val *params,
		    int nparams);
	int (*query)(struct store_tx *tx, const char *sql, const struct store_val *params,
		     int nparams, struct store_rows **out);
	int (*next)(struct store_rows *r);
	const char *(*text)(struct store_rows *r, int col);
	int64_t (*integer)(struct store_rows *r, int col);
	int (*is_null)(struct store_rows *r, int col);
	size_t (*len)(struct store_rows *r, int col);
	void (*rows_close)(struct store_rows *r);
	void (*close)(struct store *st);
	int (*checkpoint)(struct store *st);
	void (*background_checkpoints)(struct store *st);
	/* Runs sql, one or more statements of a migration named name, inside
	 * tx, without the statement timeout. Returns STORE_OK, or STORE_ERR
	 * with the reason logged. */
	int (*exec_script)(struct store_tx *tx, const char *sql, const char *name);
	/* Holds off every other process migrating the same database until
	 * unlock_migrations (NULL when the write lock of each migration's
	 * transaction is enough). Returns 0, or -1 with the reason logged. */
	int (*lock_migrations)(struct store *st);
	void (*unlock_migrations)(struct store *st);
	/* Has ch announced when tx commits: to every process on the database
	 * (PostgreSQL), or by raising st's own hub after the commit (SQLite). */
	int (*notify)(struct store_tx *tx, enum store_channel ch);
	/* store_turn (NULL: every writer already has the turn). */
	int (*turn)(struct store_tx *tx);
	/* Starts receiving other processes' notifications into st's hub (NULL
	 * when only this process's reach it). Returns 0 or -1 (logged). */
	int (*listen)(struct store *st);
	/* The part of store_changes(ch) that other processes' announcements
	 * move where they cannot notify this one (SQLite: a count kept in the
	 * file), read now; NULL where every announcement reaches every
	 * process (PostgreSQL's NOTIFY). */
	uint64_t (*changes)(struct store *st, enum store_channel ch);
};

/* Opens the SQLite database at path (creating it and its directory if
 * needed) with pool_size connections. No migration is applied. Returns 0,
 * or -1 with the reason logged. */
int store_sqlite_open(const char *path, int pool_size, struct store **out) WUR;

/* Connects pool_size connections to the PostgreSQL database named by url
 * (a libpq URI, postgres:// or postgresql://). No migration is applied.
 * Returns 0, or -1 with the reason logged. */
int store_pgsql_open(const char *url, int pool_size, struct store **out) WUR;

/* Runs sql, one or more statements of a migration named name, inside tx.
 * Returns STORE_OK, or STORE_ERR with the reason logged. */
int store_exec_script(struct store_tx *tx, const char *sql, const char *name) WUR;

#endif
