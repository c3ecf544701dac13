/* http_server: revops' own HTTP/1.1 server on epoll, behind http_server.h.
 *
 * Why our own (docs/http-library.md): libmicrohttpd 0.9.75 frames requests
 * loosely and answers some bad input with its own HTML pages (a 500 for a
 * long chunk-size line among them) that no hook can replace. Here every
 * byte goes through http_parse.c and http_check.c, and every refusal is
 * answered by the application in its envelope.
 *
 * Threads: `threads` event loops share the listening socket (each epoll
 * watches it with EPOLLEXCLUSIVE, so one loop wakes per connection); a
 * connection stays on the loop that accepted it. Reads are answered on the
 * loop thread. Writes go to `workers` threads, since they may wait on the
 * database write lock or a PMS call; the connection is parked (not read)
 * meanwhile, and the worker hands it back through the loop's eventfd. A
 * write that never waits (lane_of: HTTP_LANE_LOOP) runs on the loop; its
 * handler may defer the answer (http_defer), the connection then parked
 * the same way until another thread hands it back (http_resume).
 *
 * Per connection: one input buffer (the head, up to HTTP_HEAD_MAX, then
 * body bytes as they arrive), one output buffer, and the state of the
 * request it is on. Requests on a connection are served strictly in order:
 * the next head is parsed only once the previous answer is written. */
#include "http/http_server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "http/http_check.h"
#include "http/http_parse.h"

#define IN_CHUNK 16384 /* bytes read at a time */
#define IN_INITIAL 4096
/* After an answer with close (a refusal, a 413 before the body) the server
 * reads and discards what the client still sends, so a client that sends
 * its whole body before reading (no Expect: 100-continue) gets the answer
 * instead of a reset: while bytes keep coming (a gap of LINGER_GAP_MS ends
 * it), for at most LINGER_TOTAL_MS and LINGER_MAX bytes, as nginx's
 * lingering close does. */
#define LINGER_GAP_MS 2000
/* While draining, a request head already arriving gets this long from the
 * moment its loop saw the drain to arrive whole (and be answered 503);
 * then its connection is closed (at the next once-a-second sweep). */
#define DRAIN_HEAD_MS 2000
#define LINGER_TOTAL_MS 30000
#define LINGER_MAX (64 * 1024 * 1024)
#define MAX_EVENTS 64
#define ACCEPT_BATCH 32
#define MIN_RATE 1000 /* bytes a second a body or an answer must average */

enum conn_state {
	S_HEAD,    /* reading a request head */
	S_BODY,    /* reading a Content-Length body */
	S_CHUNKED, /* reading a chunked body */
	S_WORKER,  /* a worker thread runs the handler; not read meanwhile */
	S_WRITE,   /* writing the answer */
	S_LINGER,  /* answer sent with close: draining input until EOF */
};

struct loop;

struct conn {
	struct loop *lp;
	int fd;
	enum conn_state state;
	int dead;        /* hung up while parked with a worker */
	uint32_t events; /* what epoll watches for it now */
	int64_t deadline_ms;
	int64_t phase_ms;     /* when the body or the answer started moving */
	uint64_t phase_bytes; /* bytes of it moved since */
	char *in;
	size_t in_len, in_cap, scan;
	size_t head_len; /* length of the current request's head */
	size_t pos;      /* end of what the current request consumed */
	struct http_head head;
	struct http_chunked chunked;
	uint64_t body_left;
	struct buf out;
	size_t out_off;
	size_t discarded;
	int64_t linger_end_ms; /* S_LINGER: the total time bound */
	int keep_alive;
	int pending; /* pipelined input waits: see conn_pump */
	int counted; /* in s->in_flight: owed an answer (owe) */
	struct request req;
	struct response res;
	char *path; /* decoded path of the current request */
	const char *raw_query;
	int query_parsed;
	struct http_query query;
	struct conn *prev, *next; /* the loop's list */
	struct conn *qnext;       /* worker queue, then the loop's done list */
	/* The handler answers later (http_defer); then(then_arg) runs on the
	 * loop before the answer is written (http_resume). */
	int deferred;
	void (*then)(void *arg);
	void *then_arg;
};

struct loop {
	struct http_server *s;
	pthread_t thread;
	int started;
	int ep, wake;
	pthread_mutex_t lock; /* guards done */
	struct conn *done;
	struct conn *conns;
	struct conn *graves; /* closed, freed after the current batch */
	atomic_int stop;
	time_t date_at;
	char date[40];
	int64_t swept_ms;
	int64_t accept_resume_ms; /* out of descriptors: accepting again at (0: accepting) */
	atomic_int deferred;      /* its requests deferred and not yet handed back */
	int drain_seen;           /* swept since draining (sweep_draining) */
	int64_t drain_heads_ms;   /* while draining: when heads still arriving are closed */
};

/* A pool of worker threads and the queue of writes they take, oldest
 * first. */
struct lane {
	struct http_server *s;
	pthread_t *threads;
	int n;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct conn *head, *tail;
	int stopping;
};

/* The lanes: 0 for the writes, then those the application names
 * (http_server_opts.lane_of). */
#define LANES (1 + HTTP_LANES)

struct http_server {
	http_handler_fn fn;
	void *arg;
	atomic_int lfd;
	int port;
	int idle_ms;
	int max_conns;
	atomic_int nconns;
	atomic_int in_flight; /* requests owed an answer, from their first byte */
	/* Shutting down (http_server_quiesce): a request that starts now is
	 * refused with 503, an answer closes its connection, an idle
	 * connection is closed. */
	atomic_int draining;
	atomic_int drain_seen; /* loops that have swept since draining */
	struct loop *loops;
	int nloops;
	struct lane lanes[LANES];
	int (*lane_of)(void *arg, const struct request *req);
};

