/* libFuzzer driver for the body checks of every JSON write route, taken
 * from the real route table (api_routes_build, as main.c builds it): the input is a request body,
 * parsed by validate_parse_body as pipeline.c's check_json_body parses it and,
 * for each route whose body is BODY_JSON, checked with validate_object
 * against that route's own spec; a body that passes goes on to the checks
 * its handler runs before touching the store (rate_decision_check for a
 * rate decision, subscriptions_check_events for a v1 or v2 subscription; the
 * URLs are the SSRF guard's, fuzzed by fuzz/egress; a revert only refuses
 * blank strings).
 *
 * Besides memory errors, leaks and undefined behaviour it aborts when a
 * promise is broken: every route has a spec; the problem count and the
 * details agree (none exactly when valid, at most VALIDATE_MAX_DETAILS,
 * each {"field": string, "issue": string}); the handlers' checks add only
 * such entries. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/pipeline.h"
#include "api/rates/rate_decision.h"
#include "api/routes.h"
#include "api/webhooks/webhook.h"
#include "core/validate.h"
#include "webhooks/subscriptions.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The real route table, built once as main.c builds it. */
static struct route *routes;
static size_t nroutes;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	routes = api_routes_build(0, &nroutes);
	if (!routes)
		abort();
	return 0;
}

static void check_details(const json_t *details, int problems)
{
	size_t i;
	json_t *d;

	if (problems < 0 || (problems == 0) != (json_array_size(details) == 0) ||
	    json_array_size(details) > VALIDATE_MAX_DETAILS)
		abort();
	json_array_foreach(details, i, d) {
		if (json_object_size(d) != 2 || !json_is_string(json_object_get(d, "field")) ||
		    !json_is_string(json_object_get(d, "issue")))
			abort();
	}
}

/* The semantic checks of the handler behind spec, on a body that passed it. */
static void handler_checks(const struct route *rt, const json_t *body)
{
	json_t *details = json_array();

	if (!details)
		return;
	if (rt->spec == rate_decision_spec)
		rate_decision_check(body, details);
	else if (rt->spec == webhook_v1_spec || rt->spec == webhook_v2_spec)
		subscriptions_check_events(rt->spec == webhook_v1_spec ? "v1" : "v2",
					   json_object_get(body, "events"), details);
	check_details(details, (int)json_array_size(details));
	json_decref(details);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *body = NULL, *details = NULL;
	size_t i;
	int n;

	if (validate_parse_body((const char *)data, size, &body, NULL) < 0)
		return 0;
	details = json_array();
	if (!details)
		goto out;
	for (i = 0; i < nroutes; i++) {
		if (routes[i].body != BODY_JSON)
			continue;
		if (!routes[i].spec)
			abort();
		json_array_clear(details);
		n = validate_object(body, routes[i].spec, "", details);
		check_details(details, n);
		if (n == 0)
			handler_checks(&routes[i], body);
	}
out:
	json_decref(details);
	json_decref(body);
	return 0;
}
