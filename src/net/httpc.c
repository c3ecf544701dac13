/* libcurl glue; the only file that includes curl/curl.h. Choices:
 *  - one multi handle per thread (pthread key), kept between batches: the
 *    multi handle owns the connection cache and DNS cache, so easy handles
 *    are made per request and connections still get reused;
 *  - HTTP/1.1 without pipelining: parallel requests to one host each get
 *    their own connection, up to HTTPC_MAX_HOST_CONNECTIONS;
 *  - the response cap lives in the write callback (returning 0 aborts the
 *    transfer with CURLE_WRITE_ERROR, reported as HTTPC_ETOOBIG);
 *  - CURLOPT_TIMEOUT_MS times each transfer from when it is added, also
 *    while it waits for a free connection slot (checked with 66 requests
 *    to one host); a deadline check of our own (deadline + 100 ms) backs it
 *    up so a batch can never outlive its longest timeout by much;
 *  - event driven: libcurl tells us which sockets to watch and when its
 *    timer is due (CURLMOPT_SOCKETFUNCTION / TIMERFUNCTION), an epoll set
 *    per client waits on them, and curl_multi_socket_action runs only the
 *    transfer whose socket is ready. curl_multi_perform instead visits
 *    every transfer on each call, and in libcurl 7.88 polls each one's
 *    socket with a system call of its own: with a few hundred webhook
 *    deliveries in flight that was a third of the sender's time;
 *  - httpc_perform is the asynchronous client run to completion on the
 *    calling thread's client. */
#include "net/httpc.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "net/egress.h"

/* How long past its deadline a transfer may run before we end it ourselves. */
#define DEADLINE_GRACE_US 100000
/* Longest single wait of httpc_perform, so deadlines are checked. */
#define POLL_MAX_MS 1000
/* Socket events handed to libcurl per epoll_wait. */
#define EVENTS_PER_WAIT 64

struct xfer {
	struct httpc_request *req;
	CURL *easy;
	struct curl_slist *hdrs;    /* NULL or the first of hdr_nodes */
	struct curl_slist *resolve; /* NULL or &resolve_node */
	/* The lists curl reads (it never frees or changes them) are built here
	 * over the caller's strings, not with curl_slist_append, which made
	 * two allocations per header per request. */
	struct curl_slist hdr_nodes[HTTPC_MAX_REQUEST_HEADERS + 2];
	struct curl_slist resolve_node;
	int64_t start_us;
	int64_t deadline_us;
	struct xfer *prev, *next;  /* an async client's running list */
	struct httpc_async *owner; /* the async client, whose idle handles x reuses */
	int active;                /* added to the multi handle, not yet finished */
	int finished;              /* out fields of req are final */
	int too_big;
	int oom;
	int refused;            /* the egress guard refused an address */
	int opened;             /* ... and opened a socket for an allowed one */
	char refused_range[96]; /* the last refused address's range, e.g. "loopback (127.0.0.0/8)" */
	int shape;              /* the easy handle's fixed options: see xfer_prepare */
	char errbuf[CURL_ERROR_SIZE];
};

/* The asynchronous client: its own multi handle, the running transfers in
 * a list (for deadlines), and finished requests queued until polled. */
#define ASYNC_IDLE_HANDLES 512

struct httpc_async {
	CURLM *m;
	int epfd;         /* the sockets libcurl asks us to watch, and evfd */
	int evfd;         /* an eventfd written by httpc_async_wakeup */
	int64_t timer_us; /* when libcurl's timer is due (monotonic), -1: none */
	/* Per socket (indexed by descriptor): the events registered in epfd
	 * and the events libcurl wants now (CURL_POLL_* bits; 0: none). */
	struct sock_state {
		unsigned char reg, want;
	} * socks;
	size_t nsocks;
	struct idle_handle {
		CURL *e;
		int shape;          /* the options it is configured with: see xfer_prepare */
	} idle[ASYNC_IDLE_HANDLES]; /* finished easy handles, for reuse: making
				     * one per request, then resetting and
				     * configuring one per request, were
				     * visible shares of the sender's time */
	size_t nidle;
	struct xfer *running;   /* head of the list of running transfers */
	int64_t next_expire_us; /* when async_expire next walks the list */
	size_t nrunning;        /* started, not yet returned by poll */
	struct httpc_request **done;
	size_t ndone, done_cap;
};

