/* openapi: GET /v2/openapi.json, the OpenAPI document (docs/openapi.json,
 * compiled in by cmake/embed.cmake) made to name this server: the
 * document is written for the `make run` demo address, and start-up
 * rewrites that address to --public-url once (servers[0].url, the OAuth
 * tokenUrl, every absolute example URL); requests copy the result. */
#ifndef REVOPS_OPENAPI_H
#define REVOPS_OPENAPI_H
#include <stddef.h>
#include "core/common.h"

struct buf;
struct route_table;

/* The base URL docs/openapi.json is written for. */
#define OPENAPI_DOC_BASE "http://127.0.0.1:8080"

/* This area's routes (api/routes.c lists the areas). */
extern const struct route_table openapi_routes;

/* Appends doc[0..len) (JSON text) to out with every JSON string that
 * starts with from, followed by '/', '?', '#' or the string's end, starting
 * with to instead; to is raw text and is JSON-escaped here. Strings that
 * only contain from later on (prose) are left alone. Returns 0, or -1 when
 * to is not valid UTF-8 or out refuses the bytes. */
int openapi_rebase(const char *doc, size_t len, const char *from, const char *to, struct buf *out) WUR;

/* Makes the served document for public_url from the embedded one, once,
 * and checks that servers[0].url is then public_url and the tokenUrl
 * public_url + "/oauth/token". Requests before it answer 503. Returns 0,
 * or -1 with the reason in err (cap bytes). */
int openapi_prepare(const char *public_url, char *err, size_t cap) WUR;
/* Frees the served document; only once nothing serves requests. */
void openapi_release(void);

#endif
