#include "store/backend.h"

#include <stdatomic.h>

#include "core/clock.h"
#include "core/log.h"
#include "store/store.h"

/* The disk-full episode of this process's database (store.h,
 * store_full_since): its own file, so that the backends, which start and
 * end it, and store.c, which dispatches to them, do not use each other. */

static _Atomic int64_t full_since; /* 0: no episode */

void store_full_begin(void)
{
	int64_t none = 0;

	if (atomic_compare_exchange_strong(&full_since, &none, clock_now_ms()))
		log_msg(LOG_ERROR, "store_full",
			"the database's disk is full: writes are refused with 503 (Retry-After)"
			" and /readyz reports it until there is room again; reads go on");
}

void store_full_end(void)
{
	int64_t was = atomic_exchange(&full_since, 0);

	if (was)
		log_msg(LOG_INFO, "store_full", "the database's disk has room again after %lld s",
			(long long)((clock_now_ms() - was) / 1000));
}

int64_t store_full_since(void)
{
	return atomic_load(&full_since);
}
