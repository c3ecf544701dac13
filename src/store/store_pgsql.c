/* The PostgreSQL backend of store.h (libpq; the only file that includes
 * libpq-fe.h): a fixed pool of connections, each statement prepared once
 * per connection and run with PQexecPrepared after, parameters sent as
 * text (integers in decimal, blobs as binary bytea), results read whole
 * and walked row by row.
 *
 * Transactions keep store.h's guarantees:
 *  - write = 1 is BEGIN (READ COMMITTED) followed at once by
 *    pg_advisory_xact_lock(WRITE_LOCK_KEY): writers of every process and
 *    every node on the database take turns, as SQLite's one writer does,
 *    so there is no lost update and no deadlock on upgrade, and each
 *    statement of a writer sees every commit before its own;
 *  - write = 0 is BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY: one
 *    snapshot, taken at the first statement, like SQLite's deferred BEGIN;
 *  - STORE_WRITE_OWN is BEGIN without the lock: row locks only, until
 *    store_turn sends the lock;
 *  - STORE_READ_ONE sends no BEGIN: its one statement is an implicit
 *    transaction of its own, ended by its sync;
 *  - BEGIN (and the lock) travel with the transaction's first statement,
 *    and a statement new to the connection with its Parse, in one round
 *    trip (libpq's pipeline mode); store_send's statements wait in the
 *    same pipeline for the next statement or the COMMIT, so a writer that
 *    only inserts is one round trip; a reader's ROLLBACK goes out without
 *    waiting; a transaction with no statement costs nothing;
 *  - a failed statement leaves the transaction able only to roll back
 *    (store.h), as PostgreSQL does.
 * statement_timeout and lock_timeout are 10 s, SQLite's busy timeout.
 *
 * Errors map by SQLSTATE: class 23 (unique, check, foreign key, not null,
 * and the audit trigger's integrity_constraint_violation) is
 * STORE_CONSTRAINT; 40001, 40P01, 55P03 and 57014 are STORE_BUSY; the rest
 * is STORE_ERR. A lost connection is STORE_ERR and is reconnected when it
 * is next taken from the pool. */
#include "store/backend.h"
#include "store/pool.h"
#include "store/store.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"

#define STMT_CACHE 256
#define STMT_PROBES 4
#define MAX_PARAMS STORE_MAX_PARAMS
/* Commands a transaction sends before it reads their results: a
 * statement whose STMT_SENDS commands (BEGIN; the lock's DEALLOCATE,
 * Parse and Execute; its own three) would not fit reads the segment
 * first (make_room).
 * Their answers are a few bytes each, so neither side's socket buffer
 * fills while the other waits. */
#define QUEUE_MAX 64
#define STMT_SENDS 7
/* Advisory lock keys ("revops" and a number): the writers' turn and the
 * migration runner's. */
#define WRITE_LOCK_KEY "7310593858020360193"
#define MIGRATE_LOCK_KEY "7310593858020360194"
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT8 20

static const char *const session_sql =
	"SET statement_timeout = '10s'; SET lock_timeout = '10s';"
	" SET client_min_messages = warning; SET client_encoding = 'UTF8'";

struct pg_stmt {
	char *sql; /* a copy of the statement text; compared by content */
	uint64_t hash;
	char name[16]; /* the server-side prepared statement */
	int nslots;    /* the highest $N in sql */
};

struct pg_conn {
	PGconn *pg;
	struct pg_stmt cache[STMT_CACHE];
	unsigned next_name;
	int broken;  /* the connection was lost: reconnect before use */
	int pending; /* a reader's ROLLBACK was sent; its answer is still to read */
};

struct pg_store {
	struct store base; /* first: store.c dispatches through it */
	char *url;
	struct store_pool pool; /* slots of conns */
	struct pg_conn *conns;
	int nconns;
	PGconn *migrate_conn; /* holds the migration lock (lock_migrations) */
	pthread_t listen_thr; /* pg_listen's, when listen_started */
	int listen_started;
	int listen_pipe[2]; /* a byte written here stops it */
};

/* A command sent into a transaction's open pipeline segment whose result
 * is still to be read: the start of its text (for the message of its
 * failure) and,
 * for a Parse, the statement slot it fills and the name it gave. */
struct pg_sent {
	char what[64]; /* the start of its text (the text may be gone) */
	struct pg_stmt *parse;
	char name[16];
};

struct pg_tx {
	struct store_tx base; /* first */
	struct pg_store *st;
	struct pg_conn *c;
	int write;
	int begun;         /* BEGIN was sent (with the first statement) */
	int failed;        /* a statement failed: only ROLLBACK is left */
	int alone;         /* STORE_READ_ONE: its statement runs without BEGIN */
	int own;           /* STORE_WRITE_OWN: a writer that does not take the lock */
	int bounded;       /* bound_waits lowered its lock_timeout */
	int64_t begun_ms;  /* when BEGIN was sent (clock_mono_ms) */
	int queued;        /* commands in the open segment (sent, no sync yet) */
	unsigned notified; /* channels this transaction notifies (1 << channel) */
	struct pg_sent sent[QUEUE_MAX];
};

