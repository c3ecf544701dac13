/* The SQLite backend of store.h: WAL, synchronous=NORMAL, a busy timeout,
 * a fixed pool of connections, and a prepared-statement cache on each. */
#include "store/backend.h"
#include "store/pool.h"
#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/stat.h>

#include "core/embedded.h"
#include "core/log.h"

#define STMT_CACHE 128
#define STMT_PROBES 4
#define BUSY_TIMEOUT_MS 10000
/* The channel other processes' announcements must reach this one on:
 * counted in the file (sq_notify). */
#define STORE_KEPT_CHANNEL STORE_CH_PROPERTIES

struct cached_stmt {
	char *sql;     /* a copy of the statement text; compared by content */
	uint64_t hash; /* sql_hash(sql) */
	sqlite3_stmt *stmt;
	int nparams;
	int map[STORE_MAX_PARAMS]; /* SQL parameter index -> $N number */
	int in_use;
};

enum { TX_BEGIN, TX_BEGIN_IMMEDIATE, TX_COMMIT, TX_ROLLBACK, TX__COUNT };

struct conn {
	sqlite3 *db;
	struct cached_stmt cache[STMT_CACHE];
	sqlite3_stmt *tx[TX__COUNT]; /* prepared once: re-parsing them cost ~9 % per request */
	sqlite3_stmt *user_version;  /* PRAGMA user_version: the kept channel's count */
};

static const char *const tx_sql[TX__COUNT] = {"BEGIN", "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"};

/* Runs one of the prepared transaction statements. Returns an SQLite code. */
static int tx_step(struct conn *c, int which)
{
	int rc = sqlite3_step(c->tx[which]);

	sqlite3_reset(c->tx[which]);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* The count of the channel kept in the file (STORE_KEPT_CHANNEL: see
 * sq_notify) as c reads it now, or -1. */
static int64_t read_kept(struct conn *c)
{
	int64_t v = -1;

	if (sqlite3_step(c->user_version) == SQLITE_ROW)
		v = sqlite3_column_int64(c->user_version, 0);
	sqlite3_reset(c->user_version);
	return v;
}

struct sq_store {
	struct store base;      /* first */
	struct store_pool pool; /* slots of conns */
	/* Writers of this process queue here before BEGIN IMMEDIATE: SQLite's
	 * busy handler sleeps 1-100 ms between retries and is not woken when
	 * the lock frees, which under load left most writers asleep with the
	 * CPU idle (measured: p99 0.8 s). Other processes still meet the busy
	 * timeout. */
	pthread_mutex_t write_lock;
	/* The background checkpointer (store_background_checkpoints): woken
	 * by the WAL hook once the log passes CKPT_WAKE_FRAMES, else once a
	 * second. */
	pthread_t ckpt_thr;
	int ckpt_started;
	pthread_mutex_t ckpt_mu;
	pthread_cond_t ckpt_cond;
	int ckpt_due, ckpt_stop;
	atomic_uint_fast64_t unread; /* failed reads of user_version (sq_changes) */
	struct conn *conns;
	int nconns;
	/* Every write transaction of this process runs on this connection,
	 * one at a time (write_lock): SQLite drops a connection's page cache
	 * when another connection changed the database since its last
	 * transaction, so writers spread over the pool re-read every page they
	 * touched (pread, measured as most of a write's cost); one writer
	 * keeps its cache, as it made every change itself. */
	struct conn writer;
};

struct sq_tx {
	struct store_tx base; /* first: store.c dispatches through it */
	struct sq_store *st;
	struct conn *c;
	int write;
	unsigned notify; /* channels to raise once committed (1 << channel) */
	int kept;        /* user_version counted (sq_notify) */
	int failed;      /* a statement failed: only ROLLBACK is left (store.h) */
};

struct sq_rows {
	struct store_rows base; /* first */
	struct sq_tx *tx;
	struct cached_stmt *cs;
	sqlite3_stmt *own; /* a one-off statement when the cached one is busy */
};

static const struct store_backend sqlite_backend;
static void sq_close(struct store *gst);
static int sq_checkpoint(struct store *gst);

static int map_rc(sqlite3 *db, int rc, const char *sql)
{
	int ext;

	if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW)
		return STORE_OK;
	ext = sqlite3_extended_errcode(db);
	if ((rc & 0xff) == SQLITE_CONSTRAINT)
		return STORE_CONSTRAINT;
	if ((rc & 0xff) == SQLITE_FULL) {
		store_full_begin(); /* logged once per episode */
		return STORE_FULL;
	}
	if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
		log_msg(LOG_WARN, "store_busy", "%s", sqlite3_errmsg(db));
		return STORE_BUSY;
	}
	log_msg(LOG_ERROR, "store_error", "sqlite %d/%d: %s (in: %.120s)", rc, ext,
		sqlite3_errmsg(db), sql ? sql : "-");
	return STORE_ERR;
}

