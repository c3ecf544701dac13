/* store: the database behind revops, reached only through this interface.
 *
 * SQL given to store_exec/store_query is portable (it runs on SQLite >= 3.35
 * and PostgreSQL 15): $1..$N placeholders, INTEGER millisecond timestamps,
 * TEXT for JSON and dates, ON CONFLICT and RETURNING allowed. Anything
 * backend-specific lives in the backend file (store_sqlite.c; a
 * store_pgsql.c would implement this same header). Migrations are the one
 * exception: each backend keeps its own DDL in src/store/migrations/<backend>/.
 *
 * Threading: a store is shared by all threads; a transaction and its rows
 * belong to the thread that began it. */
#ifndef REVOPS_STORE_H
#define REVOPS_STORE_H
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"
#include "store/channel.h"

struct store;
struct store_tx;
struct store_rows;

enum store_status {
	STORE_OK = 0,
	STORE_ERR = -1,        /* anything unexpected; already logged */
	STORE_CONSTRAINT = -2, /* a UNIQUE / CHECK / FOREIGN KEY / trigger refusal */
	STORE_BUSY = -3,       /* lock not obtained within the busy timeout */
	STORE_FULL = -4,       /* no room to write: the database's disk is full */
};

enum store_kind { STORE_NULL, STORE_INT, STORE_TEXT, STORE_BLOB };

struct store_val {
	enum store_kind kind;
	int64_t i;
	const char *s; /* TEXT (NUL-terminated) or BLOB bytes; not copied */
	size_t n;      /* BLOB length */
};

static inline struct store_val sv_int(int64_t i)
{
	return (struct store_val){.kind = STORE_INT, .i = i};
}
/* NULL s binds SQL NULL. */
static inline struct store_val sv_text(const char *s)
{
	return (struct store_val){.kind = s ? STORE_TEXT : STORE_NULL, .s = s};
}
static inline struct store_val sv_null(void)
{
	return (struct store_val){.kind = STORE_NULL};
}
static inline struct store_val sv_blob(const void *p, size_t n)
{
	return (struct store_val){.kind = STORE_BLOB, .s = p, .n = n};
}

/* Opens url ("sqlite:PATH"), creating the file and its directory's database
 * if needed, and applies pending migrations. pool_size connections are
 * shared by all threads. Returns 0, or -1 with the reason logged. */
int store_open(const char *url, int pool_size, struct store **out) WUR;
/* Closes every connection (checkpointing the WAL). Transactions must be
 * finished first. */
void store_close(struct store *st);
/* 0 when the database answers a trivial query, else -1. */
int store_ping(struct store *st) WUR;
/* Server processes: stop checkpointing the WAL inside commits (where it
 * lands on a request's latency) and run store_checkpoint on a background
 * thread instead, once a second or as soon as the WAL passes ~16 MiB.
 * store_close stops the thread. */
void store_background_checkpoints(struct store *st);
/* Copies committed WAL frames into the database (without blocking anyone),
 * then holds this process's writers for the moment it takes to make the
 * next writer start the WAL from its beginning (bounded by a short wait
 * for old readers). Returns 0 or -1. */
int store_checkpoint(struct store *st);
/* The disk-full episode of this process's database: when a write first
 * found no room (ms since the epoch), 0 when there is room. A backend
 * starts it (STORE_FULL, logged once per episode, not per statement);
 * the next write that commits ends it (logged too). */
int64_t store_full_since(void);
/* A one-row write (the store_probe table) that ends a disk-full episode
 * once it commits: for the periodic check while one lasts, since a node
 * that /readyz reports unready may get no other writes. Returns a store
 * status. */
int store_probe_write(struct store *st) WUR;
/* The schema version after migrations. */
int store_schema_version(struct store *st);

/* The most $N placeholders one statement may have, on every backend. */
#define STORE_MAX_PARAMS 256

/* store_begin's modes. STORE_READ_ONE is a read of exactly one statement,
 * which needs no transaction around it: PostgreSQL runs it alone (no
 * BEGIN and ROLLBACK, so one round trip and one wake-up of the server); a
 * second statement in it returns STORE_ERR on every backend.
 * STORE_WRITE_OWN is a writer of rows that no other writer changes
 * meanwhile (work its process claimed, rows it creates) and that reads
 * nothing another writer's turn must order: it does not wait for the
 * writers' turn on PostgreSQL (row locks only, READ COMMITTED, so it runs
 * beside the other writers) until it takes it (store_turn); SQLite has one
 * writer, so there it is STORE_WRITE. */
