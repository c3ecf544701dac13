#include "cluster/cluster.h"

#include <pthread.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/id.h"
#include "core/log.h"
#include "store/store.h"

/* A node stops serving its buckets this long before their leases run out
 * when it cannot renew them (its clock and the others' may differ a little;
 * a send that starts just before the cut-off still ends inside the lease
 * unless it outlasts this margin). */
#define LEASE_MARGIN_MS 3000
/* Rows of nodes dead longer than this are removed. */
#define DEAD_ROW_MS (3600 * 1000)

struct cluster {
	struct store *st;
	enum cluster_role role;
	char id[ID_MAX];
	pthread_t thr;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int stop;                   /* under mu */
	struct cluster_hooks hooks; /* under mu; busy != NULL once serving lanes */
	_Atomic uint64_t held;      /* bit b: this node holds bucket b */
	_Atomic int64_t held_until; /* monotonic ms: serve them until then */
	int slot;                   /* the locked node-id file, or -1 */
};

static const char *const role_names[] = {"all", "api", "worker"};

int cluster_role_parse(const char *s, enum cluster_role *out)
{
	for (int i = 0; i < (int)ARRAY_LEN(role_names); i++)
		if (!strcmp(s, role_names[i])) {
			*out = (enum cluster_role)i;
			return 0;
		}
	return -1;
}

const char *cluster_role_name(enum cluster_role role)
{
	return role_names[role];
}

const char *cluster_node_id(const struct cluster *c)
{
	return c->id;
}

enum cluster_role cluster_role(const struct cluster *c)
{
	return c->role;
}

int64_t cluster_alive_after(int64_t now_ms)
{
	return now_ms - CLUSTER_TTL_MS;
}

uint64_t cluster_held(const struct cluster *c)
{
	if (!c)
		return ~0ull;
	return clock_mono_ms() < atomic_load(&c->held_until) ? atomic_load(&c->held) : 0;
}

/* Writes this node's row (again, if a long stall got it purged). */
static int node_insert(struct cluster *c, struct store_tx *tx, int64_t now)
{
	char host[256] = "";

	if (gethostname(host, sizeof host - 1) < 0)
		snprintf(host, sizeof host, "unknown");
	return store_exec(tx,
			  "INSERT INTO nodes (id, role, host, pid, started_at, heartbeat_at)"
			  " VALUES ($1, $2, $3, $4, $5, $5)",
			  (struct store_val[]){sv_text(c->id), sv_text(role_names[c->role]),
					       sv_text(host), sv_int(getpid()), sv_int(now)},
			  5);
}

/* Gives back the held buckets above share whose sends have all ended.
 * *mask is what is held, updated. */
static int give_back(struct cluster *c, struct store_tx *tx, int64_t share, uint64_t *mask)
{
	int64_t held = __builtin_popcountll(*mask);
	int rc = 0;

	for (int b = CLUSTER_BUCKETS - 1; b >= 0 && held > share && rc >= 0; b--) {
		if (!(*mask >> b & 1) || c->hooks.busy(c->hooks.arg, (unsigned)b))
			continue;
		rc = store_exec(tx,
				"UPDATE work_leases SET owner = NULL, expires_at = 0"
				" WHERE bucket = $1 AND owner = $2",
				(struct store_val[]){sv_int(b), sv_text(c->id)}, 2);
		*mask &= ~(1ull << b);
		held--;
	}
	return rc < 0 ? rc : 0;
}

/* The buckets this node holds, as a mask. */
static int held_mask(struct cluster *c, struct store_tx *tx, uint64_t *mask)
{
	struct store_rows *r;
	int rc;

	*mask = 0;
	rc = store_query(tx, "SELECT bucket FROM work_leases WHERE owner = $1",
			 (struct store_val[]){sv_text(c->id)}, 1, &r);
	if (rc < 0)
		return rc;
	while ((rc = store_next(r)) == 1)
		*mask |= 1ull << (store_int(r, 0) % CLUSTER_BUCKETS);
	store_rows_close(r);
	return rc;
}

/* Renews this node's leases, takes free or expired buckets up to its
 * share and gives back those above it. Sets *mask to what it holds. */