/* Each thread that calls httpc_perform gets a client of its own (its multi
 * handle and idle easy handles), kept under this key. */
static pthread_key_t multi_key;
static int initialized;
static char *trust_ca;
static int allow_private;
static int config_gen; /* bumped by httpc_configure: kept handles' options are stale */

/* Easy handles: reused by an async client, else made per request. */
static CURL *easy_get(struct httpc_async *a, int shape, int *configured);
static void easy_put(struct httpc_async *a, CURL *e, int shape);

static void multi_destroy(void *p)
{
	httpc_async_free(p, NULL);
}

int httpc_global_init(void)
{
	if (initialized)
		return 0;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -1;
	if (pthread_key_create(&multi_key, multi_destroy) != 0) {
		curl_global_cleanup();
		return -1;
	}
	initialized = 1;
	return 0;
}

void httpc_global_cleanup(void)
{
	if (!initialized)
		return;
	httpc_thread_cleanup();
	pthread_key_delete(multi_key);
	free(trust_ca);
	trust_ca = NULL;
	curl_global_cleanup();
	initialized = 0;
}

/* Warns when trust_ca would replace rather than extend the system store:
 * that is so when libcurl has no built-in CA directory to fall back on. */
static void check_ca_path(void)
{
	CURL *e = curl_easy_init();
	char *capath = NULL;

	if (!e)
		return;
	if (curl_easy_getinfo(e, CURLINFO_CAPATH, &capath) != CURLE_OK || !capath)
		log_msg(LOG_WARN, "httpc",
			"libcurl has no default CA directory: --trust-ca %s replaces "
			"the system CA store instead of adding to it",
			trust_ca);
	curl_easy_cleanup(e);
}

void httpc_configure(const struct httpc_opts *o)
{
	free(trust_ca);
	trust_ca = NULL;
	allow_private = 0;
	config_gen = (config_gen + 1) & 0xffff;
	if (!o)
		return;
	allow_private = o->allow_private;
	if (o->trust_ca && o->trust_ca[0]) {
		trust_ca = strdup(o->trust_ca);
		if (!trust_ca)
			log_msg(LOG_ERROR, "httpc", "out of memory copying the trust_ca path");
		else
			check_ca_path();
	}
}

void httpc_thread_cleanup(void)
{
	struct httpc_async *a;

	if (!initialized)
		return;
	a = pthread_getspecific(multi_key);
	if (!a)
		return;
	pthread_setspecific(multi_key, NULL);
	httpc_async_free(a, NULL);
}

/* CURLMOPT_SOCKETFUNCTION: keeps a's epoll set in step with what libcurl
 * wants watched, lazily. A kept-alive connection is removed between
 * requests and wanted again by the next one, so a removal only marks the
 * socket unwanted; it stays registered and the next request's wish is a
 * single MOD (an event on an unwanted socket deletes it then). Before,
 * every request paid DEL, a failed MOD and an ADD. A socket wanted after a
 * removal is always re-registered, since it may have been closed (which
 * drops it from epoll) and its number reused. */
static int on_socket(CURL *e, curl_socket_t s, int what, void *arg, void *sockp)
{
	struct httpc_async *a = arg;
	struct epoll_event ev = {0};
	struct sock_state *st;
	int op;

	(void)e;
	(void)sockp;
	if (s < 0)
		return -1;
	if ((size_t)s >= a->nsocks) {
		size_t n = (size_t)s + 64;
		struct sock_state *g = realloc(a->socks, n * sizeof *g);

		if (!g)
			return -1;
		memset(g + a->nsocks, 0, (n - a->nsocks) * sizeof *g);
		a->socks = g;
		a->nsocks = n;
	}
	st = &a->socks[s];
	if (what == CURL_POLL_REMOVE) {
		st->want = 0;
		return 0;
	}
	if (st->want && st->reg == what) {
		st->want = (unsigned char)what;
		return 0;
	}
	ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
	ev.data.fd = s;
	op = st->reg ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(a->epfd, op, s, &ev) < 0) {
		op = op == EPOLL_CTL_MOD ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
		if ((errno != ENOENT && errno != EEXIST) || epoll_ctl(a->epfd, op, s, &ev) < 0)
			return -1;
	}
	st->reg = st->want = (unsigned char)what;
	return 0;
}

/* An event on socket fd: 1 when libcurl wants it; otherwise the socket
 * leaves the epoll set (see on_socket) and 0. */
