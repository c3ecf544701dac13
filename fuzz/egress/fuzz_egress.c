/* libFuzzer driver for the SSRF guard's URL parser and address classifier
 * (egress.h), without DNS: the input is a webhook or mirror URL as a
 * subscription sends it, checked by egress_check_url the way every send
 * checks it, with http allowed and not, private targets allowed and not.
 * Its first 4 and 16 bytes are also classified as an IPv4 and an IPv6
 * address.
 *
 * Besides memory errors, leaks and undefined behaviour it aborts when a
 * promise is broken:
 *  - the verdict is OK, BAD_URL or FORBIDDEN (never RESOLVE_FAILED: no
 *    DNS here), with an empty reason exactly when it is OK; allowing http
 *    or private targets never turns an acceptance into a refusal, and
 *    allowing private targets never changes whether the URL parses;
 *  - an accepted URL has scheme https (or http when allowed), a port of
 *    1-65535, a host of letters, digits, '-', '_' and '.' whose last label
 *    is not a number (libcurl would read it as an IPv4 address), or an IP
 *    literal whose address egress_address_allowed allows;
 *  - libcurl's own URL parser, which the send will use, finds the same
 *    host and port in an accepted URL: a parser differential there is an
 *    SSRF;
 *  - the IPv4-mapped, NAT64 and 6to4 forms of an IPv4 address get its
 *    verdict. */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <curl/curl.h>

#include "net/egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int v4_allowed(const uint8_t a[4])
{
	struct sockaddr_in in;
	char why[96];
	int r;

	memset(&in, 0, sizeof in);
	in.sin_family = AF_INET;
	memcpy(&in.sin_addr, a, 4);
	why[0] = '\0';
	r = egress_address_allowed((const struct sockaddr *)&in, why, sizeof why);
	if ((r != 0 && r != 1) || !why[0])
		abort();
	return r;
}

static int v6_allowed(const uint8_t a[16])
{
	struct sockaddr_in6 in6;
	char why[96];
	int r;

	memset(&in6, 0, sizeof in6);
	in6.sin6_family = AF_INET6;
	memcpy(&in6.sin6_addr, a, 16);
	why[0] = '\0';
	r = egress_address_allowed((const struct sockaddr *)&in6, why, sizeof why);
	if ((r != 0 && r != 1) || !why[0])
		abort();
	return r;
}

/* The three IPv6 forms that embed an IPv4 address share its verdict. */
static void check_addresses(const uint8_t *data, size_t size)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
	uint8_t v4[4] = {0}, v6[16];
	int verdict;

	memcpy(v4, data, size < 4 ? size : 4);
	verdict = v4_allowed(v4);
	memcpy(v6, mapped, 12);
	memcpy(v6 + 12, v4, 4);
	if (v6_allowed(v6) != verdict)
		abort();
	memcpy(v6, nat64, 12);
	if (v6_allowed(v6) != verdict)
		abort();
	memset(v6, 0, sizeof v6);
	v6[0] = 0x20, v6[1] = 0x02;
	memcpy(v6 + 2, v4, 4);
	if (v6_allowed(v6) != verdict)
		abort();
	if (size >= 16)
		v6_allowed(data);
}

/* A host that egress_check_url accepted as a DNS name. */
static void check_name(const char *h)
{
	const char *last, *p;
	size_t n = strlen(h);

	if (!n)
		abort();
	for (p = h; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("-_.", *p))
			abort();
	if (h[n - 1] == '.')
		n--;
	last = h;
	for (p = h; p < h + n; p++)
		if (*p == '.')
			last = p + 1;
	for (p = last; p < h + n && isdigit((unsigned char)*p); p++)
		;
	if (p == h + n)
		abort(); /* all digits: libcurl's IPv4 parser would take it */
	if (!strncasecmp(last, "0x", 2)) {
		for (p = last + 2; p < h + n && isxdigit((unsigned char)*p); p++)
			;
		if (p == h + n)
			abort();
	}
}

/* What libcurl makes of an accepted URL must be what was checked. */
static void check_curl_agrees(const char *url, const struct egress_target *t)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL;
	size_t hl;

	if (!u)
		return;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
		goto out; /* libcurl refuses it: the send fails, nothing is reached */
	if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
		goto out;
	hl = strlen(host);
	if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
		/* libcurl may print an IPv6 literal in another (compressed)
		 * spelling: compare the addresses. */
		struct in6_addr a, b;

		host[hl - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &a) != 1 ||
		    inet_pton(AF_INET6, t->host, &b) != 1 || memcmp(&a, &b, sizeof a) != 0)
			abort();
	} else if (strcasecmp(host, t->host) != 0) {
		abort();
	}
	if (atoi(port) != t->port)
		abort();
out:
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
}

static void check_accepted(const char *url, int allow_http, int allow_private,
			   const struct egress_target *t)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (t->why[0] || t->port < 1 || t->port > 65535 ||
	    (strcmp(t->scheme, "https") && (!allow_http || strcmp(t->scheme, "http"))))
		abort();
	if (!t->address[0]) {
		check_name(t->host);
	} else if (inet_pton(AF_INET, t->address, &a4) == 1) {
		if (!allow_private && !v4_allowed((const uint8_t *)&a4))
			abort();
	} else if (inet_pton(AF_INET6, t->address, &a6) == 1) {
		if (!allow_private && !v6_allowed(a6.s6_addr))
			abort();
	} else {
		abort();
	}
	check_curl_agrees(url, t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct egress_target t;
	char *url;
	int v[2][2], http, priv;

	check_addresses(data, size);
	url = malloc(size + 1);
	if (!url)
		return 0;
	memcpy(url, data, size);
	url[size] = '\0';
	for (http = 0; http < 2; http++) {
		for (priv = 0; priv < 2; priv++) {
			v[http][priv] = egress_check_url(url, http, priv, &t);
			if (v[http][priv] == EGRESS_OK)
				check_accepted(url, http, priv, &t);
			else if ((v[http][priv] != EGRESS_BAD_URL &&
				  v[http][priv] != EGRESS_FORBIDDEN) ||
				 !t.why[0] || (priv && v[http][priv] == EGRESS_FORBIDDEN))
				abort();
		}
		if (v[http][0] == EGRESS_OK && v[http][1] != EGRESS_OK)
			abort();
		if ((v[http][0] == EGRESS_BAD_URL) != (v[http][1] == EGRESS_BAD_URL))
			abort();
	}
	if ((v[0][0] == EGRESS_OK && v[1][0] != EGRESS_OK) ||
	    (v[0][1] == EGRESS_OK && v[1][1] != EGRESS_OK))
		abort();
	free(url);
	return 0;
}
