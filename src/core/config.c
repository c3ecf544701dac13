#include "core/config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum opt_kind { OPT_STR, OPT_INT, OPT_NUM, OPT_FLAG, OPT_LISTEN, OPT_LOGFMT };

struct opt {
	const char *name; /* long option without "--"; env is REVOPS_<NAME> */
	enum opt_kind kind;
	size_t off;
	size_t size;
	const char *help;
};

/* threads not given: chosen by the database in finish. */
#define THREADS_AUTO (-1)

/* An initialiser macro, which clang-format 14 would lay out as a body. */
/* clang-format off */
#define O(n, k, f, h) {n, k, offsetof(struct config, f), sizeof(((struct config *)0)->f), h}
/* clang-format on */
static const struct opt opts[] = {
	O("listen", OPT_LISTEN, listen_port, "HOST:PORT to listen on (127.0.0.1:8080)"),
	O("public-url", OPT_STR, public_url, "base URL clients use (http://<listen>)"),
	O("data-dir", OPT_STR, data_dir, "directory of the embedded database (./var)"),
	O("database", OPT_STR, database,
	  "sqlite:PATH or postgres://... (sqlite:<data-dir>/revops.db)"),
	O("role", OPT_STR, role,
	  "all|api|worker: what this node runs (all; api and worker need postgres://)"),
	O("demo", OPT_FLAG, demo, "seed demo data on an empty database"),
	O("pms-url", OPT_STR, pms_url, "PMS connector base URL (sim:)"),
	O("booking-engine-url", OPT_STR, booking_engine_url,
	  "booking-engine connector base URL (sim:)"),
	O("reviews-url", OPT_STR, reviews_url, "review-platform connector base URL (sim:)"),
	O("whatsapp-api-url", OPT_STR, whatsapp_api_url,
	  "WhatsApp Cloud API base URL (sim:, or https://graph.facebook.com)"),
	O("trust-ca", OPT_STR, trust_ca, "extra CA bundle for outbound HTTPS"),
	O("allow-private-targets", OPT_FLAG, allow_private_targets,
	  "allow outbound targets on private addresses"),
	O("webhook-senders", OPT_INT, webhook_senders,
	  "threads that send webhooks, each with its own connections (2)"),
	O("webhook-uncapped", OPT_FLAG, webhook_uncapped,
	  "benchmarks only: lift the webhook throughput caps"),
	O("time-scale", OPT_NUM, time_scale, "testing only: divide business durations by N"),
	O("token-ttl", OPT_INT, token_ttl, "access token lifetime in seconds (3600)"),
	O("log-format", OPT_LOGFMT, log_json, "json|text (text on a TTY, else json)"),
	O("threads", OPT_INT, threads, "HTTP threads that read requests and serve reads (cores)"),
	O("workers", OPT_INT, workers, "threads that run writes (8)"),
	O("pms-workers", OPT_INT, pms_workers,
	  "threads that run the writes calling the PMS, and as many for the booking engine (8)"),
	O("channel-workers", OPT_INT, channel_workers,
	  "no longer used (Meta's webhook calls run on the event loops); accepted"),
	O("max-connections", OPT_INT, max_connections, "concurrent connections (4096)"),
	O("idle-timeout", OPT_INT, idle_timeout,
	  "seconds before an idle or stalled connection is closed (30)"),
	O("anon-rate-limit", OPT_INT, anon_per_minute,
	  "unauthenticated calls per minute per client address (600)"),
};
#undef O

void config_usage(const char *prog)
{
	size_t i;

	fprintf(stderr, "usage: %s [options]\n", prog);
	for (i = 0; i < ARRAY_LEN(opts); i++)
		fprintf(stderr, "  --%-24s %s\n", opts[i].name, opts[i].help);
	fprintf(stderr, "Each option may also be set as REVOPS_<NAME> (e.g. REVOPS_DATA_DIR).\n");
}

