#include "api/respond.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/ctx.h"
#include "api/idempotency.h"
#include "api/pagination.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "store/store.h"

/* Serialises body into the response; on failure falls back to a fixed 500
 * so a client always gets a parseable answer. Steals body. */
static void put_json(struct ctx *c, int status, json_t *body)
{
	char *s = body ? json_dumps(body, JSONW_DUMP) : NULL;

	json_decref(body);
	buf_reset(&c->res->body);
	if (!s || buf_puts(&c->res->body, s) < 0) {
		free(s);
		buf_reset(&c->res->body);
		status = 500;
		c->error_code = err_code(ERR_INTERNAL);
		if (buf_printf(&c->res->body,
			       "{\"error\":{\"code\":\"SVC-INTERNAL\",\"message\":\"internal "
			       "error\",\"request_id\":\"%s\"}}",
			       c->request_id) < 0)
			log_msg(LOG_ERROR, "respond", "out of memory");
		c->res->status = status;
		c->res->content_type = "application/json";
		return;
	}
	free(s);
	c->res->status = status;
	c->res->content_type = "application/json";
}

static json_t *meta(struct ctx *c)
{
	json_t *m = json_object();

	json_object_set_new(m, "request_id", json_string(c->request_id));
	if (c->authenticated && c->match.route && c->match.route->v2)
		json_object_set_new(m, "portfolio_id", json_string(c->p.portfolio_id));
	if (c->authenticated && c->meta_sla_tier)
		json_object_set_new(m, "sla_tier", json_string(auth_plan_sla_tier(c->p.plan)));
	return m;
}

void respond_data(struct ctx *c, int status, json_t *data)
{
	json_t *body = json_object();

	json_object_set_new(body, "data", data ? data : json_null());
	json_object_set_new(body, "meta", meta(c));
	put_json(c, status, body);
}

/* Appends s percent-encoded (all but RFC 3986 unreserved characters). */
static int put_encoded(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	int r = 0;

	for (; *s && !r; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~')
			r = buf_putc(b, (char)ch);
		else
			r = buf_printf(b, "%%%c%c", hex[ch >> 4], hex[ch & 15]);
	}
	return r;
}

/* Appends a decoded path percent-encoded segment by segment. */
static int put_path(struct buf *b, const char *path)
{
	char seg[ROUTER_PARAM_MAX * 2];
	const char *e;
	size_t n;

	while (*path) {
		e = strchr(path + 1, '/');
		n = e ? (size_t)(e - path - 1) : strlen(path + 1);
		if (*path != '/' || n >= sizeof seg || buf_putc(b, '/') < 0)
			return -1;
		memcpy(seg, path + 1, n);
		seg[n] = '\0';
		if (put_encoded(b, seg) < 0)
			return -1;
		path += n + 1;
	}
	return 0;
}

static int put_query_pair(void *arg, const char *name, const char *value)
{
	struct buf *b = arg;

	if (!strcmp(name, "cursor"))
		return 0;
	return put_encoded(b, name) || buf_putc(b, '=') || put_encoded(b, value) || buf_putc(b, '&')
		       ? -1
		       : 0;
}

/* Link: <public-url path?query&cursor=next>; rel="next" (RFC 8288) beside
 * meta.next_cursor: the same query with the cursor of the next page. */
static void add_link_next(struct ctx *c, const char *next_cursor)
{
	const char *base = c->svc->cfg ? c->svc->cfg->public_url : "";
	size_t bl = strlen(base);
	struct buf b;

	if (!next_cursor)
		return;
	while (bl && base[bl - 1] == '/')
		bl--;
	buf_init(&b, 8192);
	if (buf_putc(&b, '<') == 0 && buf_append(&b, base, bl) == 0 &&
	    put_path(&b, c->req->path) == 0 && buf_putc(&b, '?') == 0 &&
	    http_query_each(c->req, put_query_pair, &b) == 0 && buf_puts(&b, "cursor=") == 0 &&
	    put_encoded(&b, next_cursor) == 0 && buf_puts(&b, ">; rel=\"next\"") == 0)
		(void)response_header(c->res, "Link", b.data);
	buf_free(&b);
}