/* Process-wide settings, before the first connection: no memory
 * statistics (SQLite would otherwise take a global mutex around every
 * allocation of every connection to keep them). */
static void sqlite_configure(void)
{
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

static int conn_open(const char *path, struct conn *c)
{
	static const char *pragmas =
		"PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
		"PRAGMA temp_store=MEMORY; PRAGMA cache_size=-16384;";
	int rc;

	memset(c, 0, sizeof *c);
	rc = sqlite3_open_v2(path, &c->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		log_msg(LOG_ERROR, "store_open", "cannot open %s: %s", path,
			c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
		return -1;
	}
	sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
	sqlite3_extended_result_codes(c->db, 1);
	if (sqlite3_exec(c->db, pragmas, NULL, NULL, NULL) != SQLITE_OK)
		return map_rc(c->db, SQLITE_ERROR, pragmas);
	for (int i = 0; i < TX__COUNT; i++)
		if (sqlite3_prepare_v3(c->db, tx_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &c->tx[i],
				       NULL) != SQLITE_OK)
			return map_rc(c->db, SQLITE_ERROR, tx_sql[i]);
	if (sqlite3_prepare_v3(c->db, "PRAGMA user_version", -1, SQLITE_PREPARE_PERSISTENT,
			       &c->user_version, NULL) != SQLITE_OK)
		return map_rc(c->db, SQLITE_ERROR, "PRAGMA user_version");
	return 0;
}

static void conn_close(struct conn *c)
{
	int i;

	for (i = 0; i < STMT_CACHE; i++) {
		if (c->cache[i].stmt)
			sqlite3_finalize(c->cache[i].stmt);
		free(c->cache[i].sql);
	}
	for (i = 0; i < TX__COUNT; i++)
		sqlite3_finalize(c->tx[i]);
	sqlite3_finalize(c->user_version);
	if (c->db)
		sqlite3_close(c->db);
	c->db = NULL;
}

/* Prepares sql and records which $N each SQLite parameter slot stands for,
 * so params[N-1] binds to it whatever order the placeholders appear in. */
static int prepare(struct conn *c, const char *sql, int persistent, sqlite3_stmt **stmt,
		   int *nparams, int map[STORE_MAX_PARAMS])
{
	int rc, i, n;
	const char *name;

	rc = sqlite3_prepare_v3(c->db, sql, -1, persistent ? SQLITE_PREPARE_PERSISTENT : 0, stmt,
				NULL);
	if (rc != SQLITE_OK)
		return map_rc(c->db, rc, sql);
	n = sqlite3_bind_parameter_count(*stmt);
	if (n > STORE_MAX_PARAMS) {
		sqlite3_finalize(*stmt);
		*stmt = NULL; /* a cache slot must not keep it */
		log_msg(LOG_ERROR, "store_error", "too many parameters in: %.120s", sql);
		return STORE_ERR;
	}
	for (i = 1; i <= n; i++) {
		name = sqlite3_bind_parameter_name(*stmt, i);
		map[i - 1] = name && name[0] == '$' ? atoi(name + 1) : i;
	}
	*nparams = n;
	return STORE_OK;
}

/* A hash of the statement text: taken on every statement run, over texts
 * of up to ~500 bytes, so it reads 8 bytes per step (a byte-at-a-time
 * FNV-1a was ~10 % of the webhook fan-out's time); the final mix
 * (MurmurHash3's fmix64) brings every bit into the low ones that pick the
 * slot. */
static uint64_t sql_hash(const char *sql)
{
	size_t n = strlen(sql), i;
	uint64_t h = 14695981039346656037u ^ n, w;

	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, sql + i, 8);
		h = (h ^ w) * 1099511628211u;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, sql + i, n - i);
	h = (h ^ w) * 1099511628211u;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdu;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53u;
	return h ^ h >> 33;
}

