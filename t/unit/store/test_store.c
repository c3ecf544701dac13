/* Unit tests for the store, on each backend: migrations, placeholders,
 * value round trips, constraint mapping, transactions and snapshots, the
 * statement cache, and the connection pool under two writing threads.
 *
 * Without REVOPS_TEST_PG_URL the cases run on SQLite, each with a fresh
 * database file in its own temporary directory. With it (ctest's
 * unit_store_pg, through scripts/pg-test-cluster.sh run) the shared cases
 * and the PostgreSQL-only ones (error mapping, the pool under contention,
 * migrations racing from two processes, reconnection) run on that
 * server, each in a fresh schema (search_path in the URL). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/embedded.h"
#include "store/group.h"
#include "store/store.h"

struct fixture {
	char dir[64];
	char db[128];
	char url[512];
	char schema[64];
	struct store *st;
};

/* The PostgreSQL server under test (NULL: SQLite) and a store on its
 * default schema that makes and drops each case's schema. */
static const char *pg_url;
static struct store *pg_admin;

/* SQL that differs between the backends, for the tests' own tables. */
static const char *by_backend(const char *sqlite_sql, const char *pg_sql)
{
	return pg_url ? pg_sql : sqlite_sql;
}

/* Runs one statement in its own write transaction on st. */
static void exec_now(struct store *st, const char *sql)
{
	struct store_tx *tx;

	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_true(store_exec(tx, sql, NULL, 0) >= 0);
	assert_int_equal(store_commit(tx), STORE_OK);
}

/* A fresh empty schema of the server; f->url names it. */
static void pg_fresh_schema(struct fixture *f)
{
	static int n;
	char sql[128];

	snprintf(f->schema, sizeof f->schema, "t_%d_%d", (int)getpid(), ++n);
	snprintf(sql, sizeof sql, "CREATE SCHEMA %s", f->schema);
	exec_now(pg_admin, sql);
	snprintf(f->url, sizeof f->url, "%s%soptions=-csearch_path%%3D%s", pg_url,
		 strchr(pg_url, '?') ? "&" : "?", f->schema);
}

static int setup_pg(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);

	if (!f)
		return -1;
	pg_fresh_schema(f);
	if (store_open(f->url, 2, &f->st) != 0) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown_pg(void **state)
{
	struct fixture *f = *state;
	char sql[128];

	store_close(f->st);
	snprintf(sql, sizeof sql, "DROP SCHEMA %s CASCADE", f->schema);
	exec_now(pg_admin, sql);
	free(f);
	return 0;
}

static void remove_db(const char *db)
{
	char p[160];

	unlink(db);
	snprintf(p, sizeof p, "%s-wal", db);
	unlink(p);
	snprintf(p, sizeof p, "%s-shm", db);
	unlink(p);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);

	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/revops-store-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->db, sizeof f->db, "%s/revops.db", f->dir);
	snprintf(f->url, sizeof f->url, "sqlite:%s", f->db);
	if (store_open(f->url, 2, &f->st) != 0) {
		rmdir(f->dir);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	int rc;

	store_close(f->st);
	remove_db(f->db);
	rc = rmdir(f->dir); /* fails if anything else was left behind */
	free(f);
	return rc;
}

/* DDL is checked for success only (>= 0): store_exec reports
 * sqlite3_changes(), which a statement other than INSERT/UPDATE/DELETE
 * leaves at the previous DML statement's count. */
static void make_table(struct store *st)
{
	struct store_tx *tx;

	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_true(store_exec(tx,
			       by_backend("CREATE TABLE t (a INTEGER, b TEXT, c BLOB,"
					  " k TEXT UNIQUE, n INTEGER CHECK (n IS NULL OR n >= 0))",
					  "CREATE TABLE t (a BIGINT, b TEXT, c BYTEA,"
					  " k TEXT UNIQUE, n BIGINT CHECK (n IS NULL OR n >= 0))"),
			       NULL, 0) >= 0);
	assert_int_equal(store_commit(tx), STORE_OK);
}

/* Runs sql in a transaction of its own (write or not) and expects it to
 * fail with want; then, by store.h's contract, the transaction refuses
 * any further statement and its commit rolls back with STORE_ERR. */
static void fails_alone(struct store *st, int write, const char *sql,
			const struct store_val *params, int n, int want)
{
	struct store_tx *tx;
	int64_t v;

	assert_int_equal(store_begin(st, write, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, sql, params, n), want);
	assert_int_equal(store_query_int(tx, "SELECT 1", NULL, 0, &v), STORE_ERR);
	assert_int_equal(store_commit(tx), STORE_ERR);
}

static int64_t count(struct store *st, const char *table_sql)
{
	struct store_tx *tx;
	int64_t n = -1;

	assert_int_equal(store_begin(st, 0, &tx), STORE_OK);
	assert_int_equal(store_query_int(tx, table_sql, NULL, 0, &n), 1);
	store_rollback(tx);
	return n;
}

static void test_open_and_migrations(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;
	int version = store_schema_version(f->st);
	int64_t n = -1;

	assert_true(version >= 1);
	assert_int_equal(store_ping(f->st), 0);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM schema_migrations"), version);
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx,
				    "INSERT INTO server_keys (name, secret, created_at)"
				    " VALUES ('keep', $1, 1)",
				    (struct store_val[]){sv_blob("\0\xff", 2)}, 1),
			 1);
	assert_int_equal(store_commit(tx), STORE_OK);
	/* reopening applies nothing twice and keeps the data */
	store_close(f->st);
	f->st = NULL;
	assert_int_equal(store_open(f->url, 1, &f->st), 0);
	assert_non_null(f->st);
	assert_int_equal(store_schema_version(f->st), version);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM schema_migrations"), version);
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_int_equal(store_query_int(tx, "SELECT length(secret) FROM server_keys WHERE name = $1",
					 (struct store_val[]){sv_text("keep")}, 1, &n),
			 1);
	assert_int_equal(n, 2);
	store_rollback(tx);
	store_close(f->st);
	f->st = NULL;
	assert_int_equal(store_open(f->url, 3, &f->st), 0);
	assert_int_equal(store_schema_version(f->st), version);
	assert_int_equal(store_ping(f->st), 0);
}

/* A database written by a newer build is refused, not guessed at. */
static void test_newer_schema_refused(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;
	struct store *st2 = (struct store *)&st2;

	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx,
				    "INSERT INTO schema_migrations (version, name, applied_at)"
				    " VALUES (99999, 'future.sql', 0)",
				    NULL, 0),
			 1);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(store_open(f->url, 1, &st2), -1);
	assert_null(st2);
	/* the open store is unaffected */
	assert_int_equal(store_ping(f->st), 0);
}

static void test_bad_urls(void **state)
{
	struct fixture *f = *state;
	struct store *st = (struct store *)&st;
	char url[200];

	assert_int_equal(store_open("postgres://x", 1, &st), -1);
	assert_null(st);
	st = (struct store *)&st;
	assert_int_equal(store_open("", 1, &st), -1);
	assert_null(st);
	assert_int_equal(store_open("sqlite", 1, &st), -1);
	assert_int_equal(store_open("SQLITE:/tmp/x.db", 1, &st), -1);
	/* only one missing directory level is created */
	snprintf(url, sizeof url, "sqlite:%s/a/b/revops.db", f->dir);
	assert_int_equal(store_open(url, 1, &st), -1);
	assert_null(st);
}

static void test_creates_data_dir(void **state)
{
	struct fixture *f = *state;
	struct store *st = NULL;
	char sub[96], db[128], url[160];
	struct stat sb;

	snprintf(sub, sizeof sub, "%s/data", f->dir);
	snprintf(db, sizeof db, "%s/revops.db", sub);
	snprintf(url, sizeof url, "sqlite:%s", db);
	assert_int_equal(store_open(url, 1, &st), 0);
	assert_int_equal(store_ping(st), 0);
	assert_int_equal(stat(db, &sb), 0);
	store_close(st);
	remove_db(db);
	assert_int_equal(rmdir(sub), 0);
}

static void *row_text(struct store_rows *r)
{
	return strdup(store_text(r, 1));
}

/* store_sql_page, _eq, _in and _page_end, and store_get_owned, on a
 * table with a portfolio column. */
static void test_sql_builders(void **state)
{
	static const char *const props[] = {"p1", "p3"};
	struct fixture *f = *state;
	struct store_sql q = {.len = 0};
	struct store_rows *r;
	struct store_tx *tx;
	char got[64] = "";
	void *v;
	int i;

	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_true(store_exec(tx,
			       "CREATE TABLE things (id TEXT PRIMARY KEY, portfolio_id TEXT,"
			       " property_id TEXT, kind TEXT)",
			       NULL, 0) >= 0);
	for (i = 0; i < 6; i++) {
		char id[8], prop[8];

		snprintf(id, sizeof id, "t%d", i);
		snprintf(prop, sizeof prop, "p%d", i % 4);
		assert_int_equal(store_exec(tx, "INSERT INTO things VALUES ($1, $2, $3, $4)",
					    (struct store_val[]){sv_text(id),
								 sv_text(i == 5 ? "B" : "A"),
								 sv_text(prop),
								 sv_text(i % 2 ? "odd" : "even")},
					    4),
				 1);
	}
	/* page after t0 of A, kind even, properties p1 and p3 of none; then p0 and p2 */
	store_sql_page(&q, "SELECT id FROM things", "A", "t0");
	store_sql_eq(&q, "kind", "even");
	store_sql_eq(&q, "property_id", NULL); /* no filter */
	store_sql_eq(&q, "property_id", "");   /* no filter */
	assert_int_equal(store_sql_page_end(tx, &q, props, 2, 10, &r), STORE_OK);
	assert_int_equal(store_next(r), 0);
	store_rows_close(r);
	memset(&q, 0, sizeof q);
	store_sql_page(&q, "SELECT id FROM things", "A", "");
	store_sql_eq(&q, "kind", "even");
	assert_int_equal(store_sql_page_end(tx, &q, NULL, 0, 2, &r), STORE_OK);
	while (store_next(r) == 1)
		strcat(got, store_text(r, 0));
	store_rows_close(r);
	assert_string_equal(got, "t0t2");
	/* an empty property list matches nothing */
	memset(&q, 0, sizeof q);
	store_sql_page(&q, "SELECT id FROM things", "A", "");
	assert_int_equal(store_sql_page_end(tx, &q, props, 0, 10, &r), STORE_OK);
	assert_int_equal(store_next(r), 0);
	store_rows_close(r);
	/* more values than a statement holds (the text still has room):
	 * refused before it runs */
	memset(&q, 0, sizeof q);
	store_sql_page(&q, "SELECT id FROM things", "A", "");
	{
		const char *kinds[STORE_MAX_PARAMS];

		for (i = 0; i < STORE_MAX_PARAMS; i++)
			kinds[i] = "odd";
		store_sql_in(&q, "kind", kinds, STORE_MAX_PARAMS);
	}
	assert_true(q.overflow);
	assert_int_equal(q.n, STORE_MAX_PARAMS); /* the values ran out, not the text */
	assert_true(q.len + 16 < sizeof q.text);
	assert_int_equal(store_sql_page_end(tx, &q, NULL, 0, 10, &r), STORE_ERR);
	/* a VALUES list of numbered rows: its exact text */
	{
		char *sql = store_sql_values("SELECT k.column1, k.column2, k.column3 FROM (VALUES ",
					     3, 2, 9, ") k ORDER BY 1");

		assert_non_null(sql);
		assert_string_equal(sql, "SELECT k.column1, k.column2, k.column3 FROM (VALUES "
					 "(0, $9, $10), (1, $11, $12), (2, $13, $14)) k ORDER BY 1");
		free(sql);
	}
	/* one resource of a portfolio */
	assert_int_equal(store_get_owned(tx, "SELECT portfolio_id, kind FROM things WHERE id = $1",
					 "t3", 0, "A", row_text, &v),
			 1);
	assert_string_equal(v, "odd");
	free(v);
	assert_int_equal(store_get_owned(tx, "SELECT portfolio_id, kind FROM things WHERE id = $1",
					 "t5", 0, "A", row_text, &v),
			 2);
	assert_null(v);
	assert_int_equal(store_get_owned(tx, "SELECT portfolio_id, kind FROM things WHERE id = $1",
					 "t9", 0, "A", row_text, &v),
			 0);
	assert_null(v);
	assert_int_equal(store_commit(tx), STORE_OK);
}