void respond_list(struct ctx *c, json_t *items, const char *next_cursor)
{
	json_t *body = json_object(), *m = meta(c);

	json_object_set_new(m, "next_cursor", next_cursor ? json_string(next_cursor) : json_null());
	json_object_set_new(body, "data", items);
	json_object_set_new(body, "meta", m);
	put_json(c, 200, body);
	if (c->res->status == 200)
		add_link_next(c, next_cursor);
}

void respond_list_text(struct ctx *c, const struct buf *items, const char *next_cursor)
{
	struct buf *b = &c->res->body;
	int ok;

	buf_reset(b);
	ok = buf_puts(b, "{\"data\":") == 0 && buf_append(b, items->data, items->len) == 0 &&
	     buf_puts(b, ",\"meta\":{") == 0 && jsonw_key(b, "request_id", 1) == 0 &&
	     jsonw_str(b, c->request_id) == 0;
	if (ok && c->authenticated && c->match.route && c->match.route->v2)
		ok = jsonw_key(b, "portfolio_id", 0) == 0 && jsonw_str(b, c->p.portfolio_id) == 0;
	if (ok && c->authenticated && c->meta_sla_tier)
		ok = jsonw_key(b, "sla_tier", 0) == 0 &&
		     jsonw_str(b, auth_plan_sla_tier(c->p.plan)) == 0;
	ok = ok && jsonw_key(b, "next_cursor", 0) == 0 && jsonw_str(b, next_cursor) == 0 &&
	     buf_puts(b, "}}") == 0;
	if (!ok) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		return;
	}
	c->res->status = 200;
	c->res->content_type = "application/json";
	add_link_next(c, next_cursor);
}

/* Retry-After of a 503: a moment for what passes (a busy database, a
 * shutdown), longer for a full disk (someone must make room). */
#define RETRY_S "1"
#define RETRY_FULL_S "30"

static int has_header(const struct response *res, const char *name)
{
	for (int i = 0; i < res->nheaders; i++)
		if (!strcasecmp(res->hname[i], name))
			return 1;
	return 0;
}

void respond_error(struct ctx *c, enum err e, json_t *details, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *err;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	jsonw_sanitize(msg); /* messages may echo a path or value the client sent */
	if (c->error_shape) {
		json_decref(details);
		c->error_shape(c, e, msg);
		c->error_code = err_code(e);
		return;
	}
	err = json_pack("{s:s, s:s, s:s}", "code", err_code(e), "message", msg, "request_id",
			c->request_id);
	if (details && json_array_size(details))
		json_object_set(err, "details", details);
	json_decref(details);
	c->error_code = err_code(e);
	if (err_status(e) == 503 && !has_header(c->res, "Retry-After"))
		(void)response_header(c->res, "Retry-After", RETRY_S);
	put_json(c, err_status(e), json_pack("{s:o}", "error", err));
}

void respond_raw_json(struct ctx *c, int status, json_t *body)
{
	put_json(c, status, body);
}

void respond_store_error(struct ctx *c, int rc)
{
	if (rc == STORE_FULL) {
		(void)response_header(c->res, "Retry-After", RETRY_FULL_S);
		respond_error(c, ERR_UNAVAILABLE, NULL,
			      "the database has no room to write (its disk is full); nothing was"
			      " written: retry later");
	} else if (rc == STORE_BUSY)
		respond_error(c, ERR_UNAVAILABLE, NULL, "the database is busy; retry");
	else
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
}

void respond_key_own(struct ctx *c)
{
	struct store_tx *held;

	if (!c->idem.key || c->idem.own)
		return;
	c->idem.own = 1;
	held = store_scope_close(); /* none at a handler's start, bar a bug */
	if (held && store_commit(held) != STORE_OK)
		log_msg(LOG_ERROR, "idempotency", "a write before respond_key_own did not commit");
}

