/* http_server on h2o 2.2.5 (libh2o-evloop, Debian 12): a PROTOTYPE built
 * with -DHTTP_BACKEND=h2o to measure the library against libmicrohttpd
 * 0.9.75 behind the same http_server.h / http.h seam (issue 11,
 * docs/http-library.md). The default build uses http_server.c.
 *
 * Shape:
 *  - one listening socket, bound here without SO_REUSEPORT; each of the
 *    opts->threads event loops watches its own dup() of it and accepts;
 *  - reads (GET, HEAD, OPTIONS) are answered on the loop thread;
 *  - writes go to a worker pool; the filled response is posted back to the
 *    loop that owns the connection through an h2o_multithread receiver on
 *    that loop's context queue, and sent there;
 *  - h2o reads the whole body before calling us (h2o 2.2 has no streaming
 *    of request bodies), so our head checks (http_check.c) run after the
 *    body was framed by h2o; a refused request is answered and the
 *    connection closed, so nothing after it is answered;
 *  - h2o's own error answers (picohttpparser "line format error", broken
 *    chunked encoding, 413 over max_request_entity_size, ...) pass a
 *    response filter that replaces them by our envelope: the handler is
 *    called with framing_status set, as for our own refusals;
 *  - per-request state is allocated from the h2o request's memory pool
 *    with a dispose callback, so it is freed on every path h2o takes. */
#define H2O_USE_LIBUV 0
#include "http_server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <h2o.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "http_check.h"
#include "log.h"

/* The head of one request may be at most this long (MHD's per-connection
 * memory limit in http_server.c is 32 KiB; h2o itself allows ~400 KiB). */
#define HEAD_MAX (32 * 1024)

/* See fill_head: 1 closes the connection after any request with a body. */
#ifndef CLOSE_AFTER_BODY
#define CLOSE_AFTER_BODY 1
#endif

struct http_server;

/* A message posted to a loop thread. */
enum msg_kind { MSG_DONE, MSG_QUIESCE, MSG_STOP };

struct loop_msg {
	h2o_multithread_message_t super;
	enum msg_kind kind;
	struct reqctx *rc; /* MSG_DONE */
};

struct loop_thread {
	struct http_server *s;
	pthread_t tid;
	int started;
	h2o_evloop_t *loop;
	h2o_context_t ctx;
	h2o_accept_ctx_t accept_ctx;
	h2o_socket_t *listener;  /* NULL once quiesced */
	int lfd;                 /* its fd, a dup() of the listening socket */
	h2o_linklist_t conns;    /* struct conn_state, this loop's connections */
	h2o_multithread_receiver_t rx;
	struct loop_msg quiesce_msg, stop_msg;
	int exit;
};

struct our_handler {
	h2o_handler_t super;
	struct http_server *s;
};

struct our_filter {
	h2o_filter_t super;
	struct http_server *s;
};

/* Connections per peer address, for opts->per_ip_connections. */
struct ip_slot {
	char addr[64];
	int n;
};

struct http_server {
	h2o_globalconf_t config;
	http_handler_fn fn;
	void *arg;
	atomic_int in_flight;
	atomic_int nconns;
	int max_conns;
	int per_ip;
	int port;
	struct loop_thread *lt;
	int nthreads;
	/* the worker pool for writes (see http_server.c) */
	pthread_t *workers;
	int nworkers;
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct reqctx *head, *tail;
	int stopping;
	/* quiesce/stop acknowledgements from the loop threads */
	pthread_mutex_t ctl_lock;
	pthread_cond_t ctl_cond;
	int acks;
	int quiesced;
	/* per-IP counts */
	pthread_mutex_t ip_lock;
	struct ip_slot *ips;
	int nips;
};

/* One request. Lives in the h2o request's pool; rc_dispose runs when h2o
 * disposes of the request, whatever path it took. */
struct reqctx {
	struct request req; /* first member: http.h hands us &req back */
	struct http_server *s;
	struct loop_thread *lt;
	h2o_req_t *hreq;
	struct response res;
	int counted;
	int has_res;
	struct loop_msg done;
	struct reqctx *next; /* worker queue */
	size_t nfields;
	struct http_field *f;
	char *raw_query;
	int query_parsed;
	struct http_query query;
};