struct pg_rows {
	struct store_rows base; /* first */
	struct pg_tx *tx;
	PGresult *res;
	int row, nrows, ncols;
	int status;            /* a deferred execution error, returned by next */
	unsigned char **bytea; /* decoded bytea values of the current row */
	size_t *bytea_len;
};

static const struct store_backend pgsql_backend;

/* The first line of libpq's message for pg (they end in a newline). */
static void log_pg(int level, const char *what, const char *msg, const char *sql)
{
	size_t n = strcspn(msg, "\n");

	log_msg(level, what, "postgres: %.*s (in: %.120s)", (int)n, msg, sql ? sql : "-");
}

/* Maps a failed result of c to a store status, marking c broken when the
 * connection is gone. res may be NULL (out of memory, connection lost). */
static int map_error(struct pg_conn *c, const PGresult *res, const char *sql)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(c->pg);

	if (PQstatus(c->pg) != CONNECTION_OK) {
		c->broken = 1;
		log_pg(LOG_ERROR, "store_error", PQerrorMessage(c->pg), sql);
		return STORE_ERR;
	}
	if (state && !strncmp(state, "23", 2))
		return STORE_CONSTRAINT;
	if (state && !strcmp(state, "53100")) { /* disk_full */
		store_full_begin();             /* logged once per episode */
		return STORE_FULL;
	}
	if (state && (!strcmp(state, "40001") || !strcmp(state, "40P01") ||
		      !strcmp(state, "55P03") || !strcmp(state, "57014"))) {
		log_pg(LOG_WARN, "store_busy", msg, sql);
		return STORE_BUSY;
	}
	log_pg(LOG_ERROR, "store_error", msg, sql);
	return STORE_ERR;
}

/* Runs sql (no parameters, maybe several statements) on c. Returns
 * STORE_OK or a store status. */
static int simple(struct pg_conn *c, const char *sql)
{
	PGresult *res = PQexec(c->pg, sql);
	ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	int rc = STORE_OK;

	if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
		rc = map_error(c, res, sql);
	PQclear(res);
	return rc;
}

static void cache_clear(struct pg_conn *c)
{
	int i;

	for (i = 0; i < STMT_CACHE; i++) {
		free(c->cache[i].sql);
		c->cache[i].sql = NULL;
	}
}

/* Connects c (or connects it again after a loss, forgetting its prepared
 * statements, which died with the session). Returns 0 or -1 (logged). */
static int conn_connect(struct pg_conn *c, const char *url)
{
	cache_clear(c);
	if (c->pg)
		PQfinish(c->pg);
	c->pending = 0;
	c->pg = PQconnectdb(url);
	if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) {
		log_pg(LOG_ERROR, "store_open", c->pg ? PQerrorMessage(c->pg) : "out of memory",
		       NULL);
		c->broken = 1;
		return -1;
	}
	c->broken = 0;
	return simple(c, session_sql) == STORE_OK ? 0 : -1;
}

static void conn_close(struct pg_conn *c)
{
	cache_clear(c);
	if (c->pg)
		PQfinish(c->pg);
	c->pg = NULL;
}

/* FNV-1a over the statement text (a round trip to the server dwarfs it). */
static uint64_t sql_hash(const char *sql)
{
	uint64_t h = 14695981039346656037u;

	for (; *sql; sql++)
		h = (h ^ (unsigned char)*sql) * 1099511628211u;
	return h;
}

/* The highest $N placeholder of sql outside quotes and comments. */
static int max_placeholder(const char *sql)
{
	const char *p = sql;
	int max = 0, n;

	while (*p) {
		if (*p == '\'' || *p == '"') {
			char q = *p++;

			while (*p && *p != q)
				p++;
			p += *p ? 1 : 0;
		} else if (p[0] == '-' && p[1] == '-') {
			p += strcspn(p, "\n");
		} else if (p[0] == '$' && p[1] >= '0' && p[1] <= '9') {
			n = (int)strtol(p + 1, (char **)&p, 10);
			max = n > max ? n : max;
		} else {
			p++;
		}
	}
	return max;
}

/* The statement for sql prepared on c before, or NULL. */
static struct pg_stmt *find_stmt(struct pg_conn *c, const char *sql, uint64_t h)
{
	struct pg_stmt *cs;

	for (int i = 0; i < STMT_PROBES; i++) {
		cs = &c->cache[(h + (uint64_t)i) % STMT_CACHE];
		if (cs->sql && cs->hash == h && !strcmp(cs->sql, sql))
			return cs;
	}
	return NULL;
}

/* A slot for sql, new to c: an empty one of the STMT_PROBES from its
 * hash's, else the first, whose statement is to be deallocated (dealloc
 * gets the command, "" when none). Names it and counts its placeholders;
 * the slot stays empty (sql NULL) until its Parse is sent. Returns
 * STORE_OK or a store status. */
