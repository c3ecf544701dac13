#include "sim_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/buf.h"
#include "core/log.h"
#include "http/http_server.h"

int sim_parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(s, &end, 10);
	if (end == s || *end || errno || n < lo || n > hi)
		return -1;
	*out = (int)n;
	return 0;
}

int sim_parse_listen(const char *v, char *host, size_t cap, int *port)
{
	const char *colon = strrchr(v, ':');

	if (!colon || colon == v || (size_t)(colon - v) >= cap ||
	    sim_parse_int(colon + 1, 0, 65535, port) < 0)
		return -1;
	memcpy(host, v, (size_t)(colon - v));
	host[colon - v] = '\0';
	return 0;
}

void sim_reply(struct response *res, int status, json_t *body)
{
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;

	json_decref(body);
	res->content_type = "application/json";
	buf_reset(&res->body);
	if (!s || buf_puts(&res->body, s) < 0) {
		res->status = 500;
		buf_reset(&res->body);
		if (buf_puts(&res->body, "{\"error\":\"out of memory\"}") < 0)
			res->close = 1;
	} else {
		res->status = status;
	}
	free(s);
}

void sim_reply_error(struct response *res, int status, const char *msg)
{
	sim_reply(res, status, json_pack("{s:s}", "error", msg));
}

void sim_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L}, rem;

	while (nanosleep(&ts, &rem) < 0 && errno == EINTR)
		ts = rem;
}

int sim_is_json(const char *ct)
{
	return ct && !strncasecmp(ct, "application/json", 16) &&
	       (!ct[16] || ct[16] == ';' || ct[16] == ' ');
}

void sim_log_listening(struct http_server *srv, const char *host)
{
	/* A bare IPv6 literal needs brackets in a URL. */
	int v6 = strchr(host, ':') && host[0] != '[';

	log_msg(LOG_INFO, "listening", "port=%d url=http://%s%s%s:%d", http_server_port(srv),
		v6 ? "[" : "", host, v6 ? "]" : "", http_server_port(srv));
}
