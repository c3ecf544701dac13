#include "core/form.h"

#include <stdlib.h>
#include <string.h>

#include "core/validate.h"

int form_decode(const char *s, size_t n, char **out)
{
	char *d = malloc(n + 1);
	size_t i, o = 0;
	int hi, lo;

	if (!d)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] == '+') {
			d[o++] = ' ';
		} else if (s[i] == '%') {
			if (i + 2 >= n)
				goto bad;
			hi = hex_value(s[i + 1]);
			lo = hex_value(s[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				goto bad;
			d[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else if (s[i] == '\0') {
			goto bad;
		} else {
			d[o++] = s[i];
		}
	}
	d[o] = '\0';
	if (validate_utf8_len(d, NULL) < 0)
		goto bad; /* the encoding is UTF-8 (RFC 6749 Appendix B) */
	*out = d;
	return 0;
bad:
	free(d);
	return -1;
}

int form_parse(const char *body, size_t len, struct form *f, const char **why)
{
	const char *p = body, *end = body + len, *amp, *eq;
	char *name, *value;
	int i;

	memset(f, 0, sizeof *f);
	while (p < end) {
		amp = memchr(p, '&', (size_t)(end - p));
		if (!amp)
			amp = end;
		if (amp == p) {
			p++;
			continue;
		}
		eq = memchr(p, '=', (size_t)(amp - p));
		if (f->n == FORM_MAX_FIELDS) {
			*why = "too many form parameters";
			goto bad;
		}
		if (form_decode(p, (size_t)((eq ? eq : amp) - p), &name) < 0) {
			*why = "malformed form encoding";
			goto bad;
		}
		if (form_decode(eq ? eq + 1 : amp, eq ? (size_t)(amp - eq - 1) : 0, &value) < 0) {
			free(name);
			*why = "malformed form encoding";
			goto bad;
		}
		for (i = 0; i < f->n; i++)
			if (!strcmp(f->name[i], name)) {
				free(name);
				free(value);
				*why = "a parameter is repeated";
				goto bad;
			}
		f->name[f->n] = name;
		f->value[f->n] = value;
		f->n++;
		p = amp + (amp < end);
	}
	return 0;
bad:
	form_free(f);
	return -1;
}

const char *form_get(const struct form *f, const char *name)
{
	int i;

	for (i = 0; i < f->n; i++)
		if (!strcmp(f->name[i], name))
			return f->value[i];
	return NULL;
}

void form_free(struct form *f)
{
	int i;

	for (i = 0; i < f->n; i++) {
		free(f->name[i]);
		free(f->value[i]);
	}
	f->n = 0;
}
