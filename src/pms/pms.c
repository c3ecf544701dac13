#include "pms/pms.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/trace.h"
#include "net/httpc.h"
#include "pms/pms_sim_core.h"

struct pms {
	const char *name;    /* "the PMS", "the booking engine": for messages */
	char base[512];      /* http(s) base URL without a trailing slash */
	struct pms_sim *sim; /* "sim:" */
};

int pms_open(const char *url, struct pms **out)
{
	return pms_open_as(url, PMS_ROLE_PMS, out);
}

int pms_open_as(const char *url, enum pms_role role, struct pms **out)
{
	struct pms *p;
	size_t n;

	*out = NULL;
	p = calloc(1, sizeof *p);
	if (!p)
		return -1;
	p->name = role == PMS_ROLE_BOOKING_ENGINE ? "the booking engine" : "the PMS";
	if (!strcmp(url, "sim:")) {
		p->sim = pms_sim_new(NULL);
		if (!p->sim) {
			free(p);
			return -1;
		}
	} else if ((!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8)) &&
		   strlen(url) < sizeof p->base) {
		snprintf(p->base, sizeof p->base, "%s", url);
		n = strlen(p->base);
		while (n && p->base[n - 1] == '/')
			p->base[--n] = '\0';
	} else {
		log_msg(LOG_ERROR, "pms", "%s must be sim: or an http(s) URL",
			role == PMS_ROLE_BOOKING_ENGINE ? "--booking-engine-url" : "--pms-url");
		free(p);
		return -1;
	}
	*out = p;
	return 0;
}

void pms_close(struct pms *p)
{
	if (!p)
		return;
	pms_sim_free(p->sim);
	free(p);
}

struct pms_sim *pms_simulator(struct pms *p)
{
	return p->sim;
}

static json_t *request_json(const struct pms_write *w)
{
	return json_pack("{s:s, s:s, s:s, s:{s:s, s:I}, s:s}", "room_type_code", w->room_type_code,
			 "from", w->from, "to", w->to, "rate", "currency", w->currency, "minor_units",
			 (json_int_t)w->minor_units, "idempotency_key", w->idempotency_key);
}

/* Reads a 200 answer into w; anything not shaped as §7 says is a failed
 * write (the PMS's state is then unknown, so it is treated as failed and
 * compensated like any other). */
static void read_receipt(const struct pms *p, struct pms_write *w, long status, const json_t *body)
{
	json_t *ref = json_object_get(body, "pms_ref"), *at = json_object_get(body, "at");
	json_t *prev = json_object_get(body, "previous_rate");

	w->http_status = status;
	w->ok = 0;
	if (status != 200) {
		snprintf(w->error, sizeof w->error, "%s answered HTTP %ld", p->name, status);
		return;
	}
	if (!json_is_string(ref) || !json_string_length(ref) ||
	    json_string_length(ref) >= sizeof w->pms_ref || !json_is_string(at) ||
	    json_string_length(at) >= sizeof w->at ||
	    !(json_is_null(prev) ||
	      (json_is_object(prev) && json_is_string(json_object_get(prev, "currency")) &&
	       json_string_length(json_object_get(prev, "currency")) == 3 &&
	       json_is_integer(json_object_get(prev, "minor_units"))))) {
		snprintf(w->error, sizeof w->error, "%s's answer is not a valid receipt", p->name);
		return;
	}
	snprintf(w->pms_ref, sizeof w->pms_ref, "%s", json_string_value(ref));
	snprintf(w->at, sizeof w->at, "%s", json_string_value(at));
	w->has_previous = json_is_object(prev);
	if (w->has_previous) {
		snprintf(w->prev_currency, sizeof w->prev_currency, "%s",
			 json_string_value(json_object_get(prev, "currency")));
		w->prev_minor_units = json_integer_value(json_object_get(prev, "minor_units"));
	}
	w->ok = 1;
}

static int write_sim(struct pms *p, struct pms_write *w, size_t n)
{
	json_t *req, *resp = NULL;
	size_t i;
	int status;

	for (i = 0; i < n; i++) {
		req = request_json(&w[i]);
		if (!req)
			return -1;
		status = pms_sim_write(p->sim, w[i].property_code, req, &resp);
		read_receipt(p, &w[i], status, resp);
		json_decref(req);
		json_decref(resp);
		resp = NULL;
	}
	return 0;
}

/* The "traceparent: …" header of the calling request's trace context
 * (core/trace.h) in tp (TRACE_PARENT_LEN + 13 bytes), or NULL when the
 * request carried none. */
static const char *trace_header(char *tp)
{
	const struct trace_ctx *t = trace_current();

	if (!t)
		return NULL;
	memcpy(tp, "traceparent: ", 13);
	trace_format(t, t->span_id, tp + 13);
	return tp;
}

/* Sends each write of w[0..n) to the PMS at once (httpc_perform); with
 * the calling request's trace context (core/trace.h), each carries a
 * traceparent naming the request's span as its parent. Fills each w[i]'s
 * outcome. Returns 0, or -1 when the batch could not be sent at all. */
static int write_http(struct pms *p, struct pms_write *w, size_t n)
{
	char tp[TRACE_PARENT_LEN + 16];
	const char *hdrs[2] = {trace_header(tp), NULL};
	struct httpc_request *reqs = calloc(n, sizeof *reqs);
	char **urls = calloc(n, sizeof *urls), **bodies = calloc(n, sizeof *bodies);
	json_t *body, *resp;
	size_t i;
	int rc = -1;

	if (!reqs || !urls || !bodies)
		goto out;
	for (i = 0; i < n; i++) {
		body = request_json(&w[i]);
		bodies[i] = body ? json_dumps(body, JSON_COMPACT) : NULL;
		json_decref(body);
		if (!bodies[i] ||
		    asprintf(&urls[i], "%s/properties/%s/rates", p->base, w[i].property_code) < 0) {
			urls[i] = NULL;
			goto out;
		}
		reqs[i].method = "POST";
		reqs[i].url = urls[i];
		reqs[i].body = bodies[i];
		reqs[i].body_len = strlen(bodies[i]);
		reqs[i].timeout_ms = PMS_TIMEOUT_MS;
		reqs[i].max_response = 64 * 1024;
		reqs[i].headers = hdrs;
	}
	if (httpc_perform(reqs, n) < 0)
		goto out;
	for (i = 0; i < n; i++) {
		if (reqs[i].error != HTTPC_OK) {
			w[i].ok = 0;
			w[i].http_status = 0;
			snprintf(w[i].error, sizeof w[i].error, "no answer from %s: %s", p->name,
				 reqs[i].errmsg);
			continue;
		}
		resp = json_loadb(reqs[i].response.data ? reqs[i].response.data : "",
				  reqs[i].response.len, 0, NULL);
		read_receipt(p, &w[i], reqs[i].status, resp);
		json_decref(resp);
	}
	rc = 0;
out:
	for (i = 0; reqs && i < n; i++)
		buf_free(&reqs[i].response);
	for (i = 0; urls && bodies && i < n; i++) {
		free(urls[i]);
		free(bodies[i]);
	}
	free(reqs);
	free(urls);
	free(bodies);
	return rc;
}

int pms_write_all(struct pms *p, struct pms_write *w, size_t n)
{
	if (!n)
		return 0;
	return p->sim ? write_sim(p, w, n) : write_http(p, w, n);
}