enum store_mode { STORE_READ = 0, STORE_WRITE = 1, STORE_READ_ONE = 2, STORE_WRITE_OWN = 3 };

/* Begins a transaction of mode (enum store_mode): STORE_WRITE takes the
 * write lock at once (so two writers never deadlock on upgrade), the reads
 * see one consistent snapshot. Blocks while every pooled connection is in
 * use. */
int store_begin(struct store *st, int mode, struct store_tx **out) WUR;
/* Takes the writers' turn inside a STORE_WRITE_OWN transaction, from here
 * to its end: what it writes after this is ordered with every other
 * writer's as in STORE_WRITE (an outbox append needs it: events must
 * commit in the order of their numbers). It waits holding the row locks
 * of what tx wrote before; a STORE_WRITE writer never waits for rows an
 * own writer holds, bar a bug, and PostgreSQL would break such a circle
 * (STORE_BUSY). Nothing in the other modes, nor on SQLite (one writer).
 * Returns a store status. */
int store_turn(struct store_tx *tx) WUR;
/* Scopes: one piece of work (an API request) whose last write must commit
 * together with something its caller adds after it (the stored answer of
 * an Idempotency-Key). Inside a scope opened on this thread, the commit
 * of a write transaction is held: store_commit sends what is pending and
 * returns STORE_OK without committing. Until the scope closes, a read
 * begun on this thread runs inside the held write (it sees what the
 * scope wrote; its commit or rollback ends only the read), and a write
 * begun commits the held one first (so only the last write is held).
 * Work that must reach the database before it talks to the outside (a
 * PMS call) must not run inside a scope. */
void store_scope_open(struct store *st);
/* Closes this thread's scope and returns its held write transaction
 * (NULL when none was committed inside it): the caller adds its rows and
 * commits it, or rolls it back. */
struct store_tx *store_scope_close(void);
/* Runs fn(arg) on this thread once tx has committed, in the order given,
 * never when it rolls back: for what must not happen before the data is
 * visible (waking a thread that will read it), also when a scope holds
 * the commit. Returns arg, size bytes (not zeroed) that tx keeps for fn
 * and the caller fills now, or NULL (no memory). */
void *store_after_commit(struct store_tx *tx, void (*fn)(void *arg), size_t size) WUR;
/* Commits and releases the connection; the tx is gone either way. */
int store_commit(struct store_tx *tx) WUR;
/* Rolls back and releases the connection. NULL is ignored. */
void store_rollback(struct store_tx *tx);

/* A statement that fails (any negative status, also from store_next)
 * leaves its transaction able only to roll back, on every backend: a
 * later statement returns STORE_ERR without running, and store_commit
 * rolls back and returns STORE_ERR. (PostgreSQL aborts the transaction
 * there; undoing one statement alone would need a savepoint per
 * statement, a subtransaction that doubled the cost of every write.) */

/* Runs a statement that returns no rows. Returns the number of rows changed
 * (>= 0) or a negative enum store_status. */
int store_exec(struct store_tx *tx, const char *sql, const struct store_val *params, int nparams) WUR;
/* Runs a statement whose row count the caller does not need, maybe later:
 * PostgreSQL sends it with the transaction's next statement or its commit
 * in one round trip, so a writer's run of inserts costs one round trip,
 * not one each. Returns STORE_OK, or a negative status when it failed
 * already; a failure found later is returned by the transaction's next
 * statement (store_query, store_exec) or by store_commit / store_finish,
 * and leaves the transaction only to roll back, as any failure does. sql
 * and params are copied at once. */
int store_send(struct store_tx *tx, const char *sql, const struct store_val *params, int nparams) WUR;
/* Inserts nrows rows of ncols values each (vals row after row) with as few
 * statements as carry them, sent as store_send sends: head is the
 * statement before its VALUES ("INSERT INTO t (a, b)"), tail what follows
 * the rows ("" or " ON CONFLICT ... DO NOTHING"). A multi-row VALUES list
 * is written the same on every backend; one statement carries up to
 * STORE_ROWS rows and STORE_MAX_PARAMS values, so a run of inserts pays a
 * statement's fixed cost once per STORE_ROWS rows. Returns STORE_OK or a
 * negative store status. */
