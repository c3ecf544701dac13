#include "http/router.h"

#include <string.h>
#include <strings.h>

/* Matches one pattern against path, segment by segment. A {name} segment
 * takes any non-empty segment up to ROUTER_PARAM_MAX-1 bytes. */
static int match_pattern(const char *pat, const char *path, size_t path_len, int ci,
			 struct route_match *m)
{
	size_t pl, sl;
	const char *pe, *se, *end = path + path_len;

	m->nparams = 0;
	while (*pat && path < end) {
		if (*pat != '/' || *path != '/')
			return 0;
		pat++;
		path++;
		pe = strchr(pat, '/');
		se = memchr(path, '/', (size_t)(end - path));
		pl = pe ? (size_t)(pe - pat) : strlen(pat);
		sl = se ? (size_t)(se - path) : (size_t)(end - path);
		if (pl && pat[0] == '{') {
			if (!sl || sl >= ROUTER_PARAM_MAX || m->nparams == ROUTER_MAX_PARAMS)
				return 0;
			memcpy(m->params[m->nparams], path, sl);
			m->params[m->nparams][sl] = '\0';
			m->nparams++;
		} else if (pl != sl ||
			   (ci ? strncasecmp(pat, path, pl) : memcmp(pat, path, pl)) != 0) {
			return 0;
		}
		pat += pl;
		path += sl;
	}
	return !*pat && path == end;
}

/* Adds method (and HEAD after GET) to the comma-separated allow list
 * unless listed. Returns 0 or -1 when the buffer is full. */
static int allow_add(struct buf *allow, const char *method)
{
	if (allow->len && strstr(allow->data, method))
		return 0;
	if ((allow->len && buf_puts(allow, ", ") < 0) || buf_puts(allow, method) < 0)
		return -1;
	return strcmp(method, "GET") ? 0 : allow_add(allow, "HEAD");
}

int router_match(const struct route *table, size_t n, const char *method, const char *path,
		 struct route_match *m, struct buf *allow)
{
	struct route_match tmp;
	size_t i, len = strlen(path);
	int path_found = 0;

	if (len > 1 && path[len - 1] == '/')
		len--;
	for (i = 0; i < n; i++) {
		if (!match_pattern(table[i].pattern, path, len, table[i].ci, &tmp))
			continue;
		if (!strcmp(table[i].method, method) ||
		    (!strcmp(method, "HEAD") && !strcmp(table[i].method, "GET"))) {
			*m = tmp;
			m->route = &table[i];
			return 200;
		}
		if (allow && allow_add(allow, table[i].method) < 0)
			return 405;
		path_found = 1;
	}
	return path_found ? 405 : 404;
}