static int sock_wanted(struct httpc_async *a, int fd)
{
	if ((size_t)fd < a->nsocks && a->socks[fd].want)
		return 1;
	epoll_ctl(a->epfd, EPOLL_CTL_DEL, fd, NULL);
	if ((size_t)fd < a->nsocks)
		a->socks[fd].reg = 0;
	return 0;
}

/* CURLMOPT_TIMERFUNCTION: when libcurl next wants socket_action(TIMEOUT). */
static int on_timer(CURLM *m, long timeout_ms, void *arg)
{
	struct httpc_async *a = arg;

	(void)m;
	a->timer_us = timeout_ms < 0 ? -1 : clock_mono_us() + (int64_t)timeout_ms * 1000;
	return 0;
}

/* a's multi handle with our connection settings, event driven through a's
 * epoll set. Returns 0 or -1. */
static int multi_new(struct httpc_async *a)
{
	CURLM *m = curl_multi_init();

	if (!m)
		return -1;
	if (curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING) != CURLM_OK ||
	    curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, HTTPC_MAX_HOST_CONNECTIONS) !=
		    CURLM_OK ||
	    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, HTTPC_MAX_CACHED_CONNECTIONS) != CURLM_OK ||
	    curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_socket) != CURLM_OK ||
	    curl_multi_setopt(m, CURLMOPT_SOCKETDATA, (void *)a) != CURLM_OK ||
	    curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_timer) != CURLM_OK ||
	    curl_multi_setopt(m, CURLMOPT_TIMERDATA, (void *)a) != CURLM_OK) {
		curl_multi_cleanup(m);
		return -1;
	}
	a->m = m;
	return 0;
}

/* The calling thread's client, made on first use. NULL when out of
 * memory. */
static struct httpc_async *thread_client(void)
{
	struct httpc_async *a = pthread_getspecific(multi_key);

	if (a)
		return a;
	a = httpc_async_new();
	if (a && pthread_setspecific(multi_key, a) != 0) {
		httpc_async_free(a, NULL);
		a = NULL;
	}
	return a;
}

/* CURLOPT_OPENSOCKETFUNCTION of guarded requests: the SSRF backstop. The
 * resolve pin already decides the address; this refuses any forbidden
 * address libcurl might still try. */
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct xfer *x = arg;
	char range[sizeof x->refused_range];

	(void)purpose;
	if (!egress_address_allowed(&a->addr, range, sizeof range)) {
		x->refused = 1;
		memcpy(x->refused_range, range, sizeof range);
		return CURL_SOCKET_BAD;
	}
	x->opened = 1;
	return socket(a->family, a->socktype, a->protocol);
}

static void set_error(struct httpc_request *r, enum httpc_error err, const char *msg)
{
	r->error = err;
	snprintf(r->errmsg, sizeof r->errmsg, "%.159s", msg);
}

/* Appends the body to the response until the cap; past it (or out of
 * memory) returns 0, which makes libcurl abort with CURLE_WRITE_ERROR. */
static size_t on_write(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	struct buf *b = &x->req->response;
	size_t n = size * nmemb;

	if (buf_append(b, p, n) < 0) {
		if (n > b->max - b->len)
			x->too_big = 1;
		else
			x->oom = 1;
		return 0;
	}
	return n;
}

/* 1 when header line h is for field name (given without the colon); curl
 * also takes "Name;" for a header with an empty value. */
static int header_is(const char *h, const char *name)
{
	size_t n = strlen(name);

	return !strncasecmp(h, name, n) && (h[n] == ':' || h[n] == ';');
}

static int method_valid(const char *m)
{
	size_t i;

	for (i = 0; m[i]; i++)
		if (m[i] < 'A' || m[i] > 'Z' || i >= 16)
			return 0;
	return i > 0;
}

/* A list node over a string curl only reads (the API's type is not const). */
static void node_set(struct curl_slist *n, const char *text, struct curl_slist *next)
{
	union {
		const char *c;
		char *m;
	} u = {.c = text};

	n->data = u.m;
	n->next = next;
}

/* Builds the header list: the caller's headers, then Content-Type and an
 * empty Expect when the caller gave none. Returns 0, or 1 when a header
 * holds a line break or there are too many (the request fails; the
 * message is set). */
