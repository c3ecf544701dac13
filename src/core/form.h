/* form: application/x-www-form-urlencoded bodies (OAuth token requests). */
#ifndef REVOPS_FORM_H
#define REVOPS_FORM_H
#include <stddef.h>
#include "core/common.h"

#define FORM_MAX_FIELDS 16

struct form {
	int n;
	char *name[FORM_MAX_FIELDS];
	char *value[FORM_MAX_FIELDS];
};

/* Decodes body ('+' is a space, %XX escapes). Returns 0, or -1 with a reason
 * in *why: a malformed escape, a NUL byte, text that is not UTF-8, too many
 * fields, or a name given twice (RFC 6749 §3.2 forbids repeated parameters). */
int form_parse(const char *body, size_t len, struct form *f, const char **why) WUR;
/* The value of name or NULL. */
const char *form_get(const struct form *f, const char *name);
void form_free(struct form *f);
/* Decodes one urlencoded component into out (same rules). Returns 0 or -1. */
int form_decode(const char *s, size_t n, char **out) WUR;

#endif
