/* Unit tests for httpc against a real loopback server (the project's own
 * http_server): bodies, headers, status passing, no redirects, the
 * response cap, timeouts, refused connections, TLS against plain HTTP,
 * parallelism within a batch (against a thread-per-connection server of
 * the test's own, see below), connection reuse across batches, and
 * concurrent use from several threads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "http/http_server.h"
#include "net/httpc.h"

static struct http_server *server;
static char base[64]; /* "http://127.0.0.1:PORT" */

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
}

static long query_long(struct request *req, const char *name, long dflt)
{
	const char *v = http_query(req, name);

	return v ? strtol(v, NULL, 10) : dflt;
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* The test server:
 *   /echo           the request body back, text/plain
 *   /headers        "x-test=..;ct=..;expect=..;method=..;len=N"
 *   /status?code=N  status N
 *   /sleep?ms=N     sleeps, then 200
 *   /big?n=N        N bytes of 'x'
 *   /redirect       302 to /echo */
static void handler(void *arg, struct request *req, struct response *res)
{
	int ok = 0;

	(void)arg;
	res->status = 200;
	if (!strcmp(req->path, "/echo")) {
		res->content_type = "text/plain";
		ok = buf_append(&res->body, req->body.data ? req->body.data : "", req->body.len);
	} else if (!strcmp(req->path, "/headers")) {
		ok = buf_printf(&res->body, "x-test=%s;ct=%s;expect=%s;method=%s;len=%zu",
				or_empty(http_header(req, "X-Test")),
				or_empty(http_header(req, "Content-Type")),
				or_empty(http_header(req, "Expect")), req->method, req->body.len);
	} else if (!strcmp(req->path, "/status")) {
		res->status = (int)query_long(req, "code", 200);
		ok = buf_printf(&res->body, "{\"status\":%d}", res->status);
	} else if (!strcmp(req->path, "/sleep")) {
		sleep_ms(query_long(req, "ms", 100));
		ok = buf_puts(&res->body, "{\"slept\":true}");
	} else if (!strcmp(req->path, "/big")) {
		long n = query_long(req, "n", 0);

		res->content_type = "text/plain";
		for (long i = 0; i < n && ok == 0; i++)
			ok = buf_append(&res->body, "x", 1);
	} else if (!strcmp(req->path, "/redirect")) {
		res->status = 302;
		ok = response_header(res, "Location", "/echo");
		if (ok == 0)
			ok = buf_puts(&res->body, "{\"moved\":true}");
	} else {
		res->status = 404;
	}
	if (ok < 0)
		res->status = 500;
}

static int group_setup(void **state)
{
	struct http_server_opts o = {
		.host = "127.0.0.1",
		.port = 0,
		.threads = 32,
		.max_connections = 512,
		.idle_timeout_s = 30,
	};

	(void)state;
	if (httpc_global_init() < 0)
		return -1;
	httpc_configure(NULL);
	if (http_server_start(&o, handler, NULL, &server) < 0)
		return -1;
	snprintf(base, sizeof base, "http://127.0.0.1:%d", http_server_port(server));
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	httpc_thread_cleanup();
	http_server_stop(server);
	httpc_global_cleanup();
	return 0;
}

/* A request for base + path with the given method and body. */
static void req_init(struct httpc_request *r, char *url, size_t urlcap, const char *method,
		     const char *path, const char *body)
{
	memset(r, 0, sizeof *r);
	snprintf(url, urlcap, "%s%s", base, path);
	r->method = method;
	r->url = url;
	r->body = body;
	r->body_len = body ? strlen(body) : 0;
	r->timeout_ms = 5000;
}

static void perform_one(struct httpc_request *r)
{
	assert_int_equal(httpc_perform(r, 1), 0);
}

static void test_post_echo(void **state)
{
	struct httpc_request r;
	char url[128];

	(void)state;
	req_init(&r, url, sizeof url, NULL, "/echo", "{\"hello\":\"world\"}");
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_OK);
	assert_string_equal(r.errmsg, "");
	assert_int_equal(r.status, 200);
	assert_int_equal(r.response.len, r.body_len);
	assert_string_equal(r.response.data, "{\"hello\":\"world\"}");
	assert_true(r.duration_ms > 0);
	buf_free(&r.response);
}

