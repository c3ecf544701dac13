/* libFuzzer driver: form_parse must never crash, leak or accept a repeated
 * name, and every field it returns must be NUL-free. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/form.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct form f;
	const char *why = NULL;
	int i, j;

	if (form_parse((const char *)data, size, &f, &why) < 0) {
		if (!why || !*why)
			abort();
		return 0;
	}
	for (i = 0; i < f.n; i++)
		for (j = i + 1; j < f.n; j++)
			if (!strcmp(f.name[i], f.name[j]))
				abort();
	form_free(&f);
	return 0;
}