/* Per-connection state for the connection and per-IP counts. */
struct conn_state {
	struct http_server *s;
	h2o_linklist_t link;
	int fd;
	char addr[64];
};

static h2o_generator_t our_generator = {NULL, NULL};

/* ------------------------------------------------------------------ http.h */

static struct reqctx *ctx_of(const struct request *req)
{
	return (struct reqctx *)req;
}

const char *http_header(const struct request *req, const char *name)
{
	struct reqctx *rc = ctx_of(req);
	size_t i;

	for (i = 0; i < rc->nfields; i++)
		if (!strcasecmp(rc->f[i].name, name))
			return rc->f[i].value;
	return NULL;
}

static void parse_query(struct reqctx *rc)
{
	rc->query_parsed = 1;
	http_query_parse(rc->raw_query, &rc->query);
}

int http_query_malformed(const struct request *req)
{
	struct reqctx *rc = ctx_of(req);

	if (!rc->query_parsed)
		parse_query(rc);
	return rc->query.malformed;
}

const char *http_query(const struct request *req, const char *name)
{
	struct reqctx *rc = ctx_of(req);
	int i;

	if (!rc->query_parsed)
		parse_query(rc);
	for (i = 0; i < rc->query.n; i++)
		if (!strcmp(rc->query.name[i], name))
			return rc->query.value[i];
	return NULL;
}

int http_query_each(const struct request *req,
		    int (*fn)(void *arg, const char *name, const char *value), void *arg)
{
	struct reqctx *rc = ctx_of(req);
	int i, r;

	if (!rc->query_parsed)
		parse_query(rc);
	for (i = 0; i < rc->query.n; i++)
		if ((r = fn(arg, rc->query.name[i], rc->query.value[i])) != 0)
			return r;
	return 0;
}

/* These three are library-neutral and identical to http_server.c's. */
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

/* ------------------------------------------------------------ requests */

static char *pool_strndup(h2o_mem_pool_t *pool, const char *s, size_t n)
{
	char *p = h2o_mem_alloc_pool(pool, n + 1);

	if (n)
		memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return c - 'A' + 10;
}

/* Percent-decodes a path (no '+' rule) into the pool. The target was
 * checked by http_check_target first; a bad escape is copied as is. */
static char *decode_path(h2o_mem_pool_t *pool, const char *s, size_t n)
{
	char *out = h2o_mem_alloc_pool(pool, n + 1), *o = out;
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
		    isxdigit((unsigned char)s[i + 2])) {
			*o++ = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	return out;
}

static void peer_address(h2o_conn_t *conn, char *out, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len;

	snprintf(out, cap, "unknown");
	if (!conn || !conn->callbacks->get_peername)
		return;
	len = conn->callbacks->get_peername(conn, (struct sockaddr *)&ss);
	if (!len)
		return;
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)cap);
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out, (socklen_t)cap);
}

static void rc_dispose(void *p)
{
	struct reqctx *rc = p;

	if (rc->counted)
		atomic_fetch_sub(&rc->s->in_flight, 1);
	if (rc->has_res)
		response_free(&rc->res);
	buf_free(&rc->req.body);
	http_query_free(&rc->query);
}

static struct reqctx *rc_new(struct http_server *s, h2o_req_t *hreq)
{
	struct reqctx *rc = h2o_mem_alloc_shared(&hreq->pool, sizeof *rc, rc_dispose);

	memset(rc, 0, sizeof *rc);
	rc->s = s;
	rc->hreq = hreq;
	rc->lt = H2O_STRUCT_FROM_MEMBER(struct loop_thread, ctx, hreq->conn->ctx);
	rc->req.conn = rc;
	rc->req.start_us = clock_mono_us();
	buf_init(&rc->req.body, HTTP_BODY_MAX);
	rc->req.method = pool_strndup(&hreq->pool, hreq->input.method.base, hreq->input.method.len);
	rc->req.path = "";
	peer_address(hreq->conn, rc->req.client, sizeof rc->req.client);
	atomic_fetch_add(&s->in_flight, 1);
	rc->counted = 1;
	return rc;
}