static struct conn *conn_of(const struct request *req)
{
	return req->conn;
}

const char *http_header(const struct request *req, const char *name)
{
	const struct conn *c = conn_of(req);
	size_t i;

	for (i = 0; i < c->head.nfields; i++)
		if (!strcasecmp(c->head.fields[i].name, name))
			return c->head.fields[i].value;
	return NULL;
}

static void parse_query(struct conn *c)
{
	c->query_parsed = 1;
	http_query_parse(c->raw_query, &c->query);
}

int http_query_malformed(const struct request *req)
{
	struct conn *c = conn_of(req);

	if (!c->query_parsed)
		parse_query(c);
	return c->query.malformed;
}

const char *http_query(const struct request *req, const char *name)
{
	struct conn *c = conn_of(req);
	int i;

	if (!c->query_parsed)
		parse_query(c);
	for (i = 0; i < c->query.n; i++)
		if (!strcmp(c->query.name[i], name))
			return c->query.value[i];
	return NULL;
}

int http_query_each(const struct request *req,
		    int (*fn)(void *arg, const char *name, const char *value), void *arg)
{
	struct conn *c = conn_of(req);
	int i, r;

	if (!c->query_parsed)
		parse_query(c);
	for (i = 0; i < c->query.n; i++)
		if ((r = fn(arg, c->query.name[i], c->query.value[i])) != 0)
			return r;
	return 0;
}

void response_init(struct response *res)
{
	memset(res, 0, sizeof *res);
	res->status = 500;
	buf_init(&res->body, 0);
}

void response_free(struct response *res)
{
	int i;

	for (i = 0; i < res->nheaders; i++) {
		free(res->hname[i]);
		free(res->hvalue[i]);
	}
	res->nheaders = 0;
	buf_free(&res->body);
}

int response_header(struct response *res, const char *name, const char *value)
{
	char *v;
	int i;

	for (i = 0; i < res->nheaders; i++)
		if (!strcasecmp(res->hname[i], name)) {
			v = strdup(value);
			if (!v)
				return -1;
			free(res->hvalue[i]);
			res->hvalue[i] = v;
			return 0;
		}
	if (res->nheaders == HTTP_MAX_HEADERS)
		return -1;
	res->hname[res->nheaders] = strdup(name);
	res->hvalue[res->nheaders] = strdup(value);
	if (!res->hname[res->nheaders] || !res->hvalue[res->nheaders]) {
		free(res->hname[res->nheaders]);
		free(res->hvalue[res->nheaders]);
		return -1;
	}
	res->nheaders++;
	return 0;
}

/* ------------------------------------------------------------ connections */

/* Sets what epoll watches for c; a no-op (no system call) when unchanged,
 * which is the common case of one keep-alive request after another. */
static void set_events(struct conn *c, uint32_t ev)
{
	struct epoll_event e = {.events = ev, .data.ptr = c};

	if (ev == c->events)
		return;
	c->events = ev;
	(void)epoll_ctl(c->lp->ep, EPOLL_CTL_MOD, c->fd, &e);
}

/* Counts c's current request, from its first byte on, among those the
 * drain waits for (once). */
static void owe(struct conn *c)
{
	if (c->counted)
		return;
	atomic_fetch_add(&c->lp->s->in_flight, 1);
	c->counted = 1;
}

/* Ends the current request's accounting and frees what it owned; the
 * input buffer and the connection stay. */
static void request_end(struct conn *c)
{
	if (c->counted)
		atomic_fetch_sub(&c->lp->s->in_flight, 1);
	c->counted = 0;
	buf_free(&c->req.body);
	response_free(&c->res);
	http_query_free(&c->query);
	c->query_parsed = 0;
	free(c->path);
	c->path = NULL;
	c->raw_query = NULL;
	memset(&c->req, 0, sizeof c->req);
	memset(&c->head, 0, offsetof(struct http_head, fields));
	memset(&c->chunked, 0, sizeof c->chunked);
}

/* Closes c. The memory stays until the loop's current batch of events is
 * handled (bury), so nothing that still points at c in this batch reads
 * freed memory; a closed connection has fd -1 and is skipped. */
static void conn_close(struct conn *c)
{
	struct loop *lp = c->lp;

	if (c->fd < 0)
		return;
	request_end(c);
	(void)epoll_ctl(lp->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	if (c->prev)
		c->prev->next = c->next;
	else
		lp->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = lp->graves;
	lp->graves = c;
	atomic_fetch_sub(&lp->s->nconns, 1);
}

static void bury(struct loop *lp)
{
	struct conn *c;

	while ((c = lp->graves) != NULL) {
		lp->graves = c->next;
		buf_free(&c->out);
		free(c->in);
		free(c);
	}
}

/* Makes room for IN_CHUNK more bytes; the buffer never holds more than
 * the head plus HTTP_HEAD_MAX of unconsumed input. Returns 0 or -1. */
static int in_reserve(struct conn *c)
{
	size_t want = c->in_len + IN_CHUNK, cap = c->in_cap ? c->in_cap : IN_INITIAL;
	char *p;

	if (c->in_cap - c->in_len >= 1024)
		return 0;
	while (cap < want)
		cap *= 2;
	if (cap > 2 * HTTP_HEAD_MAX + IN_CHUNK)
		return -1;
	p = realloc(c->in, cap);
	if (!p)
		return -1;
	c->in = p;
	c->in_cap = cap;
	return 0;
}

static const char *reason(int status)
{
	/* A table: one status to a line. */
	/* clang-format off */
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 412: return "Precondition Failed";
	case 413: return "Content Too Large";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Content";
	case 428: return "Precondition Required";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Status";
	}
	/* clang-format on */
}