static void test_headers_sent(void **state)
{
	const char *const custom[] = {"X-Test: hello", NULL};
	const char *const typed[] = {"X-Test: two", "content-type: text/plain", NULL};
	const char *const crlf[] = {"X-Test: a\r\nX-Evil: b", NULL};
	struct httpc_request r;
	char url[128];

	(void)state;
	/* Custom header sent; JSON content type added; no Expect. */
	req_init(&r, url, sizeof url, "POST", "/headers", "{}");
	r.headers = custom;
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_OK);
	assert_string_equal(r.response.data,
			    "x-test=hello;ct=application/json;expect=;method=POST;len=2");
	buf_free(&r.response);

	/* The caller's Content-Type wins. */
	req_init(&r, url, sizeof url, "PUT", "/headers", "abc");
	r.headers = typed;
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_OK);
	assert_string_equal(r.response.data, "x-test=two;ct=text/plain;expect=;method=PUT;len=3");
	buf_free(&r.response);

	/* GET: no body, no content type. */
	req_init(&r, url, sizeof url, "GET", "/headers", NULL);
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_OK);
	assert_string_equal(r.response.data, "x-test=;ct=;expect=;method=GET;len=0");
	buf_free(&r.response);

	/* POST without a body: no curl form content type. */
	req_init(&r, url, sizeof url, "POST", "/headers", NULL);
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_OK);
	assert_string_equal(r.response.data, "x-test=;ct=;expect=;method=POST;len=0");
	buf_free(&r.response);

	/* A header with a line break never leaves the process. */
	req_init(&r, url, sizeof url, "POST", "/headers", "{}");
	r.headers = crlf;
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_EOTHER);
	assert_int_equal(r.status, 0);
	assert_non_null(r.response.data);
	buf_free(&r.response);

	/* The most headers a request may give are sent; one more fails it. */
	{
		const char *many[HTTPC_MAX_REQUEST_HEADERS + 2];
		size_t i;

		for (i = 0; i < HTTPC_MAX_REQUEST_HEADERS; i++)
			many[i] = i == 0 ? "X-Test: many" : "X-Filler: 1";
		many[HTTPC_MAX_REQUEST_HEADERS] = NULL;
		req_init(&r, url, sizeof url, "POST", "/headers", "{}");
		r.headers = many;
		perform_one(&r);
		assert_int_equal(r.error, HTTPC_OK);
		assert_string_equal(r.response.data,
				    "x-test=many;ct=application/json;expect=;method=POST;len=2");
		buf_free(&r.response);
		many[HTTPC_MAX_REQUEST_HEADERS] = "X-One-Too-Many: 1";
		many[HTTPC_MAX_REQUEST_HEADERS + 1] = NULL;
		req_init(&r, url, sizeof url, "POST", "/headers", "{}");
		r.headers = many;
		perform_one(&r);
		assert_int_equal(r.error, HTTPC_EOTHER);
		assert_string_equal(r.errmsg, "too many request headers");
		assert_int_equal(r.status, 0);
		buf_free(&r.response);
	}
}

static void test_status_reported(void **state)
{
	static const long codes[] = {201, 204, 400, 404, 410, 500, 503};
	struct httpc_request r[ARRAY_LEN(codes)];
	char url[ARRAY_LEN(codes)][128], path[64];
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_LEN(codes); i++) {
		snprintf(path, sizeof path, "/status?code=%ld", codes[i]);
		req_init(&r[i], url[i], sizeof url[i], "GET", path, NULL);
	}
	assert_int_equal(httpc_perform(r, ARRAY_LEN(codes)), 0);
	for (i = 0; i < ARRAY_LEN(codes); i++) {
		assert_int_equal(r[i].error, HTTPC_OK);
		assert_int_equal(r[i].status, codes[i]);
		assert_non_null(r[i].response.data);
		if (codes[i] != 204)
			assert_non_null(strstr(r[i].response.data, "\"status\""));
		buf_free(&r[i].response);
	}
}

