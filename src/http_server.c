/* libmicrohttpd glue. Traps in MHD 0.9.75 that shape this file (DESIGN.md,
 * docs/architecture.md):
 *  - epoll mode stalls with exactly 128 ready connections: poll mode only;
 *  - a response queued on the first access-handler call forces
 *    Connection: close, so normal responses wait for a later call;
 *  - no MHD_PostProcessor: bodies are collected into a capped buffer;
 *  - MHD frames requests loosely (any Transfer-Encoding but "chunked" is
 *    read until close, duplicate Host and Transfer-Encoding pass, NUL bytes
 *    cut lines short, obs-folds are joined): http_check.c refuses such heads
 *    before any body is read, and check_head_integrity() below finds the
 *    NUL bytes and folds MHD hides from us;
 *  - MHD closes some connections without telling the completion callback:
 *    a request's state lives with its connection and is freed when the
 *    connection closes, whatever path MHD took. */
#include "http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
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

struct reqctx;

/* A request handed to the worker pool while its connection is suspended. */
struct job {
	struct reqctx *rc;
	struct MHD_Connection *c;
	struct job *next;
};

struct http_server {
	struct MHD_Daemon *d;
	http_handler_fn fn;
	void *arg;
	atomic_int in_flight;
	int port;
	/* The worker pool for writes: they may wait on the database write lock
	 * or an outbound call (a PMS write: up to 10 s), and a handler that
	 * blocks an MHD thread stalls every connection that thread serves. */
	pthread_t *workers;
	int nworkers;
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct job *head, *tail;
	int stopping;
};

/* How much of an oversized body is read (and discarded) to answer 413. */
#define DISCARD_MAX (4 * 1024 * 1024)

/* The state of the request a connection is on. One per connection,
 * allocated when MHD accepts it and freed when MHD closes it (on_connection),
 * cleared between requests; so no path through MHD can leak it. */
struct reqctx {
	struct request req;
	int counted;            /* added to in_flight */
	int responded;
	int deferred;           /* handed to the worker pool */
	atomic_int ready;       /* the worker filled res */
	struct response res;
	size_t received;
	size_t uri_len;         /* strlen of the request-target MHD showed on_uri */
	int target_status;      /* http_check_target's verdict */
	const char *target_msg;
	char *raw_query;        /* the query string as sent, or NULL */
	int query_parsed;
	struct http_query query;
};

const char *http_header(const struct request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

/* Decodes the raw query string once ('+' is a space, then %XX), so a '+'
 * sent as %2B survives; MHD's own argument parsing cannot tell them apart. */
static void parse_query(struct reqctx *rc)
{
	rc->query_parsed = 1;
	http_query_parse(rc->raw_query, &rc->query);
}

static struct reqctx *ctx_of(const struct request *req)
{
	return (struct reqctx *)req; /* req is the first member of reqctx */
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

#define HEAD_MAX_FIELDS 100

/* The header fields of a request, collected in arrival order, and whether
 * each sits where the line before it ended. */
struct head_walk {
	struct http_field f[HEAD_MAX_FIELDS];
	size_t n;
	int too_many;
	const char *line_end; /* the NUL that ended the previous line */
	int broken;
};

/* 1 when next starts right after the line that ended at end: one or two
 * bytes later (LF or CRLF, both turned into NULs by MHD), nothing else in
 * between. */
static int follows(const char *end, const char *next)
{
	return (next == end + 1) || (next == end + 2 && end[1] == '\0');
}

static enum MHD_Result walk_field(void *cls, enum MHD_ValueKind kind, const char *key,
				  size_t key_size, const char *value, size_t value_size)
{
	struct head_walk *w = cls;

	(void)kind;
	(void)key_size;
	if (!follows(w->line_end, key))
		w->broken = 1;
	w->line_end = value + value_size;
	if (w->n == HEAD_MAX_FIELDS) {
		w->too_many = 1;
		return MHD_NO;
	}
	w->f[w->n].name = key;
	w->f[w->n++].value = value;
	return MHD_YES;
}

/* MHD 0.9.75 parses the request head in place in one read buffer that only
 * grows in place: it turns each line's CR and LF into NULs and hands us
 * pointers into the lines. A NUL byte inside a line cuts what we are shown
 * short, and an obs-fold is joined into a copy elsewhere (under a mangled
 * name); MHD refuses neither (connection.c, get_next_header_line and
 * process_broken_line). Both show as a field that does not start where the
 * previous line ended, or a last line followed by something other than the
 * head's end, and are refused: the bytes we would act on are not the bytes
 * that were sent, which is how requests are smuggled. Returns 1 when the
 * request line and fields are contiguous lines. */
static int head_is_contiguous(struct reqctx *rc, const char *url, const char *version,
			      struct head_walk *w)
{
	if (!*version)
		return 1; /* no version: MHD already refused the request */
	if ((size_t)(version - 1 - url) != rc->uri_len)
		return 0; /* a NUL inside the request-target */
	return !w->broken && w->line_end[1] == '\0';
}

/* Checks the request head before any body is read; sets the request's
 * framing_status when it must be refused (MHD then closes the connection
 * after the answer). */
static void check_head(struct reqctx *rc, const char *url, const char *version)
{
	struct request *req = &rc->req;
	struct head_walk w;
	int st;

	w.n = 0;
	w.too_many = w.broken = 0;
	w.line_end = version + strlen(version);
	MHD_get_connection_values_n(req->conn, MHD_HEADER_KIND, walk_field, &w);
	if (rc->target_status) {
		req->framing_status = rc->target_status;
		req->framing_msg = rc->target_msg;
	} else if (w.too_many) {
		req->framing_status = 400;
		req->framing_msg = "more than 100 header fields";
	} else if (!head_is_contiguous(rc, url, version, &w)) {
		req->framing_status = 400;
		req->framing_msg = "the request head contains a NUL byte or a folded header line";
	} else if ((st = http_check_fields(w.f, w.n, HTTP_BODY_MAX, &req->framing_msg)) != 0) {
		req->framing_status = st;
	}
}

static void client_address(struct MHD_Connection *c, char *out, size_t cap)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	snprintf(out, cap, "unknown");
	if (!sa)
		return;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)cap);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
			  (socklen_t)cap);
}