static int balance(struct cluster *c, struct store_tx *tx, int64_t now, uint64_t *mask)
{
	int64_t workers = 1, share;
	int rc, held;

	rc = store_query_int(tx,
			     "SELECT COUNT(*) FROM nodes WHERE role <> 'api' AND heartbeat_at > $1",
			     (struct store_val[]){sv_int(cluster_alive_after(now))}, 1, &workers);
	if (rc < 0)
		return rc;
	share = (CLUSTER_BUCKETS + (workers > 0 ? workers : 1) - 1) / (workers > 0 ? workers : 1);
	held = store_exec(tx, "UPDATE work_leases SET expires_at = $1 WHERE owner = $2",
			  (struct store_val[]){sv_int(now + CLUSTER_TTL_MS), sv_text(c->id)}, 2);
	if (held < 0)
		return held;
	if (held < share) {
		rc = store_exec(tx,
				"UPDATE work_leases SET owner = $1, expires_at = $2 WHERE bucket IN"
				" (SELECT bucket FROM work_leases WHERE owner IS NULL OR expires_at <= $3"
				" ORDER BY bucket LIMIT $4)",
				(struct store_val[]){sv_text(c->id), sv_int(now + CLUSTER_TTL_MS),
						     sv_int(now), sv_int(share - held)},
				4);
		if (rc < 0)
			return rc;
	}
	if ((rc = held_mask(c, tx, mask)) < 0)
		return rc;
	return give_back(c, tx, share, mask);
}

/* One beat: the heartbeat and, for a node serving lanes, its leases.
 * Returns 0 or a negative store status (the previous leases then run out
 * at their time). */
static int beat(struct cluster *c)
{
	int64_t now = clock_now_ms(), mono = clock_mono_ms();
	uint64_t mask = 0, before = atomic_load(&c->held);
	struct store_tx *tx;
	int rc, serving;

	pthread_mutex_lock(&c->mu);
	serving = c->hooks.busy != NULL;
	pthread_mutex_unlock(&c->mu);
	if ((rc = store_begin(c->st, 1, &tx)) != STORE_OK)
		return rc;
	rc = store_exec(tx, "UPDATE nodes SET heartbeat_at = $1 WHERE id = $2",
			(struct store_val[]){sv_int(now), sv_text(c->id)}, 2);
	if (rc == 0)
		rc = node_insert(c, tx, now);
	if (rc >= 0)
		rc = store_exec(tx, "DELETE FROM nodes WHERE heartbeat_at < $1",
				(struct store_val[]){sv_int(now - DEAD_ROW_MS)}, 1);
	if (rc >= 0 && serving)
		rc = balance(c, tx, now, &mask);
	if ((rc = store_finish(tx, rc)) != STORE_OK)
		return rc;
	if (serving) {
		atomic_store(&c->held, mask);
		atomic_store(&c->held_until, mono + CLUSTER_TTL_MS - LEASE_MARGIN_MS);
		if (mask & ~before)
			c->hooks.taken(c->hooks.arg);
	}
	return 0;
}

