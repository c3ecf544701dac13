/* httpc: outbound HTTP for webhooks, mirrors, the audit stream and the PMS
 * connector. Batches of requests run concurrently on a per-thread libcurl
 * multi handle that keeps connections alive between batches. httpc.c is
 * the only file that includes curl/curl.h.
 *
 * Every request: HTTP/1.1, redirects never followed (a 3xx is returned as
 * is), http and https only, TLS peer and host verification on, no signals,
 * no proxy (environment variables such as https_proxy are ignored, so the
 * address connected to is the one the URL names), no cookies, response
 * body capped. */
#ifndef REVOPS_HTTPC_H
#define REVOPS_HTTPC_H
#include <stddef.h>
#include <stdint.h>
#include "buf.h"
#include "common.h"

#define HTTPC_DEFAULT_TIMEOUT_MS 15000L
#define HTTPC_DEFAULT_MAX_RESPONSE ((size_t)1024 * 1024)
/* Connections kept or opened per host by one thread's multi handle; more
 * requests to the same host in one batch wait for a free connection. */
#define HTTPC_MAX_HOST_CONNECTIONS 64L
/* Idle connections one thread keeps for reuse (oldest closed first). A
 * fixed size: libcurl's default (4 x the transfers still in the multi
 * handle) shrinks as a batch drains and closes connections just made. */
#define HTTPC_MAX_CACHED_CONNECTIONS 128L

enum httpc_error {
	HTTPC_OK = 0,              /* a response arrived (any status) */
	HTTPC_ETIMEOUT = 1,        /* timeout_ms passed first */
	HTTPC_ECONNECT = 2,        /* refused or unreachable, or the connection
				    * dropped before a complete response */
	HTTPC_ETLS = 3,            /* handshake or certificate failure */
	HTTPC_ERESOLVE = 4,        /* the host name did not resolve */
	HTTPC_ETOOBIG = 5,         /* the body exceeded max_response */
	HTTPC_EREFUSED_TARGET = 6, /* the URL's scheme (later: address) is not allowed */
	HTTPC_EOTHER = 7           /* anything else: bad URL or header, out of memory */
};

struct httpc_request {
	/* in */
	const char *method;            /* "POST" when NULL; "GET", "HEAD", "PUT", "DELETE", ... */
	const char *url;
	const char *body;              /* sent for every method but GET and HEAD; may be NULL */
	size_t body_len;
	const char *const *headers;    /* NULL-terminated "Name: value" list, may be NULL.
					* Content-Type: application/json is added when body
					* != NULL and none is given; Expect: 100-continue is
					* never sent unless given. A header holding CR or LF
					* fails the request (HTTPC_EOTHER). */
	long timeout_ms;               /* total time for this request; <= 0: 15 s */
	size_t max_response;           /* cap on response bytes kept (more: HTTPC_ETOOBIG); 0 = 1 MiB */
	/* out */
	long status;                   /* HTTP status, 0 when no response; may be set
					* with an error (e.g. HTTPC_ETOOBIG after the headers) */
	enum httpc_error error;        /* HTTPC_OK when a response (any status) arrived */
	char errmsg[160];              /* short human reason (curl's error text) when error != OK */
	struct buf response;           /* body, NUL-terminated (data never NULL after a
					* 0 return); the caller buf_free()s it */
	double duration_ms;            /* from the start of httpc_perform to this request's end */
	int reused;                    /* 1 when the response came over a connection kept
					* from an earlier transfer (CURLINFO_NUM_CONNECTS == 0) */
};

struct httpc_opts {
	/* Extra CA bundle (PEM file) for HTTPS receivers with a private CA. It is
	 * set as CURLOPT_CAINFO, which in libcurl 7.88 replaces the built-in CA
	 * *file*; the built-in CA *directory* (CURLOPT_CAPATH, /etc/ssl/certs on
	 * Debian) stays in use, so the system CAs remain trusted and this adds
	 * to them. When libcurl was built without a default CA directory,
	 * trust_ca replaces the system store; httpc_configure logs a warning
	 * then. NULL: system CAs only. Copied. */
	const char *trust_ca;
	/* Reserved for the SSRF guard of a later issue (address checks through
	 * CURLOPT_OPENSOCKETFUNCTION and resolve pinning); ignored for now. */
	int allow_private;
};

/* Calls curl_global_init and creates the thread-local key. Call once from
 * the main thread before any other thread starts. Returns 0 or -1. */
int httpc_global_init(void) WUR;
/* Frees the calling thread's multi handle and the process-wide state. Every
 * other thread that used httpc must have exited (or called
 * httpc_thread_cleanup) before. */
void httpc_global_cleanup(void);
/* Sets process-wide options (copied); call once after httpc_global_init and
 * before any thread calls httpc_perform. NULL restores the defaults. */
void httpc_configure(const struct httpc_opts *o);

/* Performs n requests concurrently and returns when every one finished or
 * timed out. Requests run on the calling thread's multi handle, which keeps
 * connections alive between calls, so repeated calls to the same host reuse
 * them; requests to the same URL in one call run in parallel on separate
 * connections (up to HTTPC_MAX_HOST_CONNECTIONS per host).
 *
 * Fills the out fields of every request (response is initialized by this
 * call: do not pass one holding data). Returns 0 when all were attempted
 * (inspect each request's error and status), or -1 on a setup failure (out
 * of memory, libcurl multi failure): then unfinished requests carry
 * HTTPC_EOTHER, and every response is still safe to buf_free(). Calling it
 * before httpc_global_init is such a failure.
 *
 * Thread-safe: each calling thread uses its own multi handle (thread-local,
 * freed at thread exit by a pthread key destructor, or by
 * httpc_thread_cleanup()). The caller's strings must stay valid until the
 * call returns. */
int httpc_perform(struct httpc_request *reqs, size_t n) WUR;
/* Closes the calling thread's kept connections and frees its multi handle.
 * The next httpc_perform on this thread starts a fresh one. */
void httpc_thread_cleanup(void);

#endif
