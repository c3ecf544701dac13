/* The SSRF guard. Choices:
 *  - the URL grammar is a strict subset of what libcurl 7.88 accepts, so
 *    both read the same host and port: the authority ends at '/', '?' or
 *    '#', host names are plain ASCII (no percent-encoding, no IDN), and a
 *    host ending in a number must be dotted-decimal IPv4 (libcurl's URL
 *    parser turns "2130706433", "0x7f.1", "0177.0.0.1" and "127.1" into
 *    127.0.0.1, as browsers do);
 *  - IPv6 is allowed only inside 2000::/3 (global unicast) minus the special
 *    ranges; everything outside is unassigned or special, and the few
 *    ranges that carry an IPv4 address get that address's verdict;
 *  - every resolver answer is checked, not just the one used: a name that
 *    resolves to a public and a private address is refused;
 *  - refusal reasons name a range, never a resolved address, because they
 *    may go back to an API client (no internal DNS oracle beyond the
 *    verdict itself). */
#include "net/egress.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>

#define MAX_NAME 253 /* DNS name without the trailing dot */
#define MAX_LABEL 63

struct v4_range {
	uint32_t net;
	int len;
	const char *name;
};

/* More specific entries first: the first match names the range. */
static const struct v4_range v4_forbidden[] = {
	{0x00000000u, 8, "this network (0.0.0.0/8)"},
	{0x0a000000u, 8, "private (10.0.0.0/8)"},
	{0x64400000u, 10, "carrier-grade NAT (100.64.0.0/10)"},
	{0x7f000000u, 8, "loopback (127.0.0.0/8)"},
	{0xa9fea9feu, 32, "cloud metadata (169.254.169.254)"},
	{0xa9fe0000u, 16, "link-local (169.254.0.0/16)"},
	{0xac100000u, 12, "private (172.16.0.0/12)"},
	{0xc0000000u, 24, "IETF protocol assignments (192.0.0.0/24)"},
	{0xc0000200u, 24, "documentation (192.0.2.0/24)"},
	{0xc0586300u, 24, "6to4 relay anycast (192.88.99.0/24)"},
	{0xc0a80000u, 16, "private (192.168.0.0/16)"},
	{0xc6120000u, 15, "benchmarking (198.18.0.0/15)"},
	{0xc6336400u, 24, "documentation (198.51.100.0/24)"},
	{0xcb007100u, 24, "documentation (203.0.113.0/24)"},
	{0xe0000000u, 4, "multicast (224.0.0.0/4)"},
	{0xffffffffu, 32, "broadcast (255.255.255.255)"},
	{0xf0000000u, 4, "reserved (240.0.0.0/4)"},
};

enum v6_kind {
	V6_FORBIDDEN, /* the whole range is refused */
	V6_EMBEDS_V4  /* classify the IPv4 address at byte offset v4_at */
};

struct v6_range {
	uint8_t net[16];
	int len;
	enum v6_kind kind;
	int v4_at;
	const char *name;
};

/* More specific entries first. Anything not matched here must still lie in
 * 2000::/3. */
static const struct v6_range v6_special[] = {
	{{0}, 128, V6_FORBIDDEN, 0, "unspecified (::)"},
	{{[15] = 1}, 128, V6_FORBIDDEN, 0, "loopback (::1)"},
	{{[10] = 0xff, [11] = 0xff}, 96, V6_EMBEDS_V4, 12, "IPv4-mapped (::ffff:0:0/96)"},
	{{0x00, 0x64, 0xff, 0x9b}, 96, V6_EMBEDS_V4, 12, "NAT64 (64:ff9b::/96)"},
	{{0x01, 0x00}, 64, V6_FORBIDDEN, 0, "discard-only (100::/64)"},
	{{0x20, 0x01, 0x0d, 0xb8}, 32, V6_FORBIDDEN, 0, "documentation (2001:db8::/32)"},
	{{0x20, 0x01, 0x00, 0x00}, 32, V6_FORBIDDEN, 0, "Teredo (2001::/32)"},
	{{0x20, 0x01}, 23, V6_FORBIDDEN, 0, "IETF special-purpose (2001::/23)"},
	{{0x20, 0x02}, 16, V6_EMBEDS_V4, 2, "6to4 (2002::/16)"},
	{{0x3f, 0xff}, 20, V6_FORBIDDEN, 0, "documentation (3fff::/20)"},
	{{0xfc}, 7, V6_FORBIDDEN, 0, "unique local (fc00::/7)"},
	{{0xfe, 0x80}, 10, V6_FORBIDDEN, 0, "link-local (fe80::/10)"},
	{{0xfe, 0xc0}, 10, V6_FORBIDDEN, 0, "site-local (fec0::/10)"},
	{{0xff}, 8, V6_FORBIDDEN, 0, "multicast (ff00::/8)"},
};

