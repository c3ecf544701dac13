/* revopsctl: operator CLI on the same database as revopsd. Prints one JSON
 * document on stdout; errors as {"error": "..."} on stderr with exit 2. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/crypto.h"
#include "cluster/sealkey.h"
#include "core/log.h"
#include "operations/oncall.h"
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
	      "  deprecation add --method M --route /v2/... --announced 2026-06-01T00:00:00Z [--note T]\n"
	      "  review-template set --portfolio ID --band low|mid|high --language L\n"
	      "                      (--text T | --file F)   ({guest_name}, {property_name})\n"
	      "  reputation-ceiling set --portfolio ID --brand B --min-score 0-10\n"
	      "  sla-tier set --portfolio ID --tier standard|gold|platinum [--task-ack-minutes N]\n"
	      "               [--task-escalate-minutes N] [--guest-reply-minutes N]\n"
	      "  oncall set --portfolio ID --file rota.json   (docs/operations-tasks.md)\n"
	      "  whatsapp set --portfolio ID --property ID --phone-number-id N --access-token T\n"
	      "               --app-secret S --verify-token V   (docs/guest-messaging.md)\n"
	      "  guest-keywords set --portfolio ID --language pl|* --words \"a,b,c\"\n"
	      "--data-dir and --database default to REVOPS_DATA_DIR and REVOPS_DATABASE, as for\n"
	      "revopsd (--database sqlite:PATH or postgres://...).\n",
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

/* Puts msg in err and returns -1: a command's refusal. */
static int usage_error(struct buf *err, const char *msg)
{
	if (buf_puts(err, msg))
		return -1;
	return -1;
}

/* One command: reads its options from a, prints nothing itself; returns 0
 * with the JSON answer in *out, or -1 with a message in err. */
typedef int (*command_fn)(struct store *st, const struct args *a, json_t **out, struct buf *err);

static int cmd_portfolio_create(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	return operator_portfolio_create(st, arg(a, "name"), arg(a, "plan"), out, err);
}

static int cmd_portfolio_show(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	return operator_portfolio_show(st, arg(a, "portfolio"), out, err);
}

/* portfolio set-rate-limit: --per-minute must be a whole number >= 0. */
static int cmd_portfolio_set_rate_limit(struct store *st, const struct args *a, json_t **out,
					struct buf *err)
{
	int bad = 0;
	int64_t n = arg_int(a, "per-minute", -1, &bad);

	if (bad || n < 0)
		return usage_error(err, "--per-minute must be a whole number (0 = plan figure)");
	return operator_set_rate_limit(st, arg(a, "portfolio"), n, out, err);
}

static int cmd_property_add(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	struct operator_property p = {arg(a, "portfolio"), arg(a, "name"),       arg(a, "brand"),
				      arg(a, "code"),      arg(a, "billing-id"), arg(a, "timezone"),
				      arg(a, "currency"),  arg(a, "nip")};

	return operator_property_add(st, &p, out, err);
}

/* ceiling add: a --max that is not a whole number counts as 0, which the
 * operator refuses as not positive. */
static int cmd_ceiling_add(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	int bad = 0;
	struct operator_ceiling c = {arg(a, "portfolio"), arg(a, "brand"),
				     arg(a, "currency"),  arg(a, "valid-from"),
				     arg(a, "valid-to"),  arg_int(a, "max", 0, &bad),
				     arg(a, "room-types")};

	if (bad)
		c.max_minor_units = 0;
	return operator_ceiling_add(st, &c, out, err);
}

static int cmd_client_create(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	return operator_client_create(st, arg(a, "portfolio"), arg(a, "name"), arg(a, "scopes"),
				      arg(a, "properties"), out, err);
}

static int cmd_scim_token_create(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	return operator_scim_token_create(st, arg(a, "portfolio"), out, err);
}

static int cmd_user_create(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	return operator_user_create(st, arg(a, "portfolio"), arg(a, "user-name"),
				    arg(a, "display-name"), arg(a, "roles"), out, err);
}

static int cmd_user_list(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	return operator_user_list(st, arg(a, "portfolio"), out, err);
}

/* verify signature runs without a database (st is NULL). */
static int cmd_verify_signature(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	(void)st;
	return verify_signature(a, out, err);
}

/* audit verify DECISION_ID: the id is the positional "object". */
static int cmd_audit_verify(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	return operator_audit_verify(st, arg(a, "object"), out, err);
}

/* event list: --after (default 0) and --limit (default 1000) must be whole
 * numbers. */
static int cmd_event_list(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	int bad = 0;
	int64_t after = arg_int(a, "after", 0, &bad), limit = arg_int(a, "limit", 1000, &bad);

	if (bad)
		return usage_error(err, "--after and --limit must be whole numbers");
	return operator_event_list(st, arg(a, "portfolio"), after, limit, out, err);
}

