/* store: the store.h calls, each one indirect call into the backend the
 * store was opened with (store/backend.h), and what every backend shares,
 * written once over the store.h interface (a backend must not copy it). */
#include "store/store.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/embedded.h"
#include "core/log.h"
#include "store/backend.h"

/* ------------------------------------------------------------ scopes */

/* This thread's scope (store_scope_open): held is the write it keeps,
 * depth how many reads run inside held now. */
static _Thread_local struct {
	struct store *st;
	struct store_tx *held;
	int depth;
} scope;

void store_scope_open(struct store *st)
{
	scope.st = st;
	scope.held = NULL;
	scope.depth = 0;
}

struct store_tx *store_scope_close(void)
{
	struct store_tx *held = scope.held;

	if (scope.depth)
		log_msg(LOG_ERROR, "store_error", "a scope closed with %d reads still open",
			scope.depth);
	scope.st = NULL;
	scope.held = NULL;
	scope.depth = 0;
	return held;
}

/* ------------------------------------------------------ after commit */

/* What runs once a transaction committed (store_after_commit), newest
 * first; arg is held in the same allocation. */
struct store_after {
	struct store_after *next;
	void (*fn)(void *arg);
	max_align_t arg[];
};

void *store_after_commit(struct store_tx *tx, void (*fn)(void *arg), size_t size)
{
	struct store_after *a = malloc(sizeof *a + size);

	if (!a)
		return NULL;
	a->fn = fn;
	a->next = tx->after;
	tx->after = a;
	return a->arg;
}

/* Runs (when committed) and frees the list a, oldest first. */
static void after_run(struct store_after *a, int committed)
{
	struct store_after *next, *prev = NULL;

	for (; a; a = next) { /* reverse: oldest first */
		next = a->next;
		a->next = prev;
		prev = a;
	}
	for (a = prev; a; a = next) {
		next = a->next;
		if (committed)
			a->fn(a->arg);
		free(a);
	}
}

/* The backend's commit of tx (which it frees), then what was to run
 * after it. */
static int commit_now(struct store_tx *tx)
{
	struct store_after *a = tx->after;
	int rc = tx->be->commit(tx);

	after_run(a, rc == STORE_OK);
	return rc;
}

/* store_begin inside a scope that holds a write: a read runs inside it
 * (it sees what the scope wrote); a write ends the hold by committing
 * the held one (*out NULL, so the caller begins as usual). Returns a
 * store status. */
static int scope_begin(int mode, struct store_tx **out)
{
	struct store_tx *held = scope.held;

	*out = NULL;
	if (mode == STORE_READ || mode == STORE_READ_ONE) {
		scope.depth++;
		*out = held;
		return STORE_OK;
	}
	scope.held = NULL;
	return commit_now(held);
}

int store_begin(struct store *st, int mode, struct store_tx **out)
{
	int rc;

	if (scope.st == st && scope.held) {
		if ((rc = scope_begin(mode, out)) != STORE_OK || *out)
			return rc;
	}
	rc = st->be->begin(st, mode, out);
	if (rc == STORE_OK) {
		(*out)->one = mode == STORE_READ_ONE;
		(*out)->write = mode == STORE_WRITE || mode == STORE_WRITE_OWN;
		(*out)->defer = NULL;
		(*out)->after = NULL;
	}
	return rc;
}

static int may_run(struct store_tx *tx, const char *sql);

/* ------------------------------------------------------ deferred rows */

#define DEFER_STATEMENTS 4

/* The rows kept for one statement, values copied (text and blobs into
 * mem, which the values point into). */
struct defer_stmt {
	char *head, *tail;
	int ncols;
	size_t nrows, per; /* rows kept, rows one statement carries */
	struct store_val v[STORE_MAX_PARAMS];
	char *mem[STORE_MAX_PARAMS];
};

struct store_defer {
	int n;
	struct defer_stmt s[DEFER_STATEMENTS];
};