/* Writes a message into out (cap bytes, cap > 0), truncating if needed. */
PRINTF(3, 4) static void put_msg(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, cap, fmt, ap);
	va_end(ap);
	if (n < 0)
		out[0] = '\0';
}

/* Returns the name of the forbidden range holding the IPv4 address a (host
 * byte order), or NULL when a is public. */
static const char *v4_forbidden_range(uint32_t a)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(v4_forbidden); i++) {
		uint32_t mask =
			v4_forbidden[i].len == 0 ? 0 : 0xffffffffu << (32 - v4_forbidden[i].len);
		if ((a & mask) == v4_forbidden[i].net)
			return v4_forbidden[i].name;
	}
	return NULL;
}

static uint32_t v4_at(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* 1 when the first len bits of a and net agree. */
static int v6_prefix_match(const uint8_t *a, const uint8_t *net, int len)
{
	int full = len / 8, rest = len % 8;

	if (memcmp(a, net, (size_t)full) != 0)
		return 0;
	if (rest) {
		uint8_t mask = (uint8_t)(0xffu << (8 - rest));
		if ((a[full] & mask) != (net[full] & mask))
			return 0;
	}
	return 1;
}

/* Classifies a 16-byte IPv6 address; same contract as
 * egress_address_allowed. */
static int v6_allowed(const uint8_t *a, char *why, size_t cap)
{
	const char *inner;
	size_t i;

	for (i = 0; i < ARRAY_LEN(v6_special); i++) {
		const struct v6_range *r = &v6_special[i];

		if (!v6_prefix_match(a, r->net, r->len))
			continue;
		if (r->kind == V6_FORBIDDEN) {
			if (why)
				put_msg(why, cap, "%s", r->name);
			return 0;
		}
		inner = v4_forbidden_range(v4_at(a + r->v4_at));
		if (inner) {
			if (why)
				put_msg(why, cap, "%s embedding %s", r->name, inner);
			return 0;
		}
		if (why)
			put_msg(why, cap, "public");
		return 1;
	}
	if ((a[0] & 0xe0) != 0x20) {
		if (why)
			put_msg(why, cap, "reserved (outside 2000::/3 global unicast)");
		return 0;
	}
	if (why)
		put_msg(why, cap, "public");
	return 1;
}

int egress_address_allowed(const struct sockaddr *sa, char *why, size_t cap)
{
	const char *range;

	if (why && cap == 0)
		why = NULL;
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

		range = v4_forbidden_range(ntohl(in->sin_addr.s_addr));
		if (why)
			put_msg(why, cap, "%s", range ? range : "public");
		return range == NULL;
	}
	if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;

		return v6_allowed(in6->sin6_addr.s6_addr, why, cap);
	}
	if (why)
		put_msg(why, cap, "unsupported address family");
	return 0;
}

enum host_kind { HOST_NAME, HOST_IPV4, HOST_IPV6 };

static int is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/* 1 when the n bytes at s are a number in libcurl's (WHATWG) IPv4 parser:
 * decimal digits, or "0x" followed by hex digits. */
static int is_number_label(const char *s, size_t n)
{
	size_t i = 0;

	if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < n; i++)
			if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
			      (s[i] >= 'A' && s[i] <= 'F')))
				return 0;
		return 1;
	}
	if (n == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* Checks the name host (NUL-terminated, already copied into t->host) and
 * tells whether it is a dotted-decimal IPv4 address (stored in *v4) or a DNS
 * name. Returns 0, or EGRESS_BAD_URL with t->why set. */
static int check_name(struct egress_target *t, enum host_kind *kind, struct in_addr *v4)
{
	const char *h = t->host;
	size_t n = strlen(h), i, label = 0, last = 0;

	if (n > 0 && h[n - 1] == '.')
		n--;
	if (n == 0 || n > MAX_NAME) {
		put_msg(t->why, sizeof(t->why), n ? "host name is too long" : "URL has no host");
		return EGRESS_BAD_URL;
	}
	for (i = 0; i < n; i++) {
		if (h[i] == '.') {
			if (label == 0)
				goto empty;
			label = 0;
			last = i + 1;
			continue;
		}
		if (!is_name_char(h[i])) {
			put_msg(t->why, sizeof(t->why),
				"host holds a character that is not allowed (only ASCII letters, digits, '-', '_' and '.')");
			return EGRESS_BAD_URL;
		}
		if (++label > MAX_LABEL) {
			put_msg(t->why, sizeof(t->why),
				"host name label is longer than 63 characters");
			return EGRESS_BAD_URL;
		}
	}
	if (label == 0)
		goto empty;
	if (inet_pton(AF_INET, h, v4) == 1) {
		*kind = HOST_IPV4;
		return 0;
	}
	if (is_number_label(h + last, n - last)) {
		put_msg(t->why, sizeof(t->why),
			"a numeric host must be a dotted-decimal IPv4 address a.b.c.d without leading zeros");
		return EGRESS_BAD_URL;
	}
	*kind = HOST_NAME;
	return 0;
empty:
	put_msg(t->why, sizeof(t->why), "host name has an empty label");
	return EGRESS_BAD_URL;
}

/* Refuses a missing URL and one holding a space or control character.
 * Returns 0, or EGRESS_BAD_URL with t->why set. */
static int check_url_chars(const char *url, struct egress_target *t)
{
	const char *p;

	if (!url) {
		put_msg(t->why, sizeof(t->why), "URL is missing");
		return EGRESS_BAD_URL;
	}
	for (p = url; *p; p++) {
		if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
			put_msg(t->why, sizeof(t->why), "URL holds a space or control character");
			return EGRESS_BAD_URL;
		}
	}
	return 0;
}

