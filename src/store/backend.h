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
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"
#include "core/embedded.h"

struct store_val;
struct store_backend;

struct store {
	const struct store_backend *be;
};

struct store_tx {
	const struct store_backend *be;
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
	int (*begin)(struct store *st, int write, struct store_tx **out);
	int (*commit)(struct store_tx *tx);
	void (*rollback)(struct store_tx *tx);
	int (*exec)(struct store_tx *tx, const char *sql, const struct store_val *params,
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
