#include "log.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"

static int log_json = 1;
static const char *level_names[] = {"debug", "info", "warn", "error"};

void log_init(int json)
{
	log_json = json;
}

/* Writes obj as one line with a single fputs, so lines from several threads
 * never interleave (stdio locks the stream per call). */
static void emit(json_t *obj)
{
	char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
	size_t n;

	if (s) {
		n = strlen(s);
		s[n] = '\n';
		fwrite(s, 1, n + 1, stderr);
		s[n] = '\0';
		free(s);
	}
	json_decref(obj);
}

void log_msg(enum log_level level, const char *event, const char *fmt, ...)
{
	char msg[1024], ts[CLOCK_RFC3339_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	clock_format_ms(clock_now_ms(), ts);
	if (!log_json) {
		fprintf(stderr, "%s %-5s %s: %s\n", ts, level_names[level], event, msg);
		return;
	}
	emit(json_pack("{s:s, s:s, s:s, s:s}", "ts", ts, "level", level_names[level], "event",
		       event, "msg", msg));
}

void log_access(const struct log_access *a)
{
	char ts[CLOCK_RFC3339_LEN];
	json_t *o;

	clock_format_ms(clock_now_ms(), ts);
	if (!log_json) {
		fprintf(stderr, "%s access %s %s %d %.2fms %s %s\n", ts, a->method, a->path,
			a->status, a->duration_ms, a->client ? a->client : "-",
			a->request_id ? a->request_id : "-");
		return;
	}
	o = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s, s:s, s:i, s:f, s:s?, s:s?, s:s?, s:s?, s:I}",
		      "ts", ts, "level", "info", "event", "access", "request_id", a->request_id,
		      "method", a->method, "path", a->path, "route", a->route ? a->route : "-",
		      "status", a->status, "duration_ms", (double)(int64_t)(a->duration_ms * 1000) / 1000, "client", a->client,
		      "portfolio_id", a->portfolio, "principal", a->principal, "error_code",
		      a->error_code, "bytes", (json_int_t)a->bytes);
	if (o)
		emit(o);
}