/* Reads url's scheme (https, or http when allow_http) into t->scheme and
 * its default port into t->port, and the length of "scheme://" into *off.
 * Returns 0, or EGRESS_BAD_URL with t->why set. */
static int parse_scheme(const char *url, int allow_http, struct egress_target *t, size_t *off)
{
	if (strncasecmp(url, "https://", 8) == 0) {
		memcpy(t->scheme, "https", 6);
		t->port = 443;
		*off = 8;
	} else if (allow_http && strncasecmp(url, "http://", 7) == 0) {
		memcpy(t->scheme, "http", 5);
		t->port = 80;
		*off = 7;
	} else {
		put_msg(t->why, sizeof(t->why),
			allow_http ? "only http:// and https:// URLs are allowed"
				   : "only https:// URLs are allowed");
		return EGRESS_BAD_URL;
	}
	return 0;
}

/* Reads the bracketed IPv6 host at the start of the authority auth (alen
 * bytes, auth[0] == '[') into t->host and the address into *lit, and sets
 * *rest just past the ']'. Returns 0, or EGRESS_BAD_URL with t->why set. */
static int parse_ipv6_host(const char *auth, size_t alen, struct egress_target *t,
			   enum host_kind *kind, struct sockaddr_storage *lit, const char **rest)
{
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)lit;
	const char *hend = memchr(auth, ']', alen);
	size_t hlen;

	if (!hend) {
		put_msg(t->why, sizeof(t->why), "IPv6 address lacks its closing ']'");
		return EGRESS_BAD_URL;
	}
	hlen = (size_t)(hend - auth - 1);
	if (memchr(auth, '%', hlen + 1)) {
		put_msg(t->why, sizeof(t->why), "IPv6 zone identifiers are not allowed");
		return EGRESS_BAD_URL;
	}
	if (hlen == 0 || hlen >= INET6_ADDRSTRLEN) {
		put_msg(t->why, sizeof(t->why), "invalid IPv6 address");
		return EGRESS_BAD_URL;
	}
	memcpy(t->host, auth + 1, hlen);
	t->host[hlen] = '\0';
	memset(in6, 0, sizeof(*in6));
	in6->sin6_family = AF_INET6;
	if (inet_pton(AF_INET6, t->host, &in6->sin6_addr) != 1) {
		put_msg(t->why, sizeof(t->why), "invalid IPv6 address");
		return EGRESS_BAD_URL;
	}
	*kind = HOST_IPV6;
	*rest = hend + 1;
	return 0;
}

/* Reads the host name or IPv4 host at the start of the authority auth
 * (alen bytes) into t->host, checks it with check_name (which sets *kind
 * and, for IPv4, the address in *lit), and sets *rest at the ':' before
 * the port or at the authority's end. Returns 0, or EGRESS_BAD_URL with
 * t->why set. */
static int parse_name_host(const char *auth, size_t alen, struct egress_target *t,
			   enum host_kind *kind, struct sockaddr_storage *lit, const char **rest)
{
	struct sockaddr_in *in = (struct sockaddr_in *)(void *)lit;
	const char *hend = memchr(auth, ':', alen);
	size_t hlen;
	int rc;