/* store_send_row: rows kept and sent as multi-row statements, a parent
 * table's before its children's however the statements fill, before any
 * other statement and at commit; a rollback sends nothing. */
static void test_send_row(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;
	int64_t v = -1;
	char id[16];
	int i;

	exec_now(f->st, "CREATE TABLE par (id TEXT PRIMARY KEY, n INTEGER)");
	exec_now(f->st, "CREATE TABLE kid (pid TEXT NOT NULL REFERENCES par (id), seq INTEGER,"
			" x TEXT, y TEXT, z TEXT, w TEXT)");
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	/* 2 columns fill at 16 rows, 6 at 16 (21 would fit): the parents'
	 * statement and the kids' fill at different times */
	for (i = 0; i < 37; i++) {
		snprintf(id, sizeof id, "p%02d", i);
		assert_int_equal(store_send_row(tx, "INSERT INTO par (id, n)", "", 2,
						(struct store_val[]){sv_text(id), sv_int(i)}),
				 STORE_OK);
		for (int k = 0; k < 2; k++)
			assert_int_equal(
				store_send_row(tx, "INSERT INTO kid (pid, seq, x, y, z, w)", "", 6,
					       (struct store_val[]){sv_text(id), sv_int(k),
								    sv_text("x"), sv_null(),
								    sv_text("z"), sv_text("w")}),
				STORE_OK);
		id[0] = 'q'; /* the caller's buffer changes: the row kept a copy */
	}
	/* a query sees every row given before it */
	assert_int_equal(store_query_int(tx, "SELECT COUNT(*) FROM kid", NULL, 0, &v), 1);
	assert_int_equal(v, 74);
	assert_int_equal(store_send_row(tx, "INSERT INTO par (id, n)", "", 2,
					(struct store_val[]){sv_text("last"), sv_int(99)}),
			 STORE_OK);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM par"), 38);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM kid WHERE y IS NULL AND x = 'x'"), 74);
	assert_int_equal(count(f->st, "SELECT SUM(n) FROM par"), 36 * 37 / 2 + 99);
	/* rolled back: nothing of the kept rows */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_send_row(tx, "INSERT INTO par (id, n)", "", 2,
					(struct store_val[]){sv_text("gone"), sv_int(1)}),
			 STORE_OK);
	store_rollback(tx);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM par WHERE id = 'gone'"), 0);
	/* a kept row that fails fails the commit, and the transaction */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_send_row(tx, "INSERT INTO par (id, n)", "", 2,
					(struct store_val[]){sv_text("new"), sv_int(1)}),
			 STORE_OK);
	assert_int_equal(store_send_row(tx, "INSERT INTO par (id, n)", "", 2,
					(struct store_val[]){sv_text("p00"), sv_int(1)}),
			 STORE_OK);
	assert_int_equal(store_commit(tx), STORE_CONSTRAINT);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM par WHERE id = 'new'"), 0);
}

static void test_placeholders(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;
	int64_t v = -1;

	make_table(f->st);
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	/* $2 before $1 in the text */
	assert_int_equal(store_exec(tx, "INSERT INTO t (b, a) VALUES ($2, $1)",
				    (struct store_val[]){sv_int(7), sv_text("seven")}, 2),
			 1);
	assert_int_equal(store_exec(tx, "INSERT INTO t (b, a) VALUES ($2, $1)",
				    (struct store_val[]){sv_int(8), sv_text("eight")}, 2),
			 1);
	assert_int_equal(store_query_int(tx, "SELECT COUNT(*) FROM t WHERE b = $2 AND a = $1",
					 (struct store_val[]){sv_int(7), sv_text("seven")}, 2, &v),
			 1);
	assert_int_equal(v, 1);
	assert_int_equal(store_query_int(tx, "SELECT COUNT(*) FROM t WHERE b = $2 AND a = $1",
					 (struct store_val[]){sv_int(8), sv_text("seven")}, 2, &v),
			 1);
	assert_int_equal(v, 0);
	/* one placeholder used twice, with another in between */
	assert_int_equal(store_query_int(tx, "SELECT $1 + $2 * 10 + $1 * 100",
					 (struct store_val[]){sv_int(3), sv_int(5)}, 2, &v),
			 1);
	assert_int_equal(v, 353);
	assert_int_equal(store_query_int(tx, "SELECT COUNT(*) FROM t WHERE a = $1 OR a = $1 + 1",
					 (struct store_val[]){sv_int(7)}, 1, &v),
			 1);
	assert_int_equal(v, 2);
	/* more values than placeholders is fine; a placeholder without one is not */
	assert_int_equal(store_query_int(tx, "SELECT $1",
					 (struct store_val[]){sv_int(4), sv_int(5)}, 2, &v),
			 1);
	assert_int_equal(v, 4);
	/* rows changed */
	assert_int_equal(store_exec(tx, "UPDATE t SET n = $1", (struct store_val[]){sv_int(1)}, 1),
			 2);
	assert_int_equal(store_exec(tx, "UPDATE t SET n = 2 WHERE a = $1",
				    (struct store_val[]){sv_int(99)}, 1),
			 0);
	assert_int_equal(store_commit(tx), STORE_OK);
	/* a placeholder without a value, a syntax error: each fails its
	 * transaction */
	fails_alone(f->st, 0, "SELECT $1 + $3", (struct store_val[]){sv_int(4), sv_int(5)}, 2,
		    STORE_ERR);
	fails_alone(f->st, 1, "SELEKT 1", NULL, 0, STORE_ERR);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t WHERE n = 1"), 2);
}

static void test_value_round_trip(void **state)
{
	static const char utf8[] = "\xc5\x81\xc3\xb3"
				   "d\xc5\xba \xe2\x80\x93 "
				   "za\xc5\xbc\xc3\xb3\xc5\x82\xc4\x87 \xf0\x9f\x8f\xa8";
	static const unsigned char blob[] = {0, 1, 0, 0xff, 0, 'x', 0};
	struct fixture *f = *state;
	struct store_tx *tx;
	struct store_rows *r;
	const struct {
		int64_t a;
		const char *b;
	} ints[] = {{INT64_MIN, "min"}, {INT64_MAX, "max"}, {0, "zero"}, {-1, "minus one"}};
	size_t i;

	make_table(f->st);
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	for (i = 0; i < ARRAY_LEN(ints); i++)
		assert_int_equal(
			store_exec(tx, "INSERT INTO t (a, b) VALUES ($1, $2)",
				   (struct store_val[]){sv_int(ints[i].a), sv_text(ints[i].b)}, 2),
			1);
	assert_int_equal(store_exec(tx, "INSERT INTO t (a, b, c, n) VALUES ($1, $2, $3, $4)",
				    (struct store_val[]){sv_int(100), sv_text(utf8),
							 sv_blob(blob, sizeof blob), sv_null()},
				    4),
			 1);
	assert_int_equal(store_exec(tx, "INSERT INTO t (a, b, c) VALUES ($1, $2, $3)",
				    (struct store_val[]){sv_int(101), sv_text(NULL), sv_text("")}, 3),
			 1);
	assert_int_equal(store_commit(tx), STORE_OK);

	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	for (i = 0; i < ARRAY_LEN(ints); i++) {
		assert_int_equal(store_query(tx, "SELECT a, b FROM t WHERE b = $1",
					     (struct store_val[]){sv_text(ints[i].b)}, 1, &r),
				 STORE_OK);
		assert_int_equal(store_next(r), 1);
		assert_int_equal(store_int(r, 0), ints[i].a);
		assert_true(store_int(r, 0) == ints[i].a);
		assert_string_equal(store_text(r, 1), ints[i].b);
		assert_int_equal(store_next(r), 0);
		store_rows_close(r);
	}
	assert_int_equal(store_query(tx,
				     by_backend("SELECT b, c, n, length(b), typeof(c) FROM t WHERE a = $1",
						"SELECT b, c, n, length(b), pg_typeof(c)::text FROM t"
						" WHERE a = $1"),
				     (struct store_val[]){sv_int(100)}, 1, &r),
			 STORE_OK);
	assert_int_equal(store_next(r), 1);
	assert_string_equal(store_text(r, 0), utf8);
	assert_int_equal(store_len(r, 0), strlen(utf8));
	assert_int_equal(store_int(r, 3), 15); /* characters, not bytes */
	assert_string_equal(store_text(r, 4), by_backend("blob", "bytea"));
	assert_int_equal(store_len(r, 1), sizeof blob);
	assert_memory_equal(store_text(r, 1), blob, sizeof blob);
	assert_int_equal(store_is_null(r, 2), 1);
	assert_null(store_text(r, 2));
	assert_int_equal(store_is_null(r, 0), 0);
	assert_int_equal(store_next(r), 0);
	store_rows_close(r);
	/* NULL text binds SQL NULL; "" is an empty string, not NULL */
	assert_int_equal(store_query(tx, "SELECT b, c FROM t WHERE a = $1",
				     (struct store_val[]){sv_int(101)}, 1, &r),
			 STORE_OK);
	assert_int_equal(store_next(r), 1);
	assert_int_equal(store_is_null(r, 0), 1);
	assert_int_equal(store_is_null(r, 1), 0);
	assert_string_equal(store_text(r, 1), "");
	assert_int_equal(store_len(r, 1), 0);
	store_rows_close(r);
	store_rollback(tx);
}

