/* Unit tests for egress: address classification, URL parsing and the
 * resolve-then-check flow.
 *
 * DNS: the getaddrinfo defined below interposes on libc's for this
 * executable. It answers the names in fake_hosts, any name ending in
 * ".ok.test" (8.8.8.8) or ".ok6.test" (2606:4700::1111), and fails every
 * other name ending in ".test" (trailing dot ignored, any case), so split
 * answers and public names are tested offline. Other names go to the real
 * resolver: only localhost, /etc/hosts entries and ".invalid" are used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <cmocka.h>

#include "net/egress.h"

/* ---- a fake resolver for names under .test ---- */

struct fake_host {
	const char *name;
	const char *addrs[4];
};

static const struct fake_host fake_hosts[] = {
	{"public.test", {"8.8.8.8", "2606:4700::1111"}},
	{"public6.test", {"2606:4700::1111", "8.8.8.8"}},
	{"split.test", {"8.8.8.8", "10.0.0.1"}},
	{"split6.test", {"2606:4700::1111", "fd00::1"}},
	{"private-first.test", {"192.168.1.1", "8.8.8.8"}},
	{"mapped.test", {"::ffff:127.0.0.1"}},
	{"metadata.test", {"169.254.169.254"}},
	{"cgnat.test", {"8.8.4.4", "1.1.1.1", "100.64.0.1"}},
	{"notlocalhost", {"8.8.8.8"}},
};

#define MAX_LIVE 16
static struct addrinfo *live[MAX_LIVE]; /* fake answers not yet freed */
static int gai_calls;                   /* getaddrinfo calls, real or fake */
static int gai_last_family = -1;        /* hints->ai_family of the last call */

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
typedef void (*fai_fn)(struct addrinfo *);

static struct addrinfo *fake_entry(const char *addr)
{
	struct addrinfo *ai;
	struct sockaddr_storage *ss;

	ai = calloc(1, sizeof(*ai) + sizeof(*ss));
	assert_non_null(ai);
	ss = (struct sockaddr_storage *)(void *)(ai + 1);
	ai->ai_socktype = SOCK_STREAM;
	ai->ai_protocol = IPPROTO_TCP;
	ai->ai_addr = (struct sockaddr *)ss;
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)ss;

		in6->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, addr, &in6->sin6_addr), 1);
		ai->ai_family = AF_INET6;
		ai->ai_addrlen = sizeof(*in6);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)(void *)ss;

		in->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, addr, &in->sin_addr), 1);
		ai->ai_family = AF_INET;
		ai->ai_addrlen = sizeof(*in);
	}
	return ai;
}

/* 1 when name (n bytes) ends in suffix, any case. */
static int ends_in(const char *name, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && strncasecmp(name + n - k, suffix, k) == 0;
}

/* Returns the fake addresses for node (NULL-terminated), or NULL; *fake
 * tells whether node is a fake name at all (a fake name without addresses
 * does not exist). */
static const char *const *fake_lookup(const char *node, int *fake)
{
	static const char *const ok4[] = {"8.8.8.8", NULL};
	static const char *const ok6[] = {"2606:4700::1111", NULL};
	size_t n = strlen(node), i;

	if (n > 0 && node[n - 1] == '.')
		n--;
	*fake = 1;
	for (i = 0; i < ARRAY_LEN(fake_hosts); i++)
		if (strlen(fake_hosts[i].name) == n && strncasecmp(node, fake_hosts[i].name, n) == 0)
			return fake_hosts[i].addrs;
	if (ends_in(node, n, ".ok.test"))
		return ok4;
	if (ends_in(node, n, ".ok6.test"))
		return ok6;
	*fake = ends_in(node, n, ".test");
	return NULL;
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		struct addrinfo **res)
{
	static gai_fn real;
	const char *const *addrs;
	int fake = 0;
	size_t j, k;

	gai_calls++;
	gai_last_family = hints ? hints->ai_family : -1;
	addrs = node ? fake_lookup(node, &fake) : NULL;
	if (fake && !addrs)
		return EAI_NONAME;
	if (fake) {
		struct addrinfo *head = NULL, **tail = &head;

		for (j = 0; j < 4 && addrs[j]; j++) {
			*tail = fake_entry(addrs[j]);
			tail = &(*tail)->ai_next;
		}
		for (k = 0; k < MAX_LIVE && live[k]; k++)
			;
		assert_true(k < MAX_LIVE);
		live[k] = head;
		*res = head;
		return 0;
	}
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
	assert_non_null(real);
	return real(node, service, hints, res);
}