	if (!hend)
		hend = auth + alen;
	hlen = (size_t)(hend - auth);
	if (hlen >= sizeof(t->host)) {
		put_msg(t->why, sizeof(t->why), "host name is too long");
		return EGRESS_BAD_URL;
	}
	memcpy(t->host, auth, hlen);
	t->host[hlen] = '\0';
	memset(in, 0, sizeof(*in));
	in->sin_family = AF_INET;
	rc = check_name(t, kind, &in->sin_addr);
	if (rc < 0)
		return rc;
	*rest = hend;
	return 0;
}

/* Reads the ":port" between rest and end (rest < end) into t->port.
 * Returns 0, or EGRESS_BAD_URL with t->why set. */
static int parse_port(const char *rest, const char *end, struct egress_target *t)
{
	unsigned long port = 0;
	size_t digits = (size_t)(end - rest - 1);
	const char *p;

	if (*rest != ':') {
		put_msg(t->why, sizeof(t->why), "unexpected characters after the IPv6 address");
		return EGRESS_BAD_URL;
	}
	if (digits == 0 || digits > 5) {
		put_msg(t->why, sizeof(t->why), "port must be a number from 1 to 65535");
		return EGRESS_BAD_URL;
	}
	for (p = rest + 1; p < end; p++) {
		if (*p < '0' || *p > '9') {
			put_msg(t->why, sizeof(t->why), "port must be a number from 1 to 65535");
			return EGRESS_BAD_URL;
		}
		port = port * 10 + (unsigned long)(*p - '0');
	}
	if (port < 1 || port > 65535) {
		put_msg(t->why, sizeof(t->why), "port must be a number from 1 to 65535");
		return EGRESS_BAD_URL;
	}
	t->port = (int)port;
	return 0;
}

/* Parses url into t->scheme, t->host and t->port, and for literal hosts
 * the address into *lit. Returns 0, or EGRESS_BAD_URL with t->why set
 * (and scheme, host and port cleared once the scheme was read). */
static int parse_url(const char *url, int allow_http, struct egress_target *t, enum host_kind *kind,
		     struct sockaddr_storage *lit)
{
	const char *auth, *end, *rest;
	size_t off, alen;
	int rc;

	rc = check_url_chars(url, t);
	if (rc == 0)
		rc = parse_scheme(url, allow_http, t, &off);
	if (rc < 0)
		return rc;
	auth = url + off;
	alen = strcspn(auth, "/?#");
	end = auth + alen;
	if (memchr(auth, '@', alen)) {
		put_msg(t->why, sizeof(t->why),
			"user information (user@host) is not allowed in the URL");
		goto bad;
	}
	if (alen == 0 || auth[0] == ':') {
		put_msg(t->why, sizeof(t->why), "URL has no host");
		goto bad;
	}
	if (auth[0] == '[')
		rc = parse_ipv6_host(auth, alen, t, kind, lit, &rest);
	else
		rc = parse_name_host(auth, alen, t, kind, lit, &rest);
	if (rc < 0)
		goto bad;
	if (rest < end && parse_port(rest, end, t) < 0)
		goto bad;
	return 0;
bad:
	t->scheme[0] = '\0';
	t->host[0] = '\0';
	t->port = 0;
	return EGRESS_BAD_URL;
}

/* 1 when host (optional trailing dot) is "localhost" or ends in
 * ".localhost", any case. */
static int is_localhost_name(const char *host)
{
	static const char lh[] = "localhost";
	size_t n = strlen(host), k = sizeof(lh) - 1;

	if (n > 0 && host[n - 1] == '.')
		n--;
	if (n < k || strncasecmp(host + n - k, lh, k) != 0)
		return 0;
	return n == k || host[n - k - 1] == '.';
}

/* Writes sa's numeric address into out. Returns 0 or -1. */
static int numeric(const struct sockaddr *sa, char *out, size_t cap)
{
	const void *a;

	if (sa->sa_family == AF_INET)
		a = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
	else
		a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
	return inet_ntop(sa->sa_family, a, out, (socklen_t)cap) ? 0 : -1;
}

/* egress_check_url's work; *is_name tells whether the host is a DNS name
 * (left for the caller to resolve). */
