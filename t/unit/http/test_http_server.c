/* Unit tests for http_server's deferred answers (http_defer,
 * http_resume), against a real loopback server and raw sockets: a
 * handler on the loop defers, another thread resumes it and the loop
 * answers, on a connection that then serves its next request; the loop
 * serves other connections while an answer is deferred; a handler on a
 * worker defers the same way; http_server_stop waits for a deferred
 * answer owed; a start that fails part way (no descriptors left) leaves
 * descriptor 0 alone. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/http_server.h"

/* The request the handler deferred last, for the test to resume. */
static struct {
	struct request *req;
	struct response *res;
	atomic_int held;
} slot;

/* http_resume's then: the answer of a deferred request. */
static void fill(void *arg)
{
	struct response *res = arg;

	res->status = buf_puts(&res->body, "resumed") < 0 ? 500 : 200;
}

/* GET or POST /defer: deferred (slot); anything else: 200 "now". */
static void handler(void *arg, struct request *req, struct response *res)
{
	(void)arg;
	if (!strcmp(req->path, "/defer")) {
		http_defer(req);
		slot.req = req;
		slot.res = res;
		atomic_store(&slot.held, 1);
		return;
	}
	res->status = buf_puts(&res->body, "now") < 0 ? 500 : 200;
}

/* Every write runs on a worker (lane 0). */
static int lane_of(void *arg, const struct request *req)
{
	(void)arg;
	(void)req;
	return 0;
}

static struct http_server *start(int threads, int workers)
{
	struct http_server_opts o = {.host = "127.0.0.1",
				     .threads = threads,
				     .max_connections = 64,
				     .idle_timeout_s = 30,
				     .workers = workers,
				     .lane_of = lane_of};
	struct http_server *s;

	atomic_store(&slot.held, 0);
	assert_int_equal(http_server_start(&o, handler, NULL, &s), 0);
	return s;
}

static int connect_to(struct http_server *s)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(http_server_port(s))};
	struct timeval tv = {5, 0};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
	return fd;
}

static void send_request(int fd, const char *method, const char *path)
{
	char req[256];
	int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
			 method, path);

	assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
}

/* Reads one answer (up to its body, which has Content-Length) into out:
 * 1 when one came, 0 on EOF or timeout first. */
static int read_answer(int fd, char *out, size_t cap)
{
	size_t len = 0;
	const char *end, *cl;
	ssize_t n;

	out[0] = '\0';
	for (;;) {
		end = strstr(out, "\r\n\r\n");
		cl = strstr(out, "Content-Length: ");
		if (end && cl && len >= (size_t)(end + 4 - out) + strtoul(cl + 16, NULL, 10))
			return 1;
		if (len + 1 >= cap || (n = recv(fd, out + len, cap - len - 1, 0)) <= 0)
			return 0;
		len += (size_t)n;
		out[len] = '\0';
	}
}

/* 1 when fd has bytes (or EOF) to read right now. */
static int readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

static void wait_held(void)
{
	for (int i = 0; i < 5000 && !atomic_load(&slot.held); i++)
		usleep(1000);
	assert_true(atomic_load(&slot.held));
}

/* Sends method path on fd and checks that the answer's body is body. */
static void expect_answer(int fd, const char *method, const char *path, const char *body)
{
	char out[1024], want[64];

	send_request(fd, method, path);
	assert_true(read_answer(fd, out, sizeof out));
	snprintf(want, sizeof want, "\r\n\r\n%s", body);
	assert_non_null(strstr(out, want));
}

static void resume_slot(void)
{
	atomic_store(&slot.held, 0);
	http_resume(slot.req, fill, slot.res);
}

/* Deferred on the loop (a GET), resumed from this thread: answered, and
 * the connection goes on with its next request; meanwhile another
 * connection of the same (only) loop is answered. */