static const char *http_date(struct loop *lp)
{
	time_t now = time(NULL);
	struct tm tm;

	if (now != lp->date_at) {
		gmtime_r(&now, &tm);
		strftime(lp->date, sizeof lp->date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
		lp->date_at = now;
	}
	return lp->date;
}

/* 1 when the comma-separated Connection header value names token. */
static int connection_has(const char *v, const char *token)
{
	size_t n = strlen(token);

	while (v && *v) {
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		if (!strncasecmp(v, token, n) &&
		    (v[n] == '\0' || v[n] == ',' || v[n] == ' ' || v[n] == '\t'))
			return 1;
		v = strchr(v, ',');
	}
	return 0;
}

/* Serialises c->res into c->out. Decides whether the connection stays open
 * (HTTP/1.1 unless either side said close; HTTP/1.0 only on keep-alive). */
static int serialize(struct conn *c)
{
	struct response *res = &c->res;
	const char *conn_hdr = c->head.method ? http_header(&c->req, "Connection") : NULL;
	int head_only = c->req.method && !strcmp(c->req.method, "HEAD");
	int i, r;

	if (res->close || !c->head.method || connection_has(conn_hdr, "close") ||
	    atomic_load(&c->lp->s->draining))
		c->keep_alive = 0;
	else
		c->keep_alive = c->head.minor >= 1 || connection_has(conn_hdr, "keep-alive");
	buf_reset(&c->out);
	/* RFC 9110 §15.4.5: a 304 carries no representation metadata beyond
	 * ETag, Vary and the caching fields; a Content-Type there made clients
	 * such as Stoplight Prism's proxy parse the empty body as JSON. */
	if (res->status == 304)
		r = buf_printf(&c->out, "HTTP/1.1 304 %s\r\nDate: %s\r\n", reason(304),
			       http_date(c->lp));
	else
		r = buf_printf(&c->out, "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Type: %s\r\n",
			       res->status, reason(res->status), http_date(c->lp),
			       res->content_type ? res->content_type : "application/json");
	/* RFC 9110 §8.6: no Content-Length on a 204 (nor a body on a 304). */
	if (!r && res->status != 204 && res->status != 304)
		r = buf_printf(&c->out, "Content-Length: %zu\r\n", res->body.len);
	/* Header lines appended piecewise: a printf per line cost more than
	 * the rest of the head (bench/callgrind.sh). */
	for (i = 0; i < res->nheaders && !r; i++)
		r = buf_puts(&c->out, res->hname[i]) || buf_append(&c->out, ": ", 2) ||
		    buf_puts(&c->out, res->hvalue[i]) || buf_append(&c->out, "\r\n", 2);
	if (!r && !c->keep_alive)
		r = buf_puts(&c->out, "Connection: close\r\n");
	else if (!r && c->head.minor == 0)
		r = buf_puts(&c->out, "Connection: keep-alive\r\n");
	if (!r)
		r = buf_puts(&c->out, "\r\n");
	if (!r && !head_only && res->body.len && res->status != 204 && res->status != 304)
		r = buf_append(&c->out, res->body.data, res->body.len);
	c->out_off = 0;
	return r;
}

static void conn_advance(struct conn *c);
static int take_body(struct conn *c);

/* Starts the clock of a body being read or an answer being written. */
static void phase_start(struct conn *c)
{
	c->phase_ms = clock_mono_ms();
	c->phase_bytes = 0;
	c->deadline_ms = c->phase_ms + c->lp->s->idle_ms;
}

/* Counts bytes of the body or answer and moves its deadline: after the
 * idle timeout's grace it must average MIN_RATE bytes a second, so a
 * client that trickles a byte now and then (or reads an answer that way)
 * cannot hold a connection for long; an honest slow link keeps earning
 * time. */
static void phase_progress(struct conn *c, size_t bytes)
{
	c->phase_bytes += bytes;
	c->deadline_ms =
		c->phase_ms + c->lp->s->idle_ms + (int64_t)(c->phase_bytes * 1000 / MIN_RATE);
}

/* Writes what is pending; on completion moves to the next request, or to
 * lingering when the connection closes. */
static void conn_write(struct conn *c)
{
	size_t sent = 0;
	ssize_t n;

	while (c->out_off < c->out.len) {
		n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			set_events(c, EPOLLOUT);
			phase_progress(c, sent);
			return;
		}
		if (n <= 0) {
			conn_close(c);
			return;
		}
		c->out_off += (size_t)n;
		sent += (size_t)n;
	}
	if (c->out.cap > 64 * 1024)
		buf_free(&c->out); /* a big answer's buffer is not kept while idle */
	request_end(c);
	if (!c->keep_alive) {
		shutdown(c->fd, SHUT_WR);
		c->state = S_LINGER;
		c->linger_end_ms = clock_mono_ms() + LINGER_TOTAL_MS;
		c->deadline_ms = clock_mono_ms() + LINGER_GAP_MS;
		set_events(c, EPOLLIN);
		return;
	}
	/* Keep what followed the request (a pipelined one) and go on. */
	memmove(c->in, c->in + c->pos, c->in_len - c->pos);
	c->in_len -= c->pos;
	c->pos = c->scan = c->head_len = 0;
	c->state = S_HEAD;
	c->deadline_ms = clock_mono_ms() + c->lp->s->idle_ms;
	set_events(c, EPOLLIN);
	c->pending = c->in_len > 0;
}