static const char *reason_phrase(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
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
	default: return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
	}
}

/* Copies a filled response into h2o's response (headers and status only). */
static void fill_head(h2o_req_t *hreq, struct response *res)
{
	const char *ct = res->content_type ? res->content_type : "application/json";
	int i;

	hreq->res.status = res->status;
	hreq->res.reason = reason_phrase(res->status);
	hreq->res.content_length = res->body.len;
	h2o_add_header(&hreq->pool, &hreq->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, ct,
		       strlen(ct));
	for (i = 0; i < res->nheaders; i++) {
		size_t nl = strlen(res->hname[i]), vl = strlen(res->hvalue[i]);
		char *n = pool_strndup(&hreq->pool, res->hname[i], nl);

		h2o_add_header_by_str(&hreq->pool, &hreq->res.headers, n, nl, 1, n,
				      pool_strndup(&hreq->pool, res->hvalue[i], vl), vl);
	}
	if (res->close || hreq->conn->ctx->shutdown_requested)
		hreq->http1_is_persistent = 0;
	/* h2o 2.2.5 keeps Host, Content-Length and Transfer-Encoding out of
	 * the header list it hands us and frames on its own: the first of two
	 * Content-Lengths, chunked when both CL and TE are sent, and it keeps
	 * the connection open afterwards. We cannot see those duplicates, so
	 * the bytes after a body cannot be trusted to start a request: close
	 * after every request that carried a body (docs/http-library.md). */
	if (CLOSE_AFTER_BODY && hreq->entity.base)
		hreq->http1_is_persistent = 0;
}

static int is_head(h2o_req_t *hreq)
{
	return h2o_memis(hreq->input.method.base, hreq->input.method.len, H2O_STRLIT("HEAD"));
}

/* Sends a filled response on the loop thread that owns the request. */
static void send_filled(struct reqctx *rc, struct response *res)
{
	h2o_req_t *hreq = rc->hreq;
	h2o_iovec_t body;

	fill_head(hreq, res);
	body = h2o_strdup(&hreq->pool, res->body.data ? res->body.data : "", res->body.len);
	response_free(res);
	if (res == &rc->res)
		rc->has_res = 0;
	h2o_start_response(hreq, &our_generator);
	if (is_head(hreq))
		h2o_send(hreq, NULL, 0, H2O_SEND_STATE_FINAL);
	else
		h2o_send(hreq, &body, 1, H2O_SEND_STATE_FINAL);
}

static int is_write(const char *method)
{
	return strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "OPTIONS");
}

