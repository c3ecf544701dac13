/* keywords: the words that escalate a guest's message at once (issue 16;
 * docs/guest-messaging.md, "Escalation"), the one owner of the
 * guest_keywords table. A portfolio keeps a list per language (a BCP 47
 * primary tag such as "pl", or "*"); since a message does not say its
 * language, a message is checked against every list of its portfolio.
 * Matching is case- and accent-insensitive (keyword_fold) and on whole
 * words: "policja" matches "Wezwę POLICJĘ!" but not "policjant". */
#ifndef REVOPS_KEYWORDS_H
#define REVOPS_KEYWORDS_H
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "core/common.h"

struct store_tx;

#define KEYWORD_MAX 64   /* bytes of one keyword, folded */
#define KEYWORDS_MAX 200 /* keywords of one list */

/* Folds s into out (cap bytes, NUL-terminated, truncated at a character):
 * lower case, and the Latin letters with diacritics (U+00C0..U+017F) as
 * their base letters ("Łódź" -> "lodz", "ß" -> "ss"); other characters
 * are kept. Returns the length written. */
size_t keyword_fold(const char *s, char *out, size_t cap);

/* Sets the portfolio's list for language from words (comma-separated;
 * blanks trimmed, empty ones dropped, each folded, at most KEYWORDS_MAX
 * of at most KEYWORD_MAX bytes: the caller checked). An empty list
 * removes it. Returns how many words were kept, or < 0. */
int keywords_set(struct store_tx *tx, const char *portfolio_id, const char *language,
		 const char *words, int64_t now) WUR;
/* Every keyword of the portfolio's lists (folded), as one JSON array of
 * strings into *lists (owned; empty when none). Returns 0 or < 0. */
int keywords_load(struct store_tx *tx, const char *portfolio_id, json_t **lists) WUR;
/* 1 with the first of lists's keywords found in text (folded, KEYWORD_MAX
 * bytes) in keyword, 0 when none is, -1 when out of memory. */
int keywords_find(const json_t *lists, const char *text, char keyword[KEYWORD_MAX]) WUR;

#endif