static void respond(struct conn *c)
{
	if (serialize(c) < 0) {
		conn_close(c);
		return;
	}
	c->state = S_WRITE;
	phase_start(c);
	conn_write(c);
}

static int is_write(const char *method)
{
	return strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "OPTIONS");
}

/* Queues c, its connection parked, for a worker of lane l. */
static void enqueue(struct lane *l, struct conn *c)
{
	c->state = S_WORKER;
	set_events(c, 0);
	pthread_mutex_lock(&l->lock);
	c->qnext = NULL;
	if (l->tail)
		l->tail->qnext = c;
	else
		l->head = c;
	l->tail = c;
	pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

/* Set by http_defer on the thread that runs the handler, which reads and
 * clears it once the handler returns (ran_deferred). */
static _Thread_local int deferred_here;

/* 1 when the handler that just returned on this thread deferred its
 * answer. */
static int ran_deferred(void)
{
	int d = deferred_here;

	deferred_here = 0;
	return d;
}

void http_defer(struct request *req)
{
	struct conn *c = conn_of(req);

	if (c->state != S_WORKER) { /* on the loop: park it as a worker would */
		c->state = S_WORKER;
		set_events(c, 0);
	}
	c->deferred = 1;
	atomic_fetch_add(&c->lp->deferred, 1);
	deferred_here = 1;
}

/* Puts c on its loop's done list (any thread); the loop answers it. The
 * eventfd is written only when the list was empty: a loop that has not
 * taken the list yet will see every connection on it. */
static void hand_back(struct conn *c)
{
	struct loop *lp = c->lp;
	uint64_t one = 1;
	int was_empty;

	pthread_mutex_lock(&lp->lock);
	was_empty = lp->done == NULL;
	c->qnext = lp->done;
	lp->done = c;
	pthread_mutex_unlock(&lp->lock);
	if (was_empty)
		(void)!write(lp->wake, &one, sizeof one);
}

void http_resume(struct request *req, void (*then)(void *arg), void *arg)
{
	struct conn *c = conn_of(req);

	c->then = then;
	c->then_arg = arg;
	hand_back(c);
}

/* Runs the handler: inline for reads, refusals and writes of the loop's
 * lane (HTTP_LANE_LOOP), on a worker for other writes (of the lane of the
 * service a write waits on, when it has workers). */
static void dispatch(struct conn *c)
{
	struct http_server *s = c->lp->s;
	int l = 0;

	response_init(&c->res);
	if (s->lanes[0].n && !c->req.framing_status && is_write(c->req.method) &&
	    (l = s->lane_of ? s->lane_of(s->arg, &c->req) : 0) != HTTP_LANE_LOOP) {
		enqueue(&s->lanes[l > 0 && l < LANES && s->lanes[l].n ? l : 0], c);
		return;
	}
	s->fn(s->arg, &c->req, &c->res);
	if (!ran_deferred())
		respond(c);
}

/* Answers the current request with a refusal of the transport (the
 * application writes the envelope); the connection closes after it. */
static void refuse(struct conn *c, int status, const char *msg)
{
	owe(c);
	if (!c->req.method) {
		c->req.method = c->head.method ? c->head.method : "-";
		c->req.path = "-";
		c->req.conn = c;
		buf_init(&c->req.body, HTTP_BODY_MAX);
	}
	c->head.method = NULL; /* no keep-alive, and no fields to look up */
	c->head.nfields = 0;
	c->req.framing_status = status;
	c->req.framing_msg = msg;
	c->pos = c->in_len;
	dispatch(c);
}

/* Percent-decodes the path part of target (checked by http_check_target:
 * every escape is well-formed, none is NUL or '/'). */
static char *decode_path(const char *target, const char **query)
{
	const char *q = strchr(target, '?');
	size_t n = q ? (size_t)(q - target) : strlen(target), i, o = 0;
	char *p = malloc(n + 1);

	*query = q ? q + 1 : NULL;
	if (!p)
		return NULL;
	for (i = 0; i < n; i++) {
		if (target[i] == '%') {
			p[o++] = (char)(hex_value(target[i + 1]) << 4 | hex_value(target[i + 2]));
			i += 2;
		} else {
			p[o++] = target[i];
		}
	}
	p[o] = '\0';
	return p;
}

/* A complete head is in c->in[0..end): parse and check it, set up the
 * request, and choose how its body is read. */
static void start_request(struct conn *c, size_t end)
{
	struct http_server *s = c->lp->s;
	const char *msg = NULL, *te;
	int st;

	c->head_len = c->pos = end;
	owe(c);
	st = http_parse_head(c->in, end, &c->head, &msg);
	if (st)
		c->head.method = NULL; /* maybe not a token: not for the log */
	if (!st)
		st = http_check_target(c->head.target, &msg);
	c->req.conn = c;
	c->req.method = c->head.method;
	c->req.start_us = clock_mono_us();
	c->req.path = "-";
	buf_init(&c->req.body, HTTP_BODY_MAX);
	if (!st) {
		/* Decoded before the field checks, so their refusals are
		 * answered in the path's error format (SCIM's or ours). */
		c->path = decode_path(c->head.target, &c->raw_query);
		if (!c->path) {
			conn_close(c);
			return;
		}
		c->req.path = c->path;
	}
	if (!st && c->head.minor >= 1 && !http_header(&c->req, "Host"))
		st = 400, msg = "a Host header is required in HTTP/1.1";
	if (!st && atomic_load(&s->draining))
		st = 503,
		msg = "the server is shutting down: retry (on another node, or here shortly)";
	if (!st)
		st = http_check_fields(c->head.fields, c->head.nfields, HTTP_BODY_MAX, &msg);
	if (st) {
		refuse(c, st, msg);
		return;
	}
	te = http_header(&c->req, "Transfer-Encoding");
	if (te) {
		c->state = S_CHUNKED;
	} else {
		const char *cl = http_header(&c->req, "Content-Length");

		c->body_left = cl ? strtoull(cl, NULL, 10) : 0;
		c->state = c->body_left ? S_BODY : S_HEAD;
	}
	if (c->state != S_HEAD && c->in_len == end && c->head.minor >= 1) {
		const char *exp = http_header(&c->req, "Expect");

		if (exp && !strcasecmp(exp, "100-continue"))
			(void)!send(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25, MSG_NOSIGNAL);
	}
	if (c->state == S_HEAD) {
		dispatch(c);
		return;
	}
	phase_start(c);
	phase_progress(c, c->in_len - end);
	(void)take_body(c);
}

/* Moves body bytes from the input buffer into the request; dispatches
 * when the body is complete. Returns 1 when the request was dispatched or
 * refused, 0 when more input is needed. */
static int take_body(struct conn *c)
{
	size_t avail = c->in_len - c->pos, n;
	const char *msg;
	int r;

	if (c->state == S_BODY) {
		n = avail < c->body_left ? avail : (size_t)c->body_left;
		if (buf_append(&c->req.body, c->in + c->pos, n) < 0) {
			refuse(c, 413, "request body larger than 1 MiB");
			return 1;
		}
		c->pos += n;
		c->body_left -= n;
		r = c->body_left == 0;
	} else {
		r = http_chunked_feed(&c->chunked, c->in + c->pos, avail, &n, &c->req.body, &msg);
		c->pos += n;
		if (r > 1) {
			refuse(c, r, msg);
			return 1;
		}
	}
	if (r) {
		c->state = S_HEAD; /* dispatch() or a worker sets the real state */
		dispatch(c);
		return 1;
	}
	/* Keep the head, drop the consumed body bytes. */
	memmove(c->in + c->head_len, c->in + c->pos, c->in_len - c->pos);
	c->in_len -= c->pos - c->head_len;
	c->pos = c->head_len;
	return 0;
}

/* Makes what progress the buffered input allows. */
static void conn_advance(struct conn *c)
{
	size_t end, skip;

	if (c->state == S_HEAD) {
		/* RFC 9112 §2.2: empty lines before a request line are ignored. */
		for (skip = 0; skip < c->in_len && (c->in[skip] == '\r' || c->in[skip] == '\n');)
			skip++;
		if (skip) {
			memmove(c->in, c->in + skip, c->in_len - skip);
			c->in_len -= skip;
			c->scan = 0;
		}
		if (c->in_len)
			owe(c); /* a head on its way is owed an answer */
		if (!http_head_plausible(c->in, c->in_len)) {
			refuse(c, 400, "not an HTTP/1.1 request");
			return;
		}
		end = http_head_end(c->in, c->in_len, &c->scan);
		if (!end || end > HTTP_HEAD_MAX) {
			if (end || c->in_len > HTTP_HEAD_MAX)
				refuse(c, 431, "request head larger than 32 KiB");
			return;
		}
		start_request(c, end);
		return;
	}
	if (c->state == S_BODY || c->state == S_CHUNKED)
		(void)take_body(c);
}

/* Serves what is buffered, pipelined requests included, one after the
 * other: a loop, not a recursion through conn_write, so a client that
 * pipelines thousands of small requests cannot exhaust the stack. */
static void conn_pump(struct conn *c)
{
	do {
		c->pending = 0;
		conn_advance(c);
	} while (c->fd >= 0 && c->pending);
}

static void conn_read(struct conn *c)
{
	ssize_t n;

	if (c->state == S_LINGER) {
		char sink[IN_CHUNK];

		n = recv(c->fd, sink, sizeof sink, 0);
		if (n > 0 && (c->discarded += (size_t)n) < LINGER_MAX) {
			int64_t now = clock_mono_ms();

			c->deadline_ms = now + LINGER_GAP_MS < c->linger_end_ms ? now + LINGER_GAP_MS
										: c->linger_end_ms;
			return;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		conn_close(c);
		return;
	}
	if (c->state != S_HEAD && c->state != S_BODY && c->state != S_CHUNKED)
		return;
	if (in_reserve(c) < 0) {
		conn_close(c);
		return;
	}
	n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len - 1, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	if (c->state == S_HEAD && c->in_len == 0)
		c->deadline_ms = clock_mono_ms() + c->lp->s->idle_ms; /* a head's whole time */
	else if (c->state != S_HEAD)
		phase_progress(c, (size_t)n);
	c->in_len += (size_t)n;
	conn_pump(c);
}

/* Out of descriptors (EMFILE, ENFILE): the listening socket stays
 * readable, so a loop that kept watching it would spin a core accepting
 * nothing. It stops watching for ACCEPT_PAUSE_MS. An episode is logged
 * once, as it begins, and ends (logged too) once FD_QUIET_MS pass without
 * running out: a descriptor another thread frees for a moment lets one
 * connection in without ending it, so the log does not flicker. */
#define ACCEPT_PAUSE_MS 100
#define FD_QUIET_MS 1000
#define FD_RESERVE 128
static atomic_int fd_episode;
static _Atomic int64_t fd_short_ms; /* when accept last ran out */

static void accept_pause(struct loop *lp, int fd)
{
	int was = 0, err = errno;

	(void)epoll_ctl(lp->ep, EPOLL_CTL_DEL, fd, NULL);
	lp->accept_resume_ms = clock_mono_ms() + ACCEPT_PAUSE_MS;
	atomic_store(&fd_short_ms, lp->accept_resume_ms - ACCEPT_PAUSE_MS);
	if (atomic_compare_exchange_strong(&fd_episode, &was, 1))
		log_msg(LOG_ERROR, "accept",
			"out of file descriptors (%s) with %d connections open: new connections"
			" wait; raise the limit (ulimit -n, LimitNOFILE=) or lower"
			" --max-connections",
			strerror(err), atomic_load(&lp->s->nconns));
}

/* Ends an episode of running out once FD_QUIET_MS passed without it. */
static void accept_episode_end(int64_t now)
{
	if (atomic_load(&fd_episode) && now - atomic_load(&fd_short_ms) >= FD_QUIET_MS &&
	    atomic_exchange(&fd_episode, 0))
		log_msg(LOG_INFO, "accept", "file descriptors free again: accepting");
}

/* Watches the listening socket again once a pause is over. */
static void accept_resume(struct loop *lp)
{
	struct epoll_event e = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL};
	int fd = atomic_load(&lp->s->lfd);

	if (!lp->accept_resume_ms || clock_mono_ms() < lp->accept_resume_ms)
		return;
	lp->accept_resume_ms = 0;
	if (fd >= 0)
		(void)epoll_ctl(lp->ep, EPOLL_CTL_ADD, fd, &e);
}

static void accept_some(struct loop *lp)
{
	struct http_server *s = lp->s;
	struct sockaddr_storage ss;
	socklen_t sl;
	struct conn *c;
	struct epoll_event e;
	int fd, i, one = 1;

	for (i = 0; i < ACCEPT_BATCH; i++) {
		sl = sizeof ss;
		fd = accept4(atomic_load(&s->lfd), (struct sockaddr *)&ss, &sl,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE))
			accept_pause(lp, atomic_load(&s->lfd));
		if (fd < 0)
			return;
		if (atomic_fetch_add(&s->nconns, 1) >= s->max_conns || !(c = calloc(1, sizeof *c))) {
			atomic_fetch_sub(&s->nconns, 1);
			close(fd);
			continue;
		}
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		c->lp = lp;
		c->fd = fd;
		c->state = S_HEAD;
		c->deadline_ms = clock_mono_ms() + s->idle_ms;
		buf_init(&c->out, 0);
		snprintf(c->req.client, sizeof c->req.client, "unknown");
		if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, c->req.client,
				  sizeof c->req.client);
		else if (ss.ss_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, c->req.client,
				  sizeof c->req.client);
		c->next = lp->conns;
		if (lp->conns)
			lp->conns->prev = c;
		lp->conns = c;
		e.events = c->events = EPOLLIN;
		e.data.ptr = c;
		if (epoll_ctl(lp->ep, EPOLL_CTL_ADD, fd, &e) < 0)
			conn_close(c);
	}
}