static void test_query_int(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;
	int64_t v = 12345;

	make_table(f->st);
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_int_equal(store_query_int(tx, "SELECT a FROM t WHERE a = $1",
					 (struct store_val[]){sv_int(1)}, 1, &v),
			 0);
	assert_int_equal(v, 12345); /* untouched without a row */
	assert_int_equal(store_query_int(tx, "SELECT 42", NULL, 0, &v), 1);
	assert_int_equal(v, 42);
	assert_int_equal(store_query_int(tx, "SELECT -9223372036854775807 - 1", NULL, 0, &v), 1);
	assert_true(v == INT64_MIN);
	assert_int_equal(store_query_int(tx, "SELECT x FROM nowhere", NULL, 0, &v), STORE_ERR);
	store_rollback(tx);
}

static void test_constraints(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;
	struct store_rows *r;

	make_table(f->st);
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "INSERT INTO t (k) VALUES ($1)",
				    (struct store_val[]){sv_text("dup")}, 1),
			 1);
	assert_int_equal(store_commit(tx), STORE_OK);
	fails_alone(f->st, 1, "INSERT INTO t (k) VALUES ($1)", (struct store_val[]){sv_text("dup")},
		    1, STORE_CONSTRAINT);
	fails_alone(f->st, 1, "INSERT INTO t (k, n) VALUES ($1, $2)",
		    (struct store_val[]){sv_text("neg"), sv_int(-1)}, 2, STORE_CONSTRAINT);
	/* a constraint error through store_query/store_next */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "INSERT INTO t (k) VALUES ($1)",
				    (struct store_val[]){sv_text("other")}, 1),
			 1);
	assert_int_equal(store_query(tx, "INSERT INTO t (k) VALUES ($1) RETURNING k",
				     (struct store_val[]){sv_text("dup")}, 1, &r),
			 STORE_OK);
	assert_int_equal(store_next(r), STORE_CONSTRAINT);
	store_rows_close(r);
	/* the whole transaction goes, the earlier insert with it */
	assert_int_equal(store_exec(tx, "INSERT INTO t (k) VALUES ($1)",
				    (struct store_val[]){sv_text("late")}, 1),
			 STORE_ERR);
	assert_int_equal(store_commit(tx), STORE_ERR);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), 1);
	/* foreign keys are enforced */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_true(store_exec(tx, "CREATE TABLE parent (id TEXT PRIMARY KEY)", NULL, 0) >= 0);
	assert_true(store_exec(tx, "CREATE TABLE child (id TEXT, pid TEXT REFERENCES parent (id))",
			       NULL, 0) >= 0);
	assert_int_equal(store_exec(tx, "INSERT INTO child VALUES ('c', 'missing')", NULL, 0),
			 STORE_CONSTRAINT);
	store_rollback(tx);
}

/* store_send: deferred statements take effect with the commit; one that
 * fails is reported by the next statement or by the commit (with its own
 * status), and the whole transaction goes; more than a pipeline holds
 * still all arrive; a statement new to the connection whose Parse failed
 * is prepared again next time. */
static void test_send(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;
	int64_t v = -1;
	int i;

	make_table(f->st);
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	for (i = 0; i < 150; i++)
		assert_int_equal(store_send(tx, "INSERT INTO t (a, k) VALUES ($1, $2)",
					    (struct store_val[]){sv_int(i), sv_int(i)}, 2),
				 STORE_OK);
	assert_int_equal(store_query_int(tx, "SELECT COUNT(*) FROM t", NULL, 0, &v), 1);
	assert_int_equal(v, 150); /* the transaction sees its own deferred rows */
	assert_int_equal(store_send(tx, "UPDATE t SET b = 'x' WHERE a = $1",
				    (struct store_val[]){sv_int(7)}, 1),
			 STORE_OK);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t WHERE b = 'x'"), 1);

	/* a refused one, found by the commit: nothing of the transaction stays */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_send(tx, "INSERT INTO t (k) VALUES ('new')", NULL, 0), STORE_OK);
	i = store_send(tx, "INSERT INTO t (k) VALUES ('3')", NULL, 0);
	assert_true(i == STORE_OK || i == STORE_CONSTRAINT); /* SQLite knows at once */
	if (i == STORE_OK)
		assert_int_equal(store_commit(tx), STORE_CONSTRAINT);
	else
		assert_int_equal(store_commit(tx), STORE_ERR);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t WHERE k = 'new'"), 0);

	/* ... or by the next statement */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	i = store_send(tx, "INSERT INTO t (k, n) VALUES ('neg', -1)", NULL, 0);
	if (i == STORE_OK)
		assert_int_equal(store_query_int(tx, "SELECT 1", NULL, 0, &v), STORE_CONSTRAINT);
	else
		assert_int_equal(i, STORE_CONSTRAINT);
	assert_int_equal(store_exec(tx, "INSERT INTO t (k) VALUES ('late')", NULL, 0), STORE_ERR);
	assert_int_equal(store_commit(tx), STORE_ERR);

	/* a statement that cannot be prepared, then a good one on the same
	 * connection, then the bad one again: the same error, not a stale name */
	for (i = 0; i < 2; i++) {
		assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
		assert_true(store_send(tx, "INSERT INTO no_such_table VALUES (1)", NULL, 0) <= 0);
		assert_int_equal(store_commit(tx), STORE_ERR);
		assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
		assert_int_equal(store_send(tx, "INSERT INTO t (a) VALUES ($1)",
					    (struct store_val[]){sv_int(1000 + i)}, 1),
				 STORE_OK);
		assert_int_equal(store_commit(tx), STORE_OK);
	}
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t WHERE a >= 1000"), 2);

	/* every filling of the pipeline, then a statement new to the
	 * connection and the commit: the segment is read when they would not
	 * fit, whatever it held */
	for (i = 1; i <= 70; i++) {
		char sql[64];
		int j;

		snprintf(sql, sizeof sql, "SELECT COUNT(*) + %d FROM t WHERE a >= 2000", i);
		assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
		for (j = 0; j < i; j++)
			assert_int_equal(store_send(tx, "INSERT INTO t (a) VALUES ($1)",
						    (struct store_val[]){sv_int(2000 + j)}, 1),
					 STORE_OK);
		assert_int_equal(store_query_int(tx, sql, NULL, 0, &v), 1);
		assert_int_equal(v, i + i);
		assert_int_equal(store_send(tx, "DELETE FROM t WHERE a >= 2000", NULL, 0), STORE_OK);
		assert_int_equal(store_commit(tx), STORE_OK);
	}

	/* a rolled-back one leaves nothing */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_send(tx, "INSERT INTO t (k) VALUES ('gone')", NULL, 0), STORE_OK);
	store_rollback(tx);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t WHERE k = 'gone'"), 0);
}

/* STORE_READ_ONE: its statement reads (rows and errors as usual), a
 * second one is refused on every backend, and the connection is fine for
 * the next transaction; on PostgreSQL it runs outside BEGIN (the
 * session's default isolation, not the readers' REPEATABLE READ). */
static void test_read_one(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;
	struct store_rows *r;
	int64_t v = -1;

	make_table(f->st);
	for (int i = 0; i < 3; i++) { /* more rounds than the pool has connections */
		assert_int_equal(store_begin(f->st, STORE_READ_ONE, &tx), STORE_OK);
		assert_int_equal(store_query_int(tx, "SELECT COUNT(*) + $1 FROM t",
						 (struct store_val[]){sv_int(i)}, 1, &v),
				 1);
		assert_int_equal(v, i);
		assert_int_equal(store_query_int(tx, "SELECT 1", NULL, 0, &v), STORE_ERR);
		assert_int_equal(store_query(tx, "SELECT 1", NULL, 0, &r), STORE_ERR);
		assert_null(r);
		store_rollback(tx);
	}
	assert_int_equal(store_begin(f->st, STORE_READ_ONE, &tx), STORE_OK);
	assert_true(store_query_int(tx, "SELECT no_such_column FROM t", NULL, 0, &v) < 0);
	assert_int_equal(store_commit(tx), STORE_ERR);
	if (pg_url) {
		assert_int_equal(store_begin(f->st, STORE_READ_ONE, &tx), STORE_OK);
		assert_int_equal(store_query(tx, "SELECT current_setting('transaction_isolation')",
					     NULL, 0, &r),
				 STORE_OK);
		assert_int_equal(store_next(r), 1);
		assert_string_equal(store_text(r, 0), "read committed");
		store_rows_close(r);
		assert_int_equal(store_commit(tx), STORE_OK);
	}
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), 0);
}

/* store_send_rows: rows across several statements (more rows than one
 * carries, and more values than one statement may have) all arrive in
 * order with their values; its tail applies to every statement. */
