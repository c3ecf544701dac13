/* egress: the outbound SSRF guard for webhooks and mirrors.
 *
 * Two checks, one rule: a request may reach only public unicast addresses
 * (unless --allow-private-targets). This file does not include curl; httpc.c
 * turns the results into options.
 *
 * At subscription time (refuse with 400), egress_check parses the URL
 * strictly, resolves its host once and classifies every address the
 * resolver returns: one forbidden answer refuses the target.
 *
 * At every send, egress_check_url validates the URL and classifies a
 * literal address without DNS, and the address libcurl is about to connect
 * to is classified again in httpc's CURLOPT_OPENSOCKETFUNCTION (with
 * egress_address_allowed): a forbidden one gets no socket. libcurl's own
 * resolver answers for host names, asynchronously, so a slow or dead DNS
 * server holds only its own transfers; and since the address checked is the
 * address connected to, a second DNS answer (rebinding) never gets a say.
 * A name with both kinds of address is reached on its public ones only.
 *
 * egress_check also returns a pin ("host:port:address", for
 * CURLOPT_RESOLVE) for callers that resolve once and connect later; httpc
 * keeps proxies off and redirects unfollowed. */
#ifndef REVOPS_EGRESS_H
#define REVOPS_EGRESS_H
#include <netinet/in.h>
#include <stddef.h>
#include "core/common.h"

enum egress_verdict {
	EGRESS_OK = 0,
	EGRESS_BAD_URL = -1, /* not an acceptable URL (scheme, userinfo, port, host syntax) */
	EGRESS_RESOLVE_FAILED = -2, /* the host name did not resolve to any address */
	EGRESS_FORBIDDEN = -3       /* the host is, or resolves to, a forbidden address */
};

struct egress_target {
	char scheme[8];          /* "https" (or "http" when http is allowed), lower case */
	char host[256];          /* as in the URL, without brackets */
	int port;                /* explicit or the scheme default */
	char address[64];        /* the checked numeric address (IPv6 without brackets) */
	char resolve_entry[340]; /* "host:port:address" for CURLOPT_RESOLVE ("[addr]" form
				  * for IPv6); empty when host is an IP literal */
	char why[160];           /* reason when refused */
};

/* Classifies one address: 1 when it is a public unicast address a webhook
 * may reach, 0 when it is forbidden.
 *
 * Forbidden IPv4: 0.0.0.0/8, 10/8, 100.64/10 (CGNAT), 127/8, 169.254/16
 * (link-local, incl. the cloud metadata address 169.254.169.254), 172.16/12,
 * 192.0.0/24, 192.0.2/24, 192.88.99/24, 192.168/16, 198.18/15,
 * 198.51.100/24, 203.0.113/24, 224/4 (multicast), 240/4 (reserved, incl.
 * 255.255.255.255).
 *
 * Forbidden IPv6: ::/128, ::1/128, 100::/64, 2001::/23 (IETF special, incl.
 * Teredo 2001::/32), 2001:db8::/32 and 3fff::/20 (documentation), fc00::/7
 * (unique local), fe80::/10 (link-local), fec0::/10 (site-local), ff00::/8
 * (multicast), and everything else outside 2000::/3 global unicast (e.g.
 * IPv4-compatible ::a.b.c.d, 64:ff9b:1::/48, 5f00::/16 SRv6 SIDs). Three
 * ranges embed an IPv4 address and get the verdict of that address:
 * ::ffff:0:0/96 (IPv4-mapped), 64:ff9b::/96 (NAT64) and 2002::/16 (6to4).
 *
 * sa is a sockaddr_in or a sockaddr_in6 (any other family is forbidden);
 * only its family and address are read. why (may be NULL) receives a short
 * name of the range, e.g. "loopback (127.0.0.0/8)", or "public" when
 * allowed, truncated to cap. Thread-safe. */
int egress_address_allowed(const struct sockaddr *sa, char *why, size_t cap);

/* Checks a webhook target URL and returns an egress_verdict.
 *
 * The URL must be https:// (http:// too when allow_http), scheme in any
 * case; no spaces or control characters anywhere; no userinfo
 * ("user@host"); the authority ends at the first '/', '?' or '#' (a fragment
 * is ignored). The host is one of:
 *  - a DNS name: ASCII letters, digits, '-', '_', dot-separated labels of
 *    1-63 characters, at most 253 characters plus an optional trailing dot
 *    (kept in host: libcurl keys its DNS cache with it). No percent-encoding
 *    and no raw UTF-8 (IDNs must be given in punycode);
 *  - a dotted-decimal IPv4 address a.b.c.d without leading zeros. Any other
 *    host whose last label is a number ("2130706433", "0x7f.1", "0177.0.0.1",
 *    "127.1", "1.2.3.4.") is a bad URL: libcurl would read it as an IPv4
 *    address in another base;
 *  - an IPv6 address in brackets, without a zone identifier.
 * An explicit port must be 1-65535 (1-5 digits); default 443 / 80.
 *
 * Numeric hosts are classified without DNS. Names are resolved with
 * getaddrinfo (AF_UNSPEC; it blocks, for as long as the system resolver
 * takes) and every returned address must be allowed: one forbidden answer
 * among public ones refuses the target. "localhost" and "*.localhost" are
 * refused before any lookup (RFC 6761; libcurl resolves them to loopback
 * itself). allow_private = 1 skips all classification (tests,
 * --allow-private-targets) but still validates the URL and resolves.
 *
 * t is always cleared first. Returns EGRESS_OK with scheme, host, port,
 * address (a literal host's, or the first address the resolver returned)
 * and, for names, resolve_entry filled; why is empty. Otherwise
 * returns the verdict with t->why set; scheme, host and port stay filled
 * when the URL parsed, and on EGRESS_FORBIDDEN address holds the refused
 * address for the operator's log (why names only its range, so it is fit
 * for an API error message). Thread-safe. */
int egress_check(const char *url, int allow_http, int allow_private, struct egress_target *t) WUR;

/* egress_check without DNS, for every send: the same URL rules, a literal
 * host classified, "localhost" names refused; a DNS name passes (its
 * addresses are checked where the connection is made, see above). Fills t
 * like egress_check except address and resolve_entry for names. Returns
 * EGRESS_OK, EGRESS_BAD_URL or EGRESS_FORBIDDEN. Thread-safe. */
int egress_check_url(const char *url, int allow_http, int allow_private, struct egress_target *t) WUR;

#endif
