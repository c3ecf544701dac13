/* revopsctl: operator CLI on the same database as revopsd. Prints one JSON
 * document on stdout; errors as {"error": "..."} on stderr with exit 2. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/log.h"
#include "ops/operator.h"
#include "store/store.h"
#include "webhooks/signing.h"

struct args {
	int n;
	const char *name[32];
	const char *value[32];
};

static const char *arg(const struct args *a, const char *name)
{
	int i;

	for (i = 0; i < a->n; i++)
		if (!strcmp(a->name[i], name))
			return a->value[i];
	return NULL;
}

static int64_t arg_int(const struct args *a, const char *name, int64_t dflt, int *bad)
{
	const char *v = arg(a, name);
	char *end;
	long long n;

	if (!v)
		return dflt;
	n = strtoll(v, &end, 10);
	if (end == v || *end)
		*bad = 1;
	return n;
}

/* Reads a whole (small) file; NULL when missing, unreadable or over max. */
static char *read_file(const char *path, size_t max)
{
	FILE *f = path ? fopen(path, "rb") : NULL;
	char *data;
	size_t n;

	if (!f)
		return NULL;
	data = malloc(max + 1);
	n = data ? fread(data, 1, max + 1, f) : 0;
	fclose(f);
	if (!data || n > max) {
		free(data);
		return NULL;
	}
	data[n] = '\0';
	return data;
}

static void usage(void)
{
	fputs("usage: revopsctl [--data-dir DIR | --database URL] NOUN VERB [--option value]...\n"
	      "  portfolio create --name N --plan chain_starter|group|enterprise\n"
	      "  portfolio show --portfolio ID\n"
	      "  portfolio set-rate-limit --portfolio ID --per-minute N   (0 = plan figure)\n"
	      "  property add --portfolio ID --name N --brand B --code C --billing-id X\n"
	      "               --timezone TZ --currency CUR [--nip NNNNNNNNNN]\n"
	      "  ceiling add --portfolio ID --brand B --currency CUR --max MINOR_UNITS\n"
	      "              --valid-from YYYY-MM-DD [--valid-to YYYY-MM-DD] [--room-types A,B]\n"
	      "  client create --portfolio ID [--name N] [--scopes \"s1 s2\"] [--properties C1,C2]\n"
	      "  scim-token create --portfolio ID\n"
	      "  user create --portfolio ID --user-name U [--display-name D] [--roles r1,r2]\n"
	      "  user list --portfolio ID\n"
	      "  verify signature --secret S --body-file F --signature HEX   (exit 4 when invalid)\n"
	      "  verify signature --secret S --body-file F --webhook-id ID --webhook-timestamp T\n"
	      "                   --webhook-signature 'v1,…'   (Standard Webhooks, 300 s tolerance)\n"
	      "  audit verify DECISION_ID   (recomputes the hash chain; exit 3 when broken)\n"
	      "  event list --portfolio ID [--after SEQ] [--limit N]   (the transactional outbox)\n"
	      "  event emit --portfolio ID --type T [--surface v1|v2] [--count N] [--property ID]\n"
	      "             (synthetic events, for testing receivers and benchmarks; --count -\n"
	      "             reads one count per line of standard input and answers each)\n"
	      "  idp set --portfolio ID --entity-id ENTITY --cert PEMFILE [--roles-attribute roles]\n"
	      "  deprecation add --method M --route /v2/... --announced 2026-06-01T00:00:00Z [--note T]\n",
	      stderr);
}

/* Checks a delivery's signature the way a receiver would: the body file's
 * raw bytes, the signing secret, and X-Service-Signature (--signature) or
 * the Standard Webhooks headers (--webhook-id, --webhook-timestamp,
 * --webhook-signature; tolerance 300 s). */
