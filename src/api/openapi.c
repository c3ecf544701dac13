#include "api/openapi.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ctx.h"
#include "api/negotiate.h"
#include "api/respond.h"
#include "core/buf.h"
#include "core/embedded.h"
#include "core/log.h"
#include "http/http_gzip.h"

/* Written by openapi_prepare before doc_ready is set; read-only after. The
 * gzip-coded copy (about a tenth of 697 KB) is empty when compression
 * failed: the document is then served as it is. */
static struct buf doc, doc_gz;
static atomic_int doc_ready;

/* 1 when the JSON string whose text starts at s (after its opening quote,
 * end = the document's end) begins with from and from ends there, at a
 * path, query or fragment, or at the string's closing quote. */
static int starts_with_base(const char *s, const char *end, const char *from, size_t flen)
{
	if ((size_t)(end - s) <= flen || memcmp(s, from, flen) != 0)
		return 0;
	return s[flen] == '/' || s[flen] == '?' || s[flen] == '#' || s[flen] == '"';
}

int openapi_rebase(const char *text, size_t len, const char *from, const char *to, struct buf *out)
{
	const char *p = text, *end = text + len, *run = text;
	size_t flen = strlen(from), tlen;
	json_t *js = json_string(to);
	char *quoted = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
	int in_string = 0, rc = -1;

	json_decref(js);
	if (!quoted)
		return -1;
	/* quoted is "…" with to's escapes; only the inside replaces from. */
	tlen = strlen(quoted) - 2;
	for (; p < end; p++) {
		if (in_string) {
			if (*p == '\\' && p + 1 < end)
				p++;
			else if (*p == '"')
				in_string = 0;
			continue;
		}
		if (*p != '"')
			continue;
		in_string = 1;
		if (!starts_with_base(p + 1, end, from, flen))
			continue;
		if (buf_append(out, run, (size_t)(p + 1 - run)) < 0 ||
		    buf_append(out, quoted + 1, tlen) < 0)
			goto out;
		run = p + 1 + flen;
		p += flen;
	}
	rc = buf_append(out, run, (size_t)(end - run));
out:
	free(quoted);
	return rc;
}

/* Checks that the rewritten document names public_url where clients and
 * tools look for it. Returns 0 or -1 with err set. */
static int check_rebased(const struct buf *b, const char *public_url, char *err, size_t cap)
{
	json_error_t jerr;
	json_t *root = json_loadb(b->data, b->len, 0, &jerr);
	const char *server = NULL, *token = NULL;
	char want[600];
	int rc = -1;

	if (!root) {
		snprintf(err, cap, "the rewritten document is not JSON: %s (line %d)", jerr.text,
			 jerr.line);
		return -1;
	}
	if (json_unpack(root, "{s:[{s:s}], s:{s:{s:{s:{s:{s:s}}}}}}", "servers", "url", &server,
			"components", "securitySchemes", "oauth2", "flows", "clientCredentials",
			"tokenUrl", &token) < 0)
		server = token = NULL;
	snprintf(want, sizeof want, "%s/oauth/token", public_url);
	if (!server || strcmp(server, public_url) != 0)
		snprintf(err, cap, "servers[0].url is %s, not the public URL",
			 server ? server : "absent");
	else if (!token || strcmp(token, want) != 0)
		snprintf(err, cap, "the OAuth tokenUrl is %s, not %s", token ? token : "absent",
			 want);
	else
		rc = 0;
	json_decref(root);
	return rc;
}

int openapi_prepare(const char *public_url, char *err, size_t cap)
{
	struct buf b;

	buf_init(&b, 0);
	if (openapi_rebase(embedded_openapi, embedded_openapi_len, OPENAPI_DOC_BASE, public_url,
			   &b) < 0) {
		snprintf(err, cap, "cannot write the OpenAPI document for %s", public_url);
		buf_free(&b);
		return -1;
	}
	if (check_rebased(&b, public_url, err, cap) < 0) {
		buf_free(&b);
		return -1;
	}
	doc = b;
	buf_init(&doc_gz, 0);
	if (http_gzip(doc.data, doc.len, 9, &doc_gz) < 0) {
		log_msg(LOG_WARN, "openapi", "could not compress the document; served as it is");
		buf_reset(&doc_gz);
	}
	atomic_store(&doc_ready, 1);
	return 0;
}

void openapi_release(void)
{
	atomic_store(&doc_ready, 0);
	buf_free(&doc);
	buf_free(&doc_gz);
}

static void h_openapi(struct ctx *c)
{
	int zip;

	if (!atomic_load(&doc_ready)) {
		respond_error(c, ERR_UNAVAILABLE, NULL, "starting");
		return;
	}
	zip = doc_gz.len && negotiate_wants_gzip(c);
	buf_reset(&c->res->body);
	if (buf_append(&c->res->body, zip ? doc_gz.data : doc.data, zip ? doc_gz.len : doc.len) < 0) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		return;
	}
	if (zip)
		negotiate_mark_encoded(c);
	c->res->status = 200;
	c->res->content_type = "application/json";
}

static const struct route routes[] = {
	ROUTE_PUB("GET", "/v2/openapi.json", h_openapi),
};
const struct route_table openapi_routes = ROUTE_TABLE(routes);