/* Frees the copies of d's kept rows; the statement stays. */
static void defer_drop_rows(struct defer_stmt *d)
{
	for (size_t i = 0; i < d->nrows * (size_t)d->ncols; i++) {
		free(d->mem[i]);
		d->mem[i] = NULL;
	}
	d->nrows = 0;
}

static void defer_free(struct store_tx *tx)
{
	if (!tx->defer)
		return;
	for (int i = 0; i < tx->defer->n; i++) {
		defer_drop_rows(&tx->defer->s[i]);
		free(tx->defer->s[i].head);
		free(tx->defer->s[i].tail);
	}
	free(tx->defer);
	tx->defer = NULL;
}

static int send_rows_now(struct store_tx *tx, const char *head, const char *tail, int ncols,
			 const struct store_val *vals, size_t nrows);

/* Sends every kept row, statement after statement in the order they were
 * begun in tx, which stays (so a parent table's rows always go before
 * its children's, however the statements fill). On a failure nothing
 * more is kept. */
static int flush(struct store_tx *tx)
{
	struct store_defer *d = tx->defer;
	int rc = STORE_OK;

	for (int i = 0; d && i < d->n; i++) {
		if (rc == STORE_OK && d->s[i].nrows)
			rc = send_rows_now(tx, d->s[i].head, d->s[i].tail, d->s[i].ncols, d->s[i].v,
					   d->s[i].nrows);
		defer_drop_rows(&d->s[i]);
	}
	if (rc != STORE_OK)
		defer_free(tx);
	return rc;
}

/* The kept statement of head and tail, begun if need be (after sending
 * and forgetting those kept when DEFER_STATEMENTS are). NULL: no memory
 * (or *rc, a failed send). */
static struct defer_stmt *defer_for(struct store_tx *tx, const char *head, const char *tail,
				    int ncols, int *rc)
{
	struct defer_stmt *d;
	int i;

	*rc = STORE_OK;
	if (!tx->defer && !(tx->defer = calloc(1, sizeof *tx->defer)))
		return NULL;
	for (i = 0; i < tx->defer->n; i++) {
		d = &tx->defer->s[i];
		if (d->ncols == ncols && !strcmp(d->head, head) && !strcmp(d->tail, tail))
			return d;
	}
	if (tx->defer->n == DEFER_STATEMENTS) {
		if ((*rc = flush(tx)) != STORE_OK)
			return NULL;
		defer_free(tx);
		return defer_for(tx, head, tail, ncols, rc);
	}
	d = &tx->defer->s[tx->defer->n];
	memset(d, 0, sizeof *d);
	d->head = strdup(head);
	d->tail = strdup(tail);
	if (!d->head || !d->tail) {
		free(d->head);
		free(d->tail);
		memset(d, 0, sizeof *d);
		return NULL;
	}
	d->ncols = ncols;
	d->per = store_rows_per(ncols);
	tx->defer->n++;
	return d;
}

int store_send_row(struct store_tx *tx, const char *head, const char *tail, int ncols,
		   const struct store_val *vals)
{
	struct defer_stmt *d;
	size_t at;
	int rc;

	if (ncols < 1 || ncols > STORE_MAX_PARAMS || may_run(tx, head))
		return STORE_ERR;
	if (!(d = defer_for(tx, head, tail, ncols, &rc)))
		return rc != STORE_OK ? rc : STORE_ERR;
	at = d->nrows * (size_t)ncols;
	for (int c = 0; c < ncols; c++) {
		struct store_val v = vals[c];

		if (v.kind == STORE_TEXT || v.kind == STORE_BLOB) {
			size_t n = v.kind == STORE_TEXT ? strlen(v.s) + 1 : v.n;

			if (!(d->mem[at + c] = malloc(n ? n : 1))) {
				for (int k = 0; k < c; k++)
					free(d->mem[at + k]);
				return STORE_ERR;
			}
			memcpy(d->mem[at + c], v.s, n);
			v.s = d->mem[at + c];
		}
		d->v[at + c] = v;
	}
	if (++d->nrows == d->per)
		return flush(tx);
	return STORE_OK;
}