static void enqueue(struct http_server *s, struct reqctx *rc)
{
	response_init(&rc->res);
	rc->has_res = 1;
	pthread_mutex_lock(&s->qlock);
	if (s->tail)
		s->tail->next = rc;
	else
		s->head = rc;
	s->tail = rc;
	pthread_cond_signal(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
}

static void *worker_main(void *arg)
{
	struct http_server *s = arg;
	struct reqctx *rc;

	for (;;) {
		pthread_mutex_lock(&s->qlock);
		while (!s->head && !s->stopping)
			pthread_cond_wait(&s->qcond, &s->qlock);
		rc = s->head;
		if (rc) {
			s->head = rc->next;
			if (!s->head)
				s->tail = NULL;
		}
		pthread_mutex_unlock(&s->qlock);
		if (!rc)
			return NULL;
		s->fn(s->arg, &rc->req, &rc->res);
		rc->done.kind = MSG_DONE;
		rc->done.rc = rc;
		h2o_multithread_send_message(&rc->lt->rx, &rc->done.super);
	}
}

/* Collects the head into our field list and runs the checks of
 * http_check.c on it: the same verdicts as http_server.c's check_head. */
static void check_head(struct reqctx *rc)
{
	h2o_req_t *hreq = rc->hreq;
	struct request *req = &rc->req;
	size_t i, n = hreq->headers.size, head_len;
	int missing_host;
	const char *target;
	int st;

	rc->f = h2o_mem_alloc_pool(&hreq->pool, (n + 1) * sizeof *rc->f);
	/* h2o supplies the host's own authority when Host was not sent. */
	missing_host = hreq->input.authority.base == hreq->hostconf->authority.hostport.base;
	head_len = hreq->input.method.len + hreq->input.path.len + 12;
	for (i = 0; i < n; i++) {
		h2o_header_t *h = &hreq->headers.entries[i];
		const char *nm = h->orig_name ? h->orig_name : h->name->base;

		rc->f[i].name = pool_strndup(&hreq->pool, nm, h->name->len);
		rc->f[i].value = pool_strndup(&hreq->pool, h->value.base, h->value.len);
		head_len += h->name->len + h->value.len + 4;
		/* a NUL inside a value (picohttpparser refuses it; kept as a
		 * guard): the copy would be cut short */
		if (memchr(h->value.base, '\0', h->value.len)) {
			req->framing_status = 400;
			req->framing_msg = "the request head contains a NUL byte or a folded header line";
		}
	}
	/* Host back into the list (the last one, if several were sent) */
	if (!missing_host) {
		rc->f[n].name = "Host";
		rc->f[n++].value = pool_strndup(&hreq->pool, hreq->input.authority.base,
						hreq->input.authority.len);
		head_len += hreq->input.authority.len + 8;
	}
	rc->nfields = n;
	/* h2o takes Host, Content-Length, Transfer-Encoding, Expect and
	 * Upgrade out of the header list, so http_check_fields below cannot
	 * see them twice (see fill_head). */
	target = pool_strndup(&hreq->pool, hreq->input.path.base, hreq->input.path.len);
	if (hreq->input.query_at != SIZE_MAX)
		rc->raw_query = (char *)target + hreq->input.query_at + 1;
	req->path = decode_path(&hreq->pool, target,
				hreq->input.query_at != SIZE_MAX ? hreq->input.query_at
								 : hreq->input.path.len);
	if (req->framing_status)
		return;
	if (head_len > HEAD_MAX) {
		req->framing_status = 400;
		req->framing_msg = "the request head is larger than 32 KiB";
	} else if (memchr(hreq->input.path.base, '\0', hreq->input.path.len) ||
		   (st = http_check_target(target, &req->framing_msg)) != 0) {
		req->framing_status = 400;
		if (!req->framing_msg)
			req->framing_msg = "the request target contains a control character or a space";
	} else if (missing_host && hreq->version >= 0x101) {
		req->framing_status = 400;
		req->framing_msg = "no Host header";
	} else if (n > 100) {
		req->framing_status = 400;
		req->framing_msg = "more than 100 header fields";
	} else if ((st = http_check_fields(rc->f, n, HTTP_BODY_MAX, &req->framing_msg)) != 0) {
		req->framing_status = st;
	}
}

static int on_req(h2o_handler_t *self, h2o_req_t *hreq)
{
	struct http_server *s = ((struct our_handler *)self)->s;
	struct reqctx *rc = rc_new(s, hreq);
	struct response res;

	check_head(rc);
	if (!rc->req.framing_status && hreq->entity.base &&
	    buf_append(&rc->req.body, hreq->entity.base, hreq->entity.len) < 0) {
		rc->req.framing_status = 413;
		rc->req.framing_msg = "request body larger than 1 MiB";
	}
	if (s->nworkers && is_write(rc->req.method) && !rc->req.framing_status) {
		enqueue(s, rc);
		return 0;
	}
	response_init(&res);
	s->fn(s->arg, &rc->req, &res);
	if (rc->req.framing_status)
		res.close = 1;
	send_filled(rc, &res);
	return 0;
}

/* ----------------------------------------- h2o's own error answers */

struct err_ostream {
	h2o_ostream_t super;
	struct http_server *s;
};

/* Replaces an error page h2o made itself (not through our generator) by
 * our envelope: the handler runs with framing_status set to h2o's status
 * (400 or 413; anything else is reported as 400) and h2o's text as the
 * reason. */
static void err_do_send(h2o_ostream_t *self, h2o_req_t *hreq, h2o_iovec_t *bufs, size_t bufcnt,
			h2o_send_state_t state)
{
	struct http_server *s = ((struct err_ostream *)self)->s;
	struct reqctx *rc = rc_new(s, hreq);
	struct response res;
	h2o_iovec_t body;
	char msg[160];
	size_t i, len = 0;

	msg[0] = '\0';
	for (i = 0; i < bufcnt && len + 1 < sizeof msg; i++) {
		size_t n = bufs[i].len < sizeof msg - 1 - len ? bufs[i].len : sizeof msg - 1 - len;

		memcpy(msg + len, bufs[i].base, n);
		len += n;
	}
	msg[len] = '\0';
	msg[strcspn(msg, "\r\n")] = '\0';
	rc->f = NULL;
	rc->nfields = 0;
	/* the path, when h2o parsed one, so the answer takes the route's error
	 * format (SCIM answers its own) */
	if (hreq->input.path.base)
		rc->req.path = decode_path(&hreq->pool, hreq->input.path.base,
					   hreq->input.query_at != SIZE_MAX ? hreq->input.query_at
									    : hreq->input.path.len);
	rc->req.framing_status = hreq->res.status == 413 ? 413 : 400;
	rc->req.framing_msg = rc->req.framing_status == 413
				      ? "request body larger than 1 MiB"
				      : pool_strndup(&hreq->pool, msg, strlen(msg));
	if (!*rc->req.framing_msg)
		rc->req.framing_msg = "malformed request";
	response_init(&res);
	s->fn(s->arg, &rc->req, &res);
	memset(&hreq->res.headers, 0, sizeof hreq->res.headers);
	fill_head(hreq, &res);
	hreq->http1_is_persistent = 0;
	body = h2o_strdup(&hreq->pool, res.body.data ? res.body.data : "", res.body.len);
	response_free(&res);
	(void)state;
	h2o_ostream_send_next(self, hreq, &body, is_head(hreq) ? 0 : 1, H2O_SEND_STATE_FINAL);
}

static void on_setup_ostream(h2o_filter_t *self, h2o_req_t *hreq, h2o_ostream_t **slot)
{
	if (hreq->_generator != &our_generator && hreq->res.status >= 400) {
		struct err_ostream *o =
			(struct err_ostream *)h2o_add_ostream(hreq, sizeof *o, slot);

		o->super.do_send = err_do_send;
		o->s = ((struct our_filter *)self)->s;
		slot = &o->super.next;
	}
	h2o_setup_next_ostream(hreq, slot);
}

/* ------------------------------------------------------- connections */

static int ip_take(struct http_server *s, const char *addr)
{
	int i, free_i = -1, ok = 1;

	if (s->per_ip <= 0)
		return 1;
	pthread_mutex_lock(&s->ip_lock);
	for (i = 0; i < s->nips; i++) {
		if (s->ips[i].n && !strcmp(s->ips[i].addr, addr))
			break;
		if (!s->ips[i].n && free_i < 0)
			free_i = i;
	}
	if (i < s->nips) {
		if (s->ips[i].n >= s->per_ip)
			ok = 0;
		else
			s->ips[i].n++;
	} else if (free_i >= 0) {
		snprintf(s->ips[free_i].addr, sizeof s->ips[free_i].addr, "%s", addr);
		s->ips[free_i].n = 1;
	} else {
		ok = 0;
	}
	pthread_mutex_unlock(&s->ip_lock);
	return ok;
}

static void ip_release(struct http_server *s, const char *addr)
{
	int i;

	if (s->per_ip <= 0)
		return;
	pthread_mutex_lock(&s->ip_lock);
	for (i = 0; i < s->nips; i++)
		if (s->ips[i].n && !strcmp(s->ips[i].addr, addr)) {
			s->ips[i].n--;
			break;
		}
	pthread_mutex_unlock(&s->ip_lock);
}

static void on_socket_close(void *data)
{
	struct conn_state *cs = data;

	ip_release(cs->s, cs->addr);
	atomic_fetch_sub(&cs->s->nconns, 1);
	h2o_linklist_unlink(&cs->link);
	free(cs);
}

static void fd_address(int fd, char *out, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;

	snprintf(out, cap, "unknown");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		return;
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)cap);
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out, (socklen_t)cap);
}

