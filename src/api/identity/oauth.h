/* oauth: POST /oauth/token (RFC 6749 client credentials; API-CONTRACT §2),
 * its RFC 8414 metadata, and the issuing of opaque access tokens stored
 * only as hashes. */
#ifndef REVOPS_OAUTH_H
#define REVOPS_OAUTH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"

struct route_table;

struct ctx;
struct store;

void oauth_h_token(struct ctx *c);
/* GET /.well-known/oauth-authorization-server: the RFC 8414 metadata of
 * the token endpoint (issuer = --public-url), a bare JSON object. */
void oauth_h_metadata(struct ctx *c);

/* The parsers of the token endpoint's outside input, pure functions used by
 * oauth_h_token (and fuzzed alone, fuzz/token). */

/* Splits an HTTP Basic Authorization value ("Basic " in any case, spaces,
 * then standard base64 with padding of at most 599 bytes) into client id
 * and secret: the decoded bytes, NUL-free, split at the first ':', each
 * half form-urlencoded per RFC 6749 §2.3.1. Returns 0 with *id and *secret
 * (malloc'd; the caller wipes the secret and frees both), or -1 when
 * malformed, with both NULL. */
int oauth_basic_credentials(const char *h, char **id, char **secret) WUR;

/* Parses the "scope" parameter of a token request (API-CONTRACT §2):
 * names separated by spaces, each a scope name (auth_scope_bit) or
 * "property:<code>". Every scope must be in allowed; every code in
 * allowed_codes (a JSON array of strings; NULL: any code), at most
 * AUTH_MAX_PROPS distinct codes. scope may be NULL (nothing asked). Returns
 * 0 with the scope bits asked for in *want (0: none) and each distinct code
 * appended, in order, to want_codes (a JSON array the caller owns); -1 when
 * the scope is refused (invalid_scope: an unknown or disallowed name, a
 * code not allowed or not UTF-8, too many codes); -2 when memory ran out. */
int oauth_scope_parse(const char *scope, unsigned allowed, const json_t *allowed_codes,
		      unsigned *want, json_t *want_codes) WUR;

/* Decodes the "assertion" parameter of a saml2-bearer grant: base64url
 * (trailing '=' padding tolerated) of at most SAML_MAX_XML bytes of XML,
 * which is not checked here. Returns 0 with *xml (malloc'd, *cap bytes: the
 * caller crypto_wipe()s *cap bytes and frees it) holding *len bytes; -1
 * when it is not base64url or too long; -2 when memory ran out. On error
 * *xml is NULL and *len, *cap are 0. */
int oauth_assertion_decode(const char *assertion, unsigned char **xml, size_t *len, size_t *cap) WUR;
/* Deletes expired access tokens and used-assertion records. Returns the
 * number of rows removed, or -1. */
int oauth_purge(struct store *st, int64_t now_ms);

/* This area's routes, in match order (api/routes.c lists the areas). */
extern const struct route_table oauth_routes;

#endif