/* Answers the connections whose worker finished. */
static void take_done(struct loop *lp)
{
	struct conn *c, *next;
	uint64_t v;

	(void)!read(lp->wake, &v, sizeof v);
	pthread_mutex_lock(&lp->lock);
	c = lp->done;
	lp->done = NULL;
	pthread_mutex_unlock(&lp->lock);
	for (; c; c = next) {
		next = c->qnext;
		if (c->deferred) {
			c->deferred = 0;
			atomic_fetch_sub(&lp->deferred, 1);
		}
		if (c->then) {
			c->then(c->then_arg);
			c->then = NULL;
		}
		if (c->dead) {
			conn_close(c);
			continue;
		}
		respond(c);
		if (c->fd >= 0 && c->pending)
			conn_pump(c);
	}
}

/* 1 when bytes wait in fd's socket that the loop has not read yet. */
static int bytes_waiting(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/* While draining: closes each connection idle between requests, unless a
 * request's first bytes already wait in its socket (sent before the
 * drain, so owed its 503), and gives each head still arriving until
 * DRAIN_HEAD_MS after the loop saw the drain. Each loop's first such sweep
 * is counted after what it owes is (http_server_drain waits for all). */
static void sweep_draining(struct loop *lp, int64_t now)
{
	struct conn *c, *next;

	if (!lp->drain_seen)
		lp->drain_heads_ms = now + DRAIN_HEAD_MS;
	for (c = lp->conns; c; c = next) {
		next = c->next;
		if (c->state != S_HEAD)
			continue;
		if (c->in_len == 0 && !bytes_waiting(c->fd)) {
			conn_close(c); /* idle between requests: no answer owed */
			continue;
		}
		owe(c);
		if (c->deadline_ms > lp->drain_heads_ms)
			c->deadline_ms = lp->drain_heads_ms;
	}
	if (!lp->drain_seen) {
		lp->drain_seen = 1;
		atomic_fetch_add(&lp->s->drain_seen, 1);
	}
}

/* Closes connections past their deadline, once a second. A request head
 * must arrive whole within the idle timeout of its first byte; a body or
 * an answer must average MIN_RATE bytes a second after the idle timeout's
 * grace (phase_progress); an idle keep-alive connection gets the idle
 * timeout. Runs sweep_draining while draining. Also ends an
 * out-of-descriptors episode that has gone quiet. */
static void sweep(struct loop *lp)
{
	int64_t now = clock_mono_ms();
	struct conn *c, *next;

	accept_episode_end(now);
	if (atomic_load(&lp->s->draining))
		sweep_draining(lp, now);
	if (now - lp->swept_ms < 1000)
		return;
	lp->swept_ms = now;
	for (c = lp->conns; c; c = next) {
		next = c->next;
		if (c->state != S_WORKER && now >= c->deadline_ms)
			conn_close(c);
	}
}

static void write_more(struct conn *c)
{
	conn_write(c);
	if (c->fd >= 0 && c->pending)
		conn_pump(c);
}

/* A parked connection (its worker still runs) reported a hang-up: stop
 * watching it, so level-triggered epoll does not spin, and close it when
 * the worker hands it back. */
static void park_hangup(struct conn *c)
{
	c->dead = 1;
	(void)epoll_ctl(c->lp->ep, EPOLL_CTL_DEL, c->fd, NULL);
}

static void *loop_main(void *arg)
{
	struct loop *lp = arg;
	struct epoll_event ev[MAX_EVENTS];
	struct conn *c;
	int n, i;

	int woken;

	while (!atomic_load(&lp->stop)) {
		n = epoll_wait(lp->ep, ev, MAX_EVENTS, lp->accept_resume_ms ? ACCEPT_PAUSE_MS : 1000);
		accept_resume(lp);
		woken = 0;
		for (i = 0; i < n; i++) {
			c = ev[i].data.ptr;
			if (c == NULL)
				accept_some(lp);
			else if ((void *)c == (void *)lp)
				woken = 1; /* after the batch: see take_done */
			else if (c->fd < 0)
				continue; /* closed earlier in this batch */
			else if (c->state == S_WORKER)
				park_hangup(c);
			else if (ev[i].events & (EPOLLERR | EPOLLHUP))
				conn_close(c);
			else if (ev[i].events & EPOLLOUT)
				write_more(c);
			else
				conn_read(c);
		}
		if (woken)
			take_done(lp);
		sweep(lp);
		bury(lp);
	}
	take_done(lp);
	while (atomic_load(&lp->deferred) > 0) {
		/* answers deferred before the stop are still owed; their
		 * resumers run until the server is stopped */
		struct pollfd p = {.fd = lp->wake, .events = POLLIN};

		(void)poll(&p, 1, 100);
		take_done(lp);
	}
	while (lp->conns)
		conn_close(lp->conns);
	bury(lp);
	return NULL;
}

/* Worker: runs its lane's queued writes until stopping and the queue is
 * empty. */
static void *worker_main(void *arg)
{
	struct lane *l = arg;
	struct http_server *s = l->s;
	struct conn *c;

	for (;;) {
		pthread_mutex_lock(&l->lock);
		while (!l->head && !l->stopping)
			pthread_cond_wait(&l->cond, &l->lock);
		c = l->head;
		if (c) {
			l->head = c->qnext;
			if (!l->head)
				l->tail = NULL;
		}
		pthread_mutex_unlock(&l->lock);
		if (!c)
			return NULL;
		s->fn(s->arg, &c->req, &c->res);
		if (!ran_deferred())
			hand_back(c);
	}
}

/* ------------------------------------------------------------ start, stop */

int http_listen(const char *host_in, int port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	char host[256];
	size_t hl;
	int fd = -1, one = 1;

	memset(&ss, 0, sizeof ss);
	snprintf(host, sizeof host, "%s", host_in);
	hl = strlen(host);
	if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
	} else {
		log_msg(LOG_ERROR, "listen", "not an IP address: %s", host_in);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (ss.ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&ss, ss.ss_family == AF_INET ? sizeof *in4 : sizeof *in6) < 0 ||
	    listen(fd, 1024) < 0)
		goto fail;
	return fd;
fail:
	/* "Address already in use" reads "address already in use" here */
	snprintf(host, sizeof host, "%s", strerror(errno));
	host[0] = (char)tolower((unsigned char)host[0]);
	log_msg(LOG_ERROR, "listen", "listen %s:%d: %s", host_in, port, host);
	if (fd >= 0)
		close(fd);
	return -1;
}

