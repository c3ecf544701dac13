/* Unit tests for api/openapi: the rewrite of the document's base URL to
 * --public-url, and the embedded document written for it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <string.h>

#include "api/openapi.h"
#include "core/buf.h"
#include "core/embedded.h"

#define BASE "http://127.0.0.1:8080"

/* Rewrites in from BASE to to; returns the text (static, for comparison). */
static const char *rebase(const char *in, const char *to)
{
	static struct buf b;

	buf_free(&b);
	buf_init(&b, 0);
	assert_int_equal(openapi_rebase(in, strlen(in), BASE, to, &b), 0);
	return b.data ? b.data : "";
}

/* Strings that start with the base, at a path, query, fragment or their
 * end, are rewritten; the rest of the text is copied byte for byte. */
static void test_rebase_strings(void **state)
{
	(void)state;
	assert_string_equal(rebase("{\"url\": \"" BASE "\"}", "https://api.example"),
			    "{\"url\": \"https://api.example\"}");
	assert_string_equal(
		rebase("[\"" BASE "/oauth/token\", \"" BASE "?q\", \"" BASE "#f\"]", "https://h/base"),
		"[\"https://h/base/oauth/token\", \"https://h/base?q\", \"https://h/base#f\"]");
	assert_string_equal(rebase("{\"" BASE "/k\": 1}", "https://h"), "{\"https://h/k\": 1}");
	assert_string_equal(rebase(" {\"a\" :\n\t[ 1.50, \"x\" ] } ", "https://h"),
			    " {\"a\" :\n\t[ 1.50, \"x\" ] } ");
}

/* Prose that mentions the base later in a string, another port, an escaped
 * quote before the base inside a string: all left alone. */
static void test_rebase_leaves_others(void **state)
{
	(void)state;
	assert_string_equal(rebase("[\"see " BASE "/x\", \"" BASE "1/x\", \"" BASE ".evil\"]",
				   "https://h"),
			    "[\"see " BASE "/x\", \"" BASE "1/x\", \"" BASE ".evil\"]");
	assert_string_equal(rebase("[\"a \\\"" BASE "/x\\\" b\", \"\\\\\", \"" BASE "/y\"]",
				   "https://h"),
			    "[\"a \\\"" BASE "/x\\\" b\", \"\\\\\", \"https://h/y\"]");
}

/* The public URL is JSON-escaped; invalid UTF-8 is refused. */
static void test_rebase_escapes(void **state)
{
	struct buf b;

	(void)state;
	assert_string_equal(rebase("[\"" BASE "/x\"]", "https://h/a\"b\\c"),
			    "[\"https://h/a\\\"b\\\\c/x\"]");
	buf_init(&b, 0);
	assert_int_equal(openapi_rebase("[\"" BASE "\"]", 11, BASE, "https://h/\xff", &b), -1);
	buf_free(&b);
}

/* The embedded document is written for BASE: rewritten, it names the public
 * URL in servers[0] and the tokenUrl, and keeps no trace of BASE. */
static void test_embedded_document(void **state)
{
	char err[256] = "";
	struct buf b;
	json_t *root;

	(void)state;
	buf_init(&b, 0);
	assert_int_equal(openapi_rebase(embedded_openapi, embedded_openapi_len, OPENAPI_DOC_BASE,
					"https://revops.example-hotels.test/api", &b),
			 0);
	root = json_loadb(b.data, b.len, 0, NULL);
	assert_non_null(root);
	assert_null(strstr(b.data, OPENAPI_DOC_BASE));
	json_decref(root);
	buf_free(&b);
	assert_int_equal(openapi_prepare("https://revops.example-hotels.test/api", err, sizeof err),
			 0);
	openapi_release();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rebase_strings),
		cmocka_unit_test(test_rebase_leaves_others),
		cmocka_unit_test(test_rebase_escapes),
		cmocka_unit_test(test_embedded_document),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
