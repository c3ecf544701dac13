/* review_platform: the connector that publishes review replies to the
 * platform a review came from (--reviews-url; docs/feeds.md). It speaks the
 * shape of Google Business Profile's reply call:
 *
 *   PUT {reviews-url}/v4/accounts/{portfolio_id}/locations/{pms_property_code}
 *       /reviews/{external_id}/reply      {"comment": "..."}
 *   -> 200 {"comment": "...", "updateTime": "<RFC 3339>"}
 *
 * (path segments percent-encoded). Any other answer, a refused
 * connection or no answer in REVIEW_PLATFORM_TIMEOUT_MS is a failure.
 * "sim:" accepts every reply in-process, so the demo works alone. */
#ifndef REVOPS_REVIEW_PLATFORM_H
#define REVOPS_REVIEW_PLATFORM_H
#include <stdint.h>
#include "core/common.h"

#define REVIEW_PLATFORM_TIMEOUT_MS 10000

struct review_platform;

/* Returns 0, or -1 (an unsupported URL, logged). */
int review_platform_open(const char *url, struct review_platform **out) WUR;
void review_platform_close(struct review_platform *rp);

struct review_reply {
	/* in */
	const char *account, *location, *review_id, *comment;
	/* out */
	int ok;
	long http_status; /* 0 without an answer */
	int64_t published_at;
	char error[200];
};

/* Sends one reply and fills its outcome. Returns 0, or -1 on a local
 * failure (out of memory). */
int review_platform_reply(struct review_platform *rp, struct review_reply *r) WUR;

#endif