/* Gets a reset statement for sql: the cached one when free, else a one-off
 * (*own set) that the caller finalizes. A statement may sit in any of
 * STMT_PROBES slots from its hash's, so two statements whose hashes pick
 * the same slot do not evict each other on every run (a direct-mapped
 * cache re-prepared hundreds of statements a second once two hot ones
 * collided). A miss takes the first empty probed slot, else the first one
 * not in use. */
static int get_stmt(struct sq_tx *tx, const char *sql, struct cached_stmt **cs_out,
		    sqlite3_stmt **own, int *nparams, int **map)
{
	static __thread int tmpmap[STORE_MAX_PARAMS];
	uint64_t h = sql_hash(sql);
	struct cached_stmt *cs, *spare = NULL;
	int rc, i;

	*own = NULL;
	*cs_out = NULL;
	for (i = 0; i < STMT_PROBES; i++) {
		cs = &tx->c->cache[(h + (uint64_t)i) % STMT_CACHE];
		if (cs->stmt && cs->hash == h && !strcmp(cs->sql, sql)) {
			if (cs->in_use)
				break; /* nested use of the same text: a one-off */
			cs->in_use = 1;
			*cs_out = cs;
			*nparams = cs->nparams;
			*map = cs->map;
			return STORE_OK;
		}
		if (!cs->in_use && (!spare || (spare->stmt && !cs->stmt)))
			spare = cs;
	}
	if (i == STMT_PROBES && spare) {
		cs = spare;
		if (cs->stmt)
			sqlite3_finalize(cs->stmt);
		cs->stmt = NULL;
		free(cs->sql);
		cs->sql = strdup(sql);
		if (!cs->sql)
			return STORE_ERR;
		cs->hash = h;
		rc = prepare(tx->c, sql, 1, &cs->stmt, &cs->nparams, cs->map);
		if (rc != STORE_OK)
			return rc;
		cs->in_use = 1;
		*cs_out = cs;
		*nparams = cs->nparams;
		*map = cs->map;
		return STORE_OK;
	}
	*map = tmpmap;
	return prepare(tx->c, sql, 0, own, nparams, tmpmap);
}

static int bind_all(struct sq_tx *tx, sqlite3_stmt *stmt, int nslots, const int *map,
		    const struct store_val *params, int nparams, const char *sql)
{
	int i, rc = SQLITE_OK;
	const struct store_val *v;

	for (i = 0; i < nslots; i++) {
		if (map[i] < 1 || map[i] > nparams) {
			log_msg(LOG_ERROR, "store_error",
				"placeholder $%d without a value in: %.120s", map[i], sql);
			return STORE_ERR;
		}
		v = &params[map[i] - 1];
		switch (v->kind) {
		case STORE_NULL:
			rc = sqlite3_bind_null(stmt, i + 1);
			break;
		case STORE_INT:
			rc = sqlite3_bind_int64(stmt, i + 1, v->i);
			break;
		case STORE_TEXT:
			rc = sqlite3_bind_text(stmt, i + 1, v->s, -1, SQLITE_STATIC);
			break;
		case STORE_BLOB:
			rc = sqlite3_bind_blob64(stmt, i + 1, v->s, v->n, SQLITE_STATIC);
			break;
		}
		if (rc != SQLITE_OK)
			return map_rc(tx->c->db, rc, sql);
	}
	return STORE_OK;
}