static int loop_init(struct loop *lp, struct http_server *s)
{
	struct epoll_event e = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL};

	lp->s = s;
	lp->ep = epoll_create1(EPOLL_CLOEXEC);
	lp->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	pthread_mutex_init(&lp->lock, NULL);
	if (lp->ep < 0 || lp->wake < 0 ||
	    epoll_ctl(lp->ep, EPOLL_CTL_ADD, atomic_load(&s->lfd), &e) < 0)
		return -1;
	e.events = EPOLLIN;
	e.data.ptr = lp;
	if (epoll_ctl(lp->ep, EPOLL_CTL_ADD, lp->wake, &e) < 0)
		return -1;
	if (pthread_create(&lp->thread, NULL, loop_main, lp) != 0)
		return -1;
	lp->started = 1;
	pthread_setname_np(lp->thread, "http-loop");
	return 0;
}

/* The port fd is bound to, or -1. */
static int bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return -1;
	return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					     : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

int http_server_start(const struct http_server_opts *o, http_handler_fn fn, void *arg,
		      struct http_server **out)
{
	int fd = http_listen(o->host, o->port);

	*out = NULL;
	return fd < 0 ? -1 : http_server_start_fd(fd, o, fn, arg, out);
}

/* Makes room for max connections, each a descriptor beside the process's
 * others (the database, logs, outbound calls): raises the soft open-files
 * limit as far as the hard one allows, and warns when that is not enough. */