int respond_key_store(struct ctx *c, struct store_tx *tx)
{
	struct response *res = c->res;
	json_t *h;
	int i, rc;

	if (!c->idem.key || res->status == 500 || res->status == 503)
		return STORE_OK;
	h = json_object();
	for (i = 0; i < res->nheaders; i++)
		json_object_set_new(h, res->hname[i], json_string(res->hvalue[i]));
	rc = idempotency_store(tx, c->p.portfolio_id, c->idem.principal, c->idem.key, res->status,
			       h, res->body.data, res->body.len);
	json_decref(h);
	c->idem.stored = rc == STORE_OK;
	return rc;
}

void respond_page_items(struct ctx *c, const struct buf *items, const char *scope, const char *last)
{
	char next[PAGINATION_CURSOR_MAX + 1];

	if (last && pagination_cursor_encode(c->svc->cursor_key, scope, last, next, sizeof next) < 0)
		last = NULL;
	respond_list_text(c, items, last ? next : NULL);
}

void respond_rows_page_text(struct ctx *c, struct store_tx *tx, int rc, struct store_rows *r,
			    int limit, const char *scope, respond_write_fn fn, void *arg)
{
	char key[PAGINATION_CURSOR_MAX], last[PAGINATION_CURSOR_MAX] = "";
	struct buf items = {NULL, 0, 0, 0};
	size_t mark;
	int n = 0, more = 0, w = 0;

	if (rc != STORE_OK)
		goto fail;
	buf_init(&items, HTTP_BODY_MAX * 4);
	rc = STORE_ERR;
	if (buf_putc(&items, '[') < 0)
		goto fail;
	while ((rc = store_next(r)) == 1) {
		mark = items.len;
		key[0] = '\0';
		if ((n && buf_putc(&items, ',') < 0) ||
		    (w = fn(&items, tx, r, arg, key, sizeof key)) < 0) {
			rc = STORE_ERR;
			goto fail;
		}
		if (w == 0 || n == limit) {
			items.len = mark; /* left out, or the first row past the page */
			if (w == 0)
				continue;
			more = 1;
			break;
		}
		str_copy(last, sizeof last, key);
		n++;
	}
	if (rc < 0 || buf_putc(&items, ']') < 0)
		goto fail;
	store_rows_close(r);
	store_rollback(tx);
	respond_page_items(c, &items, scope, more ? last : NULL);
	buf_free(&items);
	return;
fail:
	buf_free(&items);
	store_rows_close(r);
	store_rollback(tx);
	respond_store_error(c, rc);
}

struct json_rows {
	respond_row_fn fn;
	void *arg;
};

/* respond_write_fn over a respond_row_fn: the item as compact JSON text,
 * as respond_data would write it. */
static int write_json_row(struct buf *b, struct store_tx *tx, struct store_rows *r, void *arg,
			  char *key, size_t keycap)
{
	struct json_rows *j = arg;
	json_t *item = j->fn(tx, r, j->arg, key, keycap);
	char *s;
	int rc;

	if (!item)
		return 0;
	s = json_dumps(item, JSONW_DUMP);
	json_decref(item);
	rc = s && buf_puts(b, s) == 0 ? 1 : -1;
	free(s);
	return rc;
}

void respond_rows_page(struct ctx *c, struct store_tx *tx, int rc, struct store_rows *r, int limit,
		       const char *scope, respond_row_fn fn, void *arg)
{
	struct json_rows j = {fn, arg};

	respond_rows_page_text(c, tx, rc, r, limit, scope, write_json_row, &j);
}

int respond_page_args(struct ctx *c, const char *scope, int *limit, char *after, size_t cap)
{
	const char *cur = http_query(c->req, "cursor");

	if (pagination_limit(http_query(c->req, "limit"), auth_plan_max_page(c->p.plan), limit) < 0) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL,
			      "limit must be an integer from 1 to %d on the %s plan",
			      auth_plan_max_page(c->p.plan), c->p.plan);
		return -1;
	}
	after[0] = '\0';
	if (cur && pagination_cursor_decode(c->svc->cursor_key, scope, cur, after, cap) < 0) {
		respond_error(c, ERR_REQUEST_MALFORMED, NULL, "cursor is not valid for this list");
		return -1;
	}
	return 0;
}