static void test_redirect_not_followed(void **state)
{
	struct httpc_request r;
	char url[128];

	(void)state;
	req_init(&r, url, sizeof url, "POST", "/redirect", "{\"x\":1}");
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_OK);
	assert_int_equal(r.status, 302);
	assert_string_equal(r.response.data, "{\"moved\":true}");
	buf_free(&r.response);
}

static void test_too_big(void **state)
{
	struct httpc_request r[3];
	char url[3][128];

	(void)state;
	req_init(&r[0], url[0], sizeof url[0], "GET", "/big?n=200000", NULL);
	r[0].max_response = 1000;
	req_init(&r[1], url[1], sizeof url[1], "GET", "/big?n=1000", NULL);
	r[1].max_response = 1000; /* exactly at the cap is fine */
	req_init(&r[2], url[2], sizeof url[2], "GET", "/big?n=1100000", NULL);
	/* max_response 0: the 1 MiB default */
	assert_int_equal(httpc_perform(r, 3), 0);
	assert_int_equal(r[0].error, HTTPC_ETOOBIG);
	assert_int_equal(r[0].status, 200);
	assert_true(r[0].response.len <= 1000);
	assert_non_null(strstr(r[0].errmsg, "1000"));
	assert_int_equal(r[1].error, HTTPC_OK);
	assert_int_equal(r[1].response.len, 1000);
	assert_int_equal(r[2].error, HTTPC_ETOOBIG);
	assert_true(r[2].response.len <= HTTPC_DEFAULT_MAX_RESPONSE);
	for (int i = 0; i < 3; i++)
		buf_free(&r[i].response);
}

static void test_head(void **state)
{
	struct httpc_request r;
	char url[128];

	(void)state;
	req_init(&r, url, sizeof url, "HEAD", "/big?n=10", NULL);
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_OK);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.response.len, 0);
	assert_string_equal(r.response.data, "");
	buf_free(&r.response);
}

/* A minimal HTTP/1.1 server with one thread per connection, for the
 * parallelism test only: http_server's MHD workers each accept greedily, so
 * connections that arrive together can land on one worker and a handler
 * that sleeps serializes them (seen: 10 requests of 200 ms taking up to
 * 1.8 s); a client-side property is best measured against a server that
 * cannot serialize. Every request (no body expected) is answered after
 * SLOW_MS with {} on a kept-alive connection. */
#define SLOW_MS 200
#define SLOW_MAX_CONNS 32

struct slow_server {
	int fd;
	int port;
	pthread_t acceptor;
	pthread_mutex_t lock;
	int nconns;
	int conn_fd[SLOW_MAX_CONNS];
	pthread_t conn_th[SLOW_MAX_CONNS];
};

static void *slow_conn_main(void *arg)
{
	static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				     "Content-Length: 2\r\n\r\n{}";
	int fd = (int)(intptr_t)arg;
	char in[4096];
	size_t len = 0;
	ssize_t got;
	char *end;

	for (;;) {
		got = read(fd, in + len, sizeof in - 1 - len);
		if (got <= 0)
			break;
		len += (size_t)got;
		in[len] = '\0';
		while ((end = strstr(in, "\r\n\r\n"))) {
			sleep_ms(SLOW_MS);
			if (write(fd, answer, sizeof answer - 1) != (ssize_t)(sizeof answer - 1))
				return NULL;
			len -= (size_t)(end + 4 - in);
			memmove(in, end + 4, len + 1);
		}
		if (len == sizeof in - 1)
			break;
	}
	return NULL;
}

