/* backend: what a database backend provides to store.c besides the
 * store.h calls everyone makes. store.c chooses the backend by URL, then
 * runs what all backends share (migrations, the ping); a backend calls
 * nothing of store.c, so the dependency runs one way. */
#ifndef REVOPS_STORE_BACKEND_H
#define REVOPS_STORE_BACKEND_H
#include "core/common.h"

struct store;
struct store_tx;

/* Opens the SQLite database at path (creating it and its directory if
 * needed) with pool_size connections. No migration is applied. Returns 0,
 * or -1 with the reason logged. */
int store_sqlite_open(const char *path, int pool_size, struct store **out) WUR;

/* Runs sql, one or more statements of a migration named name, inside tx.
 * Returns STORE_OK, or STORE_ERR with the reason logged. */
int store_exec_script(struct store_tx *tx, const char *sql, const char *name) WUR;

#endif