static void test_send_rows(void **state)
{
	enum { N = 40, WIDE = 16 };
	struct fixture *f = *state;
	struct store_val v[N * 3], w[N * WIDE];
	char keys[N][8], cols[512];
	struct store_tx *tx;
	int i, c;

	make_table(f->st);
	for (i = 0; i < N; i++) {
		snprintf(keys[i], sizeof keys[i], "k%d", i);
		v[i * 3] = sv_int(i);
		v[i * 3 + 1] = i % 2 ? sv_text("odd") : sv_null();
		v[i * 3 + 2] = sv_text(keys[i]);
	}
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_send_rows(tx, "INSERT INTO t (a, b, k)", "", 3, v, N), STORE_OK);
	/* again: every row collides, and the tail skips them */
	assert_int_equal(store_send_rows(tx, "INSERT INTO t (a, b, k)",
					 " ON CONFLICT (k) DO NOTHING", 3, v, N),
			 STORE_OK);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), N);
	assert_int_equal(count(f->st, "SELECT SUM(a) FROM t"), N * (N - 1) / 2);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t WHERE b = 'odd'"), N / 2);
	assert_int_equal(count(f->st, "SELECT a FROM t WHERE k = 'k37'"), 37);

	/* WIDE columns: STORE_MAX_PARAMS / WIDE rows per statement */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	c = snprintf(cols, sizeof cols, "CREATE TABLE wide (c0 BIGINT");
	for (i = 1; i < WIDE; i++)
		c += snprintf(cols + c, sizeof cols - (size_t)c, ", c%d BIGINT", i);
	snprintf(cols + c, sizeof cols - (size_t)c, ")");
	assert_true(store_exec(tx, cols, NULL, 0) >= 0);
	for (i = 0; i < N * WIDE; i++)
		w[i] = sv_int(i);
	assert_int_equal(store_send_rows(tx, "INSERT INTO wide", "", WIDE, w, N), STORE_OK);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM wide"), N);
	assert_int_equal(count(f->st, "SELECT SUM(c15) FROM wide"),
			 (int64_t)N * (WIDE - 1) + (int64_t)WIDE * N * (N - 1) / 2);

	/* a row wider than a statement may carry is refused, not looped on */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_send_rows(tx, "INSERT INTO t (a)", "", 0, v, 1), STORE_ERR);
	assert_int_equal(store_send_rows(tx, "INSERT INTO wide", "", STORE_MAX_PARAMS + 1, w, 1),
			 STORE_ERR);
	store_rollback(tx);

	/* one refused row, in the last statement: none of the rows stays */
	for (i = 0; i < N; i++) {
		snprintf(keys[i], sizeof keys[i], i + 1 < N ? "n%d" : "k0", i);
		v[i * 3 + 2] = sv_text(keys[i]);
	}
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	i = store_send_rows(tx, "INSERT INTO t (a, b, k)", "", 3, v, N);
	assert_true(i == STORE_OK || i == STORE_CONSTRAINT);
	assert_true(store_commit(tx) < 0);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), N);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t WHERE k = 'n0'"), 0);
}

/* store_query_rows: one multi-row insert whose RETURNING rows tell which
 * rows went in (a conflict skipped is not returned), after the kept rows
 * of store_send_row; more rows than one statement carries are refused. */
static void test_query_rows(void **state)
{
	struct fixture *f = *state;
	struct store_val v[4 * 3];
	struct store_rows *r;
	struct store_tx *tx;
	const char *keys[4] = {"q0", "q1", "q0", "q2"}; /* q0 twice */
	char got[64] = "";
	int i;

	make_table(f->st);
	for (i = 0; i < 4; i++) {
		v[i * 3] = sv_int(i);
		v[i * 3 + 1] = sv_null();
		v[i * 3 + 2] = sv_text(keys[i]);
	}
	assert_int_equal(store_rows_per(3), STORE_ROWS);
	assert_int_equal(store_rows_per(STORE_MAX_PARAMS / 2), 2);
	assert_int_equal(store_rows_per(0), 0);
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	/* q2 is known already, by a kept row sent before the statement */
	assert_int_equal(store_send_row(tx, "INSERT INTO t (a, b, k)", "", 3,
					(struct store_val[]){sv_int(9), sv_null(), sv_text("q2")}),
			 STORE_OK);
	assert_int_equal(store_query_rows(tx, "INSERT INTO t (a, b, k)",
					  " ON CONFLICT (k) DO NOTHING RETURNING a", 3, v, 4, &r),
			 STORE_OK);
	while ((i = store_next(r)) == 1)
		snprintf(got + strlen(got), sizeof got - strlen(got), "%lld,",
			 (long long)store_int(r, 0));
	assert_int_equal(i, 0);
	store_rows_close(r);
	assert_string_equal(got, "0,1,");
	assert_int_equal(store_query_rows(tx, "INSERT INTO t (a, b, k)", "", 3, v, 0, &r), STORE_ERR);
	assert_null(r);
	assert_int_equal(store_query_rows(tx, "INSERT INTO t (a, b, k)", "", 3, v, STORE_ROWS + 1, &r),
			 STORE_ERR);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), 3);
	assert_int_equal(count(f->st, "SELECT a FROM t WHERE k = 'q2'"), 9);
}

static void test_rollback_discards(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;

	make_table(f->st);
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "INSERT INTO t (a) VALUES (1), (2), (3)", NULL, 0), 3);
	store_rollback(tx);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), 0);
	store_rollback(NULL); /* ignored */
	/* RETURNING and ON CONFLICT are part of the portable dialect (the
	 * existing row named by its table: PostgreSQL finds a bare column
	 * ambiguous with the proposed row) */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "INSERT INTO t (k, a) VALUES ('x', 1)", NULL, 0), 1);
	assert_int_equal(store_exec(tx,
				    "INSERT INTO t (k, a) VALUES ('x', 5)"
				    " ON CONFLICT (k) DO UPDATE SET a = t.a + 10",
				    NULL, 0),
			 1);
	assert_int_equal(store_commit(tx), STORE_OK);
	{
		struct store_tx *rt;
		int64_t a = 0;

		assert_int_equal(store_begin(f->st, 0, &rt), STORE_OK);
		assert_int_equal(store_query_int(rt, "SELECT a FROM t WHERE k = 'x'", NULL, 0, &a),
				 1);
		assert_int_equal(a, 11);
		store_rollback(rt);
	}
}

static int after_count;

/* store_after_commit's fn for test_scope: appends a digit. */
static void count_after(void *arg)
{
	after_count = after_count * 10 + *(int *)arg;
}

/* Has count_after append digit once tx commits. Returns 1, or 0. */
static int after(struct store_tx *tx, int digit)
{
	int *arg = store_after_commit(tx, count_after, sizeof *arg);

	if (arg)
		*arg = digit;
	return arg != NULL;
}

/* A scope holds its last write open for its closer: reads inside see it,
 * other connections do not until the closer commits; a second write
 * commits the first; a rollback by the closer loses only the held one. */
static void test_scope(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx, *rt, *held;
	int64_t n = -1;

	make_table(f->st);
	assert_null(store_scope_close()); /* nothing held without a scope */
	store_scope_open(f->st);
	assert_int_equal(store_begin(f->st, STORE_WRITE, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "INSERT INTO t (a) VALUES (1)", NULL, 0), 1);
	assert_int_equal(store_commit(tx), STORE_OK);
	/* a read of this thread runs inside the held write */
	assert_int_equal(store_begin(f->st, STORE_READ_ONE, &rt), STORE_OK);
	assert_int_equal(store_query_int(rt, "SELECT COUNT(*) FROM t", NULL, 0, &n), 1);
	assert_int_equal(n, 1);
	store_rollback(rt);
	assert_int_equal(store_begin(f->st, STORE_READ, &rt), STORE_OK);
	assert_int_equal(store_query_int(rt, "SELECT COUNT(*) FROM t", NULL, 0, &n), 1);
	assert_int_equal(store_commit(rt), STORE_OK);
	held = store_scope_close();
	assert_ptr_equal(held, tx);
	/* not committed yet: another connection sees nothing */
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), 0);
	assert_int_equal(store_exec(held, "INSERT INTO t (a) VALUES (2)", NULL, 0), 1);
	assert_int_equal(store_commit(held), STORE_OK);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), 2);

	/* two writes: the first commits when the second begins, only the
	 * second is held, and rolling it back keeps the first */
	store_scope_open(f->st);
	assert_int_equal(store_begin(f->st, STORE_WRITE_OWN, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "INSERT INTO t (a) VALUES (3)", NULL, 0), 1);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(store_begin(f->st, STORE_WRITE, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "INSERT INTO t (a) VALUES (4)", NULL, 0), 1);
	assert_int_equal(store_commit(tx), STORE_OK);
	held = store_scope_close();
	assert_ptr_equal(held, tx);
	store_rollback(held);
	assert_int_equal(count(f->st, "SELECT SUM(a) FROM t"), 6);

	/* what runs after a commit waits for the real one, and never runs
	 * after a rollback */
	after_count = 0;
	store_scope_open(f->st);
	assert_int_equal(store_begin(f->st, STORE_WRITE, &tx), STORE_OK);
	assert_true(after(tx, 2));
	assert_true(after(tx, 3));
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(after_count, 0);
	held = store_scope_close();
	assert_int_equal(store_commit(held), STORE_OK);
	assert_int_equal(after_count, 23); /* in the order given */
	assert_int_equal(store_begin(f->st, STORE_WRITE, &tx), STORE_OK);
	assert_true(after(tx, 9));
	store_rollback(tx);
	assert_int_equal(after_count, 23);

	/* a write rolled back inside the scope is not held */
	store_scope_open(f->st);
	assert_int_equal(store_begin(f->st, STORE_WRITE, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "INSERT INTO t (a) VALUES (5)", NULL, 0), 1);
	store_rollback(tx);
	assert_null(store_scope_close());
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), 3);
}

/* A read transaction keeps seeing what it saw first while another
 * connection commits. */
static void test_read_snapshot(void **state)
{
	struct fixture *f = *state;
	struct store_tx *rt, *wt;
	int64_t n = -1;

	make_table(f->st);
	assert_int_equal(store_begin(f->st, 1, &wt), STORE_OK);
	assert_int_equal(store_exec(wt, "INSERT INTO t (a) VALUES (1)", NULL, 0), 1);
	assert_int_equal(store_commit(wt), STORE_OK);

	assert_int_equal(store_begin(f->st, 0, &rt), STORE_OK);
	assert_int_equal(store_query_int(rt, "SELECT COUNT(*) FROM t", NULL, 0, &n), 1);
	assert_int_equal(n, 1);
	/* the pool's other connection writes meanwhile */
	assert_int_equal(store_begin(f->st, 1, &wt), STORE_OK);
	assert_int_equal(store_exec(wt, "INSERT INTO t (a) VALUES (2), (3)", NULL, 0), 2);
	assert_int_equal(store_commit(wt), STORE_OK);
	assert_int_equal(store_query_int(rt, "SELECT COUNT(*) FROM t", NULL, 0, &n), 1);
	assert_int_equal(n, 1);
	assert_int_equal(store_query_int(rt, "SELECT COALESCE(MAX(a), 0) FROM t", NULL, 0, &n), 1);
	assert_int_equal(n, 1);
	store_rollback(rt);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), 3);
}

/* write = 1 holds the database's write lock from store_begin on (so two
 * writers never deadlock on upgrade); write = 0 does not block writers. An
 * outside connection that never waits shows who holds the lock. */