/* 0 when tx may run another statement, else STORE_ERR (logged): a
 * STORE_READ_ONE transaction ran one already. */
static int may_run(struct store_tx *tx, const char *sql)
{
	if (tx->one && tx->runs++ > 0) {
		log_msg(LOG_ERROR, "store_error",
			"a second statement in a one-statement read: %.120s", sql);
		return STORE_ERR;
	}
	return 0;
}

/* 1 when ending tx is a read inside the scope's held write (which goes
 * on), counted off. */
static int scope_inner_end(struct store_tx *tx)
{
	if (!scope.held || tx != scope.held || !scope.depth)
		return 0;
	scope.depth--;
	return 1;
}

int store_commit(struct store_tx *tx)
{
	int rc;

	if (scope_inner_end(tx))
		return STORE_OK;
	rc = flush(tx);
	defer_free(tx);
	if (rc != STORE_OK) {
		store_rollback(tx);
		return rc;
	}
	if (scope.st && tx->write && !scope.held) {
		scope.held = tx; /* the scope's closer commits it */
		return STORE_OK;
	}
	return commit_now(tx);
}

void store_rollback(struct store_tx *tx)
{
	if (!tx || scope_inner_end(tx))
		return;
	defer_free(tx);
	after_run(tx->after, 0);
	tx->after = NULL;
	tx->be->rollback(tx);
}

int store_exec(struct store_tx *tx, const char *sql, const struct store_val *params, int nparams)
{
	int rc = flush(tx);

	if (rc != STORE_OK)
		return rc;
	return may_run(tx, sql) ? STORE_ERR : tx->be->exec(tx, sql, params, nparams);
}

/* store_send without sending the kept rows first. */
static int send_now(struct store_tx *tx, const char *sql, const struct store_val *params, int nparams)
{
	int rc;

	if (may_run(tx, sql))
		return STORE_ERR;
	if (tx->be->send)
		return tx->be->send(tx, sql, params, nparams);
	rc = tx->be->exec(tx, sql, params, nparams);
	return rc < 0 ? rc : STORE_OK;
}

int store_send(struct store_tx *tx, const char *sql, const struct store_val *params, int nparams)
{
	int rc = flush(tx);

	return rc != STORE_OK ? rc : send_now(tx, sql, params, nparams);
}

/* Appends "$p" to b. 0 or -1 (no memory). */
static int put_param(struct buf *b, int p)
{
	return buf_putc(b, '$') == 0 && buf_put_int(b, p) == 0 ? 0 : -1;
}

/* head, then mid, then n rows "(i, $p, $p+1, ...)" of ncols placeholders
 * each, numbered from first (i, the row's index, only when indexed), then
 * tail, as one malloc'd string, or NULL (no memory). */
