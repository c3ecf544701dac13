#include "sched/timers.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "store/store.h"

int timer_set(struct store_tx *tx, const char *kind, const char *subject_id, int64_t episode,
	      int64_t step, const char *pf, int64_t due_at)
{
	char id[ID_MAX];
	int rc;

	if (strlen(kind) >= TIMER_KIND_MAX || id_new("tmr_", id, sizeof id) < 0)
		return STORE_ERR;
	rc = store_send(tx,
			"INSERT INTO timers (id, kind, subject_id, episode, step, portfolio_id, due_at,"
			" state, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8)"
			" ON CONFLICT (kind, subject_id, episode, step) DO NOTHING",
			(struct store_val[]){sv_text(id), sv_text(kind), sv_text(subject_id),
					     sv_int(episode), sv_int(step), sv_text(pf),
					     sv_int(due_at), sv_int(clock_now_ms())},
			8);
	return rc < 0 ? rc : 0;
}

int timer_cancel(struct store_tx *tx, const char *kind, const char *subject_id)
{
	return store_exec(tx,
			  "UPDATE timers SET state = 'cancelled' WHERE kind = $1 AND subject_id = $2"
			  " AND state = 'pending'",
			  (struct store_val[]){sv_text(kind), sv_text(subject_id)}, 2);
}

/* ------------------------------------------------------------- firing */

/* The timers due at now, oldest first, at most max (<= SCHED_BATCH), into
 * t. Returns how many, or a negative store status. */
static int read_due(struct store *st, int64_t now, int max, struct timer *t)
{
	struct store_tx *tx;
	struct store_rows *r;
	int rc = store_begin(st, STORE_READ_ONE, &tx), n = 0;

	if (rc != STORE_OK)
		return rc;
	rc = store_query(tx,
			 "SELECT id, kind, subject_id, episode, step, portfolio_id, due_at FROM timers"
			 " WHERE state = 'pending' AND due_at <= $1 ORDER BY due_at LIMIT $2",
			 (struct store_val[]){sv_int(now), sv_int(max)}, 2, &r);
	if (rc != STORE_OK)
		goto out;
	while (n < max && (rc = store_next(r)) == 1) {
		snprintf(t[n].id, sizeof t[n].id, "%s", store_text(r, 0));
		snprintf(t[n].kind, sizeof t[n].kind, "%s", store_text(r, 1));
		snprintf(t[n].subject_id, sizeof t[n].subject_id, "%s", store_text(r, 2));
		t[n].episode = store_int(r, 3);
		t[n].step = store_int(r, 4);
		snprintf(t[n].portfolio_id, sizeof t[n].portfolio_id, "%s", store_text(r, 5));
		t[n].due_at = store_int(r, 6);
		n++;
	}
	store_rows_close(r);
out:
	store_rollback(tx);
	return rc < 0 ? rc : n;
}

static const struct timer_kind *kind_of(const struct timer_kind *kinds, size_t n, const char *k)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(kinds[i].kind, k))
			return &kinds[i];
	return NULL;
}

/* Marks t fired and runs its handler inside tx. Returns 1 (fired), 0
 * (fired already, or cancelled: another worker or the episode's end came
 * first) or < 0. */
static int fire_one(struct store_tx *tx, const struct timer_kind *k, const struct timer *t,
		    int64_t now)
{
	int rc = store_exec(tx,
			    "UPDATE timers SET state = 'fired', fired_at = $2 WHERE id = $1 AND"
			    " state = 'pending'",
			    (struct store_val[]){sv_text(t->id), sv_int(now)}, 2);

	if (rc <= 0)
		return rc;
	rc = k->fn(tx, t, now, k->arg);
	return rc < 0 ? rc : 1;
}

/* Fires t[0..n) in one transaction, setting fired[i] for each that
 * fired (a timer of a kind this build does not know stays pending, and
 * is logged). Returns how many fired, or < 0 (then none did). */
static int fire_batch(struct store *st, const struct timer_kind *kinds, size_t nkinds,
		      const struct timer *t, int n, int64_t now, char *fired)
{
	const struct timer_kind *k;
	struct store_tx *tx;
	int rc = store_begin(st, STORE_WRITE, &tx), count = 0;

	memset(fired, 0, (size_t)n);
	if (rc != STORE_OK)
		return rc;
	for (int i = 0; rc >= 0 && i < n; i++) {
		if (!(k = kind_of(kinds, nkinds, t[i].kind))) {
			log_msg(LOG_WARN, "scheduler",
				"timer %s has an unknown kind %s; left pending", t[i].id, t[i].kind);
			continue;
		}
		if ((rc = fire_one(tx, k, &t[i], now)) > 0) {
			fired[i] = 1;
			count++;
		}
	}
	rc = store_finish(tx, rc);
	if (rc < 0)
		memset(fired, 0, (size_t)n);
	return rc < 0 ? rc : count;
}