static void test_write_tx_locks_at_once(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;
	sqlite3 *db = NULL;
	int64_t v;

	assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 0);
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) & 0xff, SQLITE_BUSY);
	store_rollback(tx);
	assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	/* a reader, even one that has read, leaves the write lock free */
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_int_equal(store_query_int(tx, "SELECT COUNT(*) FROM schema_migrations", NULL, 0, &v),
			 1);
	assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	store_rollback(tx);
	assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/* The same SQL string queried again while its first rows are still open:
 * the cached statement is busy, so a one-off statement serves the inner
 * query and both iterate correctly. */
static void test_nested_same_sql(void **state)
{
	static const char *sql = "SELECT a FROM t WHERE a >= $1 ORDER BY a";
	struct fixture *f = *state;
	struct store_tx *tx;
	struct store_rows *outer, *inner, *third;
	char copy[64];
	int64_t i, j, seen_inner;

	make_table(f->st);
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "INSERT INTO t (a) VALUES (1), (2), (3), (4), (5)", NULL, 0),
			 5);
	assert_int_equal(store_query(tx, sql, (struct store_val[]){sv_int(1)}, 1, &outer), STORE_OK);
	for (i = 1; i <= 5; i++) {
		assert_int_equal(store_next(outer), 1);
		assert_int_equal(store_int(outer, 0), i);
		/* same pointer, different binding, while outer is mid-way */
		assert_int_equal(store_query(tx, sql, (struct store_val[]){sv_int(i)}, 1, &inner),
				 STORE_OK);
		/* and the same text at another address */
		strcpy(copy, sql);
		assert_int_equal(store_query(tx, copy, (struct store_val[]){sv_int(5)}, 1, &third),
				 STORE_OK);
		seen_inner = 0;
		for (j = i; j <= 5; j++) {
			assert_int_equal(store_next(inner), 1);
			assert_int_equal(store_int(inner, 0), j);
			seen_inner++;
		}
		assert_int_equal(store_next(inner), 0);
		assert_int_equal(seen_inner, 6 - i);
		assert_int_equal(store_next(third), 1);
		assert_int_equal(store_int(third, 0), 5);
		assert_int_equal(store_next(third), 0);
		store_rows_close(third);
		store_rows_close(inner);
	}
	assert_int_equal(store_next(outer), 0);
	store_rows_close(outer);
	/* the cached statement is usable again and starts from the top */
	assert_int_equal(store_query(tx, sql, (struct store_val[]){sv_int(4)}, 1, &outer), STORE_OK);
	assert_int_equal(store_next(outer), 1);
	assert_int_equal(store_int(outer, 0), 4);
	store_rows_close(outer); /* closed before the end */
	assert_int_equal(store_query(tx, sql, (struct store_val[]){sv_int(2)}, 1, &outer), STORE_OK);
	assert_int_equal(store_next(outer), 1);
	assert_int_equal(store_int(outer, 0), 2);
	store_rows_close(outer);
	assert_int_equal(store_commit(tx), STORE_OK);
}

/* More distinct statements than cache slots, all kept alive: evictions and
 * slot collisions still give each query its own results. */
/* A statement with more placeholders than the store maps (32) is refused
 * each time it is run, and its refusal leaves nothing behind in the cache
 * (the second run used to find the freed statement there). */
static void test_too_many_params(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;
	char sql[512];
	size_t off = 0;
	int64_t v;
	int i, round;

	off += (size_t)snprintf(sql + off, sizeof sql - off, "SELECT 0");
	for (i = 1; i <= 33; i++)
		off += (size_t)snprintf(sql + off, sizeof sql - off, " + $%d", i);
	for (round = 0; round < 3; round++)
		fails_alone(f->st, 0, sql, NULL, 0, STORE_ERR);
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_int_equal(store_query_int(tx, "SELECT 7", NULL, 0, &v), 1);
	assert_int_equal(v, 7);
	store_rollback(tx);
}

static void test_statement_cache_churn(void **state)
{
	enum { NSQL = 300 };
	struct fixture *f = *state;
	struct store_tx *tx;
	char *sql[NSQL];
	int64_t v;
	int i, round;

	for (i = 0; i < NSQL; i++) {
		sql[i] = malloc(64);
		assert_non_null(sql[i]);
		snprintf(sql[i], 64, "SELECT %d + $1", i * 1000);
	}
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	for (round = 0; round < 3; round++)
		for (i = 0; i < NSQL; i++) {
			v = -1;
			assert_int_equal(store_query_int(tx, sql[i],
							 (struct store_val[]){sv_int(round)}, 1, &v),
					 1);
			assert_int_equal(v, i * 1000 + round);
		}
	store_rollback(tx);
	for (i = 0; i < NSQL; i++)
		free(sql[i]);
}

/* Write transactions whose first statements churn the statement cache
 * (more texts than it holds): each one's insert runs, whichever slot the
 * writers' lock, prepared again as it is evicted, takes on the way (it
 * once could take the slot its caller had just found, and the insert ran
 * the lock instead, reporting success). */
static void test_write_lock_cache_churn(void **state)
{
	enum { NSQL = 300, ROUNDS = 3 };
	struct fixture *f = *state;
	struct store_tx *tx;
	char sql[96];
	int64_t n = -1;
	int i, round;

	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_true(store_exec(tx, "CREATE TABLE churn (k BIGINT)", NULL, 0) >= 0);
	assert_int_equal(store_commit(tx), STORE_OK);
	/* each text twice in a row: the first may evict the lock, which the
	 * second's transaction then prepares again */
	for (round = 0; round < ROUNDS; round++)
		for (i = 0; i < 2 * NSQL; i++) {
			snprintf(sql, sizeof sql, "INSERT INTO churn (k) VALUES ($1 + %d)", i / 2);
			assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
			assert_int_equal(store_exec(tx, sql, (struct store_val[]){sv_int(0)}, 1), 1);
			assert_int_equal(store_commit(tx), STORE_OK);
		}
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_int_equal(store_query_int(tx, "SELECT COUNT(*) FROM churn", NULL, 0, &n), 1);
	store_rollback(tx);
	assert_int_equal(n, 2 * NSQL * ROUNDS);
}

#define WRITERS 2
#define ROWS_EACH 500

struct writer {
	struct store *st;
	pthread_barrier_t *go;
	int id;
	int failures;
};

static void *write_rows(void *arg)
{
	struct writer *w = arg;
	struct store_tx *tx;
	int i;

	pthread_barrier_wait(w->go);
	for (i = 0; i < ROWS_EACH; i++) {
		if (store_begin(w->st, 1, &tx) != STORE_OK) {
			w->failures++;
			continue;
		}
		if (store_exec(tx, "INSERT INTO t (a, b) VALUES ($1, $2)",
			       (struct store_val[]){sv_int(i), sv_text(w->id ? "w1" : "w0")},
			       2) != 1) {
			w->failures++;
			store_rollback(tx);
			continue;
		}
		if (store_commit(tx) != STORE_OK)
			w->failures++;
	}
	return NULL;
}

static void test_two_writers(void **state)
{
	struct fixture *f = *state;
	struct writer w[WRITERS];
	pthread_t th[WRITERS];
	pthread_barrier_t go;
	struct store_tx *tx;
	int64_t n = -1;
	int i;

	make_table(f->st);
	assert_int_equal(pthread_barrier_init(&go, NULL, WRITERS), 0);
	for (i = 0; i < WRITERS; i++) {
		w[i] = (struct writer){.st = f->st, .go = &go, .id = i};
		assert_int_equal(pthread_create(&th[i], NULL, write_rows, &w[i]), 0);
	}
	for (i = 0; i < WRITERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&go);
	for (i = 0; i < WRITERS; i++)
		assert_int_equal(w[i].failures, 0);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), WRITERS * ROWS_EACH);
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_int_equal(store_query_int(tx, "SELECT COUNT(DISTINCT a) FROM t WHERE b = $1",
					 (struct store_val[]){sv_text("w1")}, 1, &n),
			 1);
	assert_int_equal(n, ROWS_EACH);
	store_rollback(tx);
	assert_int_equal(store_ping(f->st), 0);
}

/* ------------------------------------------------------- group commit */

#define GROUP_THREADS 8
#define GROUP_JOBS 40

struct grouped {
	pthread_mutex_t mu;
	size_t largest; /* the most jobs one transaction ran */
	int slow_first; /* the first transaction waits, so the others queue */
};

/* store_group_fn: inserts a row per job (the job points to its key); a
 * negative key breaks t's CHECK and so fails its transaction. */
static int group_insert(struct store_tx *tx, void *const *jobs, size_t n, void *arg)
{
	struct grouped *g = arg;
	int rc = 0;

	pthread_mutex_lock(&g->mu);
	if (n > g->largest)
		g->largest = n;
	if (g->slow_first) {
		g->slow_first = 0;
		pthread_mutex_unlock(&g->mu);
		usleep(200 * 1000);
	} else {
		pthread_mutex_unlock(&g->mu);
	}
	for (size_t i = 0; rc >= 0 && i < n; i++) {
		int64_t key = *(const int64_t *)jobs[i];

		rc = store_exec(tx, "INSERT INTO t (a, n) VALUES ($1, $1)",
				(struct store_val[]){sv_int(key)}, 1);
	}
	return rc < 0 ? rc : 0;
}

struct group_thread {
	struct store_group *g;
	int id, failed_good, bad_ok;
};

/* Hands in GROUP_JOBS jobs one after another; job 7 of each thread is bad. */
static void *group_submit(void *arg)
{
	struct group_thread *t = arg;

	for (int j = 0; j < GROUP_JOBS; j++) {
		int64_t key = j == 7 ? -1 - t->id : (int64_t)t->id * 1000 + j;
		int rc = store_group_run(t->g, &key);

		if (j == 7)
			t->bad_ok += rc == STORE_OK;
		else
			t->failed_good += rc != STORE_OK;
	}
	return NULL;
}

/* Writers arriving together share transactions; a bad job fails alone,
 * and every good one commits exactly once. */
