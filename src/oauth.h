/* oauth: POST /oauth/token (RFC 6749 client credentials; API-CONTRACT §2)
 * and the issuing of opaque access tokens stored only as hashes. */
#ifndef REVOPS_OAUTH_H
#define REVOPS_OAUTH_H

struct ctx;

#include <stdint.h>

struct store;

void oauth_h_token(struct ctx *c);
/* Deletes expired access tokens and used-assertion records. Returns the
 * number of rows removed, or -1. */
int oauth_purge(struct store *st, int64_t now_ms);

#endif