static int claim_slot(struct pg_conn *c, const char *sql, uint64_t h, struct pg_stmt **out,
		      char dealloc[32])
{
	struct pg_stmt *cs, *spare = NULL;

	for (int i = 0; i < STMT_PROBES; i++) {
		cs = &c->cache[(h + (uint64_t)i) % STMT_CACHE];
		if (!spare || (spare->sql && !cs->sql))
			spare = cs;
	}
	if (spare->sql) {
		snprintf(dealloc, 32, "DEALLOCATE %s", spare->name);
		free(spare->sql);
		spare->sql = NULL;
	}
	spare->nslots = max_placeholder(sql);
	if (spare->nslots > MAX_PARAMS) {
		log_msg(LOG_ERROR, "store_error", "too many parameters in: %.120s", sql);
		return STORE_ERR;
	}
	snprintf(spare->name, sizeof spare->name, "r%u", c->next_name++);
	spare->hash = h;
	*out = spare;
	return STORE_OK;
}

/* Forgets the statement a failed Parse was to prepare (s names a Parse),
 * unless its slot was given to another since. */
static void forget_parse(const struct pg_sent *s)
{
	if (s->parse && s->parse->sql && !strcmp(s->parse->name, s->name)) {
		free(s->parse->sql);
		s->parse->sql = NULL;
	}
}

/* One statement's wire form: parameter values as text (integers in
 * decimal) or binary (blobs), and, for its Parse, their types (integers
 * int8, blobs bytea, the rest inferred by the server). */
struct wire {
	const char *values[MAX_PARAMS];
	int lengths[MAX_PARAMS], formats[MAX_PARAMS];
	Oid types[MAX_PARAMS];
	char ints[MAX_PARAMS][BUF_INT_MAX];
};

static void wire_fill(struct wire *w, const struct store_val *params, int nslots)
{
	for (int i = 0; i < nslots; i++) {
		w->formats[i] = params[i].kind == STORE_BLOB;
		w->lengths[i] = (int)params[i].n;
		w->values[i] = params[i].kind == STORE_NULL ? NULL : params[i].s;
		w->types[i] = params[i].kind == STORE_INT    ? OID_INT8
			      : params[i].kind == STORE_BLOB ? OID_BYTEA
							     : 0;
		if (params[i].kind == STORE_INT) {
			buf_format_int(params[i].i, w->ints[i]);
			w->values[i] = w->ints[i];
		}
	}
}

/* The result of the next command of a pipeline, having consumed the NULL
 * that ends it (NULL: the connection failed). */
static PGresult *next_result(PGconn *pg)
{
	PGresult *res = PQgetResult(pg), *extra;

	if (res && PQresultStatus(res) != PGRES_PIPELINE_SYNC)
		while ((extra = PQgetResult(pg)))
			PQclear(extra);
	return res;
}

/* What a transaction's first statement sends before it. */
static const char *const begin_read = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
static const char *const write_lock = "SELECT pg_advisory_xact_lock(" WRITE_LOCK_KEY ")";

/* Marks tx's connection lost (a half-sent or half-read pipeline cannot be
 * resumed) and tx failed. Returns STORE_ERR. */
static int lost(struct pg_tx *tx, const char *sql)
{
	if (!tx->c->broken)
		log_pg(LOG_ERROR, "store_error", PQerrorMessage(tx->c->pg), sql);
	tx->c->broken = 1;
	tx->failed = 1;
	tx->queued = 0;
	return STORE_ERR;
}

/* Notes a command sent into tx's open segment: sql's start, and for a
 * Parse the slot it fills (parse) under its name. */
static void note_sent(struct pg_tx *tx, const char *sql, struct pg_stmt *parse)
{
	struct pg_sent *s = &tx->sent[tx->queued++];
	size_t n = strnlen(sql, sizeof s->what - 1);

	memcpy(s->what, sql, n);
	s->what[n] = '\0';
	s->parse = parse;
	if (parse)
		memcpy(s->name, parse->name, sizeof s->name);
}

/* Sends one command of no parameters (BEGIN, the lock, DEALLOCATE,
 * COMMIT) into tx's open pipeline segment. Returns STORE_OK or STORE_ERR. */
static int send_plain(struct pg_tx *tx, const char *sql)
{
	if (!PQsendQueryParams(tx->c->pg, sql, 0, NULL, NULL, NULL, NULL, 0))
		return lost(tx, sql);
	note_sent(tx, sql, NULL);
	return STORE_OK;
}

/* A writer that waited (for the writers' turn, say) more than this before
 * its next statements gets only what is left of WRITE_WAIT_MS for their
 * lock waits (bound_waits). */
#define WAITED_MS 1000
#define WRITE_WAIT_MS 10000

/* Lowers the lock_timeout of tx's later statements to what is left of
 * WRITE_WAIT_MS since it began: a writer that waited its turn behind one
 * that waits for another process's lock must not then wait the whole
 * timeout again (every write waits at most the documented 10 s in all;
 * the statements sent with the turn's lock, in its first round trip,
 * keep the session's 10 s). Returns STORE_OK or STORE_ERR. */
static int bound_waits(struct pg_tx *tx)
{
	int64_t left = WRITE_WAIT_MS - (clock_mono_ms() - tx->begun_ms);
	char sql[64];

	tx->bounded = 1;
	snprintf(sql, sizeof sql, "SET LOCAL lock_timeout = %lld", (long long)(left > 1 ? left : 1));
	return send_plain(tx, sql);
}