static void test_group(void **state)
{
	struct fixture *f = *state;
	struct grouped gd = {.slow_first = 1};
	struct group_thread t[GROUP_THREADS];
	pthread_t th[GROUP_THREADS];
	struct store_group *g;

	make_table(f->st);
	pthread_mutex_init(&gd.mu, NULL);
	assert_int_equal(store_group_new(f->st, 32, group_insert, &gd, "test-group", &g), 0);
	for (int i = 0; i < GROUP_THREADS; i++) {
		t[i] = (struct group_thread){.g = g, .id = i};
		assert_int_equal(pthread_create(&th[i], NULL, group_submit, &t[i]), 0);
	}
	for (int i = 0; i < GROUP_THREADS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(t[i].failed_good, 0);
		assert_int_equal(t[i].bad_ok, 0);
	}
	store_group_free(g);
	pthread_mutex_destroy(&gd.mu);
	assert_true(gd.largest > 1);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), GROUP_THREADS * (GROUP_JOBS - 1));
	assert_int_equal(count(f->st, "SELECT COUNT(DISTINCT a) FROM t"),
			 GROUP_THREADS * (GROUP_JOBS - 1));
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t WHERE a < 0"), 0);
}

/* store_group_submit's outcomes, counted under a lock. */
struct submitted {
	pthread_mutex_t mu;
	int ok, failed;
};

static void count_outcome(void *arg, int rc)
{
	struct submitted *s = arg;

	pthread_mutex_lock(&s->mu);
	if (rc == STORE_OK)
		s->ok++;
	else
		s->failed++;
	pthread_mutex_unlock(&s->mu);
}

/* One thread hands in jobs without waiting for any: they share
 * transactions, each outcome is reported once (the bad job's as a
 * failure), and freeing the group runs what is still queued. */
static void test_group_submit(void **state)
{
	struct fixture *f = *state;
	struct grouped gd = {.slow_first = 1};
	struct submitted out = {.ok = 0};
	int64_t keys[GROUP_JOBS];
	struct store_group *g;

	make_table(f->st);
	pthread_mutex_init(&gd.mu, NULL);
	pthread_mutex_init(&out.mu, NULL);
	assert_int_equal(store_group_new(f->st, 8, group_insert, &gd, "test-group", &g), 0);
	for (int j = 0; j < GROUP_JOBS; j++) {
		keys[j] = j == 3 ? -1 : j;
		assert_int_equal(store_group_submit(g, &keys[j], count_outcome, &out), 0);
	}
	store_group_free(g); /* while the first transaction still sleeps */
	assert_int_equal(out.ok, GROUP_JOBS - 1);
	assert_int_equal(out.failed, 1);
	assert_true(gd.largest > 1);
	assert_true(gd.largest <= 8);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), GROUP_JOBS - 1);
	pthread_mutex_destroy(&out.mu);
	pthread_mutex_destroy(&gd.mu);
}

/* Inserts a delivery row on `surface` in state `state`; returns
 * store_exec's result. */
static int insert_delivery_on(struct store *st, const char *id, const char *surface, const char *state)
{
	struct store_tx *tx;
	int rc;

	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	rc = store_exec(tx,
			"INSERT INTO webhook_deliveries (id, portfolio_id, subscription_id, surface,"
			" target, event_id, event_type, event_created_at, url, lane, rate_per_s,"
			" body, state, created_at) VALUES ($1, 'pf', 'sub', $3, 'primary', 'evt',"
			" 'x.y', 1, 'https://h/', 'v2 pf https://h/', 5, x'7b7d', $2, 1)",
			(struct store_val[]){sv_text(id), sv_text(state), sv_text(surface)}, 3);
	if (rc == 1)
		assert_int_equal(store_commit(tx), STORE_OK);
	else
		store_rollback(tx);
	return rc;
}

static int insert_delivery(struct store *st, const char *id, const char *state)
{
	return insert_delivery_on(st, id, "v2", state);
}

/* How many OpenEphemeral steps the program of sql has (its $1..$n bound to
 * placeholders: EXPLAIN only compiles it). */
static int64_t ephemeral_steps(struct store *st, const char *sql, int nparams)
{
	struct store_val v[4] = {sv_int(0), sv_int(0), sv_int(0), sv_int(0)};
	struct store_tx *tx;
	struct store_rows *r;
	char explain[1024];
	int64_t n = 0;

	snprintf(explain, sizeof explain, "EXPLAIN %s", sql);
	assert_int_equal(store_begin(st, 0, &tx), STORE_OK);
	assert_int_equal(store_query(tx, explain, v, nparams, &r), STORE_OK);
	while (store_next(r) == 1)
		n += !strcmp(store_text(r, 1), "OpenEphemeral");
	store_rows_close(r);
	store_rollback(tx);
	return n;
}

/* Migration 007: a delivery's INSERT and an outcome's UPDATE build no
 * temporary B-tree for the state CHECK, which still refuses other states;
 * rebuilding the table (the migration run again) keeps its rows, its
 * indexes and its AUTOINCREMENT counter. */
static void test_webhook_deliveries_rebuild(void **state)
{
	struct fixture *f = *state;
	const char *indexes =
		"SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_master"
		" WHERE type = 'index' AND tbl_name = 'webhook_deliveries' ORDER BY name)";
	struct store_tx *tx;
	struct store_rows *r;
	char before[512];
	int64_t n = -1;

	assert_int_equal(ephemeral_steps(f->st,
					 "INSERT INTO webhook_deliveries (id, portfolio_id,"
					 " subscription_id, surface, target, event_id, event_type,"
					 " event_created_at, url, lane, rate_per_s, body, state,"
					 " created_at) VALUES ($1, 'pf', 's', 'v2', 'primary', 'e', 't',"
					 " 1, 'u', 'l', 5, x'00', 'pending', 1)",
					 1),
			 0);
	assert_int_equal(ephemeral_steps(f->st,
					 "UPDATE webhook_deliveries SET state = $1 WHERE seq = $2", 2),
			 0);
	assert_int_equal(insert_delivery(f->st, "dlv_1", "bogus"), STORE_CONSTRAINT);
	assert_int_equal(insert_delivery(f->st, "dlv_1", "pending"), 1);
	assert_int_equal(insert_delivery(f->st, "dlv_2", "delivered"), 1);
	assert_int_equal(insert_delivery(f->st, "dlv_3", "dead_lettered"), 1);
	/* The newest row goes: its seq (3) must not come back. */
	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "DELETE FROM webhook_deliveries WHERE id = 'dlv_3'", NULL, 0),
			 1);
	/* Back to the schema 006 left: without 008's columns and 009's
	 * tables too. */
	assert_true(store_exec(tx, "ALTER TABLE webhook_deliveries DROP COLUMN traceparent", NULL,
			       0) >= 0);
	assert_true(store_exec(tx, "ALTER TABLE events DROP COLUMN traceparent", NULL, 0) >= 0);
	assert_true(store_exec(tx, "DROP TABLE nodes", NULL, 0) >= 0);
	assert_true(store_exec(tx, "DROP TABLE work_leases", NULL, 0) >= 0);
	assert_true(store_exec(tx, "DROP TABLE ratelimit_grants", NULL, 0) >= 0);
	assert_true(store_exec(tx, "DROP INDEX rate_decisions_pending", NULL, 0) >= 0);
	assert_true(store_exec(tx, "ALTER TABLE rate_decisions DROP COLUMN node", NULL, 0) >= 0);
	assert_true(store_exec(tx, "ALTER TABLE webhook_claims DROP COLUMN node", NULL, 0) >= 0);
	assert_int_equal(store_exec(tx, "DELETE FROM schema_migrations WHERE version BETWEEN 7 AND 9",
				    NULL, 0),
			 3);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_int_equal(store_query(tx, indexes, NULL, 0, &r), STORE_OK);
	assert_int_equal(store_next(r), 1);
	snprintf(before, sizeof before, "%s", store_text(r, 0));
	store_rows_close(r);
	store_rollback(tx);
	assert_non_null(strstr(before, "webhook_deliveries_due"));

	store_close(f->st);
	f->st = NULL;
	assert_int_equal(store_open(f->url, 1, &f->st), 0);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM webhook_deliveries WHERE"
				      " (id = 'dlv_1' AND state = 'pending' AND seq = 1) OR"
				      " (id = 'dlv_2' AND state = 'delivered' AND seq = 2)"),
			 2);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM webhook_deliveries"), 2);
	assert_int_equal(insert_delivery(f->st, "dlv_4", "retry_scheduled"), 1);
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_int_equal(store_query_int(tx, "SELECT seq FROM webhook_deliveries WHERE id = 'dlv_4'",
					 NULL, 0, &n),
			 1);
	assert_int_equal(n, 4);
	assert_int_equal(store_query(tx, indexes, NULL, 0, &r), STORE_OK);
	assert_int_equal(store_next(r), 1);
	assert_string_equal(store_text(r, 0), before);
	store_rows_close(r);
	store_rollback(tx);
	assert_int_equal(insert_delivery(f->st, "dlv_5", "bogus"), STORE_CONSTRAINT);
}

/* Rows of sql (one text column) joined by '|', from an open database. */
static void sqlite_rows(sqlite3 *db, const char *sql, char *out, size_t cap)
{
	sqlite3_stmt *st;
	size_t off = 0;

	out[0] = '\0';
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW)
		off += (size_t)snprintf(out + off, cap - off, "%s|",
					(const char *)sqlite3_column_text(st, 0));
	assert_true(off < cap);
	sqlite3_finalize(st);
}

/* Migration 007 changes nothing of webhook_deliveries but the state CHECK:
 * the columns (name, type, NOT NULL, default, key, order), the indexes
 * (their full SQL, partial WHERE clauses included) and the other CHECKs
 * are those of a database migrated only to 006. */