void freeaddrinfo(struct addrinfo *res)
{
	static fai_fn real;
	size_t k;

	for (k = 0; k < MAX_LIVE; k++) {
		if (res && live[k] == res) {
			while (res) {
				struct addrinfo *next = res->ai_next;
				free(res);
				res = next;
			}
			live[k] = NULL;
			return;
		}
	}
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "freeaddrinfo");
	assert_non_null(real);
	real(res);
}

static void assert_no_live_fakes(void)
{
	size_t k;

	for (k = 0; k < MAX_LIVE; k++)
		assert_null(live[k]);
}

/* ---- classification ---- */

struct class_case {
	const char *addr;
	int allowed;
	const char *why; /* substring expected in the reason */
};

static const struct class_case v4_cases[] = {
	{"8.8.8.8", 1, "public"},
	{"1.1.1.1", 1, "public"},
	{"0.0.0.0", 0, "0.0.0.0/8"},
	{"0.255.255.255", 0, "0.0.0.0/8"},
	{"1.0.0.0", 1, "public"},
	{"9.255.255.255", 1, "public"},
	{"10.0.0.0", 0, "10.0.0.0/8"},
	{"10.255.255.255", 0, "10.0.0.0/8"},
	{"11.0.0.0", 1, "public"},
	{"100.63.255.255", 1, "public"},
	{"100.64.0.0", 0, "carrier-grade NAT"},
	{"100.127.255.255", 0, "carrier-grade NAT"},
	{"100.128.0.0", 1, "public"},
	{"126.255.255.255", 1, "public"},
	{"127.0.0.0", 0, "loopback"},
	{"127.0.0.1", 0, "loopback"},
	{"127.255.255.255", 0, "loopback"},
	{"128.0.0.0", 1, "public"},
	{"169.253.255.255", 1, "public"},
	{"169.254.0.0", 0, "link-local"},
	{"169.254.169.254", 0, "metadata"},
	{"169.254.255.255", 0, "link-local"},
	{"169.255.0.0", 1, "public"},
	{"172.15.255.255", 1, "public"},
	{"172.16.0.0", 0, "172.16.0.0/12"},
	{"172.31.255.255", 0, "172.16.0.0/12"},
	{"172.32.0.0", 1, "public"},
	{"191.255.255.255", 1, "public"},
	{"192.0.0.0", 0, "192.0.0.0/24"},
	{"192.0.0.255", 0, "192.0.0.0/24"},
	{"192.0.1.0", 1, "public"},
	{"192.0.1.255", 1, "public"},
	{"192.0.2.0", 0, "192.0.2.0/24"},
	{"192.0.2.255", 0, "192.0.2.0/24"},
	{"192.0.3.0", 1, "public"},
	{"192.88.98.255", 1, "public"},
	{"192.88.99.0", 0, "192.88.99.0/24"},
	{"192.88.99.255", 0, "192.88.99.0/24"},
	{"192.88.100.0", 1, "public"},
	{"192.167.255.255", 1, "public"},
	{"192.168.0.0", 0, "192.168.0.0/16"},
	{"192.168.255.255", 0, "192.168.0.0/16"},
	{"192.169.0.0", 1, "public"},
	{"198.17.255.255", 1, "public"},
	{"198.18.0.0", 0, "198.18.0.0/15"},
	{"198.19.255.255", 0, "198.18.0.0/15"},
	{"198.20.0.0", 1, "public"},
	{"198.51.99.255", 1, "public"},
	{"198.51.100.0", 0, "198.51.100.0/24"},
	{"198.51.100.255", 0, "198.51.100.0/24"},
	{"198.51.101.0", 1, "public"},
	{"203.0.112.255", 1, "public"},
	{"203.0.113.0", 0, "203.0.113.0/24"},
	{"203.0.113.255", 0, "203.0.113.0/24"},
	{"203.0.114.0", 1, "public"},
	{"223.255.255.255", 1, "public"},
	{"224.0.0.0", 0, "multicast"},
	{"239.255.255.255", 0, "multicast"},
	{"240.0.0.0", 0, "240.0.0.0/4"},
	{"255.255.255.254", 0, "240.0.0.0/4"},
	{"255.255.255.255", 0, "broadcast"},
};