static int build_headers(struct xfer *x, int has_body)
{
	const struct httpc_request *r = x->req;
	int have_ct = 0, have_expect = 0;
	size_t i, n = 0;

	for (i = 0; r->headers && r->headers[i]; i++) {
		const char *h = r->headers[i];

		if (strpbrk(h, "\r\n")) {
			set_error(x->req, HTTPC_EOTHER, "header contains a line break");
			return 1;
		}
		if (n == HTTPC_MAX_REQUEST_HEADERS) {
			set_error(x->req, HTTPC_EOTHER, "too many request headers");
			return 1;
		}
		have_ct |= header_is(h, "Content-Type");
		have_expect |= header_is(h, "Expect");
		node_set(&x->hdr_nodes[n++], h, NULL);
	}
	/* "Content-Type:" with no value stops curl's form default. */
	if (!have_ct)
		node_set(&x->hdr_nodes[n++],
			 has_body ? "Content-Type: application/json" : "Content-Type:", NULL);
	if (!have_expect)
		node_set(&x->hdr_nodes[n++], "Expect:", NULL);
	for (i = 0; i + 1 < n; i++)
		x->hdr_nodes[i].next = &x->hdr_nodes[i + 1];
	x->hdrs = n ? &x->hdr_nodes[0] : NULL;
	return 0;
}

/* Refuses a request that cannot be sent: no URL, a scheme other than http
 * or https, an invalid method. Returns 0, or 1 with the error set in r. */
static int request_check(struct httpc_request *r, const char *method)
{
	if (!r->url || !r->url[0]) {
		set_error(r, HTTPC_EOTHER, "no URL");
		return 1;
	}
	if (strncasecmp(r->url, "http://", 7) && strncasecmp(r->url, "https://", 8)) {
		set_error(r, HTTPC_EREFUSED_TARGET, "only http and https URLs are allowed");
		return 1;
	}
	if (!method_valid(method)) {
		set_error(r, HTTPC_EOTHER, "invalid method");
		return 1;
	}
	return 0;
}

#define SETOPT(opt, val)                                    \
	do {                                                \
		if (rc == CURLE_OK)                         \
			rc = curl_easy_setopt(e, opt, val); \
	} while (0)

/* Sets the options of a fresh easy handle e that its shape fixes (see
 * xfer_prepare): protocols, TLS, the SSRF backstop when guarded, the
 * method family. Returns the first failure's code, or CURLE_OK. */