/* Turns a filled response into an MHD response and queues it. */
static enum MHD_Result queue_filled(struct reqctx *rc, struct MHD_Connection *c,
				    struct response *res)
{
	struct MHD_Response *r;
	size_t len;
	char *body;
	enum MHD_Result ret;
	int i;

	len = res->body.len;
	body = buf_steal(&res->body);
	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		response_free(res);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				res->content_type ? res->content_type : "application/json");
	for (i = 0; i < res->nheaders; i++)
		MHD_add_response_header(r, res->hname[i], res->hvalue[i]);
	if (res->close)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(c, (unsigned)res->status, r);
	MHD_destroy_response(r);
	response_free(res);
	rc->responded = 1;
	return ret;
}

static enum MHD_Result send_response(struct http_server *s, struct reqctx *rc,
				     struct MHD_Connection *c)
{
	struct response res;

	response_init(&res);
	s->fn(s->arg, &rc->req, &res);
	return queue_filled(rc, c, &res);
}

static int is_write(const char *method)
{
	return strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "OPTIONS");
}

/* Suspends the connection and queues the request for the worker pool. */
static enum MHD_Result defer(struct http_server *s, struct reqctx *rc, struct MHD_Connection *c)
{
	struct job *j = calloc(1, sizeof *j);

	if (!j)
		return send_response(s, rc, c); /* no memory for a job: run inline */
	rc->deferred = 1;
	response_init(&rc->res);
	j->rc = rc;
	j->c = c;
	MHD_suspend_connection(c);
	pthread_mutex_lock(&s->qlock);
	if (s->tail)
		s->tail->next = j;
	else
		s->head = j;
	s->tail = j;
	pthread_cond_signal(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
	return MHD_YES;
}

/* Worker: runs queued requests until stopping and the queue is empty, then
 * resumes each connection so MHD calls back to send the answer. */
static void *worker_main(void *arg)
{
	struct http_server *s = arg;
	struct job *j;

	for (;;) {
		pthread_mutex_lock(&s->qlock);
		while (!s->head && !s->stopping)
			pthread_cond_wait(&s->qcond, &s->qlock);
		j = s->head;
		if (j) {
			s->head = j->next;
			if (!s->head)
				s->tail = NULL;
		}
		pthread_mutex_unlock(&s->qlock);
		if (!j)
			return NULL;
		s->fn(s->arg, &j->rc->req, &j->rc->res);
		atomic_store(&j->rc->ready, 1);
		MHD_resume_connection(j->c);
		free(j);
	}
}

/* Frees what one request owned and makes rc ready for the next. */
static void reqctx_clear(struct http_server *s, struct reqctx *rc)
{
	if (rc->counted)
		atomic_fetch_sub(&s->in_flight, 1);
	if (rc->deferred && !rc->responded)
		response_free(&rc->res);
	if (rc->req.method)
		buf_free(&rc->req.body);
	http_query_free(&rc->query);
	free(rc->raw_query);
	memset(rc, 0, sizeof *rc);
}

/* MHD's connection hook: a connection's reqctx lives exactly as long as
 * the connection, so a request MHD drops without calling on_completed
 * (its pool ran out while parsing arguments, say) is still freed. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	(void)c;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		*socket_context = calloc(1, sizeof(struct reqctx));
	} else if (*socket_context) {
		reqctx_clear(cls, *socket_context);
		free(*socket_context);
		*socket_context = NULL;
	}
}

/* MHD's URI log hook runs when the request line has been read and gives
 * the request-target exactly as sent (up to a NUL byte in it); its return
 * value becomes the request's context. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct reqctx *rc = ci ? ci->socket_context : NULL;
	const char *q;

	if (!rc)
		return NULL;
	reqctx_clear(cls, rc);
	if (!uri)
		return rc;
	rc->uri_len = strlen(uri);
	rc->target_status = http_check_target(uri, &rc->target_msg);
	q = strchr(uri, '?');
	if (q)
		rc->raw_query = strdup(q + 1);
	return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct http_server *s = cls;
	struct reqctx *rc = *con_cls;

	if (!rc)
		return MHD_NO; /* no reqctx: the connection could not get one */
	if (!rc->req.method) {
		rc->req.method = method;
		rc->req.path = url;
		rc->req.conn = c;
		rc->req.start_us = clock_mono_us();
		buf_init(&rc->req.body, HTTP_BODY_MAX);
		client_address(c, rc->req.client, sizeof rc->req.client);
		atomic_fetch_add(&s->in_flight, 1);
		rc->counted = 1;
		check_head(rc, url, version);
		/* Refuse before reading the body; MHD then closes the connection. */
		if (rc->req.framing_status)
			return send_response(s, rc, c);
		return MHD_YES;
	}
	if (rc->responded) {
		*upload_data_size = 0; /* discard what follows a refusal */
		return MHD_YES;
	}
	if (rc->deferred) {
		/* Called again after the worker resumed the connection. */
		if (!atomic_load(&rc->ready))
			return MHD_YES;
		return queue_filled(rc, c, &rc->res);
	}
	if (*upload_data_size) {
		/* MHD 0.9.75 cannot queue a response mid-upload (it drops the
		 * connection), so an oversized chunked body is read and
		 * discarded, then answered 413; past DISCARD_MAX we hang up. */
		rc->received += *upload_data_size;
		if (!rc->req.framing_status &&
		    buf_append(&rc->req.body, upload_data, *upload_data_size) < 0) {
			rc->req.framing_status = 413;
			rc->req.framing_msg = "request body larger than 1 MiB";
			buf_free(&rc->req.body);
		}
		*upload_data_size = 0;
		return rc->received > DISCARD_MAX ? MHD_NO : MHD_YES;
	}
	if (s->nworkers && is_write(rc->req.method) && !rc->req.framing_status)
		return defer(s, rc, c);
	return send_response(s, rc, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)c;
	(void)toe;
	if (*con_cls)
		reqctx_clear(cls, *con_cls);
	*con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];

	(void)cls;
	vsnprintf(msg, sizeof msg, fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	log_msg(LOG_DEBUG, "http", "%s", msg);
}

