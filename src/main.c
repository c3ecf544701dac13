/* revopsd: the API server and its background work.
 *
 * Signals are blocked in every thread; the main thread waits for them with
 * sigtimedwait, doing the once-a-second chores (deprecation registry
 * refresh, idempotency expiry) between waits. SIGTERM/SIGINT: stop
 * accepting, let requests in flight finish (up to 10 s), close the database
 * cleanly, exit 0. */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/pipeline.h"
#include "api/deprecation.h"
#include "api/idempotency.h"
#include "api/identity/oauth.h"
#include "api/identity/scim.h"
#include "api/openapi.h"
#include "api/rates/rate_decision.h"
#include "rates/decision.h"
#include "rates/suggestion.h"
#include "feeds/reputation.h"
#include "feeds/review_platform.h"
#include "feeds/reviews.h"
#include "guests/threads.h"
#include "guests/whatsapp.h"
#include "operations/tasks.h"
#include "api/ratelimit_shared.h"
#include "api/routes.h"
#include "cluster/cluster.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/dirlock.h"
#include "core/log.h"
#include "core/signals.h"
#include "http/http_server.h"
#include "identity/saml.h"
#include "net/httpc.h"
#include "ops/operator.h"
#include "pms/pms.h"
#include "sched/timers.h"
#include "store/store.h"
#include "webhooks/engine.h"

#define DRAIN_MS 10000
/* Attempts in flight at shutdown get this long; later ones keep their claim
 * and are sent again at the next start. */
#define ENGINE_DRAIN_MS 3000

/* Marks failed the decisions that stopped nodes left pending. Returns 0
 * or -1 (logged). */
static int recover_decisions(struct store *st)
{
	int n = decision_recover(st, cluster_alive_after(clock_now_ms()));

	if (n > 0)
		log_msg(LOG_WARN, "rate_decisions",
			"%d decisions were interrupted during PMS writes; marked failed", n);
	return n < 0 ? -1 : 0;
}

/* Marks expired the rate suggestions left pending past their date. */
static void expire_suggestions(struct store *st)
{
	char today[16];
	int n;

	suggestion_today(today);
	n = suggestion_expire(st, today);
	if (n > 0)
		log_msg(LOG_INFO, "rate_suggestions", "%d suggestions expired unanswered", n);
	else if (n < 0)
		log_msg(LOG_WARN, "rate_suggestions", "could not expire past suggestions");
}

struct chores_state {
	struct service *svc;
	int64_t last_purge;
};

static void chores(void *arg)
{
	struct chores_state *cs = arg;
	struct service *a = cs->svc;
	int64_t *last_purge = &cs->last_purge, now = clock_mono_ms();
	int n;

	if (deprecation_reload(a->deprecations, a->store) < 0)
		log_msg(LOG_WARN, "deprecations", "reload failed; keeping the previous registry");
	/* a full disk: each second, whether there is room again */
	if (store_full_since() && store_probe_write(a->store) == STORE_OK)
		log_msg(LOG_DEBUG, "store_full", "the probe wrote: writes are taken again");
	if (cluster_role(a->cluster) == CLUSTER_API)
		return; /* the schedulers run on worker nodes */
	/* Nodes share the database: decisions another node was publishing
	 * when it stopped. (A sole node recovered its own at start.) */
	if (store_shared(a->store))
		recover_decisions(a->store);
	if (review_publish_due(a->store, a->reviews) < 0)
		log_msg(LOG_WARN, "reviews", "could not send the replies due");
	if (whatsapp_send_due(a->store, a->seal_key, a->whatsapp) < 0)
		log_msg(LOG_WARN, "whatsapp", "could not send the messages due");
	if (now - *last_purge >= 60000) {
		*last_purge = now;
		n = idempotency_purge(a->store, clock_now_ms());
		if (n > 0)
			log_msg(LOG_INFO, "idempotency", "expired %d keys", n);
		n = oauth_purge(a->store, clock_now_ms());
		if (n > 0)
			log_msg(LOG_INFO, "oauth", "purged %d expired tokens and assertion ids", n);
		if (store_shared(a->store) && rl_shared_purge(a->store, clock_now_ms()) < 0)
			log_msg(LOG_WARN, "ratelimit", "could not purge old rate-limit grants");
		expire_suggestions(a->store);
		if (reputation_sweep(a->store) < 0)
			log_msg(LOG_WARN, "reputation", "could not re-evaluate reputation scores");
	}
}

/* Keep up to 16 MiB of freed heap per malloc arena rather than glibc's
 * 128 KiB: SQLite's page caches and libcurl's buffers grow and shrink by
 * more than that all the time, and every page handed back came back as a
 * page fault (~6,500 a second under webhook load). Setting the trim
 * threshold stops glibc from raising its mmap threshold by itself (from
 * 128 KiB, as large blocks are freed), which would give every request or
 * response body over 128 KiB its own mmap and page faults: set it to
 * 4 MiB, which glibc would reach on its own. */
