/* http: the request and response as the rest of revops sees them, free of
 * any HTTP library. http_server.c fills requests and sends responses. */
#ifndef REVOPS_HTTP_H
#define REVOPS_HTTP_H
#include <stddef.h>
#include <stdint.h>
#include "core/buf.h"
#include "core/common.h"

#define HTTP_BODY_MAX (1024 * 1024)
#define HTTP_MAX_HEADERS 24

struct request {
	const char *method;
	const char *path;        /* percent-decoded path, no query */
	char client[64];         /* peer address */
	struct buf body;         /* capped at HTTP_BODY_MAX */
	int framing_status;      /* nonzero: the transport refused the request (400/413) */
	const char *framing_msg; /* why, for the error body */
	void *conn;              /* the server's connection handle; only for http_* below */
	int64_t start_us;        /* monotonic arrival time */
};

struct response {
	int status;
	const char *content_type; /* static string; default application/json */
	struct buf body;
	int nheaders;
	char *hname[HTTP_MAX_HEADERS]; /* owned */
	char *hvalue[HTTP_MAX_HEADERS];
	int close; /* ask the server to close the connection */
};

/* A request header's value (first occurrence, case-insensitive name) or NULL. */
const char *http_header(const struct request *req, const char *name);
/* A query parameter's decoded value or NULL; present-but-empty gives "". */
const char *http_query(const struct request *req, const char *name);
/* 1 when the query string had a pair that does not decode (a bad %XX escape
 * or an encoded NUL); such a request is refused with 400. */
int http_query_malformed(const struct request *req);
/* Calls fn for every query parameter; stops early when fn returns nonzero,
 * and returns that value. */
int http_query_each(const struct request *req,
		    int (*fn)(void *arg, const char *name, const char *value), void *arg);

/* Adds or replaces a response header (copied). Returns 0 or -1 when full. */
int response_header(struct response *res, const char *name, const char *value);
void response_init(struct response *res);
void response_free(struct response *res);

#endif
