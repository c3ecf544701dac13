/* cluster: the revopsd processes ("nodes") that share one database, and
 * how the background work is divided between them (docs/operations.md).
 *
 * Every server process joins as a node (a row of nodes, owned here) with a
 * role: all (the default: API and background work), api (HTTP only) or
 * worker (background work; HTTP only for health and metrics). A thread
 * beats every CLUSTER_BEAT_MS; a node whose last beat is older than
 * CLUSTER_TTL_MS is dead, and whatever it left (a rate decision in its PMS
 * writes, webhook sends in flight) names it, so the live nodes take it
 * over (cluster_alive_after).
 *
 * The webhook lanes are divided between the nodes that do background work
 * by CLUSTER_BUCKETS leases (work_leases, owned here): a lane's bucket is
 * its lane hash % CLUSTER_BUCKETS, and only the node holding the bucket's
 * unexpired lease sends on the lane, so a receiver's cap and concurrency
 * hold across nodes. Each beat renews the node's leases, takes free or
 * expired ones up to its share (CLUSTER_BUCKETS / live workers, rounded
 * up) and gives back those above it once nothing of theirs is in flight.
 * A node that cannot renew stops serving its buckets before the leases
 * expire, so no other node serves them while it still might.
 *
 * Leases are taken in write transactions, and writers take turns (store.h),
 * so two nodes never take the same bucket. */
#ifndef REVOPS_CLUSTER_H
#define REVOPS_CLUSTER_H
#include <stdint.h>
#include "core/common.h"

struct store;

enum cluster_role { CLUSTER_ALL, CLUSTER_API, CLUSTER_WORKER };

#define CLUSTER_BUCKETS 64
#define CLUSTER_BEAT_MS 1000
#define CLUSTER_TTL_MS 10000

struct cluster;

/* What the webhook engine tells the lease keeper. */
struct cluster_hooks {
	/* 1 while the bucket has sends in flight: its lease is kept. */
	int (*busy)(void *arg, unsigned bucket);
	/* Buckets were taken: deliveries of their lanes may be waiting. */
	void (*taken)(void *arg);
	void *arg;
};

/* "all", "api" or "worker" into *out. Returns 0, or -1 for anything else. */
int cluster_role_parse(const char *s, enum cluster_role *out) WUR;
const char *cluster_role_name(enum cluster_role role);

/* Registers this process as a node of role and starts its beat. sole = 1
 * when no other server can share the database (SQLite): every other node
 * is gone, and its rows and leases are cleared at once. In data_dir (or
 * NULL) the node holds a node-id slot (node-id, node-id.2, ... each locked
 * by one running node) where the last holder recorded its id: that
 * process is gone, and its work is taken over at once, not after the
 * time-to-live. Returns 0, or -1 with the reason logged. */
int cluster_join(struct store *st, enum cluster_role role, int sole, const char *data_dir,
		 struct cluster **out) WUR;

/* Starts taking bucket leases (nodes doing background work), the first
 * time before it returns, so a sole node serves every lane at once. */
int cluster_serve_lanes(struct cluster *c, const struct cluster_hooks *h) WUR;
/* This node's id ("node_..."), recorded on the work it starts. */
const char *cluster_node_id(const struct cluster *c);
enum cluster_role cluster_role(const struct cluster *c);
/* The buckets this node may serve now (bit b: bucket b; a lane's bucket
 * is its lane hash % CLUSTER_BUCKETS): every bucket for NULL, none once
 * its leases could have run out unrenewed. */
uint64_t cluster_held(const struct cluster *c);
/* Nodes whose last beat is after this (wall ms) are alive. */
int64_t cluster_alive_after(int64_t now_ms);
/* Stops the beat, gives the leases back and removes the node's row. */
void cluster_leave(struct cluster *c);

#endif
