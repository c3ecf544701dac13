/* respond: the {data, meta} envelope and error bodies of API-CONTRACT §1
 * (the catalogue itself is api/errors.h). Every response body the API
 * sends is made here. */
#ifndef REVOPS_RESPOND_H
#define REVOPS_RESPOND_H
#include <jansson.h>
#include "api/errors.h"
#include "core/common.h"

struct ctx;
struct store_tx;
struct store_rows;

/* 2xx with {"data": data, "meta": {...}}; steals data. meta carries
 * request_id, and on v2 routes portfolio_id. */
void respond_data(struct ctx *c, int status, json_t *data);
/* A list page: data is an array (stolen); next_cursor NULL means last page. */
void respond_list(struct ctx *c, json_t *items, const char *next_cursor);
/* A list page whose items are already JSON text (a JSON array): the hot
 * list paths write items straight from the database rows. */
struct buf;
void respond_list_text(struct ctx *c, const struct buf *items, const char *next_cursor);
/* An error body; details (stolen, may be NULL) is an array of {field, issue}. */
void respond_error(struct ctx *c, enum err e, json_t *details, const char *fmt, ...) PRINTF(4, 5);
/* Answers a failed store call: 503 when the database was busy, else 500. */
void respond_store_error(struct ctx *c, int rc);

/* The answer to a write under an Idempotency-Key commits with the write
 * (api/idempotency.h): the pipeline holds the handler's last write
 * transaction open (store_scope_open) and stores the answer in it. A
 * handler that must commit before it talks to the outside (a PMS call)
 * calls respond_key_own first, then respond_key_store inside the
 * transaction that records its outcome, with that outcome's answer
 * already in c. respond_key_store stores nothing for a request without a
 * key, nor for a 500 or 503 (the key is released instead, for a retry).
 * Returns a store status. */
void respond_key_own(struct ctx *c);
int respond_key_store(struct ctx *c, struct store_tx *tx) WUR;
/* Reads ?limit (plan maximum) and ?cursor for the list named scope, the
 * last item's id going to after (cap bytes; "" for the first page).
 * Returns 0, or -1 after answering 400. */
int respond_page_args(struct ctx *c, const char *scope, int *limit, char *after, size_t cap) WUR;
/* One list item from the current row of a page query: the item (NULL to
 * leave the row out, e.g. outside a narrowed token) and, in key, the value
 * the next page resumes after. */
typedef json_t *(*respond_row_fn)(struct store_tx *tx, struct store_rows *r, void *arg, char *key,
				  size_t keycap);
/* Answers a keyset page from a query that returns rows in list order (ask
 * for more than limit, so the next page is known): up to limit items made
 * by fn, a cursor for scope when rows remain. rc is the store_query status
 * (an error is answered). Closes r and rolls tx back in every case. */
void respond_rows_page(struct ctx *c, struct store_tx *tx, int rc, struct store_rows *r, int limit,
		       const char *scope, respond_row_fn fn, void *arg);
/* The same for items written as JSON text straight into b (the hot lists,
 * which skip building a tree): fn returns 1 when it wrote the item, 0 to
 * leave the row out (having written nothing), -1 on error. */
struct buf;
typedef int (*respond_write_fn)(struct buf *b, struct store_tx *tx, struct store_rows *r, void *arg,
				char *key, size_t keycap);
void respond_rows_page_text(struct ctx *c, struct store_tx *tx, int rc, struct store_rows *r,
			    int limit, const char *scope, respond_write_fn fn, void *arg);
/* Answers a page whose items the caller wrote into items as a JSON array
 * text; last is the key of the page's last item when more follow (a cursor
 * for scope is made from it), NULL on the last page. */
void respond_page_items(struct ctx *c, const struct buf *items, const char *scope, const char *last);
/* A body that is not the envelope (OAuth token responses, /healthz). */
void respond_raw_json(struct ctx *c, int status, json_t *body);

#endif
