/* trace: W3C Trace Context (traceparent) for the request a thread serves.
 *
 * The pipeline parses a client's `traceparent` (trace_parse), gives the
 * request a span id of its own and makes it the thread's current context
 * (trace_set) for as long as the handler runs; code below the handler that
 * calls out (the PMS connector) or records work for later (the outbox)
 * reads it with trace_current, so no domain signature carries it. An
 * absent or invalid header starts no trace: nothing is propagated. */
#ifndef REVOPS_TRACE_H
#define REVOPS_TRACE_H
#include <stddef.h>
#include "core/common.h"

/* "00-" 32 hex "-" 16 hex "-" 2 hex, plus NUL */
#define TRACE_PARENT_LEN 56
/* The longest traceparent value read; a later version may append fields. */
#define TRACE_PARENT_MAX 512

struct trace_ctx {
	char trace_id[33];  /* 32 lowercase hex, not all zero */
	char parent_id[17]; /* the caller's span (the incoming parent-id) */
	char span_id[17];   /* this request's span, made by trace_start */
	char flags[3];      /* trace-flags, 2 lowercase hex */
};

/* Parses a traceparent value (W3C Trace Context level 1, §3.2): version
 * 00 exactly as specified; a higher version (not ff) is read for its first
 * four fields when the value goes on with '-' or ends there. Upper-case
 * hex, an all-zero trace-id or parent-id, a value longer than
 * TRACE_PARENT_MAX or NULL are refused. Returns 0 and fills trace_id,
 * parent_id and flags (span_id is cleared), or -1. Pure. */
int trace_parse(const char *v, struct trace_ctx *out) WUR;

/* A fresh random span id (16 lowercase hex, not all zero) into span.
 * Returns 0 or -1 when the random source fails. */
int trace_new_span(char span[17]) WUR;

/* Formats the traceparent to send downstream: version 00, t's trace id
 * and flags, span as parent-id. out has TRACE_PARENT_LEN bytes. */
void trace_format(const struct trace_ctx *t, const char *span, char out[TRACE_PARENT_LEN]);

/* The calling thread's current trace context: set (copied) for the
 * duration of a request, NULL clears it. trace_current returns NULL when
 * none is set. */
void trace_set(const struct trace_ctx *t);
const struct trace_ctx *trace_current(void);

#endif