static void *slow_accept_main(void *arg)
{
	struct slow_server *s = arg;
	int fd;

	while ((fd = accept(s->fd, NULL, NULL)) >= 0) {
		pthread_mutex_lock(&s->lock);
		if (s->nconns == SLOW_MAX_CONNS ||
		    pthread_create(&s->conn_th[s->nconns], NULL, slow_conn_main,
				   (void *)(intptr_t)fd) != 0) {
			close(fd);
		} else {
			s->conn_fd[s->nconns++] = fd;
		}
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

static void slow_server_start(struct slow_server *s)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;

	memset(s, 0, sizeof *s);
	pthread_mutex_init(&s->lock, NULL);
	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(s->fd >= 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(s->fd, 128), 0);
	assert_int_equal(getsockname(s->fd, (struct sockaddr *)&sa, &len), 0);
	s->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&s->acceptor, NULL, slow_accept_main, s), 0);
}

/* shutdown() wakes the blocked accept() and read()s; then all are joined. */
static void slow_server_stop(struct slow_server *s)
{
	int i;

	shutdown(s->fd, SHUT_RDWR);
	pthread_join(s->acceptor, NULL);
	for (i = 0; i < s->nconns; i++)
		shutdown(s->conn_fd[i], SHUT_RDWR);
	for (i = 0; i < s->nconns; i++) {
		pthread_join(s->conn_th[i], NULL);
		close(s->conn_fd[i]);
	}
	close(s->fd);
	pthread_mutex_destroy(&s->lock);
}

/* Ten requests to the same URL, each SLOW_MS at the server: in parallel
 * the batch takes about 200 ms, serialized it would take 2 s. Then the
 * same batch again: all ten go over kept connections. */
static void test_parallel_same_url(void **state)
{
	struct slow_server s;
	struct httpc_request r[10];
	char url[128];
	int64_t t0, ms;
	int round;
	size_t i;

	(void)state;
	slow_server_start(&s);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/slow", s.port);
	for (round = 0; round < 2; round++) {
		memset(r, 0, sizeof r);
		for (i = 0; i < 10; i++) {
			r[i].method = "GET";
			r[i].url = url;
			r[i].timeout_ms = 5000;
		}
		t0 = clock_mono_ms();
		assert_int_equal(httpc_perform(r, 10), 0);
		ms = clock_mono_ms() - t0;
		for (i = 0; i < 10; i++) {
			assert_int_equal(r[i].error, HTTPC_OK);
			assert_int_equal(r[i].status, 200);
			assert_string_equal(r[i].response.data, "{}");
			assert_true(r[i].duration_ms >= SLOW_MS - 10);
			assert_int_equal(r[i].reused, round == 1);
			buf_free(&r[i].response);
		}
		assert_true(ms >= SLOW_MS - 10);
		assert_true(ms < 1000);
	}
	httpc_thread_cleanup(); /* closes the client side first */
	pthread_mutex_lock(&s.lock);
	round = s.nconns;
	pthread_mutex_unlock(&s.lock);
	slow_server_stop(&s);
	assert_int_equal(round, 10);
}

/* A second batch to the same server goes over the kept connection. */
static void test_connection_reuse(void **state)
{
	struct httpc_request r;
	char url[128];
	int round;

	(void)state;
	httpc_thread_cleanup();
	for (round = 0; round < 3; round++) {
		req_init(&r, url, sizeof url, NULL, "/echo", "{\"n\":1}");
		perform_one(&r);
		assert_int_equal(r.error, HTTPC_OK);
		assert_int_equal(r.status, 200);
		assert_int_equal(r.reused, round > 0);
		buf_free(&r.response);
	}
}

