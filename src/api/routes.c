/* routes: every area's table, in the order the router tries them. An
 * area's literal paths that another area's {param} could shadow come
 * first (delivery's /v2/webhooks/dead-letters before webhook's
 * /v2/webhooks/{id}). */
#include "api/routes.h"

#include <stdlib.h>
#include <string.h>

#include "api/pipeline.h"
#include "api/openapi.h"
#include "api/feeds/alerts.h"
#include "api/feeds/feeds.h"
#include "api/feeds/review.h"
#include "api/guests/threads.h"
#include "api/guests/whatsapp.h"
#include "api/identity/oauth.h"
#include "api/identity/scim.h"
#include "api/operations/tasks.h"
#include "api/portfolio/portfolios.h"
#include "api/rates/rate_decision.h"
#include "api/rates/rate_suggestion.h"
#include "api/webhooks/delivery.h"
#include "api/webhooks/webhook.h"

/* The platform's (health, readiness, metrics) first: a worker node serves
 * only those. */
static const struct route_table *const areas[] = {
	&pipeline_platform_routes,
	&openapi_routes,
	&oauth_routes,
	&portfolio_routes,
	&rate_decision_routes,
	&rate_suggestion_routes,
	&feed_routes,
	&alert_routes,
	&review_routes,
	&task_routes,
	&thread_routes,
	&whatsapp_routes,
	&delivery_routes,
	&webhook_routes,
	&scim_routes,
};

struct route *api_routes_build(int health_only, size_t *n)
{
	size_t nareas = health_only ? 1 : ARRAY_LEN(areas), i, total = 0;
	struct route *all;

	for (i = 0; i < nareas; i++)
		total += areas[i]->n;
	all = calloc(total, sizeof *all);
	if (!all)
		return NULL;
	*n = 0;
	for (i = 0; i < nareas; i++) {
		memcpy(all + *n, areas[i]->routes, areas[i]->n * sizeof *all);
		*n += areas[i]->n;
	}
	return all;
}
