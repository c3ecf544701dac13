/* store: what every backend shares, written once over the store.h
 * interface (a second backend must not copy it). */
#include "store/store.h"

#include <string.h>

#include "core/clock.h"
#include "core/embedded.h"
#include "core/log.h"
#include "store/backend.h"

int store_finish(struct store_tx *tx, int rc)
{
	if (rc < 0) {
		store_rollback(tx);
		return rc;
	}
	return store_commit(tx);
}

int store_query_int(struct store_tx *tx, const char *sql, const struct store_val *params,
		    int nparams, int64_t *out)
{
	struct store_rows *r;
	int rc;

	rc = store_query(tx, sql, params, nparams, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1)
		*out = store_int(r, 0);
	store_rows_close(r);
	return rc;
}

/* The highest migration recorded in tx's database (0 for none). */
static int recorded_version(struct store_tx *tx, int64_t *have)
{
	int rc = store_exec_script(tx,
				   "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER"
				   " PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
				   "schema_migrations");

	if (rc == STORE_OK)
		rc = store_query_int(tx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
				     NULL, 0, have);
	return rc < 0 ? rc : STORE_OK;
}

/* Applies migration m inside tx unless the database already has it (or is
 * newer than this build, whose last migration is latest: refused rather
 * than guessed at). Returns 1 when applied, 0 when not needed, or < 0. */
static int apply_one(struct store_tx *tx, const struct embedded_migration *m, int latest)
{
	int64_t have = 0;
	int rc = recorded_version(tx, &have);

	if (rc < 0)
		return rc;
	if (have > latest) {
		log_msg(LOG_ERROR, "store_migrate",
			"database schema %lld is newer than this build (%d)", (long long)have,
			latest);
		return STORE_ERR;
	}
	if (m->version <= have)
		return 0;
	if ((rc = store_exec_script(tx, m->sql, m->name)) < 0)
		return rc;
	rc = store_exec(
		tx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
		(struct store_val[]){sv_int(m->version), sv_text(m->name), sv_int(clock_now_ms())},
		3);
	return rc < 0 ? rc : 1;
}

/* Applies every migration of list newer than the database's version, each
 * in its own write transaction, recording it in schema_migrations. */
static int migrate(struct store *st, const struct embedded_migration *list)
{
	const struct embedded_migration *m;
	struct store_tx *tx;
	int rc, latest = 0;

	for (m = list; m->name; m++)
		latest = m->version;
	for (m = list; m->name; m++) {
		if ((rc = store_begin(st, 1, &tx)) != STORE_OK)
			return rc;
		rc = apply_one(tx, m, latest);
		if (rc == 0) {
			store_rollback(tx);
			continue;
		}
		if ((rc = store_finish(tx, rc)) != STORE_OK)
			return rc;
		log_msg(LOG_INFO, "store_migrate", "applied %s", m->name);
	}
	return STORE_OK;
}

int store_open(const char *url, int pool_size, struct store **out)
{
	*out = NULL;
	if (strncmp(url, "sqlite:", 7) != 0) {
		log_msg(LOG_ERROR, "store_open",
			"unsupported database URL (this build has the sqlite: backend only)");
		return -1;
	}
	if (store_sqlite_open(url + 7, pool_size, out) < 0)
		return -1;
	if (migrate(*out, embedded_migrations_sqlite) != STORE_OK) {
		store_close(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

int store_ping(struct store *st)
{
	struct store_tx *tx;
	int64_t one = 0;
	int rc;

	if (store_begin(st, 0, &tx) != STORE_OK)
		return -1;
	rc = store_query_int(tx, "SELECT 1", NULL, 0, &one);
	store_rollback(tx);
	return rc == 1 && one == 1 ? 0 : -1;
}

int store_schema_version(struct store *st)
{
	struct store_tx *tx;
	int64_t v = -1;

	if (store_begin(st, 0, &tx) != STORE_OK)
		return -1;
	if (store_query_int(tx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", NULL, 0,
			    &v) != 1)
		v = -1;
	store_rollback(tx);
	return (int)v;
}
