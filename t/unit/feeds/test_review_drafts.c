/* Unit tests for the reply drafts of feeds/reviews: rating bands, the
 * template chosen for a language, and the placeholders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "feeds/reviews.h"

static void test_bands(void **state)
{
	(void)state;
	assert_string_equal(review_band(0), "low");
	assert_string_equal(review_band(599), "low");
	assert_string_equal(review_band(600), "mid");
	assert_string_equal(review_band(799), "mid");
	assert_string_equal(review_band(800), "high");
	assert_string_equal(review_band(1000), "high");
}

/* The draft for band and language, or NULL; lang names the template's. */
static char *draft(const json_t *t, const char *band, const char *language, const char *guest,
		   char lang[40])
{
	return review_draft(t, band, language, guest, "Hotel Vistula", lang);
}

static void test_language_choice(void **state)
{
	json_t *t = json_pack("{s:s, s:s, s:s}", "high|en", "Thanks {guest_name}!", "high|pl-pl",
			      "Dziękujemy, {guest_name}!", "low|pl", "Przykro nam ({property_name})");
	char lang[40], *s;

	(void)state;
	s = draft(t, "high", "en", "Anna", lang);
	assert_string_equal(s, "Thanks Anna!");
	assert_string_equal(lang, "en");
	free(s);
	/* the primary subtag when the whole tag has none; any case */
	s = draft(t, "high", "EN-gb", "Anna", lang);
	assert_string_equal(s, "Thanks Anna!");
	assert_string_equal(lang, "en");
	free(s);
	/* the whole tag first */
	s = draft(t, "high", "pl-PL", "Jan", lang);
	assert_string_equal(s, "Dziękujemy, Jan!");
	assert_string_equal(lang, "pl-pl");
	free(s);
	s = draft(t, "low", "pl-PL", "Jan", lang);
	assert_string_equal(s, "Przykro nam (Hotel Vistula)");
	assert_string_equal(lang, "pl");
	free(s);
	/* no template for the band or the language */
	assert_null(draft(t, "mid", "en", "Anna", lang));
	assert_null(draft(t, "high", "de", "Anna", lang));
	assert_null(draft(t, "high", "e", "Anna", lang));
	json_decref(t);
}

static void test_placeholders(void **state)
{
	json_t *t = json_pack("{s:s}", "mid|en",
			      "{guest_name}, {guest_name} at {property_name}: {unknown} {guest");
	char lang[40], *s;

	(void)state;
	s = draft(t, "mid", "en", "", lang);
	assert_string_equal(s, "guest, guest at Hotel Vistula: {unknown} {guest");
	free(s);
	/* a name holding a placeholder is not expanded again */
	s = draft(t, "mid", "en", "{property_name}", lang);
	assert_string_equal(s, "{property_name}, {property_name} at Hotel Vistula: {unknown} {guest");
	free(s);
	json_decref(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bands),
		cmocka_unit_test(test_language_choice),
		cmocka_unit_test(test_placeholders),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