static const struct class_case v6_cases[] = {
	{"2606:4700::1111", 1, "public"},
	{"2a00:1450:4001::1", 1, "public"},
	{"::", 0, "unspecified"},
	{"::1", 0, "loopback (::1)"},
	{"::2", 0, "outside 2000::/3"},
	/* IPv4-compatible (deprecated) and IPv4-translated forms */
	{"::7f00:1", 0, "outside 2000::/3"},
	{"::808:808", 0, "outside 2000::/3"},
	{"::ffff:0:808:808", 0, "outside 2000::/3"},
	/* IPv4-mapped ::ffff:0:0/96 */
	{"::ffff:0.0.0.0", 0, "IPv4-mapped"},
	{"::ffff:127.0.0.1", 0, "loopback (127.0.0.0/8)"},
	{"::ffff:10.1.2.3", 0, "10.0.0.0/8"},
	{"::ffff:169.254.169.254", 0, "metadata"},
	{"::ffff:255.255.255.255", 0, "broadcast"},
	{"::ffff:8.8.8.8", 1, "public"},
	{"::fffe:808:808", 0, "outside 2000::/3"},
	/* NAT64 64:ff9b::/96 */
	{"64:ff9b::7f00:1", 0, "NAT64"},
	{"64:ff9b::a9fe:a9fe", 0, "metadata"},
	{"64:ff9b::ffff:ffff", 0, "broadcast"},
	{"64:ff9b::808:808", 1, "public"},
	{"64:ff9b:1::808:808", 0, "outside 2000::/3"},
	/* 100::/64 */
	{"100::", 0, "discard-only"},
	{"100::ffff:ffff:ffff:ffff", 0, "discard-only"},
	{"100:0:0:1::", 0, "outside 2000::/3"},
	/* 2001::/23, Teredo 2001::/32 */
	{"2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1, "public"},
	{"2001::", 0, "Teredo"},
	{"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", 0, "Teredo"},
	{"2001:1::", 0, "2001::/23"},
	{"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "2001::/23"},
	{"2001:200::", 1, "public"},
	/* 2001:db8::/32 */
	{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", 1, "public"},
	{"2001:db8::", 0, "2001:db8::/32"},
	{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", 0, "2001:db8::/32"},
	{"2001:db9::", 1, "public"},
	/* 6to4 2002::/16 */
	{"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1, "public"},
	{"2002::", 0, "6to4"},
	{"2002:7f00:1::", 0, "loopback (127.0.0.0/8)"},
	{"2002:c0a8:101::1", 0, "192.168.0.0/16"},
	{"2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "broadcast"},
	{"2002:808:808::1", 1, "public"},
	{"2003::", 1, "public"},
	/* 3fff::/20; 5f00::/16 (SRv6) lies outside 2000::/3 */
	{"3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1, "public"},
	{"3fff::", 0, "3fff::/20"},
	{"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "3fff::/20"},
	{"3fff:1000::", 1, "public"},
	{"5f00::", 0, "outside 2000::/3"},
	/* edges of 2000::/3 */
	{"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "outside 2000::/3"},
	{"2000::", 1, "public"},
	{"3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1, "public"},
	{"4000::", 0, "outside 2000::/3"},
	/* fc00::/7 */
	{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "outside 2000::/3"},
	{"fc00::", 0, "unique local"},
	{"fd00:ec2::254", 0, "unique local"},
	{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "unique local"},
	/* fe80::/10, fec0::/10 */
	{"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "outside 2000::/3"},
	{"fe80::", 0, "link-local"},
	{"fe80::1", 0, "link-local"},
	{"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "link-local"},
	{"fec0::", 0, "site-local"},
	{"feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "site-local"},
	/* ff00::/8 */
	{"ff00::", 0, "multicast"},
	{"ff02::1", 0, "multicast"},
	{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "multicast"},
};

/* Classifies the textual address s; fills why. */
static int classify(const char *s, char *why, size_t cap)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(s, ':')) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)&ss;

		in6->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, s, &in6->sin6_addr) != 1)
			fail_msg("bad test address %s", s);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)(void *)&ss;

		in->sin_family = AF_INET;
		if (inet_pton(AF_INET, s, &in->sin_addr) != 1)
			fail_msg("bad test address %s", s);
	}
	return egress_address_allowed((const struct sockaddr *)&ss, why, cap);
}

static void run_class_table(const struct class_case *c, size_t n)
{
	char why[128];
	size_t i;

	for (i = 0; i < n; i++) {
		int got = classify(c[i].addr, why, sizeof(why));

		if (got != c[i].allowed)
			fail_msg("%s: expected %s, got %s (%s)", c[i].addr,
				 c[i].allowed ? "allowed" : "forbidden",
				 got ? "allowed" : "forbidden", why);
		if (!strstr(why, c[i].why))
			fail_msg("%s: reason \"%s\" lacks \"%s\"", c[i].addr, why, c[i].why);
		/* the verdict does not depend on why */
		assert_int_equal(classify(c[i].addr, NULL, 0), got);
	}
}

static void test_classify_ipv4(void **state)
{
	(void)state;
	run_class_table(v4_cases, ARRAY_LEN(v4_cases));
}

static void test_classify_ipv6(void **state)
{
	(void)state;
	run_class_table(v6_cases, ARRAY_LEN(v6_cases));
}

static void test_classify_edge_inputs(void **state)
{
	struct sockaddr_un un;
	char why[8];

	(void)state;
	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	assert_int_equal(egress_address_allowed((const struct sockaddr *)&un, NULL, 0), 0);
	assert_int_equal(egress_address_allowed(NULL, NULL, 0), 0);
	/* a short why is truncated, never overrun */
	memset(why, 'x', sizeof(why));
	assert_int_equal(classify("127.0.0.1", why, sizeof(why)), 0);
	assert_string_equal(why, "loopbac");
	assert_int_equal(classify("127.0.0.1", why, 0), 0);
	assert_string_equal(why, "loopbac");
}

/* ---- URL parsing (numeric hosts: no DNS involved) ---- */

struct url_case {
	const char *url;
	int allow_http;
	int verdict;
	const char *scheme, *host;
	int port;
	const char *address;
};

static const struct url_case url_cases[] = {
	{"https://8.8.8.8/", 0, EGRESS_OK, "https", "8.8.8.8", 443, "8.8.8.8"},
	{"https://8.8.8.8", 0, EGRESS_OK, "https", "8.8.8.8", 443, "8.8.8.8"},
	{"HTTPS://8.8.8.8:8443/x?y=1#frag", 0, EGRESS_OK, "https", "8.8.8.8", 8443, "8.8.8.8"},
	{"HttpS://8.8.8.8?q", 0, EGRESS_OK, "https", "8.8.8.8", 443, "8.8.8.8"},
	{"https://8.8.8.8#x", 0, EGRESS_OK, "https", "8.8.8.8", 443, "8.8.8.8"},
	{"https://8.8.8.8:1/", 0, EGRESS_OK, "https", "8.8.8.8", 1, "8.8.8.8"},
	{"https://8.8.8.8:65535/", 0, EGRESS_OK, "https", "8.8.8.8", 65535, "8.8.8.8"},
	{"https://8.8.8.8:00443/", 0, EGRESS_OK, "https", "8.8.8.8", 443, "8.8.8.8"},
	{"http://8.8.8.8/", 1, EGRESS_OK, "http", "8.8.8.8", 80, "8.8.8.8"},
	{"HTTP://8.8.8.8:8080/", 1, EGRESS_OK, "http", "8.8.8.8", 8080, "8.8.8.8"},
	{"https://8.8.8.8/", 1, EGRESS_OK, "https", "8.8.8.8", 443, "8.8.8.8"},
	/* '@' outside the authority is not userinfo */
	{"https://8.8.8.8/a@127.0.0.1", 0, EGRESS_OK, "https", "8.8.8.8", 443, "8.8.8.8"},
	{"https://8.8.8.8?@127.0.0.1", 0, EGRESS_OK, "https", "8.8.8.8", 443, "8.8.8.8"},
	{"https://8.8.8.8#@127.0.0.1", 0, EGRESS_OK, "https", "8.8.8.8", 443, "8.8.8.8"},
	/* IPv6 literals */
	{"https://[2606:4700::1111]/", 0, EGRESS_OK, "https", "2606:4700::1111", 443,
	 "2606:4700::1111"},
	{"https://[2606:4700::1111]:8443", 0, EGRESS_OK, "https", "2606:4700::1111", 8443,
	 "2606:4700::1111"},
	{"https://[2606:4700:0:0:0:0:0:1111]/", 0, EGRESS_OK, "https", "2606:4700:0:0:0:0:0:1111",
	 443, "2606:4700::1111"},
	{"https://[::ffff:8.8.8.8]/", 0, EGRESS_OK, "https", "::ffff:8.8.8.8", 443, "::ffff:8.8.8.8"},

	/* schemes */
	{"http://8.8.8.8/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"ftp://8.8.8.8/", 1, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"file:///etc/passwd", 1, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"gopher://8.8.8.8/", 1, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https:/8.8.8.8/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https:8.8.8.8", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"//8.8.8.8/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"8.8.8.8", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{" https://8.8.8.8/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	/* userinfo */
	{"https://user@8.8.8.8/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://user:pw@8.8.8.8/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://@8.8.8.8/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8@127.0.0.1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8:443@127.0.0.1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	/* ports */
	{"https://8.8.8.8:/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8:0/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8:65536/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8:99999/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8:000443/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8:4294967739/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8:-1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8:+443/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8:443a/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8:0x1bb/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8:443:443/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	/* missing host */
	{"https://", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https:///x", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://:443/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://?x", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://#x", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://./", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	/* IPv6 literal syntax */
	{"https://[::1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://[]/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://[::1]x/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://[::1]:/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://::1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://[8.8.8.8]/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://[gggg::1]/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://[fe80::1%25eth0]/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://[2606:4700::1111%eth0]/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://[0000:0000:0000:0000:0000:ffff:255.255.255.255:1]/", 0, EGRESS_BAD_URL, NULL,
	 NULL, 0, NULL},
	/* host syntax */
	{"https://exa mple.test/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://example.test\t/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8/\r\nX-Injected: 1", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8/\x7f", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://exa%6dple.test/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://127.0.0.1%2f/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://example.test\\@127.0.0.1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8\\.test/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://ex\xc3\xa4mple.test/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://a..b.test/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://.a.test/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://a.test../", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	/* numeric IPv4 in other forms: never reinterpreted */
	{"https://0x7f000001/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://0X7F000001/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://2130706433/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://0177.0.0.1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"http://0177.0.0.1/", 1, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://0x7f.1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://0x7f.0x0.0x0.0x1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://127.1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://127.0.1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://127.000.0.1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://127.0.0.1./", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://8.8.8.8./", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://1.2.3.4.5/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://256.0.0.1/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://0/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://0x/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://example.0x10/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
	{"https://example.123/", 0, EGRESS_BAD_URL, NULL, NULL, 0, NULL},
};

static void test_url_parsing(void **state)
{
	struct egress_target t;
	size_t i;
	int ap, calls;

	(void)state;
	for (i = 0; i < ARRAY_LEN(url_cases); i++) {
		const struct url_case *c = &url_cases[i];

		/* the verdict on syntax does not depend on allow_private */
		for (ap = 1; ap >= 0; ap--) {
			int want = c->verdict; /* OK cases are public addresses */
			int rc;

			calls = gai_calls;
			memset(&t, 0x5a, sizeof(t));
			rc = egress_check(c->url, c->allow_http, ap, &t);
			if (rc != want)
				fail_msg("%s (allow_private %d): expected %d, got %d (%s)", c->url,
					 ap, want, rc, t.why);
			assert_int_equal(gai_calls, calls); /* no DNS for these */
			assert_string_equal(t.resolve_entry, "");
			if (rc == EGRESS_BAD_URL) {
				assert_true(t.why[0] != '\0');
				assert_string_equal(t.host, "");
				assert_int_equal(t.port, 0);
				continue;
			}
			assert_string_equal(t.scheme, c->scheme);
			assert_string_equal(t.host, c->host);
			assert_int_equal(t.port, c->port);
			assert_string_equal(t.address, c->address);
			if (rc == EGRESS_OK)
				assert_string_equal(t.why, "");
		}
	}
}

static void test_url_null(void **state)
{
	struct egress_target t;

	(void)state;
	assert_int_equal(egress_check(NULL, 1, 1, &t), EGRESS_BAD_URL);
	assert_true(t.why[0] != '\0');
}

/* Builds "https://<labels>.<suffix>:65535/" where the host is exactly n
 * characters long (suffix included), made of labels of at most 63
 * characters. */
static void long_host_url(char *out, size_t cap, size_t n, const char *suffix)
{
	char host[300];
	size_t len = 0, sl = strlen(suffix), label = 0;

	assert_true(n < sizeof(host) && n > sl + 1);
	while (len < n - sl - 1) {
		if (label == 62) {
			host[len++] = '.';
			label = 0;
			continue;
		}
		host[len++] = 'a';
		label++;
	}
	if (host[len - 1] == '.')
		host[len - 1] = 'b';
	host[len++] = '.';
	memcpy(host + len, suffix, sl);
	len += sl;
	host[len] = '\0';
	assert_int_equal(strlen(host), n);
	assert_true((size_t)snprintf(out, cap, "https://%s:65535/", host) < cap);
}

static void test_host_length(void **state)
{
	char url[400], label[80], want[400];
	struct egress_target t;

	(void)state;
	/* one label of 63 characters is fine, 64 is not */
	memset(label, 'a', 63);
	label[63] = '\0';
	snprintf(url, sizeof(url), "https://%s.ok.test/", label);
	assert_int_equal(egress_check(url, 0, 0, &t), EGRESS_OK);
	snprintf(url, sizeof(url), "https://%sa.ok.test/", label);
	assert_int_equal(egress_check(url, 0, 0, &t), EGRESS_BAD_URL);

	/* 253 characters, with or without the trailing dot */
	long_host_url(url, sizeof(url), 253, "ok6.test");
	assert_int_equal(egress_check(url, 0, 0, &t), EGRESS_OK);
	assert_int_equal(strlen(t.host), 253);
	snprintf(want, sizeof(want), "%s:65535:[2606:4700::1111]", t.host);
	assert_string_equal(t.resolve_entry, want);
	long_host_url(url, sizeof(url), 254, "ok.test.");
	assert_int_equal(egress_check(url, 0, 0, &t), EGRESS_OK);
	assert_int_equal(strlen(t.host), 254);
	snprintf(want, sizeof(want), "%s:65535:8.8.8.8", t.host);
	assert_string_equal(t.resolve_entry, want);

	long_host_url(url, sizeof(url), 254, "ok.test");
	assert_int_equal(egress_check(url, 0, 0, &t), EGRESS_BAD_URL);
	long_host_url(url, sizeof(url), 255, "ok.test.");
	assert_int_equal(egress_check(url, 0, 0, &t), EGRESS_BAD_URL);
	long_host_url(url, sizeof(url), 290, "ok.test");
	assert_int_equal(egress_check(url, 0, 1, &t), EGRESS_BAD_URL);
	assert_no_live_fakes();
}

struct refuse_case {
	const char *url;
	const char *address;
	const char *why;
};

/* Literal hosts: refused without DNS, accepted with allow_private. */
static void test_literals_refused(void **state)
{
	static const struct refuse_case c[] = {
		{"https://127.0.0.1:8443/", "127.0.0.1", "loopback"},
		{"https://[::1]/", "::1", "loopback (::1)"},
		{"https://169.254.169.254/latest/meta-data", "169.254.169.254", "metadata"},
		{"https://0.0.0.0/", "0.0.0.0", "0.0.0.0/8"},
		{"https://10.0.0.1/", "10.0.0.1", "private"},
		{"https://100.64.0.1/", "100.64.0.1", "carrier-grade NAT"},
		{"https://172.16.0.1/", "172.16.0.1", "private"},
		{"https://192.168.0.1/", "192.168.0.1", "private"},
		{"https://224.0.0.1/", "224.0.0.1", "multicast"},
		{"https://255.255.255.255/", "255.255.255.255", "broadcast"},
		{"https://[::]/", "::", "unspecified"},
		{"https://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1", "IPv4-mapped"},
		{"https://[::ffff:7f00:1]/", "::ffff:127.0.0.1", "IPv4-mapped"},
		{"https://[0:0:0:0:0:ffff:a9fe:a9fe]/", "::ffff:169.254.169.254", "metadata"},
		{"https://[::127.0.0.1]/", "::127.0.0.1", "outside 2000::/3"},
		{"https://[64:ff9b::7f00:1]/", "64:ff9b::7f00:1", "NAT64"},
		{"https://[2002:7f00:1::]/", "2002:7f00:1::", "6to4"},
		{"https://[2001::1]/", "2001::1", "Teredo"},
		{"https://[fd00:ec2::254]/", "fd00:ec2::254", "unique local"},
		{"https://[FE80::1]/", "fe80::1", "link-local"},
		{"https://[ff02::1]/", "ff02::1", "multicast"},
	};
	struct egress_target t;
	size_t i;
	int calls = gai_calls;

	(void)state;
	for (i = 0; i < ARRAY_LEN(c); i++) {
		if (egress_check(c[i].url, 0, 0, &t) != EGRESS_FORBIDDEN)
			fail_msg("%s not refused", c[i].url);
		assert_string_equal(t.address, c[i].address);
		if (!strstr(t.why, c[i].why))
			fail_msg("%s: reason \"%s\" lacks \"%s\"", c[i].url, t.why, c[i].why);
		assert_string_equal(t.resolve_entry, "");
		assert_string_equal(t.scheme, "https");
		assert_true(t.port > 0);

		if (egress_check(c[i].url, 0, 1, &t) != EGRESS_OK)
			fail_msg("%s refused with allow_private: %s", c[i].url, t.why);
		assert_string_equal(t.address, c[i].address);
		assert_string_equal(t.why, "");
		assert_string_equal(t.resolve_entry, "");
	}
	assert_int_equal(egress_check("https://127.0.0.1:8443/", 0, 0, &t), EGRESS_FORBIDDEN);
	assert_string_equal(t.host, "127.0.0.1");
	assert_int_equal(t.port, 8443);
	assert_int_equal(gai_calls, calls);
}

static void test_localhost(void **state)
{
	static const char *const names[] = {
		"https://localhost/x",    "https://LOCALHOST/",      "https://localhost.:8443/",
		"https://foo.localhost/", "https://a.b.LocalHost./", "http://localhost/",
	};
	struct egress_target t;
	char want[64];
	size_t i;
	int calls = gai_calls, rc;

	(void)state;
	for (i = 0; i < ARRAY_LEN(names); i++) {
		if (egress_check(names[i], 1, 0, &t) != EGRESS_FORBIDDEN)
			fail_msg("%s not refused", names[i]);
		assert_non_null(strstr(t.why, "localhost"));
		assert_string_equal(t.resolve_entry, "");
	}
	assert_int_equal(gai_calls, calls); /* refused before any lookup */

	assert_int_equal(egress_check("https://localhost/x", 0, 1, &t), EGRESS_OK);
	assert_int_equal(gai_calls, calls + 1);
	assert_int_equal(gai_last_family, AF_UNSPEC);
	assert_string_equal(t.scheme, "https");
	assert_string_equal(t.host, "localhost");
	assert_int_equal(t.port, 443);
	if (strcmp(t.address, "127.0.0.1") == 0)
		assert_string_equal(t.resolve_entry, "localhost:443:127.0.0.1");
	else if (strcmp(t.address, "::1") == 0)
		assert_string_equal(t.resolve_entry, "localhost:443:[::1]");
	else
		fail_msg("localhost resolved to %s", t.address);
	assert_string_equal(t.why, "");

	assert_int_equal(egress_check("http://localhost:8080", 1, 1, &t), EGRESS_OK);
	assert_string_equal(t.scheme, "http");
	snprintf(want, sizeof(want),
		 strchr(t.address, ':') ? "localhost:8080:[%s]" : "localhost:8080:%s", t.address);
	assert_string_equal(t.resolve_entry, want);

	/* trailing dot: parsed, kept in host and in the pin (libcurl keys its
	 * DNS cache with it); whether the resolver knows "localhost." varies */
	rc = egress_check("https://localhost./", 0, 1, &t);
	assert_true(rc == EGRESS_OK || rc == EGRESS_RESOLVE_FAILED);
	assert_string_equal(t.host, "localhost.");
	if (rc == EGRESS_OK)
		assert_int_equal(strncmp(t.resolve_entry, "localhost.:443:", 15), 0);

	/* only whole labels count */
	assert_int_equal(egress_check("https://notlocalhost/", 0, 0, &t), EGRESS_OK);
	assert_string_equal(t.resolve_entry, "notlocalhost:443:8.8.8.8");
	assert_int_equal(egress_check("https://localhost.test/", 0, 0, &t), EGRESS_RESOLVE_FAILED);
	assert_no_live_fakes();
}

static void test_fake_dns(void **state)
{
	static const struct refuse_case refused[] = {
		{"https://split.test/", "10.0.0.1", "private (10.0.0.0/8)"},
		{"https://split6.test/", "fd00::1", "unique local"},
		{"https://private-first.test/", "192.168.1.1", "192.168.0.0/16"},
		{"https://mapped.test/", "::ffff:127.0.0.1", "IPv4-mapped"},
		{"https://metadata.test/", "169.254.169.254", "metadata"},
		{"https://cgnat.test/", "100.64.0.1", "carrier-grade NAT"},
	};
	struct egress_target t;
	size_t i;

	(void)state;
	assert_int_equal(egress_check("https://public.test/hook", 0, 0, &t), EGRESS_OK);
	assert_string_equal(t.address, "8.8.8.8");
	assert_string_equal(t.resolve_entry, "public.test:443:8.8.8.8");
	assert_string_equal(t.why, "");

	assert_int_equal(egress_check("https://public6.test:8443/", 0, 0, &t), EGRESS_OK);
	assert_string_equal(t.address, "2606:4700::1111");
	assert_string_equal(t.resolve_entry, "public6.test:8443:[2606:4700::1111]");

	assert_int_equal(egress_check("http://Public.Test./", 1, 0, &t), EGRESS_OK);
	assert_string_equal(t.scheme, "http");
	assert_string_equal(t.host, "Public.Test.");
	assert_string_equal(t.resolve_entry, "Public.Test.:80:8.8.8.8");

	assert_int_equal(egress_check("http://public.test/", 0, 0, &t), EGRESS_BAD_URL);

	for (i = 0; i < ARRAY_LEN(refused); i++) {
		if (egress_check(refused[i].url, 0, 0, &t) != EGRESS_FORBIDDEN)
			fail_msg("%s not refused", refused[i].url);
		assert_string_equal(t.address, refused[i].address);
		if (!strstr(t.why, refused[i].why))
			fail_msg("%s: reason \"%s\" lacks \"%s\"", refused[i].url, t.why,
				 refused[i].why);
		/* the reason names the range, not the address the name resolved to */
		if (strcmp(refused[i].address, "169.254.169.254") != 0)
			assert_null(strstr(t.why, refused[i].address));
		assert_string_equal(t.resolve_entry, "");
		assert_true(t.host[0] != '\0');
	}

	/* allow_private: the first address is pinned, whatever it is */
	assert_int_equal(egress_check("https://split.test/", 0, 1, &t), EGRESS_OK);
	assert_string_equal(t.resolve_entry, "split.test:443:8.8.8.8");
	assert_int_equal(egress_check("https://private-first.test/", 0, 1, &t), EGRESS_OK);
	assert_string_equal(t.resolve_entry, "private-first.test:443:192.168.1.1");
	assert_int_equal(egress_check("https://mapped.test:9/", 0, 1, &t), EGRESS_OK);
	assert_string_equal(t.resolve_entry, "mapped.test:9:[::ffff:127.0.0.1]");

	assert_int_equal(egress_check("https://missing.test/", 0, 0, &t), EGRESS_RESOLVE_FAILED);
	assert_int_equal(egress_check("https://missing.test/", 0, 1, &t), EGRESS_RESOLVE_FAILED);
	assert_no_live_fakes();
}

static void test_unresolvable(void **state)
{
	struct egress_target t;

	(void)state;
	assert_int_equal(egress_check("https://nonexistent.invalid/", 0, 0, &t),
			 EGRESS_RESOLVE_FAILED);
	assert_non_null(strstr(t.why, "did not resolve"));
	assert_string_equal(t.host, "nonexistent.invalid");
	assert_string_equal(t.address, "");
	assert_string_equal(t.resolve_entry, "");
	assert_int_equal(egress_check("https://nonexistent.invalid/", 0, 1, &t),
			 EGRESS_RESOLVE_FAILED);
}

/* The per-send check: the same URL rules and literal classification, and
 * names pass without any DNS lookup (libcurl resolves them, and httpc's
 * socket guard classifies the address it connects to). */
static void test_check_url_no_dns(void **state)
{
	struct egress_target t;
	int calls = gai_calls;

	(void)state;
	assert_int_equal(egress_check_url("https://nonexistent.invalid/h", 0, 0, &t), EGRESS_OK);
	assert_string_equal(t.host, "nonexistent.invalid");
	assert_int_equal(t.port, 443);
	assert_string_equal(t.address, "");
	assert_string_equal(t.resolve_entry, "");
	assert_int_equal(egress_check_url("https://split.test:8443/", 0, 0, &t), EGRESS_OK);
	assert_int_equal(t.port, 8443);

	assert_int_equal(egress_check_url("https://8.8.8.8/x", 0, 0, &t), EGRESS_OK);
	assert_string_equal(t.address, "8.8.8.8");
	assert_int_equal(egress_check_url("https://127.0.0.1:8443/", 0, 0, &t), EGRESS_FORBIDDEN);
	assert_non_null(strstr(t.why, "loopback"));
	assert_int_equal(egress_check_url("https://[fd00::1]/", 0, 0, &t), EGRESS_FORBIDDEN);
	assert_int_equal(egress_check_url("https://127.0.0.1:8443/", 0, 1, &t), EGRESS_OK);
	assert_int_equal(egress_check_url("https://app.localhost/", 0, 0, &t), EGRESS_FORBIDDEN);
	assert_int_equal(egress_check_url("https://app.localhost/", 0, 1, &t), EGRESS_OK);
	assert_int_equal(egress_check_url("http://public.test/", 0, 0, &t), EGRESS_BAD_URL);
	assert_int_equal(egress_check_url("https://0x7f.1/", 0, 1, &t), EGRESS_BAD_URL);
	assert_int_equal(egress_check_url("https://user@public.test/", 0, 0, &t), EGRESS_BAD_URL);
	assert_int_equal(gai_calls, calls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classify_ipv4),
		cmocka_unit_test(test_classify_ipv6),
		cmocka_unit_test(test_classify_edge_inputs),
		cmocka_unit_test(test_url_parsing),
		cmocka_unit_test(test_url_null),
		cmocka_unit_test(test_host_length),
		cmocka_unit_test(test_literals_refused),
		cmocka_unit_test(test_localhost),
		cmocka_unit_test(test_fake_dns),
		cmocka_unit_test(test_unresolvable),
		cmocka_unit_test(test_check_url_no_dns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
