#include "core/trace.h"

#include <string.h>

#include "core/crypto.h"

static _Thread_local struct trace_ctx current;
static _Thread_local int current_set;

/* 1 when p[0..n) is lowercase hex and, if nonzero, not all '0'. */
static int lower_hex(const char *p, size_t n, int nonzero)
{
	size_t i;
	int any = 0;

	for (i = 0; i < n; i++) {
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return 0;
		any |= p[i] != '0';
	}
	return !nonzero || any;
}

int trace_parse(const char *v, struct trace_ctx *out)
{
	size_t len;

	memset(out, 0, sizeof *out);
	if (!v)
		return -1;
	len = strnlen(v, TRACE_PARENT_MAX + 1);
	if (len < TRACE_PARENT_LEN - 1 || len > TRACE_PARENT_MAX)
		return -1;
	/* version "-" trace-id "-" parent-id "-" flags */
	if (!lower_hex(v, 2, 0) || !strncmp(v, "ff", 2) || v[2] != '-' || !lower_hex(v + 3, 32, 1) ||
	    v[35] != '-' || !lower_hex(v + 36, 16, 1) || v[52] != '-' || !lower_hex(v + 53, 2, 0))
		return -1;
	if (!strncmp(v, "00", 2) ? len != TRACE_PARENT_LEN - 1 : (len > 55 && v[55] != '-'))
		return -1;
	memcpy(out->trace_id, v + 3, 32);
	memcpy(out->parent_id, v + 36, 16);
	memcpy(out->flags, v + 53, 2);
	return 0;
}

int trace_new_span(char span[17])
{
	unsigned char b[8];

	do {
		if (crypto_random(b, sizeof b) < 0)
			return -1;
	} while (!memcmp(b, "\0\0\0\0\0\0\0\0", 8));
	crypto_hex(b, sizeof b, span);
	return 0;
}

void trace_format(const struct trace_ctx *t, const char *span, char out[TRACE_PARENT_LEN])
{
	memcpy(out, "00-", 3);
	memcpy(out + 3, t->trace_id, 32);
	out[35] = '-';
	memcpy(out + 36, span, 16);
	out[52] = '-';
	memcpy(out + 53, t->flags, 2);
	out[55] = '\0';
}

void trace_set(const struct trace_ctx *t)
{
	current_set = t != NULL;
	if (t)
		current = *t;
}

const struct trace_ctx *trace_current(void)
{
	return current_set ? &current : NULL;
}
