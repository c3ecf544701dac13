#include "store/group.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "store/store.h"

/* A job handed in: queued, then run by a leader (maybe its own thread).
 * Its thread sleeps on state (a futex word), not on a condition under the
 * group's mutex: woken, it needs no lock to go on, so a transaction's end
 * does not send each of its threads to sleep again on the mutex the
 * leader holds. */
enum { E_WAIT, E_DONE, E_LEAD };
struct entry {
	void *job;
	int rc;
	atomic_int state; /* E_DONE: rc is its outcome; E_LEAD: lead the next */
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

static void sleep_while(atomic_int *word, int value)
{
	while (atomic_load_explicit(word, memory_order_acquire) == value)
		(void)syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

/* Sets e's state and wakes its thread. Once the store is seen, e's thread
 * may return and its stack be reused: the wake then finds no sleeper
 * there, or wakes one that checks its own word again (harmless). */
static void set_state(struct entry *e, int state)
{
	atomic_store_explicit(&e->state, state, memory_order_release);
	(void)syscall(SYS_futex, &e->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

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

/* The leader (it heads the queue): runs the queue's first max jobs,
 * wakes their threads, and hands the lead to the next queued one, if any.
 * Each thread sleeps on its own word, so a transaction's end wakes only
 * the threads it concerns. */
static void take_lead(struct store_group *g)
{
	struct entry *batch[g->max];
	size_t n;

	pthread_mutex_lock(&g->mu);
	for (n = 0; g->head && n < g->max; n++) {
		batch[n] = g->head;
		if (!(g->head = g->head->next))
			g->tail = NULL;
	}
	pthread_mutex_unlock(&g->mu);
	lead(g, batch, n);
	for (size_t i = 0; i < n; i++)
		set_state(batch[i], E_DONE);
	pthread_mutex_lock(&g->mu);
	if (g->head)
		set_state(g->head, E_LEAD);
	else
		g->leading = 0;
	pthread_mutex_unlock(&g->mu);
}

int store_group_run(struct store_group *g, void *job)
{
	struct entry me = {.job = job};
	int state;

	pthread_mutex_lock(&g->mu);
	if (g->tail)
		g->tail->next = &me;
	else
		g->head = &me;
	g->tail = &me;
	if (!g->leading) {
		g->leading = 1; /* nobody leads: the queue was empty */
		atomic_store(&me.state, E_LEAD);
	}
	pthread_mutex_unlock(&g->mu);
	while ((state = atomic_load_explicit(&me.state, memory_order_acquire)) != E_DONE) {
		if (state == E_LEAD) {
			atomic_store(&me.state, E_WAIT);
			take_lead(g); /* me heads the queue: its batch holds me */
		} else {
			sleep_while(&me.state, E_WAIT);
		}
	}
	return me.rc;
}