static void test_timeout(void **state)
{
	struct httpc_request r[2];
	char url[2][128];

	(void)state;
	req_init(&r[0], url[0], sizeof url[0], "GET", "/sleep?ms=800", NULL);
	r[0].timeout_ms = 200;
	/* Another request in the same batch still completes. (Its timing is not
	 * checked: the MHD worker sleeping for r[0] may hold it up.) */
	req_init(&r[1], url[1], sizeof url[1], "GET", "/status?code=200", NULL);
	assert_int_equal(httpc_perform(r, 2), 0);
	assert_int_equal(r[0].error, HTTPC_ETIMEOUT);
	assert_int_equal(r[0].status, 0);
	assert_true(r[0].errmsg[0] != '\0');
	assert_true(r[0].duration_ms >= 190);
	assert_true(r[0].duration_ms < 600);
	assert_int_equal(r[1].error, HTTPC_OK);
	assert_int_equal(r[1].status, 200);
	buf_free(&r[0].response);
	buf_free(&r[1].response);
}

/* A loopback port nobody listens on: bind one, note it, close it. */
static int closed_port(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static void test_connection_refused(void **state)
{
	struct httpc_request r;
	char url[128];

	(void)state;
	memset(&r, 0, sizeof r);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/echo", closed_port());
	r.url = url;
	r.body = "{}";
	r.body_len = 2;
	r.timeout_ms = 2000;
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_ECONNECT);
	assert_int_equal(r.status, 0);
	assert_true(r.errmsg[0] != '\0');
	buf_free(&r.response);
}

static void test_tls_to_plain_server(void **state)
{
	struct httpc_request r;
	char url[128];

	(void)state;
	memset(&r, 0, sizeof r);
	snprintf(url, sizeof url, "https://127.0.0.1:%d/echo", http_server_port(server));
	r.url = url;
	r.body = "{}";
	r.body_len = 2;
	r.timeout_ms = 2000;
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_ETLS);
	assert_int_equal(r.status, 0);
	assert_true(r.errmsg[0] != '\0');
	buf_free(&r.response);
}

static void test_refused_targets(void **state)
{
	static const char *const urls[] = {
		"ftp://127.0.0.1/x",           "file:///etc/passwd",  "gopher://127.0.0.1/",
		"dict://127.0.0.1:11211/stat", "127.0.0.1/no-scheme",
	};
	struct httpc_request r[ARRAY_LEN(urls) + 2];
	size_t i, n = ARRAY_LEN(urls);

	(void)state;
	memset(r, 0, sizeof r);
	for (i = 0; i < n; i++) {
		r[i].url = urls[i];
		r[i].timeout_ms = 1000;
	}
	r[n].url = NULL; /* no URL */
	r[n + 1].url = "http://127.0.0.1:1/";
	r[n + 1].method = "GE T"; /* not a token */
	assert_int_equal(httpc_perform(r, n + 2), 0);
	for (i = 0; i < n; i++) {
		assert_int_equal(r[i].error, HTTPC_EREFUSED_TARGET);
		assert_int_equal(r[i].status, 0);
	}
	assert_int_equal(r[n].error, HTTPC_EOTHER);
	assert_int_equal(r[n + 1].error, HTTPC_EOTHER);
	for (i = 0; i < n + 2; i++)
		buf_free(&r[i].response);
}

static void test_resolve_failure(void **state)
{
	struct httpc_request r;

	(void)state;
	memset(&r, 0, sizeof r);
	r.method = "GET";
	r.url = "http://no-such-host.invalid/";
	r.timeout_ms = 3000;
	perform_one(&r);
	/* ETIMEOUT only where the resolver itself does not answer in time. */
	assert_true(r.error == HTTPC_ERESOLVE || r.error == HTTPC_ETIMEOUT);
	assert_int_equal(r.status, 0);
	buf_free(&r.response);
}

/* The asynchronous client: a slow request (the slow server, SLOW_MS)
 * started first does not hold back fast ones started after it; each is
 * returned by poll as it finishes, with its user pointer, the slow one
 * last. (The slow server, not /sleep: http_server may serialize requests
 * that land on one MHD worker, see above.) */
