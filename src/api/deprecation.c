#include "api/deprecation.h"

#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "store/store.h"

#define MAX_DEPRECATIONS 256

struct entry {
	char method[8];
	char route[160];
	int64_t announced_ms;
};

struct deprecation {
	pthread_rwlock_t lock;
	int n;
	struct entry e[MAX_DEPRECATIONS];
};

struct deprecation *deprecation_new(void)
{
	struct deprecation *d = calloc(1, sizeof *d);

	if (d)
		pthread_rwlock_init(&d->lock, NULL);
	return d;
}

void deprecation_free(struct deprecation *d)
{
	if (!d)
		return;
	pthread_rwlock_destroy(&d->lock);
	free(d);
}

int deprecation_reload(struct deprecation *d, struct store *st)
{
	struct entry *fresh = calloc(MAX_DEPRECATIONS, sizeof *fresh);
	struct store_tx *tx = NULL;
	struct store_rows *r = NULL;
	int n = 0, rc = -1, step;

	if (!fresh || store_begin(st, 0, &tx) != STORE_OK)
		goto out;
	if (store_query(tx, "SELECT method, route, announced_at FROM deprecations", NULL, 0, &r) !=
	    STORE_OK)
		goto out;
	while ((step = store_next(r)) == 1 && n < MAX_DEPRECATIONS) {
		snprintf(fresh[n].method, sizeof fresh[n].method, "%s", store_text(r, 0));
		snprintf(fresh[n].route, sizeof fresh[n].route, "%s", store_text(r, 1));
		fresh[n].announced_ms = store_int(r, 2);
		n++;
	}
	if (step < 0)
		goto out;
	pthread_rwlock_wrlock(&d->lock);
	memcpy(d->e, fresh, (size_t)n * sizeof *fresh);
	d->n = n;
	pthread_rwlock_unlock(&d->lock);
	rc = 0;
out:
	store_rows_close(r);
	store_rollback(tx);
	free(fresh);
	return rc;
}

int deprecation_lookup(struct deprecation *d, const char *method, const char *route,
		       int64_t *announced_ms)
{
	int i, found = 0;

	pthread_rwlock_rdlock(&d->lock);
	for (i = 0; i < d->n && !found; i++)
		if (!strcmp(d->e[i].method, method) && !strcmp(d->e[i].route, route)) {
			*announced_ms = d->e[i].announced_ms;
			found = 1;
		}
	pthread_rwlock_unlock(&d->lock);
	return found;
}

int64_t deprecation_sunset_ms(int64_t announced_ms, const char *plan)
{
	return clock_add_months(announced_ms, strcmp(plan, "enterprise") ? 12 : 18);
}

int deprecation_record(struct store_tx *tx, const char *method, const char *route,
		       int64_t announced_ms, const char *note)
{
	int rc = store_exec(tx,
			    "INSERT INTO deprecations (method, route, announced_at, note, created_at)"
			    " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (method, route) DO UPDATE SET"
			    " announced_at = $3, note = $4",
			    (struct store_val[]){sv_text(method), sv_text(route), sv_int(announced_ms),
						 sv_text(note), sv_int(clock_now_ms())},
			    5);

	return rc < 0 ? rc : 0;
}