static char *values_sql(const char *head, const char *mid, size_t n, int ncols, int first,
			int indexed, const char *tail)
{
	struct buf b;
	int p = first, ok;

	buf_init(&b, 0);
	ok = buf_puts(&b, head) == 0 && buf_puts(&b, mid) == 0;
	for (size_t r = 0; ok && r < n; r++) {
		ok = buf_puts(&b, r ? ", (" : "(") == 0 &&
		     (!indexed || buf_put_int(&b, (int64_t)r) == 0);
		for (int c = 0; ok && c < ncols; c++)
			ok = ((!c && !indexed) || buf_puts(&b, ", ") == 0) && put_param(&b, p++) == 0;
		ok = ok && buf_putc(&b, ')') == 0;
	}
	if (!ok || buf_puts(&b, tail) < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

/* "head VALUES ($1, $2), ($3, $4)tail" for nrows rows of ncols, or NULL
 * (no memory). */
static char *rows_sql(const char *head, const char *tail, int ncols, size_t nrows)
{
	return values_sql(head, " VALUES ", nrows, ncols, 1, 0, tail);
}

int store_send_rows(struct store_tx *tx, const char *head, const char *tail, int ncols,
		    const struct store_val *vals, size_t nrows)
{
	int rc = flush(tx);

	return rc != STORE_OK ? rc : send_rows_now(tx, head, tail, ncols, vals, nrows);
}

size_t store_rows_per(int ncols)
{
	size_t per = ncols < 1 ? 0 : (size_t)(STORE_MAX_PARAMS / ncols);

	return per > STORE_ROWS ? STORE_ROWS : per;
}

static int send_rows_now(struct store_tx *tx, const char *head, const char *tail, int ncols,
			 const struct store_val *vals, size_t nrows)
{
	size_t per = store_rows_per(ncols), k;
	int rc = STORE_OK;
	char *sql;

	if (!per) {
		log_msg(LOG_ERROR, "store_error", "%d values in a row of: %.120s", ncols, head);
		return STORE_ERR;
	}
	for (size_t from = 0; rc == STORE_OK && from < nrows; from += k) {
		k = nrows - from < per ? nrows - from : per;
		if (!(sql = rows_sql(head, tail, ncols, k)))
			return STORE_ERR;
		rc = send_now(tx, sql, vals + from * (size_t)ncols, (int)k * ncols);
		free(sql);
	}
	return rc;
}

int store_query(struct store_tx *tx, const char *sql, const struct store_val *params, int nparams,
		struct store_rows **out)
{
	int rc = flush(tx);

	if (rc == STORE_OK && may_run(tx, sql))
		rc = STORE_ERR;
	if (rc != STORE_OK) {
		*out = NULL;
		return rc;
	}
	return tx->be->query(tx, sql, params, nparams, out);
}

int store_query_rows(struct store_tx *tx, const char *head, const char *tail, int ncols,
		     const struct store_val *vals, size_t nrows, struct store_rows **out)
{
	char *sql;
	int rc;

	*out = NULL;
	if (!nrows || nrows > store_rows_per(ncols))
		return STORE_ERR;
	if (!(sql = rows_sql(head, tail, ncols, nrows)))
		return STORE_ERR;
	rc = store_query(tx, sql, vals, (int)nrows * ncols, out);
	free(sql);
	return rc;
}

int store_next(struct store_rows *r)
{
	return r->be->next(r);
}

const char *store_text(struct store_rows *r, int col)
{
	return r->be->text(r, col);
}

int64_t store_int(struct store_rows *r, int col)
{
	return r->be->integer(r, col);
}

int store_is_null(struct store_rows *r, int col)
{
	return r->be->is_null(r, col);
}

size_t store_len(struct store_rows *r, int col)
{
	return r->be->len(r, col);
}

void store_rows_close(struct store_rows *r)
{
	if (r)
		r->be->rows_close(r);
}

void store_close(struct store *st)
{
	if (st)
		st->be->close(st);
}

int store_checkpoint(struct store *st)
{
	return st->be->checkpoint(st);
}

void store_background_checkpoints(struct store *st)
{
	st->be->background_checkpoints(st);
}

int store_exec_script(struct store_tx *tx, const char *sql, const char *name)
{
	int rc = flush(tx);

	return rc != STORE_OK ? rc : tx->be->exec_script(tx, sql, name);
}

int store_turn(struct store_tx *tx)
{
	return tx->be->turn ? tx->be->turn(tx) : STORE_OK;
}

int store_notify(struct store_tx *tx, enum store_channel ch)
{
	return tx->be->notify(tx, ch);
}

/* Starts the backend's listener the first time this process looks. */
static void listen_once(struct store *st)
{
	int start;

	pthread_mutex_lock(&st->hub.mu);
	start = !st->hub.listening;
	st->hub.listening = 1;
	pthread_mutex_unlock(&st->hub.mu);
	if (start && st->be->listen && st->be->listen(st) < 0)
		log_msg(LOG_WARN, "store_listen",
			"not listening for other nodes' notifications; waits run to their timeout");
}

uint64_t store_notified(struct store *st, enum store_channel ch)
{
	uint64_t n;

	listen_once(st);
	pthread_mutex_lock(&st->hub.mu);
	n = st->hub.count[ch];
	pthread_mutex_unlock(&st->hub.mu);
	return n;
}

uint64_t store_wait(struct store *st, enum store_channel ch, uint64_t seen, int timeout_ms)
{
	struct timespec ts;
	uint64_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&st->hub.mu);
	while (st->hub.count[ch] == seen)
		if (pthread_cond_timedwait(&st->hub.cond, &st->hub.mu, &ts) != 0)
			break;
	n = st->hub.count[ch];
	pthread_mutex_unlock(&st->hub.mu);
	return n;
}

void store_kick(struct store *st, enum store_channel ch)
{
	store_hub_raise(&st->hub, 1u << ch);
}

uint64_t store_changes(struct store *st, enum store_channel ch)
{
	uint64_t n = store_notified(st, ch);

	/* A sum of two counts that only grow moves when either does. */
	return st->be->changes ? n + st->be->changes(st, ch) : n;
}

int store_shared(struct store *st)
{
	return st->be->listen != NULL;
}

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

void store_sql_add(struct store_sql *q, const char *fmt, struct store_val val)
{
	const char *mark = strstr(fmt, "$#");
	int w;

	if (q->overflow)
		return;
	if (mark && q->n >= STORE_MAX_PARAMS) {
		q->overflow = 1;
		return;
	}
	if (mark) {
		q->v[q->n++] = val;
		w = snprintf(q->text + q->len, sizeof q->text - q->len, "%.*s$%d%s",
			     (int)(mark - fmt), fmt, q->n, mark + 2);
	} else {
		w = snprintf(q->text + q->len, sizeof q->text - q->len, "%s", fmt);
	}
	if (w < 0 || (size_t)w >= sizeof q->text - q->len) {
		q->overflow = 1;
		return;
	}
	q->len += (size_t)w;
}

void store_sql_in(struct store_sql *q, const char *col, const char *const *vals, int n)
{
	int i;

	if (!n) {
		store_sql_add(q, " AND 1 = 0", sv_null());
		return;
	}
	store_sql_add(q, " AND ", sv_null());
	store_sql_add(q, col, sv_null());
	for (i = 0; i < n; i++)
		store_sql_add(q, i ? ", $#" : " IN ($#", sv_text(vals[i]));
	store_sql_add(q, ")", sv_null());
}

char *store_sql_values(const char *head, size_t n, int ncols, int first, const char *tail)
{
	return values_sql(head, "", n, ncols, first, 1, tail);
}

void store_sql_eq(struct store_sql *q, const char *col, const char *value)
{
	if (!value || !*value)
		return;
	store_sql_add(q, " AND ", sv_null());
	store_sql_add(q, col, sv_null());
	store_sql_add(q, " = $#", sv_text(value));
}

void store_sql_page(struct store_sql *q, const char *select_from, const char *pf, const char *after)
{
	store_sql_add(q, select_from, sv_null());
	store_sql_add(q, " WHERE portfolio_id = $#", sv_text(pf));
	store_sql_add(q, " AND id > $#", sv_text(after));
}

int store_sql_page_end(struct store_tx *tx, struct store_sql *q, const char *const *props,
		       int nprops, int limit, struct store_rows **rows)
{
	if (props)
		store_sql_in(q, "property_id", props, nprops);
	store_sql_add(q, " ORDER BY id LIMIT $#", sv_int(limit));
	if (q->overflow)
		return STORE_ERR;
	return store_query(tx, q->text, q->v, q->n, rows);
}

int store_get_owned(struct store_tx *tx, const char *sql, const char *id, int owner_col,
		    const char *owner, void *(*fn)(struct store_rows *r), void **out)
{
	struct store_rows *r;
	int rc, other = 0;

	*out = NULL;
	rc = store_query(tx, sql, (struct store_val[]){sv_text(id)}, 1, &r);
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1) {
		other = strcmp(store_text(r, owner_col), owner) != 0;
		if (!other)
			*out = fn(r);
	}
	store_rows_close(r);
	if (rc <= 0)
		return rc;
	return other ? 2 : (*out ? 1 : STORE_ERR);
}