static int parse_int(const char *v, long lo, long hi, long *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < lo || n > hi)
		return -1;
	*out = n;
	return 0;
}

/* Applies one option value; returns 0 or -1 with a message on stderr. */
static int apply(struct config *cfg, const struct opt *o, const char *v, const char *src)
{
	char *field = (char *)cfg + o->off;
	long n;
	double d;
	char *end;
	const char *colon;

	switch (o->kind) {
	case OPT_STR:
		if (strlen(v) >= o->size)
			goto bad;
		memcpy(field, v, strlen(v) + 1);
		return 0;
	case OPT_INT:
		if (parse_int(v, 0, 1000000000, &n) < 0)
			goto bad;
		*(int *)field = (int)n;
		return 0;
	case OPT_NUM:
		errno = 0;
		d = strtod(v, &end);
		if (errno || end == v || *end || !(d >= 1.0 && d <= 1e9))
			goto bad;
		*(double *)field = d;
		return 0;
	case OPT_FLAG:
		if (!v || !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"))
			*(int *)field = 1;
		else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no"))
			*(int *)field = 0;
		else
			goto bad;
		return 0;
	case OPT_LOGFMT:
		if (!strcmp(v, "json"))
			cfg->log_json = 1;
		else if (!strcmp(v, "text"))
			cfg->log_json = 0;
		else
			goto bad;
		return 0;
	case OPT_LISTEN:
		colon = strrchr(v, ':');
		if (!colon || colon == v || (size_t)(colon - v) >= sizeof cfg->listen_host ||
		    parse_int(colon + 1, 0, 65535, &n) < 0)
			goto bad;
		memcpy(cfg->listen_host, v, (size_t)(colon - v));
		cfg->listen_host[colon - v] = '\0';
		cfg->listen_port = (int)n;
		return 0;
	}
bad:
	fprintf(stderr, "revopsd: invalid value for %s%s: \"%s\"\n", src, o->name, v ? v : "");
	return -1;
}

/* The built-in defaults, before the environment and the command line. */
static void set_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	strcpy(cfg->listen_host, "127.0.0.1");
	cfg->listen_port = 8080;
	strcpy(cfg->data_dir, "./var");
	strcpy(cfg->role, "all");
	strcpy(cfg->pms_url, "sim:");
	strcpy(cfg->booking_engine_url, "sim:");
	strcpy(cfg->reviews_url, "sim:");
	strcpy(cfg->whatsapp_api_url, "sim:");
	cfg->time_scale = 1.0;
	cfg->token_ttl = 3600;
	cfg->log_json = !isatty(STDERR_FILENO);
	cfg->threads = THREADS_AUTO;
	cfg->max_connections = 4096;
	cfg->workers = 8;
	cfg->pms_workers = 8;
	cfg->channel_workers = -1; /* not given */
	cfg->webhook_senders = 2;
	cfg->anon_per_minute = 600;
	cfg->idle_timeout = 30;
}

/* Applies each option's REVOPS_<NAME> variable (dashes become
 * underscores) that is set and not empty. Returns 0 or -1 with a message
 * on stderr. */
static int apply_env(struct config *cfg)
{
	char env[64];
	const char *v;
	size_t i, j;

	for (i = 0; i < ARRAY_LEN(opts); i++) {
		snprintf(env, sizeof env, "REVOPS_");
		for (j = 0; opts[i].name[j] && j + 8 < sizeof env; j++)
			env[7 + j] = opts[i].name[j] == '-' ? '_' : (char)toupper(opts[i].name[j]);
		env[7 + j] = '\0';
		v = getenv(env);
		if (v && *v && apply(cfg, &opts[i], v, "$REVOPS_") < 0)
			return -1;
	}
	return 0;
}

/* The option named by the first len bytes of name, or NULL. */
static const struct opt *find_opt(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(opts); i++)
		if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len))
			return &opts[i];
	return NULL;
}

/* Applies the command line: --name value, --name=value, or --flag alone.
 * Returns 0, 1 after printing --help, or -1 with a message on stderr. */