static void test_webhook_deliveries_rebuild_same_shape(void **state)
{
	static const char *cols = "SELECT name || ' ' || type || ' ' || \"notnull\" || ' ' ||"
				  " coalesce(dflt_value, '-') || ' ' || pk || ' ' || hidden"
				  " FROM pragma_table_xinfo('webhook_deliveries') ORDER BY cid";
	static const char *idx = "SELECT name || ' ' || coalesce(sql, '-') FROM sqlite_master"
				 " WHERE type = 'index' AND tbl_name = 'webhook_deliveries'"
				 " ORDER BY name";
	struct fixture *f = *state;
	const struct embedded_migration *m;
	char path[120], want_cols[4096], got_cols[4096], want_idx[4096], got_idx[4096];
	sqlite3 *db;

	snprintf(path, sizeof path, "%s/at006.db", f->dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	/* Every migration but 007, the rebuild whose result must match. */
	for (m = embedded_migrations_sqlite; m->name; m++)
		if (m->version != 7)
			assert_int_equal(sqlite3_exec(db, m->sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite_rows(db, cols, want_cols, sizeof want_cols);
	sqlite_rows(db, idx, want_idx, sizeof want_idx);
	sqlite3_close(db);
	remove_db(path);
	assert_non_null(strstr(want_cols, "lane_hash INTEGER 1 0 0 0|"));

	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	sqlite_rows(db, cols, got_cols, sizeof got_cols);
	sqlite_rows(db, idx, got_idx, sizeof got_idx);
	sqlite3_close(db);
	assert_string_equal(got_cols, want_cols);
	assert_string_equal(got_idx, want_idx);

	/* The other CHECKs still hold. */
	assert_int_equal(insert_delivery_on(f->st, "d", "v3", "pending"), STORE_CONSTRAINT);
}

/* PostgreSQL: write = 1 takes the writers' advisory lock at BEGIN; a
 * reader neither takes it nor waits for it. Seen from the pool's other
 * connection, which only tries the lock. */
static void test_pg_write_tx_locks_at_once(void **state)
{
	static const char *try_lock = "SELECT pg_try_advisory_xact_lock(7310593858020360193)";
	struct fixture *f = *state;
	struct store_tx *wt, *rt;
	int64_t got = -1;

	/* The lock goes with the writer's first statement. */
	assert_int_equal(store_begin(f->st, 1, &wt), STORE_OK);
	assert_int_equal(store_query_int(wt, "SELECT 1", NULL, 0, &got), 1);
	assert_int_equal(store_begin(f->st, 0, &rt), STORE_OK);
	assert_int_equal(store_query_int(rt, try_lock, NULL, 0, &got), 1);
	assert_int_equal(got, 0);
	store_rollback(rt);
	store_rollback(wt);
	assert_int_equal(store_begin(f->st, 0, &rt), STORE_OK);
	assert_int_equal(store_query_int(rt, try_lock, NULL, 0, &got), 1);
	assert_int_equal(got, 1);
	store_rollback(rt);
}

/* STORE_WRITE_OWN takes no writers' turn: it writes and commits while a
 * STORE_WRITE holds the lock, and another writer's row lock is what it
 * waits for (none here: its rows are its own). */
static void test_pg_write_own_skips_the_lock(void **state)
{
	static const char *try_lock = "SELECT pg_try_advisory_xact_lock(7310593858020360193)";
	struct fixture *f = *state;
	struct store_tx *wt, *ot;
	int64_t got = -1;

	make_table(f->st);
	assert_int_equal(store_begin(f->st, STORE_WRITE, &wt), STORE_OK);
	assert_int_equal(store_exec(wt, "INSERT INTO t (k) VALUES ('locked')", NULL, 0), 1);
	assert_int_equal(store_begin(f->st, STORE_WRITE_OWN, &ot), STORE_OK);
	assert_int_equal(store_send(ot, "INSERT INTO t (k) VALUES ('own')", NULL, 0), STORE_OK);
	assert_int_equal(store_query_int(ot, try_lock, NULL, 0, &got), 1);
	assert_int_equal(got, 0); /* the writer holds the turn, and ot still runs */
	assert_int_equal(store_commit(ot), STORE_OK);
	assert_int_equal(store_commit(wt), STORE_OK);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), 2);
}

/* store_turn makes an own writer take the writers' turn from there on:
 * after a first insert (the lock goes into the pipeline then) and before
 * any statement (it goes with BEGIN); a second call takes nothing more;
 * the turn ends with the transaction. */
static void test_pg_turn(void **state)
{
	static const char *try_lock = "SELECT pg_try_advisory_xact_lock(7310593858020360193)";
	struct fixture *f = *state;
	struct store_tx *ot, *rt;
	int64_t got = -1;
	int first;

	make_table(f->st);
	for (first = 0; first < 2; first++) {
		assert_int_equal(store_begin(f->st, STORE_WRITE_OWN, &ot), STORE_OK);
		if (!first)
			assert_int_equal(store_send(ot, "INSERT INTO t (k) VALUES ('a')", NULL, 0),
					 STORE_OK);
		assert_int_equal(store_turn(ot), STORE_OK);
		assert_int_equal(store_turn(ot), STORE_OK);
		assert_int_equal(store_query_int(ot, "SELECT COUNT(*) FROM t", NULL, 0, &got), 1);
		assert_int_equal(store_begin(f->st, STORE_READ, &rt), STORE_OK);
		assert_int_equal(store_query_int(rt, try_lock, NULL, 0, &got), 1);
		assert_int_equal(got, 0); /* ot holds the turn */
		store_rollback(rt);
		assert_int_equal(store_commit(ot), STORE_OK);
		assert_int_equal(store_begin(f->st, STORE_READ, &rt), STORE_OK);
		assert_int_equal(store_query_int(rt, try_lock, NULL, 0, &got), 1);
		assert_int_equal(got, 1); /* and gave it back with its commit */
		store_rollback(rt);
	}
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), 1);
}

/* SQLSTATEs map to store statuses: the audit trail's trigger refuses
 * UPDATE and DELETE as a constraint; waiting past lock_timeout for a lock
 * and a statement cancelled by statement_timeout are STORE_BUSY; each
 * failure leaves its transaction only to roll back. */
static void test_pg_error_mapping(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx, *wt;
	int64_t v = 0;

	assert_int_equal(store_begin(f->st, 1, &tx), STORE_OK);
	assert_int_equal(store_exec(tx,
				    "INSERT INTO portfolios (id, name, plan, created_at)"
				    " VALUES ('pf', 'P', 'group', 1)",
				    NULL, 0),
			 1);
	assert_int_equal(store_exec(tx,
				    "INSERT INTO rate_decisions (id, portfolio_id, status,"
				    " room_type_code, date_from, date_to, currency, minor_units,"
				    " brand_ceiling_id, approver_saml_subject, justification, proposer,"
				    " properties, created_at, updated_at) VALUES ('rd', 'pf', 'pending',"
				    " 'DBL', '2026-01-01', '2026-01-02', 'PLN', 100, 'bc', 'a', 'j', 'p',"
				    " '[]', 1, 1)",
				    NULL, 0),
			 1);
	assert_int_equal(store_exec(tx,
				    "INSERT INTO audit_entries (decision_id, seq, at, kind, actor,"
				    " details, prev_hash, hash) VALUES ('rd', 1, 1, 'k', 'a', '{}', '',"
				    " 'h')",
				    NULL, 0),
			 1);
	assert_int_equal(store_commit(tx), STORE_OK);
	fails_alone(f->st, 1, "UPDATE audit_entries SET actor = 'x'", NULL, 0, STORE_CONSTRAINT);
	fails_alone(f->st, 1, "DELETE FROM audit_entries", NULL, 0, STORE_CONSTRAINT);
	fails_alone(f->st, 1, "TRUNCATE audit_entries", NULL, 0, STORE_CONSTRAINT);
	fails_alone(f->st, 1,
		    "INSERT INTO portfolios (id, name, plan, created_at)"
		    " VALUES ('pf', 'again', 'group', 1)",
		    NULL, 0, STORE_CONSTRAINT);
	fails_alone(f->st, 1,
		    "INSERT INTO portfolios (id, name, plan, created_at)"
		    " VALUES ('pf2', 'P', 'nope', 1)",
		    NULL, 0, STORE_CONSTRAINT);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM audit_entries WHERE actor = 'a'"), 1);

	/* A lock held by a writer, waited for past lock_timeout; a statement
	 * past statement_timeout. */
	assert_int_equal(store_begin(f->st, 1, &wt), STORE_OK);
	assert_int_equal(store_query_int(wt, "SELECT 1", NULL, 0, &v), 1);
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_true(store_exec(tx, "SET LOCAL lock_timeout = '100ms'", NULL, 0) >= 0);
	assert_int_equal(store_query_int(tx,
					 "SELECT 1 FROM pg_advisory_xact_lock(7310593858020360193)",
					 NULL, 0, &v),
			 STORE_BUSY);
	store_rollback(tx);
	store_rollback(wt);
	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_true(store_exec(tx, "SET LOCAL statement_timeout = '50ms'", NULL, 0) >= 0);
	assert_int_equal(store_exec(tx, "SELECT pg_sleep(2)", NULL, 0), STORE_BUSY);
	assert_int_equal(store_commit(tx), STORE_ERR);
}

/* A connection the server drops fails its statement with STORE_ERR; the
 * pool connects it again when it is next used. */
static void test_pg_reconnects(void **state)
{
	struct fixture *f = *state;
	struct store_tx *tx;
	int64_t v = 0;
	int i;

	assert_int_equal(store_begin(f->st, 0, &tx), STORE_OK);
	assert_int_equal(store_query_int(tx, "SELECT pg_terminate_backend(pg_backend_pid())", NULL,
					 0, &v),
			 STORE_ERR);
	assert_int_equal(store_query_int(tx, "SELECT 1", NULL, 0, &v), STORE_ERR);
	store_rollback(tx);
	for (i = 0; i < 4; i++) /* both pooled connections, whichever was lost */
		assert_int_equal(store_ping(f->st), 0);
	make_table(f->st);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), 0);
}

#define CONTENDERS 8
#define TURNS_EACH 100

/* Even turns write a row, odd ones read: eight threads on two pooled
 * connections. */
static void *contend(void *arg)
{
	struct writer *w = arg;
	struct store_tx *tx;
	int64_t n;
	int i;

	pthread_barrier_wait(w->go);
	for (i = 0; i < TURNS_EACH; i++) {
		if (store_begin(w->st, i % 2 == 0, &tx) != STORE_OK) {
			w->failures++;
			continue;
		}
		if (i % 2 == 0 &&
		    store_exec(tx, "INSERT INTO t (a, b) VALUES ($1, $2)",
			       (struct store_val[]){sv_int(w->id), sv_text("c")}, 2) != 1)
			w->failures++;
		if (i % 2 == 1 && store_query_int(tx, "SELECT COUNT(*) FROM t", NULL, 0, &n) != 1)
			w->failures++;
		if (store_commit(tx) != STORE_OK)
			w->failures++;
	}
	return NULL;
}

static void test_pg_pool_contention(void **state)
{
	struct fixture *f = *state;
	struct writer w[CONTENDERS];
	pthread_t th[CONTENDERS];
	pthread_barrier_t go;
	int i;

	make_table(f->st);
	assert_int_equal(pthread_barrier_init(&go, NULL, CONTENDERS), 0);
	for (i = 0; i < CONTENDERS; i++) {
		w[i] = (struct writer){.st = f->st, .go = &go, .id = i};
		assert_int_equal(pthread_create(&th[i], NULL, contend, &w[i]), 0);
	}
	for (i = 0; i < CONTENDERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&go);
	for (i = 0; i < CONTENDERS; i++)
		assert_int_equal(w[i].failures, 0);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM t"), CONTENDERS * TURNS_EACH / 2);
}

