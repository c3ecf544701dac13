/* json_fixture: the identity unit tests' JSON literal loader. Include after
 * <cmocka.h> and <jansson.h>. */
#ifndef REVOPS_TEST_JSON_FIXTURE_H
#define REVOPS_TEST_JSON_FIXTURE_H

/* Parses text (a JSON literal of the test); a typo in it fails the test. */
static inline json_t *load(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	if (!j)
		fail_msg("bad JSON in test: %s: %s", e.text, text);
	return j;
}

#endif