static int send_stmt(struct pg_tx *tx, const char *sql, const struct store_val *params, int nparams);

/* Opens tx's pipeline segment if none is open, with the transaction's
 * BEGIN (and a writer's lock) when nothing was sent yet. Returns STORE_OK
 * or STORE_ERR. */
static int open_segment(struct pg_tx *tx)
{
	int rc = STORE_OK;

	if (PQpipelineStatus(tx->c->pg) == PQ_PIPELINE_OFF && !PQenterPipelineMode(tx->c->pg))
		return lost(tx, "pipeline");
	if (!tx->begun) {
		tx->begun = 1;
		tx->begun_ms = clock_mono_ms();
		if (tx->alone)
			return STORE_OK; /* an implicit transaction, ended by the sync */
		rc = send_plain(tx, tx->write ? "BEGIN" : begin_read);
		if (rc == STORE_OK && tx->write && !tx->own)
			rc = send_stmt(tx, write_lock, NULL, 0); /* prepared: not planned each time */
	} else if (tx->write && !tx->bounded && clock_mono_ms() - tx->begun_ms > WAITED_MS) {
		rc = bound_waits(tx);
	}
	return rc;
}

static int sync_read(struct pg_tx *tx, PGresult **last, int *fail_at);

/* Reads what tx's open segment holds when n more commands would not fit
 * in it (tx->sent). Returns STORE_OK or the first failure's status. */
static int make_room(struct pg_tx *tx, int n)
{
	int fail_at;

	return tx->queued + n > QUEUE_MAX ? sync_read(tx, NULL, &fail_at) : STORE_OK;
}

/* Sends sql with params into tx's open segment (open_segment first),
 * unless a statement of tx failed already or its connection is lost: its
 * Parse too when it is new to the connection (the slot remembers it at
 * once and forgets it in sync_read if the Parse failed). Returns STORE_OK
 * or a store status (tx is then failed). */
static int send_stmt(struct pg_tx *tx, const char *sql, const struct store_val *params, int nparams)
{
	uint64_t h = sql_hash(sql);
	struct pg_stmt *cs;
	char dealloc[32] = "";
	struct wire w;
	int rc;

	if (tx->failed) {
		log_msg(LOG_ERROR, "store_error",
			"a statement after a failed one in the same transaction: %.120s", sql);
		return STORE_ERR;
	}
	if (tx->c->broken)
		return STORE_ERR;
	/* The segment first: its BEGIN may send the writers' lock through
	 * here, which may claim (and deallocate) a slot of the cache. */
	if ((rc = make_room(tx, STMT_SENDS)) != STORE_OK || (rc = open_segment(tx)) != STORE_OK)
		return rc;
	cs = find_stmt(tx->c, sql, h);
	if (!cs && (rc = claim_slot(tx->c, sql, h, &cs, dealloc)) != STORE_OK)
		goto fail;
	if (cs->nslots > nparams) {
		log_msg(LOG_ERROR, "store_error", "placeholder $%d without a value in: %.120s",
			cs->nslots, sql);
		rc = STORE_ERR;
		goto fail;
	}
	if (dealloc[0]) {
		if (!PQsendQueryParams(tx->c->pg, dealloc, 0, NULL, NULL, NULL, NULL, 0))
			return lost(tx, dealloc);
		note_sent(tx, dealloc, NULL);
	}
	wire_fill(&w, params, cs->nslots);
	if (!cs->sql) {
		if (!PQsendPrepare(tx->c->pg, cs->name, sql, cs->nslots, w.types))
			return lost(tx, sql);
		note_sent(tx, sql, cs);
		cs->sql = strdup(sql); /* NULL: forgotten, prepared again next time */
	}
	if (!PQsendQueryPrepared(tx->c->pg, cs->name, cs->nslots, w.values, w.lengths, w.formats, 0))
		return lost(tx, sql);
	note_sent(tx, sql, NULL);
	return STORE_OK;
fail:
	tx->failed = 1;
	return rc;
}

/* Ends tx's open segment with a sync and reads its results in order,
 * forgetting each statement whose Parse failed. Returns the store status
 * of the first failure (STORE_OK when none; tx is then failed) with
 * *fail_at its index, and, when last is not NULL and nothing failed, the
 * last command's result in *last. */
static int sync_read(struct pg_tx *tx, PGresult **last, int *fail_at)
{
	PGconn *pg = tx->c->pg;
	int rc = STORE_OK, n = tx->queued, i;
	PGresult *r;

	*fail_at = -1;
	if (last)
		*last = NULL;
	if (!PQpipelineSync(pg))
		return lost(tx, "sync");
	tx->queued = 0;
	for (i = 0; i < n; i++) {
		ExecStatusType s;

		if (!(r = next_result(pg)))
			return lost(tx, tx->sent[i].what);
		s = PQresultStatus(r);
		if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
			forget_parse(&tx->sent[i]);
			if (rc == STORE_OK) {
				rc = map_error(tx->c, r, tx->sent[i].what);
				*fail_at = i;
			}
		}
		if (last && i == n - 1 && rc == STORE_OK)
			*last = r;
		else
			PQclear(r);
	}
	r = PQgetResult(pg); /* the sync */
	i = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
	PQclear(r);
	if (!i || !PQexitPipelineMode(pg)) {
		if (last) {
			PQclear(*last);
			*last = NULL;
		}
		return lost(tx, "sync");
	}
	if (rc != STORE_OK)
		tx->failed = 1;
	return rc;
}