static int verify_signature(const struct args *a, json_t **out, struct buf *err)
{
	const char *secret = arg(a, "secret"), *sig = arg(a, "signature");
	const char *wid = arg(a, "webhook-id"), *wts = arg(a, "webhook-timestamp");
	const char *wsig = arg(a, "webhook-signature");
	char *body = NULL;
	size_t len = 0;
	FILE *f;
	int ok;

	if (!secret || !arg(a, "body-file") || (!sig && !(wid && wts && wsig))) {
		if (buf_puts(err, "usage: verify signature --secret S --body-file F (--signature HEX |"
				  " --webhook-id ID --webhook-timestamp T --webhook-signature V))"))
			return -1;
		return -1;
	}
	f = fopen(arg(a, "body-file"), "rb");
	body = f ? malloc(1024 * 1024 + 1) : NULL;
	if (body)
		len = fread(body, 1, 1024 * 1024 + 1, f);
	if (f)
		fclose(f);
	if (!body || len > 1024 * 1024) {
		free(body);
		if (buf_puts(err, "cannot read --body-file (at most 1 MiB)"))
			return -1;
		return -1;
	}
	if (sig)
		ok = signing_verify_service(secret, body, len, sig);
	else
		ok = signing_verify_standard(secret, wid, wts, body, len, wsig, time(NULL), 300);
	free(body);
	*out = json_pack("{s:s, s:b}", "scheme", sig ? "X-Service-Signature" : "Standard Webhooks",
			 "valid", ok);
	return 0;
}

/* event emit --count -: emits one batch per line of standard input (a
 * count), printing {"emitted": n} for each as a line, flushed, so a load
 * generator can keep one process and top a backlog up often. At the end
 * of input *out is the total. */
static int emit_stream(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	char line[64], *end;
	int64_t total = 0, batches = 0;
	long long n;
	json_t *one;

	while (fgets(line, sizeof line, stdin)) {
		batches++;
		n = strtoll(line, &end, 10);
		if (end == line || (*end && *end != '\n')) {
			if (buf_printf(err, "line %" PRId64 " of standard input is not a count",
				       batches) < 0)
				return -1;
			return -1;
		}
		one = NULL;
		if (operator_event_emit(st, arg(a, "portfolio"), arg(a, "surface"), arg(a, "type"),
					n, arg(a, "property"), &one, err) < 0)
			return -1;
		json_dumpf(one, stdout, JSON_COMPACT);
		fputc('\n', stdout);
		fflush(stdout);
		json_decref(one);
		total += n;
	}
	*out = json_pack("{s:I, s:I}", "emitted", (json_int_t)total, "batches", (json_int_t)batches);
	return 0;
}

static int run(struct store *st, const char *noun, const char *verb, const struct args *a,
	       json_t **out, struct buf *err)
{
	int bad = 0;
	int64_t n;

#define IS(x, y) (!strcmp(noun, x) && !strcmp(verb, y))
	if (IS("portfolio", "create"))
		return operator_portfolio_create(st, arg(a, "name"), arg(a, "plan"), out, err);
	if (IS("portfolio", "show"))
		return operator_portfolio_show(st, arg(a, "portfolio"), out, err);
	if (IS("portfolio", "set-rate-limit")) {
		n = arg_int(a, "per-minute", -1, &bad);
		if (bad || n < 0) {
			if (buf_puts(err, "--per-minute must be a whole number (0 = plan figure)"))
				return -1;
			return -1;
		}
		return operator_set_rate_limit(st, arg(a, "portfolio"), n, out, err);
	}
	if (IS("property", "add")) {
		struct operator_property p = {arg(a, "portfolio"),  arg(a, "name"),
					      arg(a, "brand"),      arg(a, "code"),
					      arg(a, "billing-id"), arg(a, "timezone"),
					      arg(a, "currency"),   arg(a, "nip")};
		return operator_property_add(st, &p, out, err);
	}
	if (IS("ceiling", "add")) {
		struct operator_ceiling c = {arg(a, "portfolio"), arg(a, "brand"),
					     arg(a, "currency"),  arg(a, "valid-from"),
					     arg(a, "valid-to"),  arg_int(a, "max", 0, &bad),
					     arg(a, "room-types")};
		if (bad)
			c.max_minor_units = 0;
		return operator_ceiling_add(st, &c, out, err);
	}
	if (IS("client", "create"))
		return operator_client_create(st, arg(a, "portfolio"), arg(a, "name"),
					      arg(a, "scopes"), arg(a, "properties"), out, err);
	if (IS("scim-token", "create"))
		return operator_scim_token_create(st, arg(a, "portfolio"), out, err);
	if (IS("user", "create"))
		return operator_user_create(st, arg(a, "portfolio"), arg(a, "user-name"),
					    arg(a, "display-name"), arg(a, "roles"), out, err);
	if (IS("user", "list"))
		return operator_user_list(st, arg(a, "portfolio"), out, err);
	if (IS("verify", "signature"))
		return verify_signature(a, out, err);
	if (IS("audit", "verify"))
		return operator_audit_verify(st, arg(a, "object"), out, err);
	if (IS("event", "list")) {
		int64_t after = arg_int(a, "after", 0, &bad), limit = arg_int(a, "limit", 1000, &bad);

		if (bad) {
			if (buf_puts(err, "--after and --limit must be whole numbers"))
				return -1;
			return -1;
		}
		return operator_event_list(st, arg(a, "portfolio"), after, limit, out, err);
	}
	if (IS("event", "emit")) {
		int64_t count;

		if (arg(a, "count") && !strcmp(arg(a, "count"), "-"))
			return emit_stream(st, a, out, err);
		count = arg_int(a, "count", 1, &bad);

		if (bad) {
			if (buf_puts(err, "--count must be a whole number"))
				return -1;
			return -1;
		}
		return operator_event_emit(st, arg(a, "portfolio"), arg(a, "surface"),
					   arg(a, "type"), count, arg(a, "property"), out, err);
	}
	if (IS("idp", "set")) {
		char *pem = read_file(arg(a, "cert"), 64 * 1024);
		int rc;

		rc = operator_idp_set(st, arg(a, "portfolio"), arg(a, "entity-id"), pem,
				      arg(a, "roles-attribute"), out, err);
		free(pem);
		return rc;
	}
	if (IS("deprecation", "add"))
		return operator_deprecation_add(st, arg(a, "method"), arg(a, "route"),
						arg(a, "announced"), arg(a, "note"), out, err);
#undef IS
	if (buf_printf(err, "unknown command: %s %s", noun, verb))
		return -1;
	return -1;
}