static CURLcode set_shape_options(CURL *e, int guarded, int is_get, int is_head)
{
	CURLcode rc = CURLE_OK;

	SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
	SETOPT(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	SETOPT(CURLOPT_FOLLOWLOCATION, 0L);
	SETOPT(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SETOPT(CURLOPT_NOSIGNAL, 1L);
	SETOPT(CURLOPT_PROXY, "");
	SETOPT(CURLOPT_SSL_VERIFYPEER, 1L);
	SETOPT(CURLOPT_SSL_VERIFYHOST, 2L);
	if (trust_ca)
		SETOPT(CURLOPT_CAINFO, trust_ca);
	SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
	SETOPT(CURLOPT_USERAGENT, "revops");
	SETOPT(CURLOPT_WRITEFUNCTION, on_write);
	if (guarded)
		SETOPT(CURLOPT_OPENSOCKETFUNCTION, open_socket);
	if (is_get)
		SETOPT(CURLOPT_HTTPGET, 1L);
	else if (is_head)
		SETOPT(CURLOPT_NOBODY, 1L);
	return rc;
}

/* Sets the options of x's easy handle e that change with each request:
 * URL, timeout, headers, resolve pin, callbacks' data and, when send_body,
 * the body and method. Returns the first failure's code, or CURLE_OK. */
static CURLcode set_request_options(CURL *e, struct xfer *x, const char *method, long timeout,
				    int guarded, int send_body)
{
	const struct httpc_request *r = x->req;
	CURLcode rc = CURLE_OK;

	SETOPT(CURLOPT_PRIVATE, (void *)x);
	SETOPT(CURLOPT_ERRORBUFFER, x->errbuf);
	SETOPT(CURLOPT_URL, r->url);
	SETOPT(CURLOPT_TIMEOUT_MS, timeout);
	SETOPT(CURLOPT_HTTPHEADER, x->hdrs);
	SETOPT(CURLOPT_WRITEDATA, (void *)x);
	SETOPT(CURLOPT_RESOLVE, x->resolve);
	if (guarded)
		SETOPT(CURLOPT_OPENSOCKETDATA, (void *)x);
	if (send_body) {
		/* POSTFIELDS does not copy: the caller's body outlives the call. */
		SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(r->body ? r->body_len : 0));
		SETOPT(CURLOPT_POSTFIELDS, r->body ? r->body : "");
		SETOPT(CURLOPT_CUSTOMREQUEST, strcmp(method, "POST") ? method : NULL);
	}
	return rc;
}

#undef SETOPT

/* Makes the easy handle for x. Returns 0 (x->easy set), -1 out of memory,
 * or 1 when the request failed before any transfer (error set in it). */
static int xfer_prepare(struct xfer *x, int64_t start_us)
{
	struct httpc_request *r = x->req;
	const char *method = r->method ? r->method : "POST";
	long timeout = r->timeout_ms > 0 ? r->timeout_ms : HTTPC_DEFAULT_TIMEOUT_MS;
	int is_get = !strcmp(method, "GET"), is_head = !strcmp(method, "HEAD");
	int send_body = !is_get && !is_head;
	CURLcode rc = CURLE_OK;
	CURL *e;
	int ret, guarded, configured;

	ret = request_check(r, method);
	if (!ret)
		ret = build_headers(x, send_body && r->body);
	if (ret)
		return ret;
	if (r->resolve && r->resolve[0]) {
		node_set(&x->resolve_node, r->resolve, NULL);
		x->resolve = &x->resolve_node;
	}
	/* The shape names the options that depend only on the kind of request
	 * (method family, SSRF backstop) and the configuration: a handle kept
	 * from a request of the same shape has them already, so only the
	 * per-request ones are set. */
	guarded = r->egress_guard && !allow_private;
	x->shape = (is_get ? 1 : is_head ? 2 : 3) | guarded << 2 | config_gen << 3;
	e = x->easy = easy_get(x->owner, x->shape, &configured);
	if (!e)
		return -1;
	x->start_us = start_us;
	x->deadline_us = start_us + (int64_t)timeout * 1000;
	if (!configured)
		rc = set_shape_options(e, guarded, is_get, is_head);
	if (rc == CURLE_OK)
		rc = set_request_options(e, x, method, timeout, guarded, send_body);
	if (rc == CURLE_OK)
		return 0;
	if (rc == CURLE_OUT_OF_MEMORY)
		return -1;
	set_error(r, HTTPC_EOTHER, curl_easy_strerror(rc));
	return 1;
}

static enum httpc_error classify(CURLcode rc, const struct xfer *x)
{
	if (x->too_big)
		return HTTPC_ETOOBIG;
	/* A refused address is the failure only when no other one of the
	 * name's addresses was tried: otherwise that one's outcome counts. */
	if (x->refused && !x->opened && rc != CURLE_OK)
		return HTTPC_EREFUSED_TARGET;
	switch (rc) {
	case CURLE_OK:
		return HTTPC_OK;
	case CURLE_OPERATION_TIMEDOUT:
		return HTTPC_ETIMEOUT;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return HTTPC_ERESOLVE;
	case CURLE_COULDNT_CONNECT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
		return HTTPC_ECONNECT;
	case CURLE_UNSUPPORTED_PROTOCOL:
		return HTTPC_EREFUSED_TARGET;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_SHUTDOWN_FAILED:
	case CURLE_SSL_CLIENTCERT:
	case CURLE_USE_SSL_FAILED:
		return HTTPC_ETLS;
	default:
		return HTTPC_EOTHER;
	}
}

/* Frees what x holds (not x itself); an async client keeps the easy
 * handle for its next request. */
static void xfer_release(struct xfer *x)
{
	if (x->easy)
		easy_put(x->owner, x->easy, x->shape);
	x->easy = NULL;
	x->hdrs = NULL;
	x->resolve = NULL;
}

/* Ends x: takes it off the multi handle, records status, error, reuse and
 * duration, and frees the easy handle and header list. */
static void xfer_finish(CURLM *m, struct xfer *x, CURLcode rc)
{
	struct httpc_request *r = x->req;
	long status = 0, connects = 0;

	if (x->active)
		curl_multi_remove_handle(m, x->easy);
	x->active = 0;
	x->finished = 1;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &connects);
	r->status = status;
	r->error = classify(rc, x);
	if (x->oom)
		set_error(r, HTTPC_EOTHER, "out of memory storing the response");
	else if (r->error == HTTPC_ETOOBIG)
		snprintf(r->errmsg, sizeof r->errmsg, "response larger than %zu bytes",
			 r->response.max);
	else if (r->error == HTTPC_EREFUSED_TARGET && x->refused)
		snprintf(r->errmsg, sizeof r->errmsg,
			 "the target address is not allowed (SSRF guard): %s", x->refused_range);
	else if (r->error != HTTPC_OK)
		set_error(r, r->error, x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
	r->reused = status > 0 && connects == 0;
	r->duration_ms = (double)(clock_mono_us() - x->start_us) / 1000.0;
	xfer_release(x);
}

/* Reads curl's completion messages and finishes those transfers, calling
 * on_done for each. */
static void drain(CURLM *m, void (*on_done)(struct xfer *, void *), void *arg)
{
	struct CURLMsg *msg;
	struct xfer *x;
	char *priv;
	int left;
	CURLcode rc;

	while ((msg = curl_multi_info_read(m, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		rc = msg->data.result;
		priv = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
		x = (struct xfer *)(void *)priv;
		if (!x || !x->active)
			continue;
		xfer_finish(m, x, rc);
		on_done(x, arg);
	}
}

/* Performs the requests on the calling thread's asynchronous client: all
 * are started, then polled until each came back. */
int httpc_perform(struct httpc_request *reqs, size_t n)
{
	struct httpc_request *done[EVENTS_PER_WAIT];
	struct httpc_async *tc = NULL;
	unsigned char *running = NULL;
	const char *why = "out of memory";
	size_t i, pending = 0;
	int rc, k, ret = -1;

	for (i = 0; i < n; i++) {
		struct httpc_request *r = &reqs[i];

		r->status = 0;
		r->error = HTTPC_EOTHER;
		snprintf(r->errmsg, sizeof r->errmsg, "not attempted");
		buf_init(&r->response,
			 r->max_response ? r->max_response : HTTPC_DEFAULT_MAX_RESPONSE);
		r->duration_ms = 0;
		r->reused = 0;
	}
	if (n == 0)
		return 0;
	if (!initialized)
		goto fail; /* no thread key yet: a setup failure like any other */
	running = calloc(n, 1);
	tc = thread_client();
	if (!running || !tc)
		goto fail;
	for (i = 0; i < n; i++) {
		rc = httpc_async_start(tc, &reqs[i]);
		if (rc < 0)
			goto fail;
		running[i] = rc == 0;
		pending += running[i];
	}
	while (pending > 0) {
		k = httpc_async_poll(tc, POLL_MAX_MS, done, ARRAY_LEN(done));
		if (k < 0) {
			why = "the transfer engine failed";
			goto fail;
		}
		for (i = 0; i < (size_t)k; i++)
			running[done[i] - reqs] = 0;
		pending -= (size_t)k;
	}
	ret = 0;
	goto out;
fail:
	/* Nothing more runs: unfinished requests fail, and the thread's client
	 * (possibly broken) is dropped so the next call starts afresh. */
	for (i = 0; i < n; i++)
		if (!running || running[i] || reqs[i].error == HTTPC_OK)
			set_error(&reqs[i], HTTPC_EOTHER, why);
	if (tc)
		httpc_thread_cleanup();
out:
	free(running);
	return ret;
}

/* An easy handle for a request of the given shape: an idle one of a
 * already configured for that shape (*configured = 1), else an idle one
 * reset to defaults or a new one (*configured = 0). */
static CURL *easy_get(struct httpc_async *a, int shape, int *configured)
{
	struct idle_handle h;
	size_t i;

	*configured = 0;
	if (!a || !a->nidle)
		return curl_easy_init();
	for (i = a->nidle; i-- > 0;)
		if (a->idle[i].shape == shape) {
			h = a->idle[i];
			a->idle[i] = a->idle[--a->nidle];
			*configured = 1;
			return h.e;
		}
	h = a->idle[--a->nidle];
	curl_easy_reset(h.e);
	return h.e;
}

/* Ends a request's use of e: kept by a (with its options) when there is
 * room, else freed. The options that point into the request are cleared
 * so an idle handle holds no dangling pointer but its body (never read
 * before the next request sets it). */
static void easy_put(struct httpc_async *a, CURL *e, int shape)
{
	if (a && a->nidle < ASYNC_IDLE_HANDLES) {
		curl_easy_setopt(e, CURLOPT_PRIVATE, NULL);
		curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
		curl_easy_setopt(e, CURLOPT_RESOLVE, NULL);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, NULL);
		curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, NULL);
		a->idle[a->nidle++] = (struct idle_handle){e, shape};
		return;
	}
	curl_easy_cleanup(e);
}

struct httpc_async *httpc_async_new(void)
{
	struct httpc_async *a;

	if (!initialized)
		return NULL;
	a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	a->timer_us = -1;
	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	a->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (a->epfd < 0 || a->evfd < 0 ||
	    epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->evfd,
		      &(struct epoll_event){.events = EPOLLIN, .data.fd = a->evfd}) < 0 ||
	    multi_new(a) < 0) {
		log_msg(LOG_ERROR, "httpc", "cannot make an HTTP client: %s", strerror(errno));
		goto fail;
	}
	return a;
fail:
	if (a->epfd >= 0)
		close(a->epfd);
	if (a->evfd >= 0)
		close(a->evfd);
	free(a);
	return NULL;
}