static int check_url(const char *url, int allow_http, int allow_private, struct egress_target *t,
		     int *is_name)
{
	struct sockaddr_storage lit;
	enum host_kind kind = HOST_NAME;
	char range[96];
	int rc;

	memset(t, 0, sizeof(*t));
	memset(&lit, 0, sizeof(lit));
	*is_name = 0;
	rc = parse_url(url, allow_http, t, &kind, &lit);
	if (rc < 0)
		return rc;
	if (kind != HOST_NAME) {
		if (numeric((const struct sockaddr *)&lit, t->address, sizeof(t->address)) < 0) {
			put_msg(t->why, sizeof(t->why), "address cannot be printed");
			return EGRESS_BAD_URL;
		}
		if (!allow_private &&
		    !egress_address_allowed((const struct sockaddr *)&lit, range, sizeof(range))) {
			put_msg(t->why, sizeof(t->why), "address is forbidden: %s", range);
			return EGRESS_FORBIDDEN;
		}
		return EGRESS_OK;
	}
	if (!allow_private && is_localhost_name(t->host)) {
		put_msg(t->why, sizeof(t->why), "host is forbidden: localhost names mean loopback");
		return EGRESS_FORBIDDEN;
	}
	*is_name = 1;
	return EGRESS_OK;
}

int egress_check_url(const char *url, int allow_http, int allow_private, struct egress_target *t)
{
	int is_name;

	return check_url(url, allow_http, allow_private, t, &is_name);
}

/* Checks every IPv4 and IPv6 answer in res (all must be allowed unless
 * allow_private) and sets *chosen to the first. Returns EGRESS_OK;
 * EGRESS_FORBIDDEN with t->why naming the range and t->address the refused
 * address (empty if it cannot be printed); or EGRESS_RESOLVE_FAILED with
 * t->why set when res holds no IPv4 or IPv6 address. */
static int check_answers(const struct addrinfo *res, int allow_private, struct egress_target *t,
			 const struct sockaddr **chosen)
{
	const struct addrinfo *ai;
	char range[96];

	*chosen = NULL;
	for (ai = res; ai; ai = ai->ai_next) {
		if (!ai->ai_addr || (ai->ai_family != AF_INET && ai->ai_family != AF_INET6))
			continue;
		if (!allow_private && !egress_address_allowed(ai->ai_addr, range, sizeof(range))) {
			if (numeric(ai->ai_addr, t->address, sizeof(t->address)) < 0)
				t->address[0] = '\0';
			put_msg(t->why, sizeof(t->why), "host resolves to a forbidden address: %s",
				range);
			return EGRESS_FORBIDDEN;
		}
		if (!*chosen)
			*chosen = ai->ai_addr;
	}
	if (!*chosen) {
		put_msg(t->why, sizeof(t->why), "host did not resolve to any IPv4 or IPv6 address");
		return EGRESS_RESOLVE_FAILED;
	}
	return EGRESS_OK;
}

/* Writes chosen's numeric address into t->address and the pin
 * "host:port:address" (IPv6 in brackets) for CURLOPT_RESOLVE into
 * t->resolve_entry. Returns EGRESS_OK, or EGRESS_RESOLVE_FAILED (address
 * cannot be printed) or EGRESS_BAD_URL (pin too long) with t->why set. */
static int pin_address(const struct sockaddr *chosen, struct egress_target *t)
{
	int n;

	if (numeric(chosen, t->address, sizeof(t->address)) < 0) {
		put_msg(t->why, sizeof(t->why), "resolved address cannot be printed");
		return EGRESS_RESOLVE_FAILED;
	}
	if (chosen->sa_family == AF_INET6)
		n = snprintf(t->resolve_entry, sizeof(t->resolve_entry), "%s:%d:[%s]", t->host,
			     t->port, t->address);
	else
		n = snprintf(t->resolve_entry, sizeof(t->resolve_entry), "%s:%d:%s", t->host,
			     t->port, t->address);
	if (n < 0 || (size_t)n >= sizeof(t->resolve_entry)) {
		put_msg(t->why, sizeof(t->why), "host name is too long");
		return EGRESS_BAD_URL;
	}
	return EGRESS_OK;
}

int egress_check(const char *url, int allow_http, int allow_private, struct egress_target *t)
{
	struct addrinfo hints, *res = NULL;
	const struct sockaddr *chosen = NULL;
	int rc, n, is_name;

	rc = check_url(url, allow_http, allow_private, t, &is_name);
	if (rc < 0 || !is_name)
		goto out;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	n = getaddrinfo(t->host, NULL, &hints, &res);
	if (n != 0) {
		put_msg(t->why, sizeof(t->why), "host did not resolve: %s", gai_strerror(n));
		rc = EGRESS_RESOLVE_FAILED;
		res = NULL;
		goto out;
	}
	rc = check_answers(res, allow_private, t, &chosen);
	if (rc == EGRESS_OK)
		rc = pin_address(chosen, t);
out:
	if (res)
		freeaddrinfo(res);
	if (rc == EGRESS_OK)
		t->why[0] = '\0';
	else
		t->resolve_entry[0] = '\0';
	return rc;
}