static int apply_argv(struct config *cfg, int argc, char **argv)
{
	const struct opt *o;
	const char *arg, *eq, *v;
	int a;

	for (a = 1; a < argc; a++) {
		arg = argv[a];
		if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
			config_usage(argv[0]);
			return 1;
		}
		if (strncmp(arg, "--", 2) != 0)
			goto unknown;
		arg += 2;
		eq = strchr(arg, '=');
		o = find_opt(arg, eq ? (size_t)(eq - arg) : strlen(arg));
		if (!o)
			goto unknown;
		if (eq)
			v = eq + 1;
		else if (o->kind == OPT_FLAG)
			v = NULL;
		else if (a + 1 < argc)
			v = argv[++a];
		else {
			fprintf(stderr, "revopsd: --%s needs a value\n", o->name);
			return -1;
		}
		if (apply(cfg, o, v, "--") < 0)
			return -1;
	}
	return 0;
unknown:
	fprintf(stderr, "revopsd: unknown argument \"%s\" (see --help)\n", argv[a]);
	return -1;
}

/* Checks and completes the loaded values: clamps threads and the idle
 * timeout to at least 1, derives the database URL and the public URL when
 * not given, and drops the public URL's trailing slashes. Returns 0 or -1 with a message on stderr. */
static int finish(struct config *cfg)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	if (!cfg->database[0])
		snprintf(cfg->database, sizeof cfg->database, "sqlite:%s/revops.db", cfg->data_dir);
	/* One loop per core on both backends: the reads made on every request
	 * come from the node's memory (docs/architecture.md, "Threads"). */
	if (cfg->threads == THREADS_AUTO)
		cfg->threads = cores > 0 ? (int)cores : 2;
	if (cfg->threads < 1)
		cfg->threads = 1;
	if (cfg->webhook_senders < 1 || cfg->webhook_senders > 16) {
		fprintf(stderr, "revopsd: --webhook-senders must be 1-16\n");
		return -1;
	}
	if (cfg->idle_timeout < 1)
		cfg->idle_timeout = 1;
	if (cfg->pms_workers < 0 || cfg->pms_workers > 256) {
		fprintf(stderr, "revopsd: --pms-workers must be 0-256 (0: with the other writes)\n");
		return -1;
	}
	if (cfg->channel_workers != -1 && (cfg->channel_workers < 0 || cfg->channel_workers > 256)) {
		fprintf(stderr, "revopsd: --channel-workers must be 0-256 (it has no effect)\n");
		return -1;
	}
	if (strcmp(cfg->role, "all") && strcmp(cfg->role, "api") && strcmp(cfg->role, "worker")) {
		fprintf(stderr, "revopsd: --role must be all, api or worker\n");
		return -1;
	}
	/* One server per SQLite file: a role that leaves work to other nodes
	 * needs a database they can share. */
	if (strcmp(cfg->role, "all") && !strncmp(cfg->database, "sqlite:", 7)) {
		fprintf(stderr,
			"revopsd: --role %s needs a database that several nodes share"
			" (--database postgres://...)\n",
			cfg->role);
		return -1;
	}
	/* A base URL: without trailing slashes, so "<public-url>/path" has one. */
	for (size_t n = strlen(cfg->public_url); n > 0 && cfg->public_url[n - 1] == '/'; n--)
		cfg->public_url[n - 1] = '\0';
	cfg->public_url_default = !cfg->public_url[0];
	if (!cfg->public_url[0])
		snprintf(cfg->public_url, sizeof cfg->public_url, "http://%s:%d", cfg->listen_host,
			 cfg->listen_port);
	return 0;
}

int config_load(struct config *cfg, int argc, char **argv)
{
	int rc;

	set_defaults(cfg);
	if (apply_env(cfg) < 0)
		return -1;
	rc = apply_argv(cfg, argc, argv);
	if (rc != 0)
		return rc;
	return finish(cfg);
}