static void unlink_xfer(struct httpc_async *a, struct xfer *x)
{
	if (x->prev)
		x->prev->next = x->next;
	else
		a->running = x->next;
	if (x->next)
		x->next->prev = x->prev;
	x->prev = x->next = NULL;
}

void httpc_async_free(struct httpc_async *a, void (*abandoned)(struct httpc_request *))
{
	struct xfer *x, *next;
	size_t i;

	if (!a)
		return;
	for (x = a->running; x; x = next) {
		next = x->next;
		if (x->active)
			curl_multi_remove_handle(a->m, x->easy);
		xfer_release(x);
		if (abandoned)
			abandoned(x->req);
		free(x);
	}
	for (i = 0; abandoned && i < a->ndone; i++)
		abandoned(a->done[i]);
	while (a->nidle)
		curl_easy_cleanup(a->idle[--a->nidle].e);
	curl_multi_cleanup(a->m);
	close(a->epfd);
	close(a->evfd);
	free(a->socks);
	free(a->done);
	free(a);
}

/* Queues x's request as finished (the queue grew when x started) and
 * frees x. */
static void async_done(struct xfer *x, void *arg)
{
	struct httpc_async *a = arg;

	unlink_xfer(a, x);
	a->done[a->ndone++] = x->req;
	free(x);
}