#define STORE_ROWS 16
/* How many rows of ncols values one such statement carries (0: none). */
size_t store_rows_per(int ncols);
int store_send_rows(struct store_tx *tx, const char *head, const char *tail, int ncols,
		    const struct store_val *vals, size_t nrows) WUR;
/* Inserts one row (ncols values) as store_send_rows would, but later: the
 * rows of consecutive calls are kept, by statement (head and tail), and
 * sent as multi-row statements when a statement's rows fill one (then all
 * kept rows are sent, statements in the order tx first gave each a row),
 * before any other statement of tx runs, and at commit. So a run of
 * inserts into a few tables costs one statement per STORE_ROWS rows of
 * each; rows reach each table in the order given, and no row is sent
 * before a row given earlier to a table begun earlier (a parent's rows,
 * given first, precede its children's). Values are copied. Returns
 * STORE_OK, or a negative status now (memory) or, as store_send, later. */
int store_send_row(struct store_tx *tx, const char *head, const char *tail, int ncols,
		   const struct store_val *vals) WUR;
/* Runs a query; *out iterates its rows and must be closed before the tx
 * ends. Returns 0 or a negative enum store_status. */
int store_query(struct store_tx *tx, const char *sql, const struct store_val *params, int nparams,
		struct store_rows **out) WUR;
/* Runs one multi-row insert as store_send_rows writes it (nrows rows, at
 * most store_rows_per(ncols)) and returns its rows, as store_query: for a
 * tail with RETURNING, so a run of inserts that must learn which rows went
 * in pays a round trip per statement, not per row. */
int store_query_rows(struct store_tx *tx, const char *head, const char *tail, int ncols,
		     const struct store_val *vals, size_t nrows, struct store_rows **out) WUR;
/* Advances to the next row: 1 = a row, 0 = no more rows, < 0 = error. */
int store_next(struct store_rows *rows) WUR;
/* Column accessors for the current row (0-based). Text is valid until the
 * next store_next/store_rows_close; NULL for SQL NULL. */
const char *store_text(struct store_rows *rows, int col);
int64_t store_int(struct store_rows *rows, int col);
int store_is_null(struct store_rows *rows, int col);
size_t store_len(struct store_rows *rows, int col);
void store_rows_close(struct store_rows *rows);

/* Ends tx by the outcome of its statements: commits when rc >= 0 (a row
 * count or STORE_OK), else rolls back and returns rc. Returns STORE_OK or
 * a negative store status; tx is gone either way. For the common "if a
 * statement failed or the commit failed" path, which must neither leave a
 * failed transaction open nor touch a committed one. */
int store_finish(struct store_tx *tx, int rc) WUR;

/* Convenience: runs a query expected to give at most one row whose first
 * column is an integer. Returns 1 and sets *out, 0 when there is no row, or
 * a negative enum store_status. */
int store_query_int(struct store_tx *tx, const char *sql, const struct store_val *params,
		    int nparams, int64_t *out) WUR;

/* A statement assembled in place: text and its placeholders' values. */
struct store_sql {
	char text[2048];
	size_t len;
	struct store_val v[STORE_MAX_PARAMS];
	int n;
	int overflow; /* text or values ran out: the statement must not run */
};
/* Appends text to q (printf-style); "$#" in fmt is replaced by the next
 * placeholder number and binds val (one "$#" at most per call). */
void store_sql_add(struct store_sql *q, const char *fmt, struct store_val val);
/* head, then n rows "(i, $p, $p+1, ...)" of ncols placeholders each
 * (numbered from first, row after row; i is the row's index, 0..n-1),
 * then tail, as one malloc'd string (NULL: no memory): a read of many
 * keys correlated on a VALUES list ("... FROM (VALUES " head, ") k"
 * tail), the same SQL on every backend. */
char *store_sql_values(const char *head, size_t n, int ncols, int first, const char *tail);
/* Runs one statement in a transaction of its own (mode: STORE_WRITE or
 * STORE_WRITE_OWN). Returns its row count (>= 0), or a negative status
 * (the statement's, or the commit's). */
int store_exec_alone(struct store *st, int mode, const char *sql, const struct store_val *params,
		     int nparams) WUR;
