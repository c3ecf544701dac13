/* oauth: POST /oauth/token (RFC 6749 client credentials; API-CONTRACT §2)
 * and the issuing of opaque access tokens stored only as hashes. */
#ifndef REVOPS_OAUTH_H
#define REVOPS_OAUTH_H

struct ctx;

void oauth_h_token(struct ctx *c);

#endif