static void check_fd_limit(int max_conns)
{
	rlim_t want = (rlim_t)max_conns + FD_RESERVE;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want)
		log_msg(LOG_WARN, "max_connections",
			"--max-connections %d is above what the open-files limit allows (RLIMIT_NOFILE"
			" %llu, hard limit included, less ~%d for the database, logs and outbound"
			" calls): connections past it wait; raise the limit (ulimit -n,"
			" LimitNOFILE=) or lower --max-connections",
			max_conns, (unsigned long long)rl.rlim_cur, FD_RESERVE);
}

/* Starts up to n workers on l (fewer when threads cannot be made). */
static void lane_start(struct lane *l, int n, const char *name)
{
	l->threads = calloc((size_t)(n > 0 ? n : 1), sizeof *l->threads);
	for (int i = 0; l->threads && i < n; i++) {
		if (pthread_create(&l->threads[i], NULL, worker_main, l) != 0)
			break;
		pthread_setname_np(l->threads[i], name);
		l->n++;
	}
}

/* Lets l's workers finish what is queued, then joins and frees them. */
static void lane_stop(struct lane *l)
{
	pthread_mutex_lock(&l->lock);
	l->stopping = 1;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	for (int i = 0; i < l->n; i++)
		pthread_join(l->threads[i], NULL);
	free(l->threads);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
}