/* Runs sql with params on tx's connection, in one round trip with what
 * the segment holds before it (BEGIN, the lock, a Parse, deferred
 * statements). Sets *res to its result, or returns the store status of a
 * failure before its execution (*res NULL); an execution failure is
 * returned as *exec_rc. Either failure leaves the transaction able only to
 * roll back (store.h). */
static int run(struct pg_tx *tx, const char *sql, const struct store_val *params, int nparams,
	       PGresult **res, int *exec_rc)
{
	int rc, fail_at, last;

	*res = NULL;
	*exec_rc = STORE_OK;
	if ((rc = send_stmt(tx, sql, params, nparams)) != STORE_OK)
		return rc;
	last = tx->queued - 1;
	rc = sync_read(tx, res, &fail_at);
	if (rc != STORE_OK && !tx->c->broken && fail_at == last) {
		*exec_rc = rc;
		return STORE_OK;
	}
	return rc;
}

static int pg_query(struct store_tx *gtx, const char *sql, const struct store_val *params,
		    int nparams, struct store_rows **out)
{
	struct pg_tx *tx = (struct pg_tx *)gtx;
	struct pg_rows *r;
	PGresult *res;
	int rc, exec_rc;

	*out = NULL;
	rc = run(tx, sql, params, nparams, &res, &exec_rc);
	if (rc != STORE_OK)
		return rc;
	r = calloc(1, sizeof *r);
	if (!r) {
		PQclear(res);
		return STORE_ERR;
	}
	r->base.be = &pgsql_backend;
	r->tx = tx;
	r->res = res;
	r->row = -1;
	r->nrows = res ? PQntuples(res) : 0;
	r->ncols = res ? PQnfields(res) : 0;
	r->status = exec_rc;
	*out = &r->base;
	return STORE_OK;
}

static void drop_bytea(struct pg_rows *r)
{
	int i;

	for (i = 0; r->bytea && i < r->ncols; i++) {
		free(r->bytea[i]);
		r->bytea[i] = NULL;
	}
}

static int pg_next(struct store_rows *gr)
{
	struct pg_rows *r = (struct pg_rows *)gr;

	if (r->status != STORE_OK)
		return r->status;
	drop_bytea(r);
	if (r->row + 1 >= r->nrows) {
		r->row = r->nrows;
		return 0;
	}
	r->row++;
	return 1;
}

/* A bytea column's value decoded from its text form and NUL-terminated
 * (as SQLite's blobs read as text are), kept until the next row; NULL when
 * it cannot be decoded. */
static const char *bytea_value(struct pg_rows *r, int col)
{
	unsigned char *raw;
	size_t n;

	if (!r->bytea) {
		r->bytea = calloc((size_t)r->ncols, sizeof *r->bytea);
		r->bytea_len = calloc((size_t)r->ncols, sizeof *r->bytea_len);
		if (!r->bytea || !r->bytea_len)
			return NULL;
	}
	if (r->bytea[col])
		return (const char *)r->bytea[col];
	raw = PQunescapeBytea((const unsigned char *)PQgetvalue(r->res, r->row, col), &n);
	if (!raw)
		return NULL;
	r->bytea[col] = malloc(n + 1);
	if (r->bytea[col]) {
		memcpy(r->bytea[col], raw, n);
		r->bytea[col][n] = '\0';
		r->bytea_len[col] = n;
	}
	PQfreemem(raw);
	return (const char *)r->bytea[col];
}

static int pg_is_null(struct store_rows *gr, int col)
{
	struct pg_rows *r = (struct pg_rows *)gr;

	return PQgetisnull(r->res, r->row, col);
}

static const char *pg_text(struct store_rows *gr, int col)
{
	struct pg_rows *r = (struct pg_rows *)gr;

	if (PQgetisnull(r->res, r->row, col))
		return NULL;
	if (PQftype(r->res, col) == OID_BYTEA)
		return bytea_value(r, col);
	return PQgetvalue(r->res, r->row, col);
}

static int64_t pg_int(struct store_rows *gr, int col)
{
	struct pg_rows *r = (struct pg_rows *)gr;
	const char *v = PQgetvalue(r->res, r->row, col);

	if (PQftype(r->res, col) == OID_BOOL)
		return v[0] == 't';
	return strtoll(v, NULL, 10);
}

static size_t pg_len(struct store_rows *gr, int col)
{
	struct pg_rows *r = (struct pg_rows *)gr;

	if (PQftype(r->res, col) == OID_BYTEA && !PQgetisnull(r->res, r->row, col))
		return bytea_value(r, col) ? r->bytea_len[col] : 0;
	return (size_t)PQgetlength(r->res, r->row, col);
}

