#include "guests/keywords.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store/store.h"

/* The base letters of U+00C0..U+017F, lower case ("" keeps the
 * character: ×, ÷). Index: code point - 0xC0. */
static const char *const latin[] = {
	/* C0 */ "a",  "a", "a",  "a",  "a", "a", "ae", "c",
	"e",           "e", "e",  "e",  "i", "i", "i",  "i",
	/* D0 */ "d",  "n", "o",  "o",  "o", "o", "o",  "",
	"o",           "u", "u",  "u",  "u", "y", "th", "ss",
	/* E0 */ "a",  "a", "a",  "a",  "a", "a", "ae", "c",
	"e",           "e", "e",  "e",  "i", "i", "i",  "i",
	/* F0 */ "d",  "n", "o",  "o",  "o", "o", "o",  "",
	"o",           "u", "u",  "u",  "u", "y", "th", "y",
	/* 100 */ "a", "a", "a",  "a",  "a", "a", "c",  "c",
	"c",           "c", "c",  "c",  "c", "c", "d",  "d",
	/* 110 */ "d", "d", "e",  "e",  "e", "e", "e",  "e",
	"e",           "e", "e",  "e",  "g", "g", "g",  "g",
	/* 120 */ "g", "g", "g",  "g",  "h", "h", "h",  "h",
	"i",           "i", "i",  "i",  "i", "i", "i",  "i",
	/* 130 */ "i", "i", "ij", "ij", "j", "j", "k",  "k",
	"k",           "l", "l",  "l",  "l", "l", "l",  "l",
	/* 140 */ "l", "l", "l",  "n",  "n", "n", "n",  "n",
	"n",           "n", "n",  "n",  "o", "o", "o",  "o",
	/* 150 */ "o", "o", "oe", "oe", "r", "r", "r",  "r",
	"r",           "r", "s",  "s",  "s", "s", "s",  "s",
	/* 160 */ "s", "s", "t",  "t",  "t", "t", "t",  "t",
	"u",           "u", "u",  "u",  "u", "u", "u",  "u",
	/* 170 */ "u", "u", "u",  "u",  "w", "w", "y",  "y",
	"y",           "z", "z",  "z",  "z", "z", "z",  "s",
};

/* The code point of the UTF-8 sequence at s (*len bytes), or -1 (*len 1)
 * for a malformed one. */
static long decode(const unsigned char *s, size_t *len)
{
	long c;
	size_t n, i;

	if (s[0] < 0x80) {
		*len = 1;
		return s[0];
	}
	n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
	c = n == 4 ? s[0] & 0x07 : n == 3 ? s[0] & 0x0F : s[0] & 0x1F;
	for (i = 1; n && i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			break;
		c = (c << 6) | (s[i] & 0x3F);
	}
	if (!n || i < n) {
		*len = 1;
		return -1;
	}
	*len = n;
	return c;
}

size_t keyword_fold(const char *s, char *out, size_t cap)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0, len, add;
	const char *rep;
	char one[2] = {0, 0};
	long c;

	while (*p && cap) {
		c = decode(p, &len);
		if (c >= 0 && c < 0x80) {
			one[0] = (char)tolower((int)c);
			rep = one;
		} else if (c >= 0xC0 && c <= 0x17F && latin[c - 0xC0][0]) {
			rep = latin[c - 0xC0];
		} else {
			rep = NULL;
		}
		add = rep ? strlen(rep) : len;
		if (o + add + 1 > cap)
			break;
		memcpy(out + o, rep ? rep : (const char *)p, add);
		o += add;
		p += len;
	}
	if (cap)
		out[o] = '\0';
	return o;
}

int keywords_set(struct store_tx *tx, const char *pf, const char *language, const char *words,
		 int64_t now)
{
	char *copy = strdup(words ? words : ""), *w, *save = NULL, folded[KEYWORD_MAX];
	json_t *list = json_array();
	char *text = NULL;
	int rc = copy && list ? 0 : STORE_ERR, n = 0;

	for (w = copy ? strtok_r(copy, ",", &save) : NULL; rc == 0 && w;
	     w = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*w))
			w++;
		for (size_t e = strlen(w); e && isspace((unsigned char)w[e - 1]); e--)
			w[e - 1] = '\0';
		if (*w && keyword_fold(w, folded, sizeof folded) && n < KEYWORDS_MAX) {
			json_array_append_new(list, json_string(folded));
			n++;
		}
	}
	if (rc == 0 && !n)
		rc = store_exec(tx,
				"DELETE FROM guest_keywords WHERE portfolio_id = $1 AND language = $2",
				(struct store_val[]){sv_text(pf), sv_text(language)}, 2);
	else if (rc == 0)
		rc = (text = json_dumps(list, JSON_COMPACT))
			     ? store_exec(tx,
					  "INSERT INTO guest_keywords (portfolio_id, language, words,"
					  " updated_at) VALUES ($1, $2, $3, $4) ON CONFLICT (portfolio_id,"
					  " language) DO UPDATE SET words = excluded.words, updated_at ="
					  " excluded.updated_at",
					  (struct store_val[]){sv_text(pf), sv_text(language),
							       sv_text(text), sv_int(now)},
					  4)
			     : STORE_ERR;
	if (rc >= 0) /* announced: the nodes' caches of a portfolio's settings reload */
		rc = store_notify(tx, STORE_CH_PROPERTIES);
	free(copy);
	free(text);
	json_decref(list);
	return rc < 0 ? rc : n;
}

/* 1 when word occurs in text as a whole word (both folded). */
static int has_word(const char *text, const char *word)
{
	size_t n = strlen(word);
	const char *p = text;

	while (n && (p = strstr(p, word)) != NULL) {
		int before = p == text || !isalnum((unsigned char)p[-1]);
		int after = !isalnum((unsigned char)p[n]);

		if (before && after)
			return 1;
		p++;
	}
	return 0;
}

int keywords_load(struct store_tx *tx, const char *pf, json_t **lists)
{
	struct store_rows *r;
	json_t *list;
	int rc;

	if (!(*lists = json_array()))
		return STORE_ERR;
	rc = store_query(tx, "SELECT words FROM guest_keywords WHERE portfolio_id = $1",
			 (struct store_val[]){sv_text(pf)}, 1, &r);
	if (rc != STORE_OK)
		goto out;
	while ((rc = store_next(r)) == 1) {
		if ((list = json_loads(store_text(r, 0), 0, NULL)) != NULL)
			json_array_extend(*lists, list);
		json_decref(list);
	}
	store_rows_close(r);
out:
	if (rc < 0) {
		json_decref(*lists);
		*lists = NULL;
	}
	return rc < 0 ? rc : 0;
}

int keywords_find(const json_t *lists, const char *text, char keyword[KEYWORD_MAX])
{
	size_t cap = text ? strlen(text) * 2 + 1 : 1, i;
	char *folded;
	const json_t *w;
	int found = 0;

	if (!json_array_size(lists))
		return 0;
	if (!(folded = malloc(cap)))
		return -1;
	keyword_fold(text ? text : "", folded, cap);
	json_array_foreach(lists, i, w) {
		if (has_word(folded, json_string_value(w))) {
			snprintf(keyword, KEYWORD_MAX, "%s", json_string_value(w));
			found = 1;
			break;
		}
	}
	free(folded);
	return found;
}
