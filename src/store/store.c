/* store: what every backend shares, written once over the store.h
 * interface (a second backend must not copy it). */
#include "store/store.h"

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