static void pg_rows_close(struct store_rows *gr)
{
	struct pg_rows *r = (struct pg_rows *)gr;

	drop_bytea(r);
	free(r->bytea);
	free(r->bytea_len);
	PQclear(r->res);
	free(r);
}

static int pg_exec(struct store_tx *gtx, const char *sql, const struct store_val *params, int nparams)
{
	struct pg_tx *tx = (struct pg_tx *)gtx;
	PGresult *res;
	int rc, exec_rc;

	rc = run(tx, sql, params, nparams, &res, &exec_rc);
	if (rc != STORE_OK)
		return rc;
	if (exec_rc != STORE_OK)
		return exec_rc;
	rc = atoi(PQcmdTuples(res)); /* "" (0) for statements that change no rows */
	PQclear(res);
	return rc;
}

/* store_send: the statement goes into the open segment, read with the
 * transaction's next statement or its commit; a full segment is read
 * first (a sync of its own). */
static int pg_send(struct store_tx *gtx, const char *sql, const struct store_val *params, int nparams)
{
	return send_stmt((struct pg_tx *)gtx, sql, params, nparams);
}

static struct pg_conn *pool_get(struct pg_store *st)
{
	return &st->conns[store_pool_take(&st->pool)];
}

static void pool_put(struct pg_store *st, struct pg_conn *c)
{
	store_pool_give(&st->pool, (int)(c - st->conns));
}

/* Reads the answer to the ROLLBACK a reader sent without waiting
 * (end_read), before the connection's next use. */
static void finish_pending(struct pg_conn *c)
{
	PGresult *r;
	int ok;

	if (!c->pending)
		return;
	c->pending = 0;
	r = next_result(c->pg);
	ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	r = PQgetResult(c->pg); /* the sync */
	ok = ok && r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
	PQclear(r);
	if (!ok || !PQexitPipelineMode(c->pg)) {
		log_pg(LOG_WARN, "store_error", PQerrorMessage(c->pg), "ROLLBACK");
		c->broken = 1;
	}
}

/* Ends a reader that read: its ROLLBACK goes out without waiting for the
 * answer, which changes nothing a reader did (the server runs it at once,
 * so no transaction stays open); finish_pending reads it. Returns 0, or
 * -1 when it could not be sent (the caller ends it the usual way). */
static int end_read(struct pg_conn *c)
{
	if (!PQenterPipelineMode(c->pg))
		return -1;
	if (!PQsendQueryParams(c->pg, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0) ||
	    !PQpipelineSync(c->pg)) {
		c->broken = 1; /* half a pipeline: start the session again */
		return 0;
	}
	c->pending = 1;
	return 0;
}

static int pg_begin(struct store *gst, int mode, struct store_tx **out)
{
	struct pg_store *st = (struct pg_store *)gst;
	struct pg_tx *tx = calloc(1, sizeof *tx);
	int rc;

	*out = NULL;
	if (!tx)
		return STORE_ERR;
	tx->base.be = &pgsql_backend;
	tx->st = st;
	tx->c = pool_get(st);
	finish_pending(tx->c);
	if ((tx->c->broken || PQstatus(tx->c->pg) != CONNECTION_OK) &&
	    conn_connect(tx->c, st->url) < 0) {
		rc = STORE_ERR;
		goto fail;
	}
	tx->write = mode == STORE_WRITE || mode == STORE_WRITE_OWN; /* BEGIN: with the first */
	tx->own = mode == STORE_WRITE_OWN;
	tx->alone = mode == STORE_READ_ONE;
	*out = &tx->base;
	return STORE_OK;
fail:
	pool_put(st, tx->c);
	free(tx);
	return rc;
}

/* Sends COMMIT after what tx's open segment holds and reads it all.
 * Returns STORE_OK, or the status of the first failure (a deferred
 * statement's, or the COMMIT's; a COMMIT of a failed transaction answers
 * ROLLBACK and is STORE_ERR). */
static int send_commit(struct pg_tx *tx)
{
	PGresult *res = NULL;
	int rc, fail_at;

	/* room for the COMMIT and the lock_timeout open_segment may send */
	if ((rc = make_room(tx, 2)) != STORE_OK || (rc = open_segment(tx)) != STORE_OK ||
	    (rc = send_plain(tx, "COMMIT")) != STORE_OK)
		return rc;
	rc = sync_read(tx, &res, &fail_at);
	if (rc == STORE_OK && strcmp(PQcmdStatus(res), "COMMIT") != 0)
		rc = STORE_ERR;
	PQclear(res);
	return rc;
}

/* Ends tx (COMMIT, or ROLLBACK when commit is 0 or a statement failed)
 * and releases its connection; a transaction no statement began costs no
 * round trip. Committing a failed one returns STORE_ERR. */
