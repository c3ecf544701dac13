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
#include "core/buf.h"
#include "core/common.h"

#define HTTPC_DEFAULT_TIMEOUT_MS 15000L
#define HTTPC_DEFAULT_MAX_RESPONSE ((size_t)1024 * 1024)
/* Connections kept or opened per host by one thread's multi handle; more
 * requests to the same host in one batch wait for a free connection. */
#define HTTPC_MAX_HOST_CONNECTIONS 64L
/* Idle connections one thread keeps for reuse (oldest closed first). A
 * fixed size: libcurl's default (4 x the transfers still in the multi
 * handle) shrinks as a batch drains and closes connections just made. */
#define HTTPC_MAX_CACHED_CONNECTIONS 128L
/* Headers a request may give (more fail it with HTTPC_EOTHER). */
#define HTTPC_MAX_REQUEST_HEADERS 32

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
	const char *method; /* "POST" when NULL; "GET", "HEAD", "PUT", "DELETE", ... */
	const char *url;
	const char *body; /* sent for every method but GET and HEAD; may be NULL */
	size_t body_len;
	const char *const *headers; /* NULL-terminated "Name: value" list, may be NULL;
					* at most HTTPC_MAX_REQUEST_HEADERS.
					* Content-Type: application/json is added when body
					* != NULL and none is given; Expect: 100-continue is
					* never sent unless given. A header holding CR or LF
					* fails the request (HTTPC_EOTHER). */
	long timeout_ms;            /* total time for this request; <= 0: 15 s */
	size_t max_response; /* cap on response bytes kept (more: HTTPC_ETOOBIG); 0 = 1 MiB */
	const char *resolve; /* "host:port:address" pin for CURLOPT_RESOLVE (an
					* egress_target's resolve_entry), or NULL / "" */
	int egress_guard;    /* 1: refuse forbidden addresses (webhook targets) unless
					* httpc_opts.allow_private; 0: trusted URL (the PMS) */
	void *user;          /* the caller's, untouched */
	/* out */
	long status;            /* HTTP status, 0 when no response; may be set
					* with an error (e.g. HTTPC_ETOOBIG after the headers) */
	enum httpc_error error; /* HTTPC_OK when a response (any status) arrived */
	char errmsg[160];       /* short human reason (curl's error text) when error != OK */
	struct buf response;    /* body, NUL-terminated (data never NULL after a
					* 0 return); the caller buf_free()s it */
	double duration_ms;     /* from the start of httpc_perform to this request's end */
	int reused;             /* 1 when the response came over a connection kept
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
	/* 0 (the default): every socket opened for a request with egress_guard
	 * is checked with egress_address_allowed() first, and a forbidden
	 * address fails the request with HTTPC_EREFUSED_TARGET (the backstop
	 * behind the resolve pin). 1 (--allow-private-targets): no check.
	 * The check runs when a connection is opened: a connection kept from
	 * an unguarded request to the same host and port would be reused
	 * unchecked, so guarded and unguarded requests should not share a
	 * thread (the delivery engine has its own httpc_async client). */
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
/* An asynchronous client for one thread: requests are started one by one
 * and run concurrently on the client's own multi handle (connections kept
 * between requests), and finished ones are collected by httpc_async_poll,
 * so a slow request never holds back the others. Only httpc_async_wakeup
 * may be called from another thread. */
struct httpc_async;

/* Returns a new client or NULL (out of memory, or before httpc_global_init). */
struct httpc_async *httpc_async_new(void);
/* Ends every request still running (their out fields are not filled),
 * calling abandoned (when not NULL) for each so its owner can free it, and
 * frees the client. NULL is ignored. */
void httpc_async_free(struct httpc_async *a, void (*abandoned)(struct httpc_request *));
/* Starts req, which (with its strings) must stay valid until poll returns
 * it. Returns 0 when started, or 1 when it failed before any transfer: then
 * its out fields are final and it is NOT returned by poll. -1: out of
 * memory (req untouched but for response, which is safe to buf_free). */
int httpc_async_start(struct httpc_async *a, struct httpc_request *req) WUR;
/* Runs transfers for up to wait_ms (less when one finishes, a deadline
 * passes or httpc_async_wakeup is called) and stores up to cap finished
 * requests in done[], out fields final (duration_ms from its start).
 * Returns how many, or -1 when the multi handle failed (every running
 * request is then finished with HTTPC_EOTHER and returned by later polls). */
int httpc_async_poll(struct httpc_async *a, int wait_ms, struct httpc_request **done, size_t cap) WUR;
/* Requests started and not yet returned by poll. */
size_t httpc_async_running(const struct httpc_async *a);
/* Makes a poll in progress (or the next one) return at once. Thread-safe. */
void httpc_async_wakeup(struct httpc_async *a);

/* Closes the calling thread's kept connections and frees its multi handle.
 * The next httpc_perform on this thread starts a fresh one. */
void httpc_thread_cleanup(void);

#endif
