/* feeds: the module feeds of API-CONTRACT §6 (issue 15). A feed call
 * carries {"items": [...]}, 1 to FEEDS_MAX_ITEMS items, and answers 200
 * with one result per item, in order: {"index", "status": "created" |
 * "duplicate" | "rejected", ...}. A rejected item carries its error
 * ({code, message, details[]} with field paths "items[i]...") and wrote
 * nothing; it never stops the good items of its batch, which are written
 * together in one transaction (so a failing database leaves none of them,
 * and the call answers 503 as any other). */
#ifndef REVOPS_API_FEEDS_H
#define REVOPS_API_FEEDS_H

#define FEEDS_MAX_ITEMS 500

struct route_table;

extern const struct route_table feed_routes;

#endif