static void test_deferred_on_the_loop(void **state)
{
	struct http_server *s = start(1, 0);
	int a = connect_to(s), b = connect_to(s);
	char out[1024];

	(void)state;
	send_request(a, "GET", "/defer");
	wait_held();
	expect_answer(b, "GET", "/other", "now");
	assert_false(readable(a)); /* still deferred: nothing written */
	resume_slot();
	assert_true(read_answer(a, out, sizeof out));
	assert_non_null(strstr(out, "HTTP/1.1 200"));
	assert_non_null(strstr(out, "\r\n\r\nresumed"));
	expect_answer(a, "GET", "/next", "now");
	/* the request ends just after its answer is sent */
	for (int i = 0; i < 5000 && http_server_in_flight(s); i++)
		usleep(1000);
	assert_int_equal(http_server_in_flight(s), 0);
	close(a);
	close(b);
	http_server_stop(s);
}

/* Deferred by a handler on a worker (a POST): the worker is free at once
 * (a second write is answered on the only worker), and the deferred one
 * is answered once resumed. */
static void test_deferred_on_a_worker(void **state)
{
	struct http_server *s = start(1, 1);
	int a = connect_to(s), b = connect_to(s);
	char out[1024];

	(void)state;
	send_request(a, "POST", "/defer");
	wait_held();
	assert_int_equal(http_server_in_flight(s), 1);
	expect_answer(b, "POST", "/other", "now");
	resume_slot();
	assert_true(read_answer(a, out, sizeof out));
	assert_non_null(strstr(out, "\r\n\r\nresumed"));
	close(a);
	close(b);
	http_server_stop(s);
}

/* Resumes the slot after 200 ms (while the test stops the server). */
static void *resume_soon(void *arg)
{
	(void)arg;
	usleep(200 * 1000);
	resume_slot();
	return NULL;
}

/* http_server_stop while an answer is deferred: it returns only once the
 * answer was written (a stop that closed the connection first would leave
 * the client an EOF, and the resume a freed connection). */
static void test_stop_waits_for_deferred(void **state)
{
	struct http_server *s = start(2, 0);
	int a = connect_to(s);
	pthread_t t;
	char out[1024];

	(void)state;
	send_request(a, "GET", "/defer");
	wait_held();
	assert_int_equal(pthread_create(&t, NULL, resume_soon, NULL), 0);
	http_server_stop(s);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(read_answer(a, out, sizeof out));
	assert_non_null(strstr(out, "\r\n\r\nresumed"));
	close(a);
}

/* With too few descriptors for all its loops, http_server_start fails and
 * stops the loops it made. The loops it never set up were once woken and
 * closed as descriptor 0 (their zeroed fields); descriptor 0 is the write
 * end of a pipe here, so a stray wake-up shows on the read end. */
static void test_failed_start_leaves_fd0_alone(void **state)
{
	/* max_connections 1: the server raises the open-files limit to 129 at
	 * most (FD_RESERVE), too few for 200 loops of two descriptors each */
	struct http_server_opts o = {.host = "127.0.0.1",
				     .threads = 200,
				     .max_connections = 1,
				     .idle_timeout_s = 30};
	struct http_server *s = NULL;
	struct rlimit old, low;
	int p[2], saved0 = dup(0), lowest;
	char b[8];

	(void)state;
	assert_true(saved0 >= 0);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(dup2(p[1], 0), 0);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	assert_true((lowest = dup(p[0])) >= 0);
	close(lowest);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)lowest + 12;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	assert_int_equal(http_server_start(&o, handler, NULL, &s), -1);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	errno = 0;
	assert_int_equal(read(p[0], b, sizeof b), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(dup2(saved0, 0), 0);
	close(saved0);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deferred_on_the_loop),
		cmocka_unit_test(test_deferred_on_a_worker),
		cmocka_unit_test(test_stop_waits_for_deferred),
		cmocka_unit_test(test_failed_start_leaves_fd0_alone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