/* Puts t off by SCHED_RETRY_MS after its handler failed alone. */
static void put_off(struct store *st, const struct timer *t, int64_t now)
{
	struct store_tx *tx;
	int rc = store_begin(st, STORE_WRITE, &tx);

	if (rc == STORE_OK)
		rc = store_finish(tx, store_exec(tx,
						 "UPDATE timers SET due_at = $2 WHERE id = $1 AND"
						 " state = 'pending'",
						 (struct store_val[]){sv_text(t->id),
								      sv_int(now + SCHED_RETRY_MS)},
						 2));
	log_msg(LOG_WARN, "scheduler", "timer %s (%s of %s, step %lld) failed%s; tried again in %d s",
		t->id, t->kind, t->subject_id, (long long)t->step,
		rc < 0 ? ", and could not be put off" : "", SCHED_RETRY_MS / 1000);
}

/* Reads the timers due at now (at most max, <= SCHED_BATCH) into t and
 * fires them together; when that fails, each alone, so the others fire
 * and a failing one waits (put_off). Sets *n and fired[i]. Returns how
 * many fired, or a negative store status from the read. */
static int fire_due(struct store *st, const struct timer_kind *kinds, size_t nkinds, int64_t now,
		    int max, struct timer *t, int *n, char *fired)
{
	int rc, count = 0;

	if ((*n = read_due(st, now, max, t)) <= 0)
		return *n;
	if ((rc = fire_batch(st, kinds, nkinds, t, *n, now, fired)) >= 0)
		return rc;
	for (int i = 0; i < *n; i++) {
		if (!kind_of(kinds, nkinds, t[i].kind))
			continue;
		if ((rc = fire_batch(st, kinds, nkinds, &t[i], 1, now, &fired[i])) < 0)
			put_off(st, &t[i], now);
		else
			count += rc;
	}
	return count;
}

/* ---------------------------------------------------------- the thread */

static const double lag_bounds[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
#define NLAG (sizeof lag_bounds / sizeof lag_bounds[0])

struct sched {
	struct store *st;
	const struct timer_kind *kinds;
	size_t nkinds;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	atomic_uint_fast64_t fired, lag_ms_sum;
	atomic_uint_fast64_t lag[NLAG + 1]; /* non-cumulative; [NLAG] is +Inf */
};

/* Counts a fired timer's lag. */
static void count_lag(struct sched *s, int64_t lag_ms)
{
	size_t i = 0;

	lag_ms = lag_ms < 0 ? 0 : lag_ms;
	while (i < NLAG && (double)lag_ms / 1000.0 > lag_bounds[i])
		i++;
	atomic_fetch_add(&s->lag[i], 1);
	atomic_fetch_add(&s->lag_ms_sum, (uint_fast64_t)lag_ms);
	atomic_fetch_add(&s->fired, 1);
}

/* One round: fires what is due, batch after batch, until none is left or
 * the scheduler is stopping, counting each fired timer's lag. */
static void round_of(struct sched *s)
{
	struct timer t[SCHED_BATCH];
	char fired[SCHED_BATCH];
	int64_t now;
	int n;

	do {
		now = clock_now_ms();
		if (fire_due(s->st, s->kinds, s->nkinds, now, SCHED_BATCH, t, &n, fired) < 0)
			return;
		for (int i = 0; i < n; i++)
			if (fired[i])
				count_lag(s, now - t[i].due_at);
	} while (n == SCHED_BATCH && !s->stop);
}

static void *run(void *arg)
{
	struct sched *s = arg;
	struct timespec until;

	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		pthread_mutex_unlock(&s->mu);
		round_of(s);
		pthread_mutex_lock(&s->mu);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += SCHED_POLL_MS * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int sched_start(struct store *st, const struct timer_kind *kinds, size_t nkinds, struct sched **out)
{
	struct sched *s = calloc(1, sizeof *s);

	*out = NULL;
	if (!s)
		return -1;
	s->st = st;
	s->kinds = kinds;
	s->nkinds = nkinds;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->thread, NULL, run, s) != 0) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		free(s);
		return -1;
	}
	*out = s;
	return 0;
}

void sched_stop(struct sched *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

int sched_metrics(struct sched *s, struct buf *out)
{
	uint64_t cum = 0;
	int rc = buf_printf(out,
			    "# HELP revops_scheduler_timers_fired_total Timers this node fired.\n"
			    "# TYPE revops_scheduler_timers_fired_total counter\n"
			    "revops_scheduler_timers_fired_total %llu\n"
			    "# HELP revops_scheduler_lag_seconds How late this node fired each timer"
			    " (fired at - due at).\n"
			    "# TYPE revops_scheduler_lag_seconds histogram\n",
			    (unsigned long long)(s ? atomic_load(&s->fired) : 0));

	for (size_t i = 0; rc == 0 && i <= NLAG; i++) {
		cum += s ? atomic_load(&s->lag[i]) : 0;
		if (i < NLAG)
			rc = buf_printf(out, "revops_scheduler_lag_seconds_bucket{le=\"%g\"} %llu\n",
					lag_bounds[i], (unsigned long long)cum);
		else
			rc = buf_printf(out,
					"revops_scheduler_lag_seconds_bucket{le=\"+Inf\"} %llu\n",
					(unsigned long long)cum);
	}
	if (rc == 0)
		rc = buf_printf(out,
				"revops_scheduler_lag_seconds_sum %.3f\n"
				"revops_scheduler_lag_seconds_count %llu\n",
				(double)(s ? atomic_load(&s->lag_ms_sum) : 0) / 1000.0,
				(unsigned long long)cum);
	return rc;
}