static int sq_query(struct store_tx *gtx, const char *sql, const struct store_val *params,
		    int nparams, struct store_rows **out)
{
	struct sq_tx *tx = (struct sq_tx *)gtx;
	struct sq_rows *r;
	sqlite3_stmt *own;
	struct cached_stmt *cs;
	int rc, nslots, *map;

	*out = NULL;
	if (tx->failed) {
		log_msg(LOG_ERROR, "store_error",
			"a statement after a failed one in the same transaction: %.120s", sql);
		return STORE_ERR;
	}
	rc = get_stmt(tx, sql, &cs, &own, &nslots, &map);
	if (rc != STORE_OK) {
		tx->failed = 1;
		return rc;
	}
	rc = bind_all(tx, cs ? cs->stmt : own, nslots, map, params, nparams, sql);
	r = calloc(1, sizeof *r);
	if (rc != STORE_OK || !r) {
		tx->failed = 1;
		free(r);
		if (cs) {
			sqlite3_reset(cs->stmt);
			sqlite3_clear_bindings(cs->stmt);
			cs->in_use = 0;
		}
		if (own)
			sqlite3_finalize(own);
		return rc != STORE_OK ? rc : STORE_ERR;
	}
	r->base.be = &sqlite_backend;
	r->tx = tx;
	r->cs = cs;
	r->own = own;
	*out = &r->base;
	return STORE_OK;
}

static sqlite3_stmt *rows_stmt(struct sq_rows *r)
{
	return r->cs ? r->cs->stmt : r->own;
}

static int sq_next(struct store_rows *gr)
{
	struct sq_rows *r = (struct sq_rows *)gr;
	sqlite3_stmt *s = rows_stmt(r);
	int rc = sqlite3_step(s);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	r->tx->failed = 1;
	return map_rc(r->tx->c->db, rc, sqlite3_sql(s));
}

static const char *sq_text(struct store_rows *gr, int col)
{
	struct sq_rows *r = (struct sq_rows *)gr;
	return (const char *)sqlite3_column_text(rows_stmt(r), col);
}

static int64_t sq_int(struct store_rows *gr, int col)
{
	struct sq_rows *r = (struct sq_rows *)gr;
	return sqlite3_column_int64(rows_stmt(r), col);
}

static int sq_is_null(struct store_rows *gr, int col)
{
	struct sq_rows *r = (struct sq_rows *)gr;
	return sqlite3_column_type(rows_stmt(r), col) == SQLITE_NULL;
}

static size_t sq_len(struct store_rows *gr, int col)
{
	struct sq_rows *r = (struct sq_rows *)gr;
	return (size_t)sqlite3_column_bytes(rows_stmt(r), col);
}

static void sq_rows_close(struct store_rows *gr)
{
	struct sq_rows *r = (struct sq_rows *)gr;
	if (!r)
		return;
	if (r->cs) {
		sqlite3_reset(r->cs->stmt);
		sqlite3_clear_bindings(r->cs->stmt);
		r->cs->in_use = 0;
	}
	if (r->own)
		sqlite3_finalize(r->own);
	free(r);
}

static int sq_exec(struct store_tx *gtx, const char *sql, const struct store_val *params, int nparams)
{
	struct sq_tx *tx = (struct sq_tx *)gtx;
	struct store_rows *r;
	int rc;
	int64_t before = sqlite3_total_changes64(tx->c->db);

	rc = sq_query(gtx, sql, params, nparams, &r);
	if (rc != STORE_OK)
		return rc;
	do
		rc = sq_next(r);
	while (rc == 1);
	sq_rows_close(r);
	if (rc < 0)
		return rc;
	/* total_changes counts only this statement's rows (DDL adds none). */
	return (int)(sqlite3_total_changes64(tx->c->db) - before);
}

static struct conn *pool_get(struct sq_store *st)
{
	return &st->conns[store_pool_take(&st->pool)];
}

static void pool_put(struct sq_store *st, struct conn *c)
{
	store_pool_give(&st->pool, (int)(c - st->conns));
}

/* Gives tx's connection back: the writer's lock, or the pool's slot. */
static void tx_release(struct sq_tx *tx)
{
	if (tx->write)
		pthread_mutex_unlock(&tx->st->write_lock);
	else
		pool_put(tx->st, tx->c);
}

/* Takes this process's writer within BUSY_TIMEOUT_MS in all: the wait
 * for write_lock (behind this process's other writers) counts against
 * the busy timeout that BEGIN IMMEDIATE then waits for other processes,
 * so no writer waits longer than the documented bound because others
 * queued before it (each waiting its own bound, one after another).
 * Returns STORE_OK (write_lock held) or STORE_BUSY. */
