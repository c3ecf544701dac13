#include "feeds/review_platform.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "net/httpc.h"

struct review_platform {
	char base[512]; /* "" for sim: */
};

int review_platform_open(const char *url, struct review_platform **out)
{
	struct review_platform *rp = calloc(1, sizeof *rp);
	size_t n;

	*out = NULL;
	if (!rp)
		return -1;
	if (strcmp(url, "sim:")) {
		if ((strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) ||
		    strlen(url) >= sizeof rp->base) {
			log_msg(LOG_ERROR, "reviews", "--reviews-url must be sim: or an http(s) URL");
			free(rp);
			return -1;
		}
		snprintf(rp->base, sizeof rp->base, "%s", url);
		n = strlen(rp->base);
		while (n && rp->base[n - 1] == '/')
			rp->base[--n] = '\0';
	}
	*out = rp;
	return 0;
}

void review_platform_close(struct review_platform *rp)
{
	free(rp);
}

/* Appends s percent-encoded as one path segment (RFC 3986 unreserved
 * characters kept). */
static int segment(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p;
	int rc = 0;

	for (p = (const unsigned char *)s; *p && rc == 0; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~')
			rc = buf_putc(b, (char)*p);
		else
			rc = buf_printf(b, "%%%c%c", hex[*p >> 4], hex[*p & 15]);
	}
	return rc;
}

/* Reads a 200 answer: {"comment", "updateTime"}. */
static void read_answer(struct review_reply *r, long status, const struct buf *body)
{
	json_t *j = json_loadb(body->data ? body->data : "", body->len, 0, NULL);
	const char *t = json_string_value(json_object_get(j, "updateTime"));

	r->http_status = status;
	if (status != 200)
		snprintf(r->error, sizeof r->error, "the review platform answered HTTP %ld", status);
	else if (!t || clock_parse_time(t, &r->published_at) < 0)
		snprintf(r->error, sizeof r->error,
			 "the review platform's answer has no valid updateTime");
	else
		r->ok = 1;
	json_decref(j);
}

int review_platform_reply(struct review_platform *rp, struct review_reply *r)
{
	struct httpc_request q;
	struct buf url;
	json_t *body = json_pack("{s:s}", "comment", r->comment);
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	int rc = -1;

	r->ok = 0;
	r->http_status = 0;
	r->error[0] = '\0';
	json_decref(body);
	buf_init(&url, 4096);
	if (!text)
		goto out;
	if (!rp->base[0]) {
		r->ok = 1;
		r->http_status = 200;
		r->published_at = clock_now_ms();
		rc = 0;
		goto out;
	}
	if (buf_printf(&url, "%s/v4/accounts/", rp->base) < 0 || segment(&url, r->account) < 0 ||
	    buf_puts(&url, "/locations/") < 0 || segment(&url, r->location) < 0 ||
	    buf_puts(&url, "/reviews/") < 0 || segment(&url, r->review_id) < 0 ||
	    buf_puts(&url, "/reply") < 0)
		goto out;
	memset(&q, 0, sizeof q);
	q.method = "PUT";
	q.url = url.data;
	q.body = text;
	q.body_len = strlen(text);
	q.timeout_ms = REVIEW_PLATFORM_TIMEOUT_MS;
	q.max_response = 64 * 1024;
	if (httpc_perform(&q, 1) < 0) {
		buf_free(&q.response);
		goto out;
	}
	if (q.error != HTTPC_OK)
		snprintf(r->error, sizeof r->error, "no answer from the review platform: %s",
			 q.errmsg);
	else
		read_answer(r, q.status, &q.response);
	buf_free(&q.response);
	rc = 0;
out:
	buf_free(&url);
	free(text);
	return rc;
}