static void tune_malloc(void)
{
	mallopt(M_TRIM_THRESHOLD, 16 << 20);
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
}

/* Starts logging in the configured format and applies --time-scale,
 * warning when it shortens business durations. */
static void start_logging(const struct config *cfg)
{
	log_init(cfg->log_json);
	clock_set_time_scale(cfg->time_scale);
	if (cfg->time_scale > 1.0)
		log_msg(LOG_WARN, "config",
			"--time-scale %g: business durations shortened (testing only)",
			cfg->time_scale);
}

/* The durable scheduler's timer kinds and their handlers. */
static const struct timer_kind timer_kinds[] = {
	{TASK_TIMER, task_escalate_fire, NULL},
	{THREAD_TIMER, thread_escalate_fire, NULL},
};

/* Starts what runs once the pipeline is set up: the PMS connector, the
 * recovery of rate decisions a stop interrupted, the webhook engine, the
 * durable scheduler and the HTTP listener (*srv); then sets the public URL from the port the
 * listener got when it was left to the default and port 0. Returns 0 or
 * -1; main's cleanup stops whatever did start. */
static int start_serving(struct config *cfg, struct store *st, struct service *svc, int *lfd,
			 struct http_server **srv)
{
	struct http_server_opts o;
	int fd;

	if (pms_open(cfg->pms_url, &svc->pms) < 0 ||
	    pms_open_as(cfg->booking_engine_url, PMS_ROLE_BOOKING_ENGINE, &svc->booking) < 0 ||
	    review_platform_open(cfg->reviews_url, &svc->reviews) < 0 ||
	    whatsapp_open(cfg->whatsapp_api_url, st, &svc->whatsapp) < 0)
		return -1;
	if (cluster_role(svc->cluster) != CLUSTER_API &&
	    (recover_decisions(st) < 0 ||
	     engine_start(st,
			  &(struct engine_opts){cfg->webhook_uncapped, cfg->allow_private_targets,
						svc->seal_key, cfg->webhook_senders, svc->cluster},
			  &svc->engine) < 0 ||
	     sched_start(st, timer_kinds, ARRAY_LEN(timer_kinds), &svc->sched) < 0))
		return -1;
	o = (struct http_server_opts){.host = cfg->listen_host,
				      .port = cfg->listen_port,
				      .threads = cfg->threads,
				      .max_connections = cfg->max_connections,
				      .idle_timeout_s = cfg->idle_timeout,
				      .workers = cfg->workers,
				      .lane_of = pipeline_lane,
				      .lane_workers = {[LANE_PMS - 1] = cfg->pms_workers,
						       [LANE_BOOKING - 1] = cfg->pms_workers}};
	fd = *lfd;
	*lfd = -1; /* the server's now, also if it fails */
	if (http_server_start_fd(fd, &o, pipeline_handle, svc, srv) < 0)
		return -1;
	if (cfg->public_url_default && cfg->listen_port == 0)
		snprintf(cfg->public_url, sizeof cfg->public_url, "http://%s:%d", cfg->listen_host,
			 http_server_port(*srv));
	return 0;
}

/* xmlsec and libcurl, process-wide. Returns 0 or -1 (logged). */
static int init_libraries(const struct config *cfg)
{
	if (saml_global_init() < 0 || httpc_global_init() < 0) {
		log_msg(LOG_ERROR, "start", "cannot initialise xmlsec or libcurl");
		return -1;
	}
	httpc_configure(&(struct httpc_opts){cfg->trust_ca[0] ? cfg->trust_ca : NULL,
					     cfg->allow_private_targets});
	return 0;
}

