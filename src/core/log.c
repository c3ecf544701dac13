#include "core/log.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/jsonw.h"

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
	struct buf line;
	char ts[CLOCK_RFC3339_LEN];
	int ok;

	clock_format_ms(clock_now_ms(), ts);
	if (!log_json) {
		fprintf(stderr, "%s access %s %s %d %.2fms %s %s%s%s\n", ts, a->method, a->path,
			a->status, a->duration_ms, a->client ? a->client : "-",
			a->request_id ? a->request_id : "-", a->trace_id ? " trace=" : "",
			a->trace_id ? a->trace_id : "");
		return;
	}
	/* Formatted by hand (no jansson tree) and written with one fwrite:
	 * the access line is on every request's path. */
	buf_init(&line, 16 * 1024);
	ok = buf_putc(&line, '{') == 0 && jsonw_key(&line, "ts", 1) == 0 &&
	     jsonw_str(&line, ts) == 0 &&
	     buf_puts(&line, ",\"level\":\"info\",\"event\":\"access\"") == 0 &&
	     jsonw_key(&line, "request_id", 0) == 0 && jsonw_str(&line, a->request_id) == 0 &&
	     jsonw_key(&line, "method", 0) == 0 && jsonw_str(&line, a->method) == 0 &&
	     jsonw_key(&line, "path", 0) == 0 && jsonw_str(&line, a->path) == 0 &&
	     jsonw_key(&line, "route", 0) == 0 && jsonw_str(&line, a->route ? a->route : "-") == 0 &&
	     jsonw_key(&line, "status", 0) == 0 && jsonw_int(&line, a->status) == 0 &&
	     jsonw_key(&line, "duration_ms", 0) == 0 &&
	     buf_printf(&line, "%.3f", a->duration_ms) == 0 && jsonw_key(&line, "client", 0) == 0 &&
	     jsonw_str(&line, a->client) == 0 && jsonw_key(&line, "portfolio_id", 0) == 0 &&
	     jsonw_str(&line, a->portfolio) == 0 && jsonw_key(&line, "principal", 0) == 0 &&
	     jsonw_str(&line, a->principal) == 0 && jsonw_key(&line, "error_code", 0) == 0 &&
	     jsonw_str(&line, a->error_code) == 0 && jsonw_key(&line, "bytes", 0) == 0 &&
	     jsonw_int(&line, (int64_t)a->bytes) == 0;
	if (ok && a->trace_id)
		ok = jsonw_key(&line, "trace_id", 0) == 0 && jsonw_str(&line, a->trace_id) == 0 &&
		     jsonw_key(&line, "span_id", 0) == 0 && jsonw_str(&line, a->span_id) == 0 &&
		     jsonw_key(&line, "parent_span_id", 0) == 0 &&
		     jsonw_str(&line, a->parent_span_id) == 0;
	ok = ok && buf_puts(&line, "}\n") == 0;
	if (ok)
		fwrite(line.data, 1, line.len, stderr);
	buf_free(&line);
}