/* Accepts on this loop's dup of the listening socket (accept4 of our own,
 * so the connection's fd is known and can be shut down at stop). */
static void on_accept(h2o_socket_t *listener, const char *err)
{
	struct loop_thread *lt = listener->data;
	struct http_server *s = lt->s;
	h2o_socket_t *sock;
	struct conn_state *cs;
	int i, fd, one = 1;

	if (err)
		return;
	for (i = 0; i < 8; i++) {
		fd = accept4(lt->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		cs = calloc(1, sizeof *cs);
		if (!cs) {
			close(fd);
			continue;
		}
		cs->s = s;
		cs->fd = fd;
		fd_address(fd, cs->addr, sizeof cs->addr);
		if (atomic_fetch_add(&s->nconns, 1) >= s->max_conns) {
			atomic_fetch_sub(&s->nconns, 1);
			free(cs);
			close(fd);
			continue;
		}
		if (!ip_take(s, cs->addr)) {
			atomic_fetch_sub(&s->nconns, 1);
			free(cs);
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		sock = h2o_evloop_socket_create(lt->loop, fd, 0);
		sock->on_close.cb = on_socket_close;
		sock->on_close.data = cs;
		h2o_linklist_insert(&lt->conns, &cs->link);
		h2o_accept(&lt->accept_ctx, sock);
	}
}

static void close_listener(struct loop_thread *lt)
{
	if (lt->listener) {
		h2o_socket_read_stop(lt->listener);
		h2o_socket_close(lt->listener);
		lt->listener = NULL;
	}
}

static void ack(struct http_server *s)
{
	pthread_mutex_lock(&s->ctl_lock);
	s->acks++;
	pthread_cond_broadcast(&s->ctl_cond);
	pthread_mutex_unlock(&s->ctl_lock);
}

static void on_messages(h2o_multithread_receiver_t *rx, h2o_linklist_t *messages)
{
	struct loop_thread *lt = H2O_STRUCT_FROM_MEMBER(struct loop_thread, rx, rx);

	while (!h2o_linklist_is_empty(messages)) {
		struct loop_msg *m = H2O_STRUCT_FROM_MEMBER(struct loop_msg, super.link, messages->next);

		h2o_linklist_unlink(&m->super.link);
		switch (m->kind) {
		case MSG_DONE:
			send_filled(m->rc, &m->rc->res);
			break;
		case MSG_QUIESCE:
			close_listener(lt);
			ack(lt->s);
			break;
		case MSG_STOP:
			close_listener(lt);
			lt->exit = 1;
			break;
		}
	}
}

static void *loop_main(void *arg)
{
	struct loop_thread *lt = arg;
	int64_t deadline;

	while (!lt->exit)
		h2o_evloop_run(lt->loop, INT32_MAX);
	/* Every answer is sent by now (workers were joined first); h2o 2.2
	 * has no call that closes idle HTTP/1 connections, so shut their
	 * sockets down and let h2o see the end of the stream and close them. */
	for (h2o_linklist_t *l = lt->conns.next; l != &lt->conns; l = l->next)
		shutdown(H2O_STRUCT_FROM_MEMBER(struct conn_state, link, l)->fd, SHUT_RDWR);
	deadline = clock_mono_ms() + 1000;
	while (!h2o_linklist_is_empty(&lt->ctx.http1._conns) && clock_mono_ms() < deadline)
		h2o_evloop_run(lt->loop, 10);
	/* Sockets closed above are freed on the next turns of the loop. */
	for (int i = 0; i < 3; i++)
		h2o_evloop_run(lt->loop, 0);
	return NULL;
}

/* ------------------------------------------------------------- server */

static int listen_socket(const struct http_server_opts *o)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl;
	char host[256];
	size_t hl;
	int fd, one = 1;

	memset(&ss, 0, sizeof ss);
	snprintf(host, sizeof host, "%s", o->host);
	hl = strlen(host);
	if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)o->port);
		sl = sizeof *in4;
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)o->port);
		sl = sizeof *in6;
	} else {
		log_msg(LOG_ERROR, "listen", "not an IP address: %s", o->host);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* SO_REUSEADDR (as MHD_OPTION_LISTENING_ADDRESS_REUSE sets it) but
	 * never SO_REUSEPORT: the port is ours alone. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1024) < 0) {
		log_msg(LOG_ERROR, "listen", "cannot listen on %s:%d: %s", o->host, o->port,
			strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return -1;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

int http_server_start(const struct http_server_opts *o, http_handler_fn fn, void *arg,
		      struct http_server **out)
{
	struct http_server *s;
	h2o_hostconf_t *host;
	h2o_pathconf_t *path;
	struct our_handler *h;
	struct our_filter *f;
	int fd, i;

	*out = NULL;
	if ((fd = listen_socket(o)) < 0)
		return -1;
	s = calloc(1, sizeof *s);
	if (!s) {
		close(fd);
		return -1;
	}
	s->fn = fn;
	s->arg = arg;
	s->port = bound_port(fd);
	s->max_conns = o->max_connections > 0 ? o->max_connections : 1020;
	s->per_ip = o->per_ip_connections;
	s->nips = s->max_conns;
	s->ips = calloc((size_t)s->nips, sizeof *s->ips);
	pthread_mutex_init(&s->qlock, NULL);
	pthread_cond_init(&s->qcond, NULL);
	pthread_mutex_init(&s->ctl_lock, NULL);
	pthread_cond_init(&s->ctl_cond, NULL);
	pthread_mutex_init(&s->ip_lock, NULL);

	h2o_config_init(&s->config);
	s->config.server_name = h2o_iovec_init(H2O_STRLIT(""));
	s->config.max_request_entity_size = HTTP_BODY_MAX;
	s->config.http1.req_timeout = (uint64_t)(o->idle_timeout_s > 0 ? o->idle_timeout_s : 30) * 1000;
	s->config.http1.upgrade_to_http2 = 0;
	host = h2o_config_register_host(&s->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
	path = h2o_config_register_path(host, "/", 0);
	h = (struct our_handler *)h2o_create_handler(path, sizeof *h);
	h->super.on_req = on_req;
	h->s = s;
	f = (struct our_filter *)h2o_create_filter(path, sizeof *f);
	f->super.on_setup_ostream = on_setup_ostream;
	f->s = s;
	f = (struct our_filter *)h2o_create_filter(&host->fallback_path, sizeof *f);
	f->super.on_setup_ostream = on_setup_ostream;
	f->s = s;

	s->workers = calloc((size_t)(o->workers > 0 ? o->workers : 1), sizeof *s->workers);
	for (i = 0; s->workers && i < o->workers; i++) {
		if (pthread_create(&s->workers[i], NULL, worker_main, s) != 0)
			break;
		pthread_setname_np(s->workers[i], "http-worker");
		s->nworkers++;
	}
	s->nthreads = o->threads > 0 ? o->threads : 1;
	s->lt = calloc((size_t)s->nthreads, sizeof *s->lt);
	if (!s->lt || !s->ips) {
		close(fd);
		http_server_stop(s);
		return -1;
	}
	for (i = 0; i < s->nthreads; i++) {
		struct loop_thread *lt = &s->lt[i];
		int lfd = dup(fd);

		lt->s = s;
		lt->lfd = lfd;
		h2o_linklist_init_anchor(&lt->conns);
		lt->loop = h2o_evloop_create();
		h2o_context_init(&lt->ctx, lt->loop, &s->config);
		lt->accept_ctx.ctx = &lt->ctx;
		lt->accept_ctx.hosts = s->config.hosts;
		h2o_multithread_register_receiver(lt->ctx.queue, &lt->rx, on_messages);
		if (lfd < 0) {
			log_msg(LOG_ERROR, "listen", "dup: %s", strerror(errno));
			close(fd);
			http_server_stop(s);
			return -1;
		}
		fcntl(lfd, F_SETFL, O_NONBLOCK);
		fcntl(lfd, F_SETFD, FD_CLOEXEC);
		lt->listener = h2o_evloop_socket_create(lt->loop, lfd, H2O_SOCKET_FLAG_DONT_READ);
		lt->listener->data = lt;
		h2o_socket_read_start(lt->listener, on_accept);
		if (pthread_create(&lt->tid, NULL, loop_main, lt) != 0) {
			close(fd);
			http_server_stop(s);
			return -1;
		}
		pthread_setname_np(lt->tid, "http-loop");
		lt->started = 1;
	}
	close(fd); /* each loop holds its own dup */
	*out = s;
	return 0;
}

int http_server_port(struct http_server *s)
{
	return s->port;
}

/* Posts kind to every started loop and waits for want acknowledgements. */
static void post_all(struct http_server *s, enum msg_kind kind)
{
	int i;

	for (i = 0; i < s->nthreads; i++) {
		struct loop_thread *lt = &s->lt[i];
		struct loop_msg *m = kind == MSG_QUIESCE ? &lt->quiesce_msg : &lt->stop_msg;

		if (!lt->started)
			continue;
		m->kind = kind;
		h2o_multithread_send_message(&lt->rx, &m->super);
	}
}

void http_server_quiesce(struct http_server *s)
{
	int want = 0, i;

	pthread_mutex_lock(&s->ctl_lock);
	if (s->quiesced) {
		pthread_mutex_unlock(&s->ctl_lock);
		return;
	}
	s->quiesced = 1;
	s->acks = 0;
	pthread_mutex_unlock(&s->ctl_lock);
	for (i = 0; i < s->nthreads; i++)
		want += s->lt[i].started;
	post_all(s, MSG_QUIESCE);
	pthread_mutex_lock(&s->ctl_lock);
	while (s->acks < want)
		pthread_cond_wait(&s->ctl_cond, &s->ctl_lock);
	pthread_mutex_unlock(&s->ctl_lock);
}

int http_server_in_flight(struct http_server *s)
{
	return atomic_load(&s->in_flight);
}

int http_server_drain(struct http_server *s, int64_t drain_ms)
{
	int64_t deadline = clock_mono_ms() + drain_ms;

	http_server_quiesce(s);
	while (http_server_in_flight(s) > 0 && clock_mono_ms() < deadline)
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	return http_server_in_flight(s);
}

void http_server_stop(struct http_server *s)
{
	int i;

	if (!s)
		return;
	/* Workers finish what is queued; their answers are posted to the
	 * loops, which are still running, ahead of the stop message. */
	pthread_mutex_lock(&s->qlock);
	s->stopping = 1;
	pthread_cond_broadcast(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
	for (i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i], NULL);
	post_all(s, MSG_STOP);
	for (i = 0; s->lt && i < s->nthreads; i++) {
		struct loop_thread *lt = &s->lt[i];

		if (lt->started)
			pthread_join(lt->tid, NULL);
		if (!lt->loop)
			continue;
		close_listener(lt);
		h2o_multithread_unregister_receiver(lt->ctx.queue, &lt->rx);
		/* Connections still open past the grace period are left to
		 * process exit: h2o 2.2 has no call that closes them. */
		if (h2o_linklist_is_empty(&lt->ctx.http1._conns)) {
			h2o_context_dispose(&lt->ctx);
			h2o_evloop_destroy(lt->loop);
		}
	}
	h2o_config_dispose(&s->config);
	free(s->lt);
	free(s->workers);
	free(s->ips);
	pthread_mutex_destroy(&s->qlock);
	pthread_cond_destroy(&s->qcond);
	pthread_mutex_destroy(&s->ctl_lock);
	pthread_cond_destroy(&s->ctl_cond);
	pthread_mutex_destroy(&s->ip_lock);
	free(s);
}
