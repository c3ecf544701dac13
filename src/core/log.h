/* log: structured logs on stderr, one line per record, JSON or text.
 * Never pass secrets (tokens, client secrets, signing keys) to these. */
#ifndef REVOPS_LOG_H
#define REVOPS_LOG_H
#include <stdint.h>
#include "core/common.h"

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

struct log_access {
	const char *request_id;
	const char *method;
	const char *path;  /* the raw path, without the query */
	const char *route; /* the matched route pattern, or "-" */
	int status;
	double duration_ms;
	const char *client;     /* client address */
	const char *portfolio;  /* authenticated portfolio or NULL */
	const char *principal;  /* client or user id, or NULL */
	const char *error_code; /* SVC-* code for errors, or NULL */
	uint64_t bytes;         /* response body bytes */
	/* W3C trace context, or all NULL when the request carried none */
	const char *trace_id, *span_id, *parent_span_id;
};

/* json = 1 for JSON lines, 0 for human text. */
void log_init(int json);
void log_msg(enum log_level level, const char *event, const char *fmt, ...) PRINTF(3, 4);
void log_access(const struct log_access *a);

#endif