static void *beat_main(void *arg)
{
	struct cluster *c = arg;
	struct timespec ts;
	int failing = 0;

	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		pthread_mutex_unlock(&c->mu);
		if (beat(c) < 0) {
			if (!failing++)
				log_msg(LOG_ERROR, "cluster",
					"heartbeat failed; retrying every second");
		} else if (failing) {
			log_msg(LOG_INFO, "cluster", "heartbeat back after %d failures", failing);
			failing = 0;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += CLUSTER_BEAT_MS / 1000;
		pthread_mutex_lock(&c->mu);
		if (!c->stop)
			pthread_cond_timedwait(&c->cond, &c->mu, &ts);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* Registers the node. Nodes that cannot be running lose their row and
 * leases first, so their work is taken over at once rather than after the
 * time-to-live: with sole, every other node; else the previous process on
 * this data directory (prev, or ""). */
static int register_node(struct cluster *c, int sole, const char *prev)
{
	struct store_val v = sv_text(prev);
	struct store_tx *tx;
	int rc;

	if ((rc = store_begin(c->st, 1, &tx)) != STORE_OK)
		return rc;
	if (sole || prev[0]) {
		rc = store_exec(tx, sole ? "DELETE FROM nodes" : "DELETE FROM nodes WHERE id = $1",
				&v, sole ? 0 : 1);
		if (rc >= 0)
			rc = store_exec(tx,
					sole ? "UPDATE work_leases SET owner = NULL, expires_at = 0"
					     : "UPDATE work_leases SET owner = NULL, expires_at = 0"
					       " WHERE owner = $1",
					&v, sole ? 0 : 1);
	}
	if (rc >= 0)
		rc = node_insert(c, tx, clock_now_ms());
	return store_finish(tx, rc);
}

/* Slots for node ids in a data directory: node-id, node-id.2, ... Each
 * running node holds one with an flock, so nodes sharing a directory
 * (PostgreSQL allows it) never take over each other's ids, and a node
 * restarted after any stop finds the slot its predecessor held free. */
#define ID_SLOTS 16

/* Opens and locks the first free slot in dir; its fd (kept for the
 * process's life, the kernel releases the lock), or -1 when none is free
 * or dir is NULL. */
static int take_slot(const char *dir)
{
	char path[1100];
	int fd;

	for (int i = 1; dir && i <= ID_SLOTS; i++) {
		snprintf(path, sizeof path, i == 1 ? "%s/node-id" : "%s/node-id.%d", dir, i);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			break;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		close(fd);
	}
	if (dir)
		log_msg(LOG_WARN, "cluster",
			"no free node-id slot in %s: a stopped predecessor's"
			" work is taken over after the time-to-live",
			dir);
	return -1;
}

/* The node id the previous holder of slot fd recorded, into prev ("" when
 * none). */
static void read_previous(int fd, char prev[ID_MAX])
{
	ssize_t n = fd >= 0 ? pread(fd, prev, ID_MAX - 1, 0) : -1;

	prev[n > 0 ? n : 0] = '\0';
	prev[strcspn(prev, "\n")] = '\0';
	if (!id_valid("node_", prev))
		prev[0] = '\0';
}

/* Records this node's id in its slot. */
static void record_id(int fd, const char *id)
{
	char line[ID_MAX + 1];
	int n = snprintf(line, sizeof line, "%s\n", id);

	if (fd >= 0 && (ftruncate(fd, 0) < 0 || pwrite(fd, line, (size_t)n, 0) != n))
		log_msg(LOG_WARN, "cluster", "cannot record the node id");
}

int cluster_join(struct store *st, enum cluster_role role, int sole, const char *data_dir,
		 struct cluster **out)
{
	struct cluster *c = calloc(1, sizeof *c);
	char prev[ID_MAX];

	*out = NULL;
	if (!c)
		return -1;
	c->slot = take_slot(data_dir);
	read_previous(c->slot, prev);
	if (id_new("node_", c->id, sizeof c->id) < 0) {
		if (c->slot >= 0)
			close(c->slot);
		free(c);
		return -1;
	}
	c->st = st;
	c->role = role;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cond, NULL);
	if (register_node(c, sole, prev) != STORE_OK) {
		log_msg(LOG_ERROR, "cluster", "cannot register this node");
		goto fail;
	}
	if (pthread_create(&c->thr, NULL, beat_main, c) != 0) {
		log_msg(LOG_ERROR, "cluster", "cannot start the heartbeat thread");
		goto fail;
	}
	c->started = 1;
	record_id(c->slot, c->id);
	log_msg(LOG_INFO, "cluster", "joined as %s, role %s", c->id, role_names[role]);
	*out = c;
	return 0;
fail:
	cluster_leave(c);
	return -1;
}

int cluster_serve_lanes(struct cluster *c, const struct cluster_hooks *h)
{
	pthread_mutex_lock(&c->mu);
	c->hooks = *h;
	pthread_mutex_unlock(&c->mu);
	if (beat(c) < 0) {
		log_msg(LOG_ERROR, "cluster", "cannot take webhook lane leases");
		return -1;
	}
	return 0;
}

void cluster_leave(struct cluster *c)
{
	struct store_tx *tx;
	int rc;

	if (!c)
		return;
	if (c->started) {
		pthread_mutex_lock(&c->mu);
		c->stop = 1;
		pthread_cond_signal(&c->cond);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->thr, NULL);
	}
	atomic_store(&c->held, 0);
	if (store_begin(c->st, 1, &tx) == STORE_OK) {
		rc = store_exec(tx,
				"UPDATE work_leases SET owner = NULL, expires_at = 0 WHERE owner = $1",
				(struct store_val[]){sv_text(c->id)}, 1);
		if (rc >= 0)
			rc = store_exec(tx, "DELETE FROM nodes WHERE id = $1",
					(struct store_val[]){sv_text(c->id)}, 1);
		if (store_finish(tx, rc) != STORE_OK)
			log_msg(LOG_WARN, "cluster",
				"could not remove this node; it expires by itself");
	}
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->mu);
	if (c->slot >= 0)
		close(c->slot);
	free(c);
}