/* event emit: --count N (default 1) emits one batch; --count - reads
 * counts from standard input (emit_stream). */
static int cmd_event_emit(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	int bad = 0;
	int64_t count;

	if (arg(a, "count") && !strcmp(arg(a, "count"), "-"))
		return emit_stream(st, a, out, err);
	count = arg_int(a, "count", 1, &bad);
	if (bad)
		return usage_error(err, "--count must be a whole number");
	return operator_event_emit(st, arg(a, "portfolio"), arg(a, "surface"), arg(a, "type"),
				   count, arg(a, "property"), out, err);
}

/* idp set: reads --cert (at most 64 KiB; a missing file passes NULL, which
 * the operator refuses). */
static int cmd_idp_set(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	char *pem = read_file(arg(a, "cert"), 64 * 1024);
	int rc;

	rc = operator_idp_set(st, arg(a, "portfolio"), arg(a, "entity-id"), pem,
			      arg(a, "roles-attribute"), out, err);
	free(pem);
	return rc;
}

/* review-template set: the text from --text, or from the file --file. */
static int cmd_review_template_set(struct store *st, const struct args *a, json_t **out,
				   struct buf *err)
{
	char *file = arg(a, "file") ? read_file(arg(a, "file"), 8192) : NULL;
	int rc;

	if (arg(a, "file") && arg(a, "text"))
		return usage_error(err, "give --text or --file, not both");
	if (arg(a, "file") && !file)
		return usage_error(err, "--file must name a readable file of at most 8192 bytes");
	rc = operator_review_template_set(st, arg(a, "portfolio"), arg(a, "band"),
					  arg(a, "language"), file ? file : arg(a, "text"), out, err);
	free(file);
	return rc;
}

static int cmd_reputation_ceiling_set(struct store *st, const struct args *a, json_t **out,
				      struct buf *err)
{
	return operator_reputation_floor_set(st, arg(a, "portfolio"), arg(a, "brand"),
					     arg(a, "min-score"), out, err);
}

static int cmd_sla_tier_set(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	return operator_sla_tier_set(st, arg(a, "portfolio"), arg(a, "tier"),
				     arg(a, "task-ack-minutes"), arg(a, "task-escalate-minutes"),
				     arg(a, "guest-reply-minutes"), out, err);
}

static int cmd_oncall_set(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	char *file = arg(a, "file") ? read_file(arg(a, "file"), ONCALL_MAX_BYTES) : NULL;
	int rc;

	if (arg(a, "file") && !file)
		return usage_error(err, "--file must name a readable file of at most 256 KiB");
	rc = operator_oncall_set(st, arg(a, "portfolio"), file, out, err);
	free(file);
	return rc;
}

/* The data directory of the command line, for the sealing key. */
static const char *data_dir = "./var";

static int cmd_whatsapp_set(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	unsigned char key[32];
	int rc;

	if (sealkey_load(st, data_dir, key) < 0)
		return usage_error(err, "the sealing key <data-dir>/revops.key is missing or not "
					"this database's (see the log above)");
	rc = operator_whatsapp_set(st, key, arg(a, "portfolio"), arg(a, "property"),
				   arg(a, "phone-number-id"), arg(a, "access-token"),
				   arg(a, "app-secret"), arg(a, "verify-token"), out, err);
	crypto_wipe(key, sizeof key);
	return rc;
}

static int cmd_guest_keywords_set(struct store *st, const struct args *a, json_t **out,
				  struct buf *err)
{
	return operator_guest_keywords_set(st, arg(a, "portfolio"), arg(a, "language"),
					   arg(a, "words"), out, err);
}

static int cmd_deprecation_add(struct store *st, const struct args *a, json_t **out, struct buf *err)
{
	return operator_deprecation_add(st, arg(a, "method"), arg(a, "route"), arg(a, "announced"),
					arg(a, "note"), out, err);
}

/* The commands, as usage() lists them. */
static const struct command {
	const char *noun, *verb;
	command_fn fn;
} commands[] = {
	{"portfolio", "create", cmd_portfolio_create},
	{"portfolio", "show", cmd_portfolio_show},
	{"portfolio", "set-rate-limit", cmd_portfolio_set_rate_limit},
	{"property", "add", cmd_property_add},
	{"ceiling", "add", cmd_ceiling_add},
	{"client", "create", cmd_client_create},
	{"scim-token", "create", cmd_scim_token_create},
	{"user", "create", cmd_user_create},
	{"user", "list", cmd_user_list},
	{"verify", "signature", cmd_verify_signature},
	{"audit", "verify", cmd_audit_verify},
	{"event", "list", cmd_event_list},
	{"event", "emit", cmd_event_emit},
	{"idp", "set", cmd_idp_set},
	{"deprecation", "add", cmd_deprecation_add},
	{"review-template", "set", cmd_review_template_set},
	{"reputation-ceiling", "set", cmd_reputation_ceiling_set},
	{"sla-tier", "set", cmd_sla_tier_set},
	{"oncall", "set", cmd_oncall_set},
	{"whatsapp", "set", cmd_whatsapp_set},
	{"guest-keywords", "set", cmd_guest_keywords_set},
};