int httpc_async_start(struct httpc_async *a, struct httpc_request *r)
{
	struct xfer *x;
	int rc;

	r->status = 0;
	r->error = HTTPC_OK;
	r->errmsg[0] = '\0';
	r->duration_ms = 0;
	r->reused = 0;
	buf_init(&r->response, r->max_response ? r->max_response : HTTPC_DEFAULT_MAX_RESPONSE);
	if (buf_append(&r->response, "", 0) < 0)
		return -1;
	if (a->done_cap < a->nrunning + a->ndone + 1) {
		size_t cap = a->done_cap ? a->done_cap * 2 : 64;
		struct httpc_request **d = realloc(a->done, cap * sizeof *d);

		if (!d)
			return -1;
		a->done = d;
		a->done_cap = cap;
	}
	x = calloc(1, sizeof *x);
	if (!x)
		return -1;
	x->req = r;
	x->owner = a;
	rc = xfer_prepare(x, clock_mono_us());
	if (rc != 0) {
		xfer_release(x);
		free(x);
		return rc;
	}
	if (curl_multi_add_handle(a->m, x->easy) != CURLM_OK) {
		xfer_release(x);
		free(x);
		set_error(r, HTTPC_EOTHER, "cannot add the transfer");
		return 1;
	}
	x->active = 1;
	x->next = a->running;
	if (a->running)
		a->running->prev = x;
	a->running = x;
	a->nrunning++;
	return 0;
}

/* How often the async client walks its transfers for deadlines: libcurl
 * enforces CURLOPT_TIMEOUT_MS itself, this is the backstop, and walking
 * every transfer on every poll cost O(in flight) per completion. */
#define EXPIRE_EVERY_US 100000

/* Ends running transfers past their deadline (plus grace) as timed out,
 * at most every EXPIRE_EVERY_US; returns the milliseconds until the next
 * check is due. */