static int end_tx(struct pg_tx *tx, int commit)
{
	int rc = commit && tx->failed ? STORE_ERR : STORE_OK, fail_at;

	if (!tx->begun)
		goto out;
	if (tx->c->broken) {
		rc = STORE_ERR;
		goto out;
	}
	if (tx->alone)
		goto out; /* its statement's sync ended it */
	if (!tx->write && !tx->failed && !tx->queued && end_read(tx->c) == 0)
		goto out; /* sent; its answer is read by the connection's next user */
	if (commit && !tx->failed && (rc = send_commit(tx)) == STORE_OK && tx->write)
		store_full_end();
	else if (tx->queued)
		(void)sync_read(tx, NULL, &fail_at);
	if (!tx->c->broken && PQtransactionStatus(tx->c->pg) != PQTRANS_IDLE)
		(void)simple(tx->c, "ROLLBACK");
	if (tx->c->broken)
		rc = STORE_ERR;
out:
	pool_put(tx->st, tx->c);
	free(tx);
	return rc;
}

static int pg_commit(struct store_tx *gtx)
{
	return end_tx((struct pg_tx *)gtx, 1);
}

static void pg_rollback(struct store_tx *gtx)
{
	(void)end_tx((struct pg_tx *)gtx, 0);
}

static void listen_stop(struct pg_store *st);

static void pg_close(struct store *gst)
{
	struct pg_store *st = (struct pg_store *)gst;
	int i;

	listen_stop(st);

	for (i = 0; st->conns && i < st->nconns; i++)
		conn_close(&st->conns[i]);
	free(st->conns);
	if (st->migrate_conn)
		PQfinish(st->migrate_conn);
	store_pool_destroy(&st->pool);
	store_hub_destroy(&st->base.hub);
	free(st->url);
	free(st);
}

int store_pgsql_open(const char *url, int pool_size, struct store **out)
{
	struct pg_store *st = calloc(1, sizeof *st);
	int i;

	*out = NULL;
	if (!st)
		return -1;
	st->base.be = &pgsql_backend;
	store_hub_init(&st->base.hub);
	st->url = strdup(url);
	st->nconns = pool_size < 1 ? 1 : pool_size;
	if (store_pool_init(&st->pool, st->nconns) < 0)
		goto fail;
	st->conns = calloc((size_t)st->nconns, sizeof *st->conns);
	if (!st->url || !st->conns)
		goto fail;
	for (i = 0; i < st->nconns; i++)
		if (conn_connect(&st->conns[i], url) < 0)
			goto fail;
	*out = &st->base;
	return 0;
fail:
	pg_close(&st->base);
	return -1;
}

/* PostgreSQL has no WAL for the server to checkpoint: nothing to do. */
static int pg_checkpoint(struct store *gst)
{
	(void)gst;
	return 0;
}

static void pg_background_checkpoints(struct store *gst)
{
	(void)gst;
}

static int pg_exec_script(struct store_tx *gtx, const char *sql, const char *name)
{
	struct pg_tx *tx = (struct pg_tx *)gtx;
	int fail_at, rc = tx->queued ? sync_read(tx, NULL, &fail_at) : STORE_OK;

	if (rc != STORE_OK)
		return rc;
	rc = tx->begun ? STORE_OK
		       : simple(tx->c,
				tx->write ? "BEGIN; SELECT pg_advisory_xact_lock(" WRITE_LOCK_KEY ")"
					  : begin_read);

	tx->begun = 1;
	if (rc == STORE_OK)
		rc = simple(tx->c, "SET LOCAL statement_timeout = 0");

	if (rc == STORE_OK)
		rc = simple(tx->c, sql);
	if (rc != STORE_OK) {
		log_msg(LOG_ERROR, "store_migrate", "%s failed", name);
		return STORE_ERR;
	}
	return STORE_OK;
}

/* Takes the migration lock on a connection of its own (outside the pool,
 * which the migrations themselves use), waiting up to 10 minutes for a
 * node that is migrating the same database; closing that connection
 * releases the lock. */
static int pg_lock_migrations(struct store *gst)
{
	struct pg_store *st = (struct pg_store *)gst;
	struct pg_conn c = {0};
	int rc;

	if (conn_connect(&c, st->url) < 0) {
		conn_close(&c);
		return -1;
	}
	rc = simple(&c, "SET lock_timeout = '600s'; SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")");
	if (rc != STORE_OK) {
		conn_close(&c);
		return -1;
	}
	st->migrate_conn = c.pg;
	return 0;
}

static void pg_unlock_migrations(struct store *gst)
{
	struct pg_store *st = (struct pg_store *)gst;

	if (st->migrate_conn)
		PQfinish(st->migrate_conn);
	st->migrate_conn = NULL;
}

/* ---------------------------------------------------- NOTIFY / LISTEN */

static const char *const channel_names[STORE_CHANNELS] = {"revops_outbox", "revops_deliveries",
							  "revops_properties"};

/* An own writer's lock goes out with its BEGIN when nothing was sent yet,
 * else now, in the pipeline like any statement. */
static int pg_turn(struct store_tx *gtx)
{
	struct pg_tx *tx = (struct pg_tx *)gtx;

	if (!tx->own)
		return STORE_OK;
	tx->own = 0;
	return tx->begun ? send_stmt(tx, write_lock, NULL, 0) : STORE_OK;
}

/* NOTIFY is transactional: sent when tx commits, dropped if it rolls back,
 * and sent once however often a transaction repeats it. */
