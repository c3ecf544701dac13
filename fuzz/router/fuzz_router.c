/* libFuzzer driver for route matching (router.h) over the real route table
 * (api_routes_build, as main.c builds it): the input is "METHOD path", the path as http_server.c hands
 * it over (percent-decoded, no query). router_match gets the whole table,
 * as pipeline.c calls it.
 *
 * Besides memory errors, leaks and undefined behaviour it aborts when a
 * promise is broken:
 *  - the answer is 200, 404 or 405; the Allow list is empty on 404 and
 *    on 405 names only methods of the table (and HEAD, right after GET),
 *    not the one asked;
 *  - a match is a route of the table for this method (a GET route for
 *    HEAD, RFC 9110 §9.3.2), no earlier route
 *    also matches (the first match wins), and putting its captured
 *    parameters back into its pattern gives the path again (one trailing
 *    slash aside, static segments in any case for case-insensitive
 *    routes): every parameter is one non-empty segment, shorter than
 *    ROUTER_PARAM_MAX, without '/'. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/pipeline.h"
#include "api/routes.h"
#include "core/buf.h"
#include "http/router.h"

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

static int method_in_table(const char *m, size_t n)
{
	size_t i;

	for (i = 0; i < nroutes; i++)
		if (strlen(routes[i].method) == n && !strncmp(routes[i].method, m, n))
			return 1;
	return 0;
}

/* Each ", "-separated name in allow is a method of the table, or HEAD
 * right after GET, and not method. */
static void check_allow(const char *allow, const char *method)
{
	const char *p = allow, *e;
	size_t n;

	if (!*p)
		abort();
	for (;;) {
		e = strstr(p, ", ");
		n = e ? (size_t)(e - p) : strlen(p);
		if (n == 4 && !strncmp(p, "HEAD", 4)) {
			if (p - allow < 5 || strncmp(p - 5, "GET, ", 5))
				abort();
		} else if (!method_in_table(p, n)) {
			abort();
		}
		if (strlen(method) == n && !strncmp(p, method, n))
			abort();
		if (!e)
			break;
		p = e + 2;
	}
}

/* The pattern with the captured parameters put back. */
static void check_rebuilt(const struct route_match *m, const char *path)
{
	const char *pat = m->route->pattern, *close;
	char rebuilt[ROUTER_MAX_PARAMS * ROUTER_PARAM_MAX + 256];
	size_t len = 0, n, plen = strlen(path);
	int k = 0;

	while (*pat) {
		if (*pat == '{') {
			close = strchr(pat, '}');
			if (!close || k >= m->nparams)
				abort();
			n = strlen(m->params[k]);
			if (!n || n >= ROUTER_PARAM_MAX || strchr(m->params[k], '/'))
				abort();
			memcpy(rebuilt + len, m->params[k++], n);
			len += n;
			pat = close + 1;
		} else {
			rebuilt[len++] = *pat++;
		}
	}
	rebuilt[len] = '\0';
	if (k != m->nparams)
		abort();
	if (plen > 1 && path[plen - 1] == '/')
		plen--;
	if (len != plen ||
	    (m->route->ci ? strncasecmp(rebuilt, path, len) : strncmp(rebuilt, path, len)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct route_match m, earlier;
	char *text, *path;
	const char *method;
	struct buf allow;
	int rc;

	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	path = strchr(text, ' ');
	if (path)
		*path++ = '\0';
	else
		path = text + size;
	method = text;
	buf_init(&allow, 256);
	rc = router_match(routes, nroutes, method, path, &m, &allow);
	switch (rc) {
	case 200:
		if (m.route < routes || m.route >= routes + nroutes ||
		    (strcmp(m.route->method, method) &&
		     (strcmp(method, "HEAD") || strcmp(m.route->method, "GET"))))
			abort();
		check_rebuilt(&m, path);
		if (router_match(routes, (size_t)(m.route - routes), method, path, &earlier, NULL) ==
		    200)
			abort();
		break;
	case 405:
		check_allow(allow.data ? allow.data : "", method);
		break;
	case 404:
		if (allow.len)
			abort();
		break;
	default:
		abort();
	}
	buf_free(&allow);
	free(text);
	return 0;
}
