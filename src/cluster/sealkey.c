#include "cluster/sealkey.h"

#include <stdio.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/keyfile.h"
#include "core/log.h"
#include "store/store.h"

/* The check value the database holds into out. Returns 1, 0 (none yet)
 * or < 0. */
static int stored_check(struct store *st, char out[KEYFILE_CHECK_LEN + 1])
{
	struct store_tx *tx;
	struct store_rows *r;
	int rc = store_begin(st, STORE_READ_ONE, &tx);

	if (rc != STORE_OK)
		return rc;
	if ((rc = store_query(tx, "SELECT check_value FROM key_checks WHERE name = 'seal'", NULL, 0,
			      &r)) == STORE_OK) {
		if ((rc = store_next(r)) == 1)
			snprintf(out, KEYFILE_CHECK_LEN + 1, "%s", store_text(r, 0));
		store_rows_close(r);
	}
	store_rollback(tx);
	return rc;
}

/* Records check unless the database has one (another process's, made
 * meanwhile: the caller reads it again). */
static int record_check(struct store *st, const char *check)
{
	int rc = store_exec_alone(st, STORE_WRITE,
				  "INSERT INTO key_checks (name, check_value, created_at) VALUES"
				  " ('seal', $1, $2) ON CONFLICT (name) DO NOTHING",
				  (struct store_val[]){sv_text(check), sv_int(clock_now_ms())}, 2);

	return rc < 0 ? rc : STORE_OK;
}

/* Logs why the key at path will not do: the database expects the key
 * whose check value is want; have is this key's (NULL: there is none). */
static void refuse(const char *path, const char *want, const char *have)
{
	if (have)
		log_msg(LOG_ERROR, "sealing_key",
			"%s is not the key this database's secrets are sealed with: the database "
			"expects the key whose check value begins %.16s, this key's begins %.16s. "
			"Restore the revops.key backed up with this database (or copy it from a node "
			"that shares the database) into the data directory and start again; nothing "
			"was changed",
			path, want, have);
	else
		log_msg(LOG_ERROR, "sealing_key",
			"%s is missing, but this database's secrets are sealed with the key whose "
			"check value begins %.16s. Restore that revops.key (backed up with this "
			"database, or copied from a node that shares it) into the data directory and "
			"start again; a new key would leave every sealed secret unreadable, so none "
			"was made",
			path, want);
}

int sealkey_load(struct store *st, const char *data_dir, unsigned char key[32])
{
	char path[1100], want[KEYFILE_CHECK_LEN + 1] = "", have[KEYFILE_CHECK_LEN + 1];
	int rc = keyfile_read(data_dir, key), stored, made = 0;

	keyfile_path(data_dir, path, sizeof path);
	if (rc < 0 || (stored = stored_check(st, want)) < 0)
		goto fail;
	if (rc == 1 && stored == 1) {
		refuse(path, want, NULL);
		goto fail;
	}
	if (rc == 1) { /* a new database: its first key */
		if ((rc = keyfile_make(data_dir, key)) < 0 ||
		    (rc == 1 && keyfile_read(data_dir, key) != 0))
			goto fail;
		made = rc == 0;
	}
	keyfile_check(key, have);
	if (stored == 0 && (record_check(st, have) != STORE_OK || stored_check(st, want) != 1))
		goto fail;
	if (!crypto_equal(want, have, KEYFILE_CHECK_LEN)) {
		refuse(path, want, have); /* made: another node's key was recorded first */
		goto fail;
	}
	return 0;
fail:
	if (made) /* nothing changed: not even a key of our own */
		keyfile_unmake(data_dir);
	crypto_wipe(key, 32);
	return -1;
}