static int writer_take(struct sq_store *st)
{
	struct timespec deadline, now;
	int64_t left;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += BUSY_TIMEOUT_MS / 1000;
	if (pthread_mutex_timedlock(&st->write_lock, &deadline) != 0) {
		log_msg(LOG_WARN, "store_busy",
			"no turn to write within %d s: this process's writers queue behind one"
			" that waits for another process's lock",
			BUSY_TIMEOUT_MS / 1000);
		return STORE_BUSY;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	left = (int64_t)(deadline.tv_sec - now.tv_sec) * 1000 +
	       (deadline.tv_nsec - now.tv_nsec) / 1000000;
	sqlite3_busy_timeout(st->writer.db, (int)(left < 1 ? 1 : left));
	return STORE_OK;
}

static int sq_begin(struct store *gst, int mode, struct store_tx **out)
{
	struct sq_store *st = (struct sq_store *)gst;
	struct sq_tx *tx = calloc(1, sizeof *tx);
	int write = mode == STORE_WRITE || mode == STORE_WRITE_OWN,
	    which = write ? TX_BEGIN_IMMEDIATE : TX_BEGIN;
	int rc;

	*out = NULL;
	if (!tx)
		return STORE_ERR;
	tx->base.be = &sqlite_backend;
	tx->st = st;
	tx->write = write;
	if (write) {
		if ((rc = writer_take(st)) != STORE_OK) {
			free(tx);
			return rc;
		}
		tx->c = &st->writer;
	} else {
		tx->c = pool_get(st);
	}
	rc = tx_step(tx->c, which);
	if (write) /* writer_take shortened it by the wait for write_lock */
		sqlite3_busy_timeout(tx->c->db, BUSY_TIMEOUT_MS);
	if (rc != SQLITE_OK) {
		rc = map_rc(tx->c->db, rc, tx_sql[which]);
		tx_release(tx);
		free(tx);
		return rc;
	}
	*out = &tx->base;
	return STORE_OK;
}

static int sq_commit(struct store_tx *gtx)
{
	struct sq_tx *tx = (struct sq_tx *)gtx;
	int rc;

	if (tx->failed) {
		rc = STORE_ERR; /* store.h: a failed statement leaves only ROLLBACK */
		tx_step(tx->c, TX_ROLLBACK);
	} else if ((rc = tx_step(tx->c, TX_COMMIT)) != SQLITE_OK) {
		rc = map_rc(tx->c->db, rc, "COMMIT");
		tx_step(tx->c, TX_ROLLBACK);
	}
	tx_release(tx);
	if (rc == SQLITE_OK && tx->write)
		store_full_end();
	if (rc == SQLITE_OK && tx->notify)
		store_hub_raise(&tx->st->base.hub, tx->notify);
	free(tx);
	return rc == SQLITE_OK ? STORE_OK : rc;
}

/* This process is the database's only server: a notification is raised
 * in its own hub when tx commits. */
/* Raises ch in this process once tx commits. A notification cannot reach
 * another process on SQLite, yet the server must see what revopsctl
 * announces on STORE_KEPT_CHANNEL (a new property): that channel is also
 * counted in the file, in the header's user_version, written by this
 * transaction (which holds the write lock) and read by sq_changes. */
static int sq_notify(struct store_tx *gtx, enum store_channel ch)
{
	struct sq_tx *tx = (struct sq_tx *)gtx;
	char sql[48];
	int64_t v;

	tx->notify |= 1u << ch;
	if (ch != STORE_KEPT_CHANNEL || tx->kept)
		return STORE_OK;
	if (!tx->write || (v = read_kept(tx->c)) < 0)
		return STORE_ERR;
	snprintf(sql, sizeof sql, "PRAGMA user_version = %lld", (long long)(v + 1) & 0x7fffffff);
	if (sqlite3_exec(tx->c->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return map_rc(tx->c->db, SQLITE_ERROR, sql);
	tx->kept = 1;
	return STORE_OK;
}

static void sq_rollback(struct store_tx *gtx)
{
	struct sq_tx *tx = (struct sq_tx *)gtx;
	if (!tx)
		return;
	if (!sqlite3_get_autocommit(tx->c->db))
		tx_step(tx->c, TX_ROLLBACK);
	tx_release(tx);
	free(tx);
}

/* Creates the directory holding path (one level), so a fresh --data-dir works. */
static void make_parent_dir(const char *path)
{
	char dir[1100];
	char *slash;

	if (strlen(path) >= sizeof dir)
		return;
	strcpy(dir, path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return;
	*slash = '\0';
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		log_msg(LOG_WARN, "store_open", "cannot create %s: %s", dir, strerror(errno));
}

int store_sqlite_open(const char *path, int pool_size, struct store **out)
{
	struct sq_store *st;
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	int i;

	*out = NULL;
	pthread_once(&once, sqlite_configure);
	make_parent_dir(path);
	st = calloc(1, sizeof *st);
	if (!st)
		return -1;
	st->base.be = &sqlite_backend;
	store_hub_init(&st->base.hub);
	pthread_mutex_init(&st->write_lock, NULL);
	pthread_mutex_init(&st->ckpt_mu, NULL);
	pthread_cond_init(&st->ckpt_cond, NULL);
	st->nconns = pool_size < 1 ? 1 : pool_size;
	if (store_pool_init(&st->pool, st->nconns) < 0)
		goto fail;
	st->conns = calloc((size_t)st->nconns, sizeof *st->conns);
	if (!st->conns)
		goto fail;
	for (i = 0; i < st->nconns; i++)
		if (conn_open(path, &st->conns[i]) < 0)
			goto fail;
	if (conn_open(path, &st->writer) < 0)
		goto fail;
	*out = &st->base;
	return 0;
fail:
	sq_close(&st->base);
	return -1;
}

static void sq_close(struct store *gst)
{
	struct sq_store *st = (struct sq_store *)gst;
	int i;

	if (!st)
		return;
	if (st->ckpt_started) {
		pthread_mutex_lock(&st->ckpt_mu);
		st->ckpt_stop = 1;
		pthread_cond_signal(&st->ckpt_cond);
		pthread_mutex_unlock(&st->ckpt_mu);
		pthread_join(st->ckpt_thr, NULL);
	}
	for (i = 0; st->conns && i < st->nconns; i++)
		conn_close(&st->conns[i]);
	conn_close(&st->writer);
	free(st->conns);
	store_pool_destroy(&st->pool);
	pthread_mutex_destroy(&st->write_lock);
	pthread_mutex_destroy(&st->ckpt_mu);
	pthread_cond_destroy(&st->ckpt_cond);
	store_hub_destroy(&st->base.hub);
	free(st);
}

/* The WAL length (pages) at which a commit wakes the checkpointer: 16 MiB
 * of 4 KiB pages, small enough to stay in the page cache. Its second step
 * holds the writers for a few milliseconds (the frames added meanwhile and
 * an fsync), so fewer, longer checkpoints leave the write lock free more:
 * at 1000 frames the webhook benchmark restarted the WAL ~36 times a
 * second, holding the lock 20 % of the time at saturation, and the
 * recorders spent a quarter of theirs waiting for it (0.49 thread-seconds
 * per second against 0.34 at 4000). */
#define CKPT_WAKE_FRAMES 4000

static int on_wal_commit(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct sq_store *st = arg;

	(void)db;
	(void)name;
	if (pages >= CKPT_WAKE_FRAMES) {
		pthread_mutex_lock(&st->ckpt_mu);
		if (!st->ckpt_due) {
			st->ckpt_due = 1;
			pthread_cond_signal(&st->ckpt_cond);
		}
		pthread_mutex_unlock(&st->ckpt_mu);
	}
	return SQLITE_OK;
}

static void *checkpointer_main(void *arg)
{
	struct sq_store *st = arg;
	struct timespec ts;

	pthread_mutex_lock(&st->ckpt_mu);
	while (!st->ckpt_stop) {
		if (!st->ckpt_due) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&st->ckpt_cond, &st->ckpt_mu, &ts);
		}
		if (st->ckpt_stop)
			break;
		st->ckpt_due = 0;
		pthread_mutex_unlock(&st->ckpt_mu);
		if (sq_checkpoint(&st->base) < 0)
			log_msg(LOG_WARN, "store", "checkpoint failed; will retry");
		pthread_mutex_lock(&st->ckpt_mu);
	}
	pthread_mutex_unlock(&st->ckpt_mu);
	return NULL;
}

static void sq_background_checkpoints(struct store *gst)
{
	struct sq_store *st = (struct sq_store *)gst;
	int i;

	for (i = 0; i <= st->nconns; i++) {
		sqlite3 *db = i < st->nconns ? st->conns[i].db : st->writer.db;

		sqlite3_wal_autocheckpoint(db, 0);
		sqlite3_wal_hook(db, on_wal_commit, st);
	}
	if (!st->ckpt_started && pthread_create(&st->ckpt_thr, NULL, checkpointer_main, st) == 0) {
		st->ckpt_started = 1;
		pthread_setname_np(st->ckpt_thr, "db-checkpoint");
	}
}

/* Two steps. A PASSIVE checkpoint first copies what it can while writers
 * go on. Then, with this process's writers held at write_lock, a RESTART
 * checkpoint copies the few frames added meanwhile and waits (briefly) for
 * readers of old snapshots, so that the next writer starts the WAL again
 * from its beginning. Without the second step a server that always has a
 * reader never restarts the WAL: it grew by 50-125 MB/s under the rate
 * decision and webhook benchmarks, every commit paid for new file blocks,
 * and readers searched an ever larger WAL index. */
#define CHECKPOINT_WAIT_MS 50

static int sq_checkpoint(struct store *gst)
{
	struct sq_store *st = (struct sq_store *)gst;
	struct conn *c = pool_get(st);
	int rc, nlog = 0, nckpt = 0;

	rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &nlog, &nckpt);
	if (rc == SQLITE_OK && nlog > 0) {
		pthread_mutex_lock(&st->write_lock);
		sqlite3_busy_timeout(c->db, CHECKPOINT_WAIT_MS);
		rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_RESTART, NULL, NULL);
		sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
		pthread_mutex_unlock(&st->write_lock);
	}
	pool_put(st, c);
	if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED) {
		log_msg(LOG_WARN, "store_checkpoint", "%s", sqlite3_errstr(rc));
		return -1;
	}
	return 0;
}