/* Appends " AND col IN ($i, ...)" binding vals[0..n); n 0 appends
 * " AND 1 = 0" (nothing matches an empty list). */
void store_sql_in(struct store_sql *q, const char *col, const char *const *vals, int n);
/* Appends " AND col = $i" binding value, unless value is NULL or "". */
void store_sql_eq(struct store_sql *q, const char *col, const char *value);

/* A page of a portfolio's list, keyset on id: select_from ("SELECT ...
 * FROM t") with "WHERE portfolio_id = $1 AND id > $2" (store_sql_page),
 * the caller's filters (store_sql_eq), then store_sql_page_end: the
 * property_id IN list when props is not NULL, "ORDER BY id LIMIT n". */
void store_sql_page(struct store_sql *q, const char *select_from, const char *portfolio_id,
		    const char *after);
/* Runs the page. Returns a store status (STORE_ERR when q overflowed). */
int store_sql_page_end(struct store_tx *tx, struct store_sql *q, const char *const *props,
		       int nprops, int limit, struct store_rows **rows) WUR;

/* Reads the row of sql (whose one parameter $1 is id) and, when its
 * column owner_col is owner, makes *out = fn(row). Returns 1, 0 (no such
 * row), 2 (the row is another owner's: *out NULL), or a negative status
 * (also when fn returned NULL). For "one resource of this portfolio". */
int store_get_owned(struct store_tx *tx, const char *sql, const char *id, int owner_col,
		    const char *owner, void *(*fn)(struct store_rows *r), void **out) WUR;

/* Wake-ups between the processes that share the database: a writer
 * announces with its commit that a channel has news, and every waiter on
 * the channel wakes. On PostgreSQL that is NOTIFY / LISTEN, so every node
 * (and revopsctl) reaches every other; on SQLite it stays inside the
 * process (one server per database file), so a waiter's timeout is what
 * catches another process's writes. */
/* The channels: store/channel.h. */
/* Announces news on ch once tx commits (nothing when it rolls back).
 * Returns 0 or a negative store status. */
int store_notify(struct store_tx *tx, enum store_channel ch) WUR;
/* How many notifications on ch this process has received so far: read it
 * before looking at the data, then wait for it to move. */
uint64_t store_notified(struct store *st, enum store_channel ch);
/* Waits until the count of ch differs from seen, at most timeout_ms;
 * returns the count then. */
uint64_t store_wait(struct store *st, enum store_channel ch, uint64_t seen, int timeout_ms);
/* Wakes this process's waiters on ch (as a notification would): for a
 * stopping thread. */
void store_kick(struct store *st, enum store_channel ch);
/* A count that moves whenever ch has news, from this process or any
 * other: store_notified where notifications reach every process
 * (PostgreSQL); on SQLite, where they cannot, STORE_CH_PROPERTIES's
 * announcements are also counted in the database file and read now (a
 * header field: no table read). Read it before reading the data a cache
 * keeps, keep it with the copy: the copy is current while the count has
 * not moved. Thread-safe. */
uint64_t store_changes(struct store *st, enum store_channel ch);
/* 1 when several server processes may share the database, and their
 * notifications reach one another (PostgreSQL); 0 when one server has it
 * to itself (SQLite). */
int store_shared(struct store *st);

/* Lists of integers, written the same on every backend: a statement whose
 * placeholders $1..$STORE_IDS are one list, spelled STORE_IDS_LIST (for
 * example "DELETE FROM t WHERE id IN " STORE_IDS_LIST), runs once per
 * STORE_IDS of the ids, the last group padded with its last id (a repeat
 * inside IN changes nothing). One statement text, so it is prepared once.
 * store_exec_ids returns the rows changed in all (>= 0) or a negative
 * store status; store_count_ids runs a query giving one integer per group
 * (a COUNT over disjoint groups) and sets *out to their sum. */
#define STORE_IDS 16
#define STORE_IDS_LIST "($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16)"
int store_exec_ids(struct store_tx *tx, const char *sql, const int64_t *ids, size_t n) WUR;
/* The group of the n ids starting at from as v[0..STORE_IDS), padded with
 * the last id: for a statement that has other values after the list. */
void store_ids_group(struct store_val *v, const int64_t *ids, size_t n, size_t from);
int store_count_ids(struct store_tx *tx, const char *sql, const int64_t *ids, size_t n,
		    int64_t *out) WUR;

#endif