static int async_expire(struct httpc_async *a)
{
	int64_t now = clock_mono_us(), left, nearest = EXPIRE_EVERY_US;
	struct xfer *x, *next;

	if (now < a->next_expire_us)
		return (int)((a->next_expire_us - now + 999) / 1000);
	for (x = a->running; x; x = next) {
		next = x->next;
		left = x->deadline_us + DEADLINE_GRACE_US - now;
		if (left <= 0) {
			xfer_finish(a->m, x, CURLE_OPERATION_TIMEDOUT);
			async_done(x, a);
		} else if (left < nearest) {
			nearest = left;
		}
	}
	a->next_expire_us = now + nearest;
	return (int)((nearest + 999) / 1000);
}

/* The multi handle broke: every running transfer fails. */
static void async_fail_all(struct httpc_async *a, CURLMcode mc)
{
	struct xfer *x, *next;

	for (x = a->running; x; x = next) {
		next = x->next;
		xfer_finish(a->m, x, CURLE_OK);
		set_error(x->req, HTTPC_EOTHER, curl_multi_strerror(mc));
		x->req->status = 0;
		async_done(x, a);
	}
}

/* Runs libcurl's timer when it is due. */
static CURLMcode run_timer(struct httpc_async *a)
{
	int running;

	if (a->timer_us < 0 || a->timer_us > clock_mono_us())
		return CURLM_OK;
	a->timer_us = -1; /* libcurl sets the next one from inside the call */
	return curl_multi_socket_action(a->m, CURL_SOCKET_TIMEOUT, 0, &running);
}

/* Waits up to wait_ms (less when libcurl's timer is due sooner) for
 * socket events or a wakeup, hands each ready socket to libcurl, then runs
 * its timer if due. */
static CURLMcode wait_events(struct httpc_async *a, int wait_ms)
{
	struct epoll_event ev[EVENTS_PER_WAIT];
	CURLMcode mc = CURLM_OK;
	int64_t timer_ms;
	uint64_t count;
	int n, i, mask, running;

	if (a->timer_us >= 0) {
		timer_ms = (a->timer_us - clock_mono_us() + 999) / 1000;
		if (timer_ms < wait_ms)
			wait_ms = timer_ms < 0 ? 0 : (int)timer_ms;
	}
	n = epoll_wait(a->epfd, ev, EVENTS_PER_WAIT, wait_ms);
	if (n < 0)
		return errno == EINTR ? CURLM_OK : CURLM_INTERNAL_ERROR;
	for (i = 0; i < n && mc == CURLM_OK; i++) {
		if (ev[i].data.fd == a->evfd) {
			if (read(a->evfd, &count, sizeof count) < 0)
				count = 0; /* already drained: nothing to do */
			continue;
		}
		if (!sock_wanted(a, ev[i].data.fd))
			continue;
		mask = (ev[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
		       (ev[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
		       (ev[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
		mc = curl_multi_socket_action(a->m, ev[i].data.fd, mask, &running);
	}
	return mc == CURLM_OK ? run_timer(a) : mc;
}

int httpc_async_poll(struct httpc_async *a, int wait_ms, struct httpc_request **done, size_t cap)
{
	CURLMcode mc;
	int deadline_ms, ret = 0;
	size_t n;

	mc = run_timer(a);
	if (mc == CURLM_OK)
		drain(a->m, async_done, a);
	if (mc == CURLM_OK && a->ndone == 0) {
		deadline_ms = async_expire(a);
		if (a->ndone == 0) {
			if (wait_ms > deadline_ms && a->running)
				wait_ms = deadline_ms;
			mc = wait_events(a, wait_ms < 0 ? 0 : wait_ms);
			if (mc == CURLM_OK)
				drain(a->m, async_done, a);
		}
	}
	if (mc != CURLM_OK) {
		async_fail_all(a, mc);
		ret = -1;
	}
	n = a->ndone < cap ? a->ndone : cap;
	if (n) {
		memcpy(done, a->done, n * sizeof *done);
		memmove(a->done, a->done + n, (a->ndone - n) * sizeof *done);
		a->ndone -= n;
		a->nrunning -= n;
	}
	return ret < 0 && n == 0 ? -1 : (int)n;
}

size_t httpc_async_running(const struct httpc_async *a)
{
	return a->nrunning;
}

void httpc_async_wakeup(struct httpc_async *a)
{
	uint64_t one = 1;

	/* Fails only when the counter is already huge: a wakeup is pending. */
	if (write(a->evfd, &one, sizeof one) < 0)
		return;
}