int http_server_start(const struct http_server_opts *o, http_handler_fn fn, void *arg,
		      struct http_server **out)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	struct http_server *s;
	const union MHD_DaemonInfo *di;
	unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
			 MHD_ALLOW_SUSPEND_RESUME;
	char host[256];
	size_t hl;

	*out = NULL;
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
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)o->port);
		flags |= MHD_USE_IPv6;
	} else {
		log_msg(LOG_ERROR, "listen", "not an IP address: %s", o->host);
		return -1;
	}
	s = calloc(1, sizeof *s);
	if (!s)
		return -1;
	s->fn = fn;
	s->arg = arg;
	pthread_mutex_init(&s->qlock, NULL);
	pthread_cond_init(&s->qcond, NULL);
	s->workers = calloc((size_t)(o->workers > 0 ? o->workers : 1), sizeof *s->workers);
	for (int i = 0; s->workers && i < o->workers; i++) {
		if (pthread_create(&s->workers[i], NULL, worker_main, s) != 0)
			break;
		pthread_setname_np(s->workers[i], "http-worker");
		s->nworkers++;
	}
	s->d = MHD_start_daemon(
		flags, (uint16_t)o->port, NULL, NULL, on_request, s,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		MHD_OPTION_THREAD_POOL_SIZE, (unsigned)o->threads,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o->per_ip_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->idle_timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
		MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
		MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
		MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
		MHD_OPTION_END);
	if (!s->d) {
		log_msg(LOG_ERROR, "listen", "cannot listen on %s:%d", o->host, o->port);
		http_server_stop(s);
		return -1;
	}
	di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = di ? di->port : o->port;
	*out = s;
	return 0;
}

int http_server_port(struct http_server *s)
{
	return s->port;
}

void http_server_quiesce(struct http_server *s)
{
	MHD_socket fd = MHD_quiesce_daemon(s->d);

	if (fd != MHD_INVALID_SOCKET)
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
	while (http_server_in_flight(s) > 0 && clock_mono_ms() < deadline)
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	return http_server_in_flight(s);
}

void http_server_stop(struct http_server *s)
{
	int i;

	if (!s)
		return;
	/* Workers finish what is queued (resuming those connections) before
	 * MHD stops: it must not be stopped with suspended connections. */
	pthread_mutex_lock(&s->qlock);
	s->stopping = 1;
	pthread_cond_broadcast(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
	for (i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i], NULL);
	if (s->d)
		MHD_stop_daemon(s->d);
	free(s->workers);
	pthread_mutex_destroy(&s->qlock);
	pthread_cond_destroy(&s->qcond);
	free(s);
}
