#include "store/pool.h"

#include <stdlib.h>

int store_pool_init(struct store_pool *p, int n)
{
	p->n = n < 1 ? 1 : n;
	p->taken = calloc((size_t)p->n, 1);
	if (!p->taken)
		return -1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->freed, NULL);
	return 0;
}

void store_pool_destroy(struct store_pool *p)
{
	if (!p->taken)
		return;
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->freed);
	free(p->taken);
	p->taken = NULL;
}

int store_pool_take(struct store_pool *p)
{
	int i;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		for (i = 0; i < p->n; i++)
			if (!p->taken[i]) {
				p->taken[i] = 1;
				pthread_mutex_unlock(&p->lock);
				return i;
			}
		pthread_cond_wait(&p->freed, &p->lock);
	}
}

void store_pool_give(struct store_pool *p, int slot)
{
	pthread_mutex_lock(&p->lock);
	p->taken[slot] = 0;
	pthread_cond_signal(&p->freed);
	pthread_mutex_unlock(&p->lock);
}