int http_server_start_fd(int fd, const struct http_server_opts *o, http_handler_fn fn, void *arg,
			 struct http_server **out)
{
	struct http_server *s = calloc(1, sizeof *s);
	int i;

	*out = NULL;
	if (!s) {
		close(fd);
		return -1;
	}
	s->fn = fn;
	s->arg = arg;
	s->idle_ms = (o->idle_timeout_s > 0 ? o->idle_timeout_s : 30) * 1000;
	s->max_conns = o->max_connections > 0 ? o->max_connections : 4096;
	check_fd_limit(s->max_conns);
	s->lane_of = o->lane_of;
	for (i = 0; i < LANES; i++) {
		s->lanes[i].s = s;
		pthread_mutex_init(&s->lanes[i].lock, NULL);
		pthread_cond_init(&s->lanes[i].cond, NULL);
	}
	atomic_store(&s->lfd, fd);
	if ((s->port = bound_port(fd)) < 0)
		goto fail;
	lane_start(&s->lanes[0], o->workers, "http-worker");
	for (i = 1; i < LANES && s->lanes[0].n && o->lane_of; i++)
		lane_start(&s->lanes[i], o->lane_workers[i - 1], "http-lane");
	s->nloops = o->threads > 0 ? o->threads : 1;
	s->loops = calloc((size_t)s->nloops, sizeof *s->loops);
	if (!s->loops)
		goto fail;
	for (i = 0; i < s->nloops; i++) /* none yet: stop leaves these alone */
		s->loops[i].ep = s->loops[i].wake = -1;
	for (i = 0; i < s->nloops; i++)
		if (loop_init(&s->loops[i], s) < 0)
			goto fail;
	*out = s;
	return 0;
fail:
	http_server_stop(s);
	return -1;
}

int http_server_port(struct http_server *s)
{
	return s->port;
}

void http_server_quiesce(struct http_server *s)
{
	int fd = atomic_exchange(&s->lfd, -1), i;
	uint64_t one = 1;

	atomic_store(&s->draining, 1);
	for (i = 0; s->loops && i < s->nloops; i++) /* to close their idle connections */
		if (s->loops[i].wake >= 0)
			(void)!write(s->loops[i].wake, &one, sizeof one);
	if (fd < 0)
		return;
	for (i = 0; s->loops && i < s->nloops; i++)
		if (s->loops[i].ep >= 0)
			(void)epoll_ctl(s->loops[i].ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
}

int http_server_in_flight(struct http_server *s)
{
	return atomic_load(&s->in_flight);
}

int http_server_drain(struct http_server *s, int64_t drain_ms)
{
	int64_t deadline = clock_mono_ms() + drain_ms;

	http_server_quiesce(s);
	/* drain_seen first: a loop counts what it owes before it counts
	 * itself in drain_seen, so once every loop is seen, in_flight holds
	 * all they owe */
	while ((atomic_load(&s->drain_seen) < s->nloops || http_server_in_flight(s) > 0) &&
	       clock_mono_ms() < deadline)
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	return http_server_in_flight(s);
}

void http_server_stop(struct http_server *s)
{
	uint64_t one = 1;
	int i;

	if (!s)
		return;
	http_server_quiesce(s);
	/* Workers finish what is queued and hand it to the loops, which answer
	 * it before they close their connections. */
	for (i = 0; i < LANES; i++)
		lane_stop(&s->lanes[i]);
	for (i = 0; s->loops && i < s->nloops; i++) {
		struct loop *lp = &s->loops[i];

		atomic_store(&lp->stop, 1);
		if (lp->wake >= 0)
			(void)!write(lp->wake, &one, sizeof one);
		if (lp->started)
			pthread_join(lp->thread, NULL);
		if (lp->ep >= 0)
			close(lp->ep);
		if (lp->wake >= 0)
			close(lp->wake);
		if (lp->s) /* loop_init made its lock */
			pthread_mutex_destroy(&lp->lock);
	}
	free(s->loops);
	free(s);
}
