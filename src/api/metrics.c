#include "api/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SERIES 1024

static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
				0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define NB (sizeof bounds / sizeof bounds[0])

static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"};

struct series {
	const char *route;
	const char *method; /* one of methods[] or "OTHER" */
	int status;
	atomic_uint_fast64_t count;
	atomic_uint_fast64_t sum_us;
	atomic_uint_fast64_t bucket[NB]; /* non-cumulative; summed when rendered */
};

struct metrics {
	pthread_mutex_t lock;
	atomic_int n;
	struct series s[MAX_SERIES];
};

struct metrics *metrics_new(void)
{
	struct metrics *m = calloc(1, sizeof *m);

	if (m)
		pthread_mutex_init(&m->lock, NULL);
	return m;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static const char *canon_method(const char *method)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(methods); i++)
		if (!strcmp(method, methods[i]))
			return methods[i];
	return "OTHER";
}

static struct series *find(struct metrics *m, int n, const char *route, const char *method, int status)
{
	int i;

	for (i = 0; i < n; i++)
		if (m->s[i].status == status && m->s[i].method == method &&
		    (m->s[i].route == route || !strcmp(m->s[i].route, route)))
			return &m->s[i];
	return NULL;
}

void metrics_observe(struct metrics *m, const char *route, const char *method, int status,
		     double seconds)
{
	const char *meth = canon_method(method);
	struct series *s;
	size_t b;
	int n = atomic_load_explicit(&m->n, memory_order_acquire);

	s = find(m, n, route, meth, status);
	if (!s) {
		pthread_mutex_lock(&m->lock);
		n = atomic_load(&m->n);
		s = find(m, n, route, meth, status);
		if (!s && n < MAX_SERIES) {
			s = &m->s[n];
			s->route = route;
			s->method = meth;
			s->status = status;
			atomic_store_explicit(&m->n, n + 1, memory_order_release);
		}
		pthread_mutex_unlock(&m->lock);
		if (!s)
			return; /* table full: a bounded cost for unbounded routes */
	}
	for (b = 0; b < NB && seconds > bounds[b]; b++)
		;
	if (b < NB)
		atomic_fetch_add_explicit(&s->bucket[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->sum_us, (uint64_t)(seconds * 1e6), memory_order_relaxed);
}

int metrics_render(struct metrics *m, struct buf *out)
{
	int i, n = atomic_load(&m->n), rc = 0;
	size_t b;
	uint64_t cum;

	rc |= buf_puts(out, "# HELP revops_http_requests_total HTTP requests answered.\n"
			    "# TYPE revops_http_requests_total counter\n");
	for (i = 0; i < n; i++)
		rc |= buf_printf(out,
				 "revops_http_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"}"
				 " %llu\n",
				 m->s[i].route, m->s[i].method, m->s[i].status,
				 (unsigned long long)atomic_load(&m->s[i].count));
	rc |= buf_puts(out, "# HELP revops_http_request_duration_seconds Time to answer.\n"
			    "# TYPE revops_http_request_duration_seconds histogram\n");
	for (i = 0; i < n; i++) {
		struct series *s = &m->s[i];
		uint64_t count = atomic_load(&s->count);

		cum = 0;
		for (b = 0; b < NB; b++) {
			cum += atomic_load(&s->bucket[b]);
			rc |= buf_printf(out,
					 "revops_http_request_duration_seconds_bucket{route=\"%s\","
					 "method=\"%s\",status=\"%d\",le=\"%g\"} %llu\n",
					 s->route, s->method, s->status, bounds[b],
					 (unsigned long long)cum);
		}
		rc |= buf_printf(out,
				 "revops_http_request_duration_seconds_bucket{route=\"%s\","
				 "method=\"%s\",status=\"%d\",le=\"+Inf\"} %llu\n"
				 "revops_http_request_duration_seconds_sum{route=\"%s\",method=\"%s\","
				 "status=\"%d\"} %.6f\n"
				 "revops_http_request_duration_seconds_count{route=\"%s\","
				 "method=\"%s\",status=\"%d\"} %llu\n",
				 s->route, s->method, s->status, (unsigned long long)count, s->route,
				 s->method, s->status, (double)atomic_load(&s->sum_us) / 1e6,
				 s->route, s->method, s->status, (unsigned long long)count);
	}
	return rc ? -1 : 0;
}
