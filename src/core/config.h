/* config: revopsd's options from the command line and REVOPS_* variables
 * (API-CONTRACT §0). The command line wins over the environment. */
#ifndef REVOPS_CONFIG_H
#define REVOPS_CONFIG_H
#include "core/common.h"

struct config {
	char listen_host[256];
	int listen_port;
	char public_url[512];
	int public_url_default; /* 1 when derived from --listen */
	char data_dir[1024];
	char database[1100];
	char role[16]; /* all | api | worker (cluster.h) */
	int demo;
	char pms_url[512];
	char booking_engine_url[512];
	char reviews_url[512];
	char whatsapp_api_url[512];
	char trust_ca[1024];
	int allow_private_targets;
	int webhook_uncapped;
	int webhook_senders;
	double time_scale;
	int token_ttl;
	int log_json;
	int threads;         /* HTTP event loops; default = cores */
	int workers;         /* threads that run writes; default 8 */
	int pms_workers;     /* threads that run the writes that call a PMS; default 8 */
	int channel_workers; /* no longer used (-1: not given); accepted with a warning */
	int max_connections;
	int anon_per_minute; /* unauthenticated calls per client address */
	int idle_timeout;    /* seconds before an idle or stalled connection is closed */
};

/* Fills cfg from defaults, then the environment, then argv. On a bad option
 * writes a message to stderr and returns -1; for --help prints usage and
 * returns 1; otherwise 0. */
int config_load(struct config *cfg, int argc, char **argv) WUR;
void config_usage(const char *prog);

#endif
