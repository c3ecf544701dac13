/* pool: the slots of a backend's fixed connection pool, shared by every
 * backend: a thread takes a free slot (waiting while all are taken) and
 * gives it back when its transaction ends. The backend keeps its
 * connections in an array indexed by slot. */
#ifndef REVOPS_STORE_POOL_H
#define REVOPS_STORE_POOL_H
#include <pthread.h>
#include "core/common.h"

struct store_pool {
	pthread_mutex_t lock;
	pthread_cond_t freed;
	int n;
	unsigned char *taken;
};

/* n slots, all free (n < 1 means 1). Returns 0 or -1 (out of memory). */
int store_pool_init(struct store_pool *p, int n) WUR;
/* Safe on a pool whose init failed or never ran (zeroed). */
void store_pool_destroy(struct store_pool *p);
/* A free slot, marked taken; blocks while every slot is taken. */
int store_pool_take(struct store_pool *p);
void store_pool_give(struct store_pool *p, int slot);

#endif