static int die(const char *msg)
{
	json_t *e = json_pack("{s:s}", "error", msg);

	json_dumpf(e, stderr, JSON_COMPACT);
	fputc('\n', stderr);
	json_decref(e);
	return 2;
}

int main(int argc, char **argv)
{
	char data_dir[1024] = "./var", database[1100] = "";
	const char *noun = NULL, *verb = NULL, *object = NULL;
	struct args a = {0};
	struct store *st = NULL;
	struct buf err;
	json_t *out = NULL;
	int i, rc;

	log_init(1);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage();
			return 0;
		}
		if (!strncmp(argv[i], "--", 2)) {
			if (i + 1 >= argc)
				return die("an option is missing its value");
			if (!strcmp(argv[i], "--data-dir"))
				snprintf(data_dir, sizeof data_dir, "%s", argv[i + 1]);
			else if (!strcmp(argv[i], "--database"))
				snprintf(database, sizeof database, "%s", argv[i + 1]);
			else if (a.n < 32) {
				a.name[a.n] = argv[i] + 2;
				a.value[a.n++] = argv[i + 1];
			}
			i++;
		} else if (!noun) {
			noun = argv[i];
		} else if (!verb) {
			verb = argv[i];
		} else if (!object) {
			object = argv[i];
		} else {
			return die("unexpected argument (see --help)");
		}
	}
	if (!noun || !verb) {
		usage();
		return 2;
	}
	if (!database[0])
		snprintf(database, sizeof database, "sqlite:%s/revops.db", data_dir);
	if (strcmp(noun, "verify") && store_open(database, 1, &st) < 0)
		return die("cannot open the database");
	buf_init(&err, 1024);
	if (object && a.n < 32) {
		a.name[a.n] = "object";
		a.value[a.n++] = object;
	}
	rc = run(st, noun, verb, &a, &out, &err);
	store_close(st);
	if (rc < 0) {
		rc = die(err.data ? err.data : "failed");
		buf_free(&err);
		return rc;
	}
	buf_free(&err);
	json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
	rc = json_is_false(json_object_get(out, "chain_valid")) ? 3
	     : json_is_false(json_object_get(out, "valid"))     ? 4
								: 0;
	json_decref(out);
	return rc;
}
