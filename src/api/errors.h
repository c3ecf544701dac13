/* errors: the error catalogue of API-CONTRACT §1, an SVC-* code and an
 * HTTP status for each error. Shared by the handler state (ctx.h: the
 * error shape hook) and respond, which writes the bodies. */
#ifndef REVOPS_ERRORS_H
#define REVOPS_ERRORS_H

enum err {
	ERR_REQUEST_MALFORMED,
	ERR_VALIDATION_FAILED,
	ERR_PORTFOLIO_REQUIRED,
	ERR_UNAUTHENTICATED,
	ERR_INSUFFICIENT_ROLE,
	ERR_PLAN_FEATURE_UNAVAILABLE,
	ERR_NOT_FOUND,
	ERR_METHOD_NOT_ALLOWED,
	ERR_CONFLICT,
	ERR_IDEMPOTENCY_IN_PROGRESS,
	ERR_WINDOW_EXPIRED,
	ERR_PAYLOAD_TOO_LARGE,
	ERR_UNSUPPORTED_MEDIA_TYPE,
	ERR_IDEMPOTENCY_KEY_REUSED,
	ERR_RATE_CEILING_EXCEEDED,
	ERR_GOVERNANCE_REJECTED,
	ERR_RATE_LIMITED,
	ERR_PMS_WRITE_FAILED,
	ERR_UNAVAILABLE,
	ERR_INTERNAL,
	ERR__COUNT
};

/* The SVC-* code and HTTP status of an error. */
const char *err_code(enum err e);
int err_status(enum err e);

#endif