static void test_async_slow_does_not_block(void **state)
{
	struct httpc_async *a = httpc_async_new();
	struct httpc_request r[4], *done[8];
	struct slow_server slow;
	char url[4][128];
	int64_t t0, fast_done_at = 0;
	int i, n, got = 0, order[4], slow_seen = 0;

	(void)state;
	assert_non_null(a);
	slow_server_start(&slow);
	memset(&r[0], 0, sizeof r[0]);
	snprintf(url[0], sizeof url[0], "http://127.0.0.1:%d/slow", slow.port);
	r[0].method = "GET";
	r[0].url = url[0];
	r[0].timeout_ms = 5000;
	r[0].user = &r[0];
	for (i = 1; i < 4; i++) {
		req_init(&r[i], url[i], sizeof url[i], "POST", "/echo", "fast");
		r[i].user = &r[i];
	}
	t0 = clock_mono_ms();
	for (i = 0; i < 4; i++)
		assert_int_equal(httpc_async_start(a, &r[i]), 0);
	assert_int_equal(httpc_async_running(a), 4);
	while (got < 4 && clock_mono_ms() - t0 < 5000) {
		n = httpc_async_poll(a, 100, done, ARRAY_LEN(done));
		assert_true(n >= 0);
		for (i = 0; i < n; i++) {
			assert_ptr_equal(done[i]->user, done[i]);
			order[got++] = (int)(done[i] - r);
			if (done[i] == &r[0])
				slow_seen = 1;
			else if (!slow_seen)
				fast_done_at = clock_mono_ms();
		}
	}
	assert_int_equal(got, 4);
	assert_int_equal(order[3], 0); /* the slow one finished last */
	assert_true(fast_done_at - t0 < SLOW_MS * 3 / 4);
	assert_int_equal(httpc_async_running(a), 0);
	for (i = 1; i < 4; i++) {
		assert_int_equal(r[i].error, HTTPC_OK);
		assert_string_equal(r[i].response.data, "fast");
	}
	assert_int_equal(r[0].status, 200);
	assert_true(r[0].duration_ms >= SLOW_MS - 10);
	for (i = 0; i < 4; i++)
		buf_free(&r[i].response);
	httpc_async_free(a, NULL);
	slow_server_stop(&slow);
}

/* A request that cannot start (bad scheme) is final at once (1) and never
 * comes out of poll; wakeup makes a waiting poll return early. */
static void test_async_refused_and_wakeup(void **state)
{
	struct httpc_async *a = httpc_async_new();
	struct httpc_request r, *done[2];
	int64_t t0;

	(void)state;
	assert_non_null(a);
	memset(&r, 0, sizeof r);
	r.url = "ftp://127.0.0.1/x";
	assert_int_equal(httpc_async_start(a, &r), 1);
	assert_int_equal(r.error, HTTPC_EREFUSED_TARGET);
	assert_int_equal(httpc_async_running(a), 0);
	buf_free(&r.response);
	httpc_async_wakeup(a);
	t0 = clock_mono_ms();
	assert_int_equal(httpc_async_poll(a, 2000, done, 2), 0);
	assert_true(clock_mono_ms() - t0 < 1000);
	httpc_async_free(a, NULL);
}

/* The resolve pin decides the address: a name that does not exist in DNS
 * reaches the test server through "name:port:127.0.0.1". */
static void test_resolve_pin(void **state)
{
	struct httpc_request r;
	char url[128], pin[128];
	int port = http_server_port(server);

	(void)state;
	memset(&r, 0, sizeof r);
	snprintf(url, sizeof url, "http://pinned.invalid:%d/echo", port);
	snprintf(pin, sizeof pin, "pinned.invalid:%d:127.0.0.1", port);
	r.url = url;
	r.body = "pinned";
	r.body_len = 6;
	r.resolve = pin;
	r.timeout_ms = 3000;
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_OK);
	assert_string_equal(r.response.data, "pinned");
	buf_free(&r.response);
}