static void close_if_open(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* Makes sure this process is the only one on its port and, on SQLite, on
 * its data directory before it touches the database: binds the listening
 * socket (*lfd, served from by start_serving) and locks the directory
 * (*lock_fd, held until exit). Returns 0, or -1 with the reason logged. */
static int claim_port_and_dir(const struct config *cfg, int *lfd, int *lock_fd)
{
	char err[1200];

	if ((*lfd = http_listen(cfg->listen_host, cfg->listen_port)) < 0)
		return -1;
	/* One server per embedded database; PostgreSQL nodes may share a
	 * directory (each holds a node-id slot of its own, cluster.h). */
	if (!strncmp(cfg->database, "sqlite:", 7) &&
	    (*lock_fd = dirlock_take(cfg->data_dir, err, sizeof err)) < 0) {
		log_msg(LOG_ERROR, "start", "%s", err);
		return -1;
	}
	return 0;
}

/* Joins the nodes on the database in cfg's role (alone on SQLite). Returns
 * 0 or -1 (logged). */
static int join_cluster(const struct config *cfg, struct store *st, struct service *svc)
{
	enum cluster_role role = CLUSTER_ALL;

	if (cluster_role_parse(cfg->role, &role) < 0)
		return -1; /* config_load checked it */
	return cluster_join(st, role, !store_shared(st), cfg->data_dir, &svc->cluster);
}

/* Writes the OpenAPI document for the public URL, now that it is known.
 * Returns 0, or -1 with the failure logged. */
static int serve_openapi(const struct config *cfg)
{
	char err[256];

	if (openapi_prepare(cfg->public_url, err, sizeof err) == 0)
		return 0;
	log_msg(LOG_ERROR, "openapi", "%s", err);
	return -1;
}

/* --demo: seeds the demo data on an empty database and logs where the
 * credentials are. Returns 0, or -1 with the failure logged. */
static int seed_demo(struct store *st, const struct config *cfg)
{
	struct buf err;
	int rc;

	buf_init(&err, 512);
	rc = operator_demo_seed(st, cfg->public_url, cfg->data_dir, &err);
	if (rc < 0) {
		log_msg(LOG_ERROR, "demo", "seeding failed: %s", err.data ? err.data : "?");
		buf_free(&err);
		return -1;
	}
	buf_free(&err);
	log_msg(LOG_INFO, "demo",
		rc ? "seeded; credentials in %s/demo-credentials.json"
		   : "data exists; credentials in %s/demo-credentials.json",
		cfg->data_dir);
	return 0;
}

/* Serves until SIGTERM or SIGINT (doing the chores between waits), then
 * stops accepting and lets the requests in flight finish, up to DRAIN_MS. */
static void serve_until_signal(const sigset_t *sigs, struct service *svc, struct http_server *srv)
{
	struct chores_state cs = {svc, 0};
	int sig;

	sig = signals_wait(sigs, chores, &cs);
	log_msg(LOG_INFO, "shutdown", "%s: draining %d requests in flight",
		sig > 0 ? "signal received" : "signal wait failed", http_server_in_flight(srv));
	svc->shutting_down = 1;
	http_server_drain(srv, DRAIN_MS);
}

int main(int argc, char **argv)
{
	struct config cfg;
	struct store *st = NULL;
	struct http_server *srv = NULL;
	struct service svc;
	sigset_t sigs;
	int rc, app_ok = 0, exit_code = 1, lfd = -1, lock_fd = -1;
	struct route *routes = NULL;
	size_t nroutes = 0;

	tune_malloc();
	rc = config_load(&cfg, argc, argv);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	start_logging(&cfg);
	if (cfg.channel_workers >= 0)
		log_msg(LOG_WARN, "start",
			"--channel-workers has no effect: Meta's webhook calls are checked on the "
			"event loops and recorded by one thread, with no thread waiting for them");
	signals_block(&sigs);

	if (init_libraries(&cfg) < 0)
		return 1;
	if (claim_port_and_dir(&cfg, &lfd, &lock_fd) < 0)
		goto out;
	/* + the chores, the heartbeat, fan-out, the lane watcher, the
	 * scheduler, the webhook senders and the thread that records Meta's
	 * webhook calls (store/group.h) */
	if (store_open(cfg.database,
		       cfg.threads + cfg.workers + cfg.pms_workers + 7 + cfg.webhook_senders, &st) < 0)
		goto out;
	store_background_checkpoints(st);
	routes = api_routes_build(!strcmp(cfg.role, "worker"), &nroutes);
	if (!routes || pipeline_init(&svc, &cfg, st, routes, nroutes) < 0) {
		log_msg(LOG_ERROR, "start", "cannot initialise");
		goto out;
	}
	app_ok = 1;
	/* SCIM clients read RFC 7644 error bodies for every answer under /scim/. */
	svc.error_shape_prefix = "/scim/";
	svc.error_shape = scim_error_shape;
	if (join_cluster(&cfg, st, &svc) < 0 || start_serving(&cfg, st, &svc, &lfd, &srv) < 0 ||
	    serve_openapi(&cfg) < 0)
		goto out;
	if (cfg.demo && seed_demo(st, &cfg) < 0)
		goto out;
	svc.ready = 1;
	log_msg(LOG_INFO, "listening", "port=%d url=%s", http_server_port(srv), cfg.public_url);
	serve_until_signal(&sigs, &svc, srv);
	exit_code = 0;
out:
	http_server_stop(srv);
	openapi_release();
	if (app_ok) {
		sched_stop(svc.sched);
		engine_stop(svc.engine, ENGINE_DRAIN_MS);
		cluster_leave(svc.cluster); /* after the engine: no send outlives its lease */
		pms_close(svc.pms);
		pms_close(svc.booking);
		review_platform_close(svc.reviews);
		whatsapp_close(svc.whatsapp);
		pipeline_free(&svc);
	}
	store_close(st);
	close_if_open(lfd);
	close_if_open(lock_fd); /* the data directory's lock: the kernel would at exit */
	free(routes);
	saml_global_cleanup();
	httpc_global_cleanup();
	if (exit_code == 0)
		log_msg(LOG_INFO, "shutdown", "stopped cleanly");
	return exit_code;
}