/* One NOTIFY per channel and transaction: PostgreSQL folds repeats of a
 * notification into one anyway, and a feed batch appends 500 events. */
static int pg_notify(struct store_tx *gtx, enum store_channel ch)
{
	static const char *const sql[STORE_CHANNELS] = {
		"SELECT pg_notify('revops_outbox', '')",
		"SELECT pg_notify('revops_deliveries', '')",
		"SELECT pg_notify('revops_properties', '')",
	};
	struct pg_tx *tx = (struct pg_tx *)gtx;

	if (tx->notified & 1u << ch)
		return STORE_OK;
	tx->notified |= 1u << ch;
	return pg_send(gtx, sql[ch], NULL, 0);
}

/* A session of its own that LISTENs on every channel, or NULL. */
static PGconn *listen_connect(const char *url)
{
	PGconn *pg = PQconnectdb(url);
	PGresult *res;
	int ok = 0;

	if (pg && PQstatus(pg) == CONNECTION_OK) {
		res = PQexec(pg, "LISTEN revops_outbox; LISTEN revops_deliveries;"
				 " LISTEN revops_properties");
		ok = res && PQresultStatus(res) == PGRES_COMMAND_OK;
		PQclear(res);
	}
	if (!ok) {
		log_pg(LOG_WARN, "store_listen", pg ? PQerrorMessage(pg) : "out of memory", NULL);
		PQfinish(pg);
		return NULL;
	}
	return pg;
}

/* Raises the hub for the notifications pg has received. Returns 0, or -1
 * when the session is lost. */
static int listen_drain(struct pg_store *st, PGconn *pg)
{
	unsigned mask = 0;
	PGnotify *n;
	int i;

	if (!PQconsumeInput(pg))
		return -1;
	while ((n = PQnotifies(pg))) {
		for (i = 0; i < STORE_CHANNELS; i++)
			if (!strcmp(n->relname, channel_names[i]))
				mask |= 1u << i;
		PQfreemem(n);
	}
	if (mask)
		store_hub_raise(&st->base.hub, mask);
	return 0;
}

/* The listener thread: waits on its session (reconnecting every second
 * while the database is away, and raising every channel after, since
 * notifications sent meanwhile are lost) until listen_stop. */
static void *listen_main(void *arg)
{
	struct pg_store *st = arg;
	PGconn *pg = NULL;
	struct pollfd fds[2];

	for (;;) {
		if (!pg && (pg = listen_connect(st->url)))
			store_hub_raise(&st->base.hub, (1u << STORE_CHANNELS) - 1);
		fds[0] = (struct pollfd){.fd = st->listen_pipe[0], .events = POLLIN};
		fds[1] = (struct pollfd){.fd = pg ? PQsocket(pg) : -1, .events = POLLIN};
		if (poll(fds, 2, pg ? -1 : 1000) < 0 && errno != EINTR)
			break;
		if (fds[0].revents)
			break;
		if (pg && fds[1].revents && listen_drain(st, pg) < 0) {
			log_pg(LOG_WARN, "store_listen", PQerrorMessage(pg), NULL);
			PQfinish(pg);
			pg = NULL;
		}
	}
	PQfinish(pg);
	return NULL;
}

static int pg_listen(struct store *gst)
{
	struct pg_store *st = (struct pg_store *)gst;

	if (pipe(st->listen_pipe) < 0) {
		log_msg(LOG_ERROR, "store_listen", "pipe: %s", strerror(errno));
		return -1;
	}
	if (pthread_create(&st->listen_thr, NULL, listen_main, st) != 0) {
		close(st->listen_pipe[0]);
		close(st->listen_pipe[1]);
		log_msg(LOG_ERROR, "store_listen", "cannot start the listener thread");
		return -1;
	}
	st->listen_started = 1;
	return 0;
}

static void listen_stop(struct pg_store *st)
{
	if (!st->listen_started)
		return;
	if (write(st->listen_pipe[1], "x", 1) < 0)
		log_msg(LOG_WARN, "store_listen", "cannot stop the listener: %s", strerror(errno));
	pthread_join(st->listen_thr, NULL);
	close(st->listen_pipe[0]);
	close(st->listen_pipe[1]);
	st->listen_started = 0;
}

static const struct store_backend pgsql_backend = {
	.name = "postgres",
	.migrations = embedded_migrations_postgres,
	.begin = pg_begin,
	.commit = pg_commit,
	.rollback = pg_rollback,
	.exec = pg_exec,
	.send = pg_send,
	.query = pg_query,
	.next = pg_next,
	.text = pg_text,
	.integer = pg_int,
	.is_null = pg_is_null,
	.len = pg_len,
	.rows_close = pg_rows_close,
	.close = pg_close,
	.checkpoint = pg_checkpoint,
	.background_checkpoints = pg_background_checkpoints,
	.exec_script = pg_exec_script,
	.lock_migrations = pg_lock_migrations,
	.unlock_migrations = pg_unlock_migrations,
	.notify = pg_notify,
	.turn = pg_turn,
	.listen = pg_listen,
};