/* Notifies ch in a write transaction that commits (1) or rolls back. */
static void notify_in_tx(struct store *st, enum store_channel ch, int commit)
{
	struct store_tx *tx;

	assert_int_equal(store_begin(st, 1, &tx), STORE_OK);
	assert_int_equal(store_notify(tx, ch), STORE_OK);
	if (commit)
		assert_int_equal(store_commit(tx), STORE_OK);
	else
		store_rollback(tx);
}

/* Starts st's listening (PostgreSQL) and waits until it is connected: it
 * raises every channel once then, since it may have missed some. Returns
 * the count of ch after. */
static uint64_t listening(struct store *st, enum store_channel ch)
{
	uint64_t seen = store_notified(st, ch);

	if (!pg_url)
		return seen;
	assert_true(store_wait(st, ch, seen, 5000) > seen);
	return store_notified(st, ch);
}

/* A notification reaches the waiters on its channel when its transaction
 * commits, and never when it rolls back; on PostgreSQL it reaches another
 * store on the database (another node) too. */
static void test_notify(void **state)
{
	struct fixture *f = *state;
	struct store *other = NULL;
	uint64_t seen, seen_other = 0, deliveries;

	assert_int_equal(store_shared(f->st), pg_url != NULL);
	if (pg_url) {
		assert_int_equal(store_open(f->url, 1, &other), 0);
		seen_other = listening(other, STORE_CH_OUTBOX);
	}
	seen = listening(f->st, STORE_CH_OUTBOX);
	deliveries = store_notified(f->st, STORE_CH_DELIVERIES);
	notify_in_tx(f->st, STORE_CH_OUTBOX, 0);
	assert_true(store_wait(f->st, STORE_CH_OUTBOX, seen, 300) == seen);
	notify_in_tx(f->st, STORE_CH_OUTBOX, 1);
	assert_true(store_wait(f->st, STORE_CH_OUTBOX, seen, 5000) > seen);
	if (other)
		assert_true(store_wait(other, STORE_CH_OUTBOX, seen_other, 5000) > seen_other);
	assert_true(store_notified(f->st, STORE_CH_DELIVERIES) == deliveries);
	/* a kick wakes this process's waiters only */
	seen = store_notified(f->st, STORE_CH_DELIVERIES);
	store_kick(f->st, STORE_CH_DELIVERIES);
	assert_true(store_wait(f->st, STORE_CH_DELIVERIES, seen, 0) > seen);
	store_close(other);
}

/* Commits on other a property announcement (with a row, as
 * portfolio_property_add's) and waits until st has received it where
 * notifications travel (PostgreSQL). */
static void announce_property(struct store *st, struct store *other, int64_t a)
{
	struct store_tx *tx;
	uint64_t seen = store_notified(st, STORE_CH_PROPERTIES);

	assert_int_equal(store_begin(other, STORE_WRITE, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "INSERT INTO t (a) VALUES ($1)",
				    (struct store_val[]){sv_int(a)}, 1),
			 1);
	assert_int_equal(store_notify(tx, STORE_CH_PROPERTIES), STORE_OK);
	assert_int_equal(store_commit(tx), STORE_OK);
	if (pg_url)
		assert_true(store_wait(st, STORE_CH_PROPERTIES, seen, 5000) > seen);
}

/* store_changes moves when another store on the database (another
 * process: revopsctl) commits an announcement on STORE_CH_PROPERTIES, on
 * SQLite too, where notifications stay inside a process; it holds still
 * while nothing is announced, whatever else is committed. */
static void test_changes(void **state)
{
	struct fixture *f = *state;
	struct store *other = NULL;
	struct store_tx *tx;
	uint64_t c0, c1;

	make_table(f->st);
	assert_int_equal(store_open(f->url, 1, &other), 0);
	(void)listening(f->st, STORE_CH_PROPERTIES);
	c0 = store_changes(f->st, STORE_CH_PROPERTIES);
	assert_true(store_changes(f->st, STORE_CH_PROPERTIES) == c0);

	/* another store's commit that announces nothing */
	assert_int_equal(store_begin(other, STORE_WRITE, &tx), STORE_OK);
	assert_int_equal(store_exec(tx, "INSERT INTO t (a) VALUES (1)", NULL, 0), 1);
	assert_int_equal(store_commit(tx), STORE_OK);
	assert_true(store_changes(f->st, STORE_CH_PROPERTIES) == c0);
	assert_true(store_changes(f->st, STORE_CH_PROPERTIES) == c0);

	/* two announced commits: each moves it, on both backends */
	announce_property(f->st, other, 2);
	c1 = store_changes(f->st, STORE_CH_PROPERTIES);
	assert_true(c1 != c0);
	assert_true(store_changes(f->st, STORE_CH_PROPERTIES) == c1);
	announce_property(f->st, other, 3);
	assert_true(store_changes(f->st, STORE_CH_PROPERTIES) != c1);
	/* a rolled-back announcement moves nothing */
	c1 = store_changes(f->st, STORE_CH_PROPERTIES);
	assert_int_equal(store_begin(other, STORE_WRITE, &tx), STORE_OK);
	assert_int_equal(store_notify(tx, STORE_CH_PROPERTIES), STORE_OK);
	store_rollback(tx);
	assert_true(store_changes(f->st, STORE_CH_PROPERTIES) == c1);
	store_close(other);
}

/* Two processes open the same fresh database at the same moment: both
 * succeed and every migration is applied once. */
static void test_pg_migrations_race(void **state)
{
	struct fixture *f = *state, fresh = {0};
	const struct embedded_migration *m;
	int64_t latest = 0, n = -1;
	int go[2], i, status;
	pid_t pid[2];
	char byte;

	for (m = embedded_migrations_postgres; m->name; m++)
		latest++;
	pg_fresh_schema(&fresh);
	assert_int_equal(pipe(go), 0);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		assert_true(pid[i] >= 0);
		if (pid[i] == 0) {
			struct store *st = NULL;

			close(go[1]);
			if (read(go[0], &byte, 1) != 0)
				_exit(3);
			if (store_open(fresh.url, 1, &st) != 0)
				_exit(1);
			store_close(st);
			_exit(0);
		}
	}
	close(go[0]);
	close(go[1]); /* both children start now */
	for (i = 0; i < 2; i++) {
		assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	store_close(f->st);
	snprintf(f->url, sizeof f->url, "%s", fresh.url);
	assert_int_equal(store_open(f->url, 1, &f->st), 0);
	assert_int_equal(count(f->st, "SELECT COUNT(*) FROM schema_migrations"), latest);
	assert_int_equal(count(f->st, "SELECT COUNT(DISTINCT version) FROM schema_migrations"),
			 latest);
	assert_int_equal(store_schema_version(f->st), (int)latest);
	(void)n;
	/* the fixture's own schema goes in teardown; this one here */
	{
		char sql[128];

		snprintf(sql, sizeof sql, "DROP SCHEMA %s CASCADE", fresh.schema);
		exec_now(pg_admin, sql);
	}
}

static int pg_group_setup(void **state)
{
	(void)state;
	return store_open(pg_url, 1, &pg_admin) == 0 ? 0 : -1;
}

static int pg_group_teardown(void **state)
{
	(void)state;
	store_close(pg_admin);
	return 0;
}

#define BOTH(t) cmocka_unit_test_setup_teardown(t, SETUP, TEARDOWN)

int main(void)
{
#define SETUP setup
#define TEARDOWN teardown
	const struct CMUnitTest sqlite_tests[] = {
		BOTH(test_open_and_migrations),
		BOTH(test_newer_schema_refused),
		BOTH(test_placeholders),
		BOTH(test_sql_builders),
		BOTH(test_send_row),
		BOTH(test_value_round_trip),
		BOTH(test_query_int),
		BOTH(test_constraints),
		BOTH(test_send),
		BOTH(test_read_one),
		BOTH(test_send_rows),
		BOTH(test_query_rows),
		BOTH(test_rollback_discards),
		BOTH(test_read_snapshot),
		BOTH(test_scope),
		BOTH(test_nested_same_sql),
		BOTH(test_too_many_params),
		BOTH(test_statement_cache_churn),
		BOTH(test_write_lock_cache_churn),
		BOTH(test_two_writers),
		BOTH(test_group),
		BOTH(test_group_submit),
		BOTH(test_notify),
		BOTH(test_changes),
		/* SQLite only */
		BOTH(test_bad_urls),
		BOTH(test_creates_data_dir),
		BOTH(test_write_tx_locks_at_once),
		BOTH(test_webhook_deliveries_rebuild),
		BOTH(test_webhook_deliveries_rebuild_same_shape),
	};
#undef SETUP
#undef TEARDOWN
#define SETUP setup_pg
#define TEARDOWN teardown_pg
	const struct CMUnitTest pg_tests[] = {
		BOTH(test_open_and_migrations),
		BOTH(test_newer_schema_refused),
		BOTH(test_placeholders),
		BOTH(test_sql_builders),
		BOTH(test_send_row),
		BOTH(test_value_round_trip),
		BOTH(test_query_int),
		BOTH(test_constraints),
		BOTH(test_send),
		BOTH(test_read_one),
		BOTH(test_send_rows),
		BOTH(test_query_rows),
		BOTH(test_rollback_discards),
		BOTH(test_read_snapshot),
		BOTH(test_scope),
		BOTH(test_nested_same_sql),
		BOTH(test_too_many_params),
		BOTH(test_statement_cache_churn),
		BOTH(test_write_lock_cache_churn),
		BOTH(test_two_writers),
		BOTH(test_group),
		BOTH(test_group_submit),
		BOTH(test_notify),
		BOTH(test_changes),
		/* PostgreSQL only */
		BOTH(test_pg_write_tx_locks_at_once),
		BOTH(test_pg_write_own_skips_the_lock),
		BOTH(test_pg_turn),
		BOTH(test_pg_error_mapping),
		BOTH(test_pg_reconnects),
		BOTH(test_pg_pool_contention),
		BOTH(test_pg_migrations_race),
	};
#undef SETUP
#undef TEARDOWN

	pg_url = getenv("REVOPS_TEST_PG_URL");
	if (pg_url && *pg_url)
		return cmocka_run_group_tests_name("store_pgsql", pg_tests, pg_group_setup,
						   pg_group_teardown);
	pg_url = NULL;
	return cmocka_run_group_tests_name("store_sqlite", sqlite_tests, NULL, NULL);
}