/* Runs the command named by noun and verb. Returns 0 with the answer in
 * *out, or -1 with a message in err (also for an unknown command). */
static int run(struct store *st, const char *noun, const char *verb, const struct args *a,
	       json_t **out, struct buf *err)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(commands); i++)
		if (!strcmp(noun, commands[i].noun) && !strcmp(verb, commands[i].verb))
			return commands[i].fn(st, a, out, err);
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

/* The command line: where the database is, the command and its options. */
struct cli {
	char data_dir[1024], database[1100];
	const char *noun, *verb, *object;
	struct args a;
};

/* Reads argv into *c: --data-dir and --database (defaults from
 * REVOPS_DATA_DIR and REVOPS_DATABASE), then NOUN VERB [OBJECT]
 * and the other --name value pairs (at most 32 kept); the OBJECT becomes
 * the option "object". Returns 0 to go on, or 1 when the process is done
 * with *status as its exit status (0 after --help, 2 after a usage error,
 * already reported). */
static int parse_argv(int argc, char **argv, struct cli *c, int *status)
{
	const char *env;
	int i;

	/* The same environment as revopsd's, so one setting serves both. */
	if ((env = getenv("REVOPS_DATA_DIR")) && *env)
		snprintf(c->data_dir, sizeof c->data_dir, "%s", env);
	if ((env = getenv("REVOPS_DATABASE")) && *env)
		snprintf(c->database, sizeof c->database, "%s", env);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage();
			*status = 0;
			return 1;
		}
		if (!strncmp(argv[i], "--", 2)) {
			if (i + 1 >= argc) {
				*status = die("an option is missing its value");
				return 1;
			}
			if (!strcmp(argv[i], "--data-dir"))
				snprintf(c->data_dir, sizeof c->data_dir, "%s", argv[i + 1]);
			else if (!strcmp(argv[i], "--database"))
				snprintf(c->database, sizeof c->database, "%s", argv[i + 1]);
			else if (c->a.n < 32) {
				c->a.name[c->a.n] = argv[i] + 2;
				c->a.value[c->a.n++] = argv[i + 1];
			}
			i++;
		} else if (!c->noun) {
			c->noun = argv[i];
		} else if (!c->verb) {
			c->verb = argv[i];
		} else if (!c->object) {
			c->object = argv[i];
		} else {
			*status = die("unexpected argument (see --help)");
			return 1;
		}
	}
	if (!c->noun || !c->verb) {
		usage();
		*status = 2;
		return 1;
	}
	if (!c->database[0])
		snprintf(c->database, sizeof c->database, "sqlite:%s/revops.db", c->data_dir);
	if (c->object && c->a.n < 32) {
		c->a.name[c->a.n] = "object";
		c->a.value[c->a.n++] = c->object;
	}
	return 0;
}

/* Prints a command's answer on stdout and frees it. Returns the exit
 * status: 3 when an audit chain is broken ("chain_valid": false), 4 when a
 * signature is invalid ("valid": false), else 0. */
static int print_answer(json_t *out)
{
	int rc;

	json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
	fputc('\n', stdout);
	rc = json_is_false(json_object_get(out, "chain_valid")) ? 3
	     : json_is_false(json_object_get(out, "valid"))     ? 4
								: 0;
	json_decref(out);
	return rc;
}

int main(int argc, char **argv)
{
	struct cli c = {.data_dir = "./var"};
	struct store *st = NULL;
	struct buf err;
	json_t *out = NULL;
	int rc = 0;

	log_init(1);
	if (parse_argv(argc, argv, &c, &rc))
		return rc;
	if (strcmp(c.noun, "verify") && store_open(c.database, 1, &st) < 0)
		return die("cannot open the database");
	buf_init(&err, 1024);
	data_dir = c.data_dir;
	rc = run(st, c.noun, c.verb, &c.a, &out, &err);
	store_close(st);
	if (rc < 0) {
		rc = die(err.data ? err.data : "failed");
		buf_free(&err);
		return rc;
	}
	buf_free(&err);
	return print_answer(out);
}
