#include "store/group.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "store/store.h"

/* A job handed in, queued until the group's thread runs it. */
struct entry {
	void *job;
	store_group_done_fn done;
	void *done_arg;
	struct entry *next;
};

struct store_group {
	struct store *st;
	size_t max;
	store_group_fn fn;
	void *arg;
	pthread_t thread;
	pthread_mutex_t mu;        /* guards what follows */
	pthread_cond_t cond;       /* the thread waits on it for jobs */
	struct entry *head, *tail; /* the queue, oldest first */
	int idle;                  /* the thread waits (or is about to) */
	int stopping;
};

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
 * fails, reports each outcome and frees the entries. */
static void lead(struct store_group *g, struct entry **batch, size_t n)
{
	void *jobs[n];
	int rc;

	for (size_t i = 0; i < n; i++)
		jobs[i] = batch[i]->job;
	rc = run_tx(g, jobs, n);
	for (size_t i = 0; i < n; i++) {
		batch[i]->done(batch[i]->done_arg,
			       n == 1 || rc == STORE_OK ? rc : run_tx(g, &jobs[i], 1));
		free(batch[i]);
	}
}

/* The group's thread: runs the queue's first max jobs at a time, until
 * stopping and the queue is empty. */
static void *group_main(void *arg)
{
	struct store_group *g = arg;
	struct entry *batch[g->max];
	size_t n;

	for (;;) {
		pthread_mutex_lock(&g->mu);
		while (!g->head && !g->stopping) {
			g->idle = 1;
			pthread_cond_wait(&g->cond, &g->mu);
		}
		g->idle = 0;
		for (n = 0; g->head && n < g->max; n++) {
			batch[n] = g->head;
			if (!(g->head = g->head->next))
				g->tail = NULL;
		}
		pthread_mutex_unlock(&g->mu);
		if (!n)
			return NULL; /* stopping, and nothing queued */
		lead(g, batch, n);
	}
}

/* Wakes the group's thread when it waits; called with g->mu held, it
 * returns whether to signal (after unlocking: the woken thread then does
 * not sleep again at once on the mutex). */
static int must_wake(struct store_group *g)
{
	int idle = g->idle;

	g->idle = 0;
	return idle;
}

int store_group_new(struct store *st, size_t max, store_group_fn fn, void *arg, const char *name,
		    struct store_group **out)
{
	struct store_group *g = calloc(1, sizeof *g);

	*out = NULL;
	if (!g)
		return -1;
	*g = (struct store_group){.st = st, .max = max ? max : 1, .fn = fn, .arg = arg};
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cond, NULL);
	if (pthread_create(&g->thread, NULL, group_main, g) != 0) {
		pthread_cond_destroy(&g->cond);
		pthread_mutex_destroy(&g->mu);
		free(g);
		return -1;
	}
	(void)pthread_setname_np(g->thread, name);
	*out = g;
	return 0;
}

void store_group_free(struct store_group *g)
{
	int wake;

	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->stopping = 1;
	wake = must_wake(g);
	pthread_mutex_unlock(&g->mu);
	if (wake)
		pthread_cond_signal(&g->cond);
	pthread_join(g->thread, NULL);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->mu);
	free(g);
}

int store_group_submit(struct store_group *g, void *job, store_group_done_fn done, void *done_arg)
{
	struct entry *e = malloc(sizeof *e);
	int wake;

	if (!e)
		return -1;
	*e = (struct entry){job, done, done_arg, NULL};
	pthread_mutex_lock(&g->mu);
	if (g->tail)
		g->tail->next = e;
	else
		g->head = e;
	g->tail = e;
	wake = must_wake(g);
	pthread_mutex_unlock(&g->mu);
	if (wake)
		pthread_cond_signal(&g->cond);
	return 0;
}

/* store_group_run's wait: the outcome, and a futex word the group's
 * thread sets once it is there. */
struct waiter {
	int rc;
	atomic_int done;
};

static void wake_waiter(void *arg, int rc)
{
	struct waiter *w = arg;

	w->rc = rc;
	atomic_store_explicit(&w->done, 1, memory_order_release);
	/* w may be gone once done is seen: the wake then finds no sleeper,
	 * or wakes one that checks its own word again (harmless) */
	(void)syscall(SYS_futex, &w->done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

int store_group_run(struct store_group *g, void *job)
{
	struct waiter w = {0, 0};

	if (store_group_submit(g, job, wake_waiter, &w) < 0)
		return STORE_ERR;
	while (!atomic_load_explicit(&w.done, memory_order_acquire))
		(void)syscall(SYS_futex, &w.done, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	return w.rc;
}
