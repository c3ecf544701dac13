/* tmp_store: the unit tests' throw-away store directory. Include after
 * <cmocka.h>. */
#ifndef REVOPS_TEST_TMP_STORE_H
#define REVOPS_TEST_TMP_STORE_H
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "store/store.h"

/* Makes /tmp/revops-<name>-XXXXXX into dir (64 bytes) and the URL of a
 * SQLite database in it into url. Returns 0 or -1. */
static inline int tmp_store_dir(const char *name, char dir[64], char *url, size_t urlcap)
{
	snprintf(dir, 64, "/tmp/revops-%s-XXXXXX", name);
	if (!mkdtemp(dir))
		return -1;
	snprintf(url, urlcap, "sqlite:%s/revops.db", dir);
	return 0;
}

/* tmp_store_dir, with url then the PostgreSQL database REVOPS_TEST_PG_URL
 * names when it is set (a *_pg run). Returns 1 (PostgreSQL), 0 (SQLite)
 * or -1. */
static inline int tmp_store_url(const char *name, char dir[64], char *url, size_t urlcap)
{
	const char *pg = getenv("REVOPS_TEST_PG_URL");

	if (tmp_store_dir(name, dir, url, urlcap) < 0)
		return -1;
	if (!pg || !*pg)
		return 0;
	snprintf(url, urlcap, "%s", pg);
	return 1;
}

/* Closes st and removes dir: a cmocka teardown's 0 or -1. */
static inline int tmp_store_remove(struct store *st, const char *dir)
{
	char cmd[128];

	store_close(st);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

#endif
