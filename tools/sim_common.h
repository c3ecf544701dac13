/* sim_common: what the test simulators (pms-sim, wa-sim) share: option
 * parsing, JSON answers, sleeping and the 'listening' log line the suites
 * wait for (t/api/lib/pmssim.py). */
#ifndef REVOPS_SIM_COMMON_H
#define REVOPS_SIM_COMMON_H
#include <jansson.h>
#include <stddef.h>

struct response;
struct http_server;

/* Parses a decimal integer in [lo, hi]. Returns 0 or -1. */
int sim_parse_int(const char *s, long lo, long hi, int *out);
/* Parses HOST:PORT (the host may be a bracketed IPv6 literal) into host
 * (cap bytes) and *port. Returns 0 or -1. */
int sim_parse_listen(const char *v, char *host, size_t cap, int *port);
/* Sets res to status with body as compact JSON; consumes body. A body that
 * cannot be serialised turns the answer into a bare 500. */
void sim_reply(struct response *res, int status, json_t *body);
/* The simulator's own errors: {"error": msg}. */
void sim_reply_error(struct response *res, int status, const char *msg);
/* Sleeps ms milliseconds, resuming after interruptions. */
void sim_sleep_ms(int ms);
/* 1 when the Content-Type ct is application/json (parameters allowed). */
int sim_is_json(const char *ct);
/* Logs the 'listening' line ("port=N url=http://HOST:N") of srv on host. */
void sim_log_listening(struct http_server *srv, const char *host);

#endif