/* The SSRF backstop: with allow_private off, a guarded request to loopback
 * fails as a refused target before connecting; an unguarded one (the PMS)
 * and a guarded one with allow_private on go through. The check runs when
 * a connection is opened, so the thread's kept connections are dropped
 * first (the delivery engine's client makes guarded requests only). */
static void test_egress_guard(void **state)
{
	struct httpc_request r;
	char url[128];

	(void)state;
	httpc_thread_cleanup();
	httpc_configure(&(struct httpc_opts){NULL, 0});
	req_init(&r, url, sizeof url, "POST", "/echo", "x");
	r.egress_guard = 1;
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_EREFUSED_TARGET);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.errmsg, "SSRF"));
	assert_non_null(strstr(r.errmsg, "loopback (127.0.0.0/8)"));
	buf_free(&r.response);

	req_init(&r, url, sizeof url, "POST", "/echo", "x");
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_OK);
	buf_free(&r.response);

	httpc_configure(&(struct httpc_opts){NULL, 1});
	req_init(&r, url, sizeof url, "POST", "/echo", "x");
	r.egress_guard = 1;
	perform_one(&r);
	assert_int_equal(r.error, HTTPC_OK);
	assert_int_equal(r.status, 200);
	buf_free(&r.response);
	httpc_configure(NULL);
}

static void test_empty_batch(void **state)
{
	(void)state;
	assert_int_equal(httpc_perform(NULL, 0), 0);
}

#define THREADS 4
#define BATCHES 5
#define PER_BATCH 4

struct worker {
	int id;
	atomic_int *failures;
};

/* Runs BATCHES batches on its own multi handle; counts (does not assert)
 * mismatches, since cmocka's asserts belong to the main thread. Even
 * workers clean up explicitly, odd ones leave it to the key destructor. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct httpc_request r[PER_BATCH];
	char url[PER_BATCH][128], body[PER_BATCH][64];
	int b, i;

	for (b = 0; b < BATCHES; b++) {
		for (i = 0; i < PER_BATCH; i++) {
			snprintf(body[i], sizeof body[i], "{\"t\":%d,\"b\":%d,\"r\":%d}", w->id, b,
				 i);
			req_init(&r[i], url[i], sizeof url[i], "POST", "/echo", body[i]);
		}
		if (httpc_perform(r, PER_BATCH) != 0)
			atomic_fetch_add(w->failures, 1);
		for (i = 0; i < PER_BATCH; i++) {
			if (r[i].error != HTTPC_OK || r[i].status != 200 ||
			    strcmp(r[i].response.data ? r[i].response.data : "", body[i]))
				atomic_fetch_add(w->failures, 1);
			if (b > 0 && !r[i].reused)
				atomic_fetch_add(w->failures, 1000);
			buf_free(&r[i].response);
		}
	}
	if (w->id % 2 == 0)
		httpc_thread_cleanup();
	return NULL;
}

static void test_threads(void **state)
{
	pthread_t th[THREADS];
	struct worker w[THREADS];
	atomic_int failures = 0;
	int i;

	(void)state;
	for (i = 0; i < THREADS; i++) {
		w[i].id = i;
		w[i].failures = &failures;
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(atomic_load(&failures), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_post_echo),
		cmocka_unit_test(test_headers_sent),
		cmocka_unit_test(test_status_reported),
		cmocka_unit_test(test_redirect_not_followed),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_head),
		cmocka_unit_test(test_parallel_same_url),
		cmocka_unit_test(test_connection_reuse),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_connection_refused),
		cmocka_unit_test(test_tls_to_plain_server),
		cmocka_unit_test(test_refused_targets),
		cmocka_unit_test(test_resolve_failure),
		cmocka_unit_test(test_empty_batch),
		cmocka_unit_test(test_async_slow_does_not_block),
		cmocka_unit_test(test_async_refused_and_wakeup),
		cmocka_unit_test(test_resolve_pin),
		cmocka_unit_test(test_egress_guard),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