static int sq_exec_script(struct store_tx *gtx, const char *sql, const char *name)
{
	struct sq_tx *tx = (struct sq_tx *)gtx;
	char *err = NULL;

	if (sqlite3_exec(tx->c->db, sql, NULL, NULL, &err) == SQLITE_OK)
		return STORE_OK;
	log_msg(LOG_ERROR, "store_migrate", "%s failed: %s", name, err ? err : "?");
	sqlite3_free(err);
	return STORE_ERR;
}

/* store_changes's part that other processes' writes move: the kept
 * channel's count in the file. A failed read returns a value no read gave
 * before (the caller reloads, which is always safe). */
static uint64_t sq_changes(struct store *gst, enum store_channel ch)
{
	struct sq_store *st = (struct sq_store *)gst;
	struct conn *c;
	int64_t v;

	if (ch != STORE_KEPT_CHANNEL)
		return 0;
	c = pool_get(st);
	v = read_kept(c);
	pool_put(st, c);
	return v >= 0 ? (uint64_t)v : UINT64_MAX - atomic_fetch_add(&st->unread, 1);
}

static const struct store_backend sqlite_backend = {
	.name = "sqlite",
	.migrations = embedded_migrations_sqlite,
	.begin = sq_begin,
	.commit = sq_commit,
	.rollback = sq_rollback,
	.exec = sq_exec,
	.query = sq_query,
	.next = sq_next,
	.text = sq_text,
	.integer = sq_int,
	.is_null = sq_is_null,
	.len = sq_len,
	.rows_close = sq_rows_close,
	.close = sq_close,
	.checkpoint = sq_checkpoint,
	.background_checkpoints = sq_background_checkpoints,
	.exec_script = sq_exec_script,
	.lock_migrations = NULL, /* each migration's write transaction is enough */
	.unlock_migrations = NULL,
	.notify = sq_notify,
	.listen = NULL, /* no other process serves the database */
	.changes = sq_changes,
};