void store_ids_group(struct store_val *v, const int64_t *ids, size_t n, size_t from)
{
	for (size_t i = 0; i < STORE_IDS; i++)
		v[i] = sv_int(ids[from + i < n ? from + i : n - 1]);
}

int store_exec_ids(struct store_tx *tx, const char *sql, const int64_t *ids, size_t n)
{
	struct store_val v[STORE_IDS];
	int rc, total = 0;

	for (size_t from = 0; from < n; from += STORE_IDS) {
		store_ids_group(v, ids, n, from);
		if ((rc = store_exec(tx, sql, v, STORE_IDS)) < 0)
			return rc;
		total += rc;
	}
	return total;
}

int store_count_ids(struct store_tx *tx, const char *sql, const int64_t *ids, size_t n, int64_t *out)
{
	struct store_val v[STORE_IDS];
	int64_t one;
	int rc;

	*out = 0;
	for (size_t from = 0; from < n; from += STORE_IDS) {
		store_ids_group(v, ids, n, from);
		one = 0;
		if ((rc = store_query_int(tx, sql, v, STORE_IDS, &one)) < 0)
			return rc;
		*out += one;
	}
	return STORE_OK;
}

/* The highest migration recorded in tx's database (0 for none). */
static int recorded_version(struct store_tx *tx, int64_t *have)
{
	int rc = store_exec_script(tx,
				   "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER"
				   " PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
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
static int migrate_list(struct store *st, const struct embedded_migration *list)
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

/* Applies the backend's pending migrations while holding every other
 * process that migrates the same database off (PostgreSQL: two nodes
 * starting at once; the second waits, then finds nothing to apply). */
static int migrate(struct store *st)
{
	const struct store_backend *be = st->be;
	int rc;

	if (be->lock_migrations && be->lock_migrations(st) < 0)
		return STORE_ERR;
	rc = migrate_list(st, be->migrations);
	if (be->unlock_migrations)
		be->unlock_migrations(st);
	return rc;
}

/* Opens the backend url names: "sqlite:PATH", or a libpq URI starting
 * "postgres://" or "postgresql://". Returns 0 or -1 (logged). */
static int open_backend(const char *url, int pool_size, struct store **out)
{
	if (strncmp(url, "sqlite:", 7) == 0)
		return store_sqlite_open(url + 7, pool_size, out);
	if (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0)
		return store_pgsql_open(url, pool_size, out);
	log_msg(LOG_ERROR, "store_open", "unsupported database URL (sqlite:PATH or postgres://...)");
	return -1;
}

int store_open(const char *url, int pool_size, struct store **out)
{
	*out = NULL;
	if (open_backend(url, pool_size, out) < 0) {
		*out = NULL;
		return -1;
	}
	if (migrate(*out) != STORE_OK) {
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

/* ------------------------------------------------------------ disk full */

int store_exec_alone(struct store *st, int mode, const char *sql, const struct store_val *params,
		     int nparams)
{
	struct store_tx *tx;
	int rc = store_begin(st, mode, &tx), done;

	if (rc != STORE_OK)
		return rc;
	rc = store_exec(tx, sql, params, nparams);
	done = store_finish(tx, rc);
	return done != STORE_OK ? done : rc;
}

int store_probe_write(struct store *st)
{
	int rc = store_exec_alone(st, STORE_WRITE,
				  "INSERT INTO store_probe (id, at) VALUES (1, $1) ON CONFLICT (id) DO"
				  " UPDATE SET at = excluded.at",
				  (struct store_val[]){sv_int(clock_now_ms())}, 1);

	return rc < 0 ? rc : STORE_OK;
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
