#include "store/group.h"

#include <pthread.h>
#include <stdlib.h>

#include "store/store.h"

/* A job handed in: queued, then run by a leader (maybe its own thread). */
struct entry {
	void *job;
	int rc;
	int done; /* its transaction ended: rc is its outcome */
	int lead; /* its thread is to lead the next transaction */
	pthread_cond_t cv;
	struct entry *next;
};

struct store_group {
	struct store *st;
	size_t max;
	store_group_fn fn;
	void *arg;
	pthread_mutex_t mu;
	struct entry *head, *tail; /* the queue, oldest first */
	int leading;               /* a thread leads (or was told to) */
};

int store_group_new(struct store *st, size_t max, store_group_fn fn, void *arg,
		    struct store_group **out)
{
	struct store_group *g = calloc(1, sizeof *g);

	*out = NULL;
	if (!g)
		return -1;
	*g = (struct store_group){.st = st, .max = max ? max : 1, .fn = fn, .arg = arg};
	pthread_mutex_init(&g->mu, NULL);
	*out = g;
	return 0;
}

void store_group_free(struct store_group *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->mu);
	free(g);
}

/* One transaction of jobs[0..n). Returns its store status. */
static int run_tx(struct store_group *g, void *const *jobs, size_t n)
{
	struct store_tx *tx;
	int rc = store_begin(g->st, STORE_WRITE_OWN, &tx);

	if (rc != STORE_OK)
		return rc;
	return store_finish(tx, g->fn(tx, jobs, n, g->arg));
}

/* Runs batch (n entries) as one transaction, or each alone when that
 * fails, and sets each entry's rc. */
static void lead(struct store_group *g, struct entry **batch, size_t n)
{
	void *jobs[n];
	int rc;

	for (size_t i = 0; i < n; i++)
		jobs[i] = batch[i]->job;
	rc = run_tx(g, jobs, n);
	for (size_t i = 0; i < n; i++)
		batch[i]->rc = n == 1 || rc == STORE_OK ? rc : run_tx(g, &jobs[i], 1);
}

/* The leader (g->mu held; it heads the queue): runs the queue's first
 * max jobs, wakes their threads, and hands the lead to the next queued
 * one, if any. Each thread waits on its own condition, so a transaction's
 * end wakes only the threads it concerns. */
static void take_lead(struct store_group *g)
{
	struct entry *batch[g->max];
	size_t n;

	for (n = 0; g->head && n < g->max; n++) {
		batch[n] = g->head;
		if (!(g->head = g->head->next))
			g->tail = NULL;
	}
	pthread_mutex_unlock(&g->mu);
	lead(g, batch, n);
	pthread_mutex_lock(&g->mu);
	for (size_t i = 0; i < n; i++) {
		batch[i]->done = 1;
		pthread_cond_signal(&batch[i]->cv);
	}
	if (g->head) {
		g->head->lead = 1;
		pthread_cond_signal(&g->head->cv);
	} else {
		g->leading = 0;
	}
}

int store_group_run(struct store_group *g, void *job)
{
	struct entry me = {.job = job};

	pthread_cond_init(&me.cv, NULL);
	pthread_mutex_lock(&g->mu);
	if (g->tail)
		g->tail->next = &me;
	else
		g->head = &me;
	g->tail = &me;
	if (!g->leading)
		g->leading = me.lead = 1; /* nobody leads: the queue was empty */
	while (!me.done) {
		if (me.lead) {
			me.lead = 0;
			take_lead(g); /* me heads the queue: its batch holds me */
		} else {
			pthread_cond_wait(&me.cv, &g->mu);
		}
	}
	pthread_mutex_unlock(&g->mu);
	pthread_cond_destroy(&me.cv);
	return me.rc;
}
