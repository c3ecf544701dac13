/* http_server: revops' own HTTP/1.1 server (event loops on epoll and a
 * worker pool for writes; docs/architecture.md, docs/http-library.md).
 * The bytes of a request are parsed by http_parse.c and checked by
 * http_check.c; this file owns the sockets and threads. */
#ifndef REVOPS_HTTP_SERVER_H
#define REVOPS_HTTP_SERVER_H
#include <stdint.h>
#include "core/common.h"
#include "http/http.h"

struct http_server;

/* Lanes of workers besides the writes' own (lane 0). */
#define HTTP_LANES 2
/* lane_of's answer for a write that runs on the loop thread, as reads do:
 * one whose handler never waits (it defers its answer, http_defer). */
#define HTTP_LANE_LOOP (-1)

struct http_server_opts {
	const char *host; /* IPv4 or IPv6 literal, or "localhost" */
	int port;         /* 0 = any free port */
	int threads;
	int max_connections;
	int idle_timeout_s; /* closes connections idle (or stalled) this long */
	int workers;        /* threads that run writes (POST/PUT/PATCH/DELETE) while their
				* connection is parked; 0 = run everything on the loop threads */
	/* NULL, or the lane of a write: HTTP_LANE_LOOP, 0, or 1..HTTP_LANES for one that
	 * the application keeps apart (one that waits on another service: a
	 * PMS, a booking engine; or calls from outside that come in bursts).
	 * Lane i has lane_workers[i - 1] threads of its own (0: its writes
	 * run in lane 0), and its writes queue while all are busy, so a
	 * service that hangs holds only its lane and the other writes go on.
	 * Called on a loop thread with the handler's arg; must be quick. */
	int (*lane_of)(void *arg, const struct request *req);
	int lane_workers[HTTP_LANES];
};

/* Called once per complete request, on a loop thread (reads, refusals
 * with req->framing_status set, writes of HTTP_LANE_LOOP) or a worker
 * thread (other writes). Fills res, or defers the answer (http_defer). */
typedef void (*http_handler_fn)(void *arg, struct request *req, struct response *res);

/* Called by a handler, on its thread, before it hands req to whatever
 * answers it later: the handler then returns with res unfilled, the
 * connection stays parked (not read; a hang-up closes it only after the
 * answer) and the request counts as in flight until http_resume. */
void http_defer(struct request *req);
/* Once per deferred request, from any thread: hands req back to its
 * loop, which calls then(arg) (NULL: nothing) on the loop thread, where
 * then fills req's response, and writes the answer. After this call req
 * and its response belong to the loop. http_server_stop waits for every
 * deferred request to be resumed. */
void http_resume(struct request *req, void (*then)(void *arg), void *arg);

int http_server_start(const struct http_server_opts *o, http_handler_fn fn, void *arg,
		      struct http_server **out) WUR;
/* Binds host:port exclusively (no SO_REUSEPORT: a port another process
 * holds is an error, "listen H:P: address already in use", logged) and
 * listens. Returns the socket, or -1. */
int http_listen(const char *host, int port) WUR;
/* http_server_start on fd, a socket from http_listen (o's host and port
 * are not used): for a process that must know its port is its own before
 * it touches anything else. fd belongs to the server from here, also on
 * failure. */
int http_server_start_fd(int fd, const struct http_server_opts *o, http_handler_fn fn, void *arg,
			 struct http_server **out) WUR;
/* The port actually bound. */
int http_server_port(struct http_server *s);
/* Stops accepting new connections and starts draining: requests in
 * flight go on (their answers close their connections), a request that
 * starts on an open connection from now on is refused with 503 (the
 * handler sees framing_status 503: the application writes the envelope),
 * idle connections are closed. A request whose head is still arriving was
 * sent before: it is in flight, and its head has 2 s to arrive whole (to
 * be answered 503) before its connection is closed (within 3 s). */
void http_server_quiesce(struct http_server *s);
/* Requests received (from their first byte) and not yet completed. */
int http_server_in_flight(struct http_server *s);
/* Stops accepting, then waits up to drain_ms for every loop to have seen
 * the drain and for requests in flight to finish. Returns how many were
 * still in flight at the deadline. */
int http_server_drain(struct http_server *s, int64_t drain_ms);
/* Closes every connection and stops the threads, once each deferred
 * request was resumed and answered. */
void http_server_stop(struct http_server *s);

#endif
