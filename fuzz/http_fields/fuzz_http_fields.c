/* libFuzzer driver for the request-field readers that shape an answer:
 * http_request_id_ok, http_accepts_gzip and http_etag_match
 * (http/http_fields.h) and trace_parse (core/trace.h). The input is one
 * field value (a NUL ends it early, as the head parser never passes one).
 *
 * Besides memory errors and undefined behaviour it aborts when a promise
 * is broken:
 *  - an accepted request id is 1-128 bytes of 0x21-0x7e without '"' or
 *    '\';
 *  - an accepted traceparent has lowercase-hex ids, not all zero, and
 *    formats back (trace_format with its own parent-id) to its first 55
 *    bytes, except the version, which becomes 00;
 *  - '*' matches any tag; a value that names the tag quoted matches it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/trace.h"
#include "http/http_fields.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_request_id(const char *v)
{
	size_t i, n = strlen(v);

	if (!http_request_id_ok(v))
		return;
	if (n < 1 || n > HTTP_REQUEST_ID_MAX)
		abort();
	for (i = 0; i < n; i++)
		if (v[i] < 0x21 || v[i] > 0x7e || v[i] == '"' || v[i] == '\\')
			abort();
}

static void check_trace(const char *v)
{
	struct trace_ctx t;
	char out[TRACE_PARENT_LEN];

	if (trace_parse(v, &t) < 0)
		return;
	if (strlen(t.trace_id) != 32 || strlen(t.parent_id) != 16 || strlen(t.flags) != 2 ||
	    !strcmp(t.trace_id, "00000000000000000000000000000000") ||
	    !strcmp(t.parent_id, "0000000000000000"))
		abort();
	trace_format(&t, t.parent_id, out);
	if (strncmp(out + 2, v + 2, TRACE_PARENT_LEN - 3) || strncmp(out, "00", 2))
		abort();
}

static void check_etag(const char *v)
{
	char quoted[64];

	(void)http_accepts_gzip(v);
	(void)http_etag_match(v, "0123abcd", "-gzip");
	if (!http_etag_match("*", v, NULL))
		abort();
	if (strlen(v) < 40 && !strchr(v, '"')) {
		snprintf(quoted, sizeof quoted, "W/\"%s\"", v);
		if (!http_etag_match(quoted, v, NULL))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *v = malloc(size + 1);

	if (!v)
		return 0;
	memcpy(v, data, size);
	v[size] = '\0';
	check_request_id(v);
	check_trace(v);
	check_etag(v);
	free(v);
	return 0;
}
