/* tasks: operations tasks (issue 16; docs/operations-tasks.md), the one
 * owner of the operations_tasks table.
 *
 * A task is open, then acknowledged, then resolved (or resolved straight
 * from open); only a user with role ops-manager acts on it. A task must
 * be acknowledged within its SLA tier's task_ack_minutes (operations/sla.h)
 * or it escalates: level 1 at that deadline, then level 2, 3, ... each
 * task_escalate_minutes after the one before, as far as the portfolio's
 * on-call rota has levels (operations/oncall.h; at least level 1). Each
 * escalation routes the task to the person on call for its property and
 * level at that moment and emits v2 operations.task.escalated, once per
 * level. The escalations are timers of the durable scheduler
 * (sched/timers.h): acknowledging or resolving the task cancels them in
 * the same transaction, so none fires after. */
#ifndef REVOPS_TASKS_H
#define REVOPS_TASKS_H
#include <jansson.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"

struct store;
struct store_tx;
struct store_rows;
struct timer;

#define TASK_TIMER "task.escalate" /* the timer kind of an escalation */

/* A new task, checked by the caller (priority low|normal|high|urgent;
 * sla_tier valid or NULL for the portfolio's own). */
struct task_new {
	const char *property_id, *title, *category, *priority, *sla_tier;
	int64_t due_at; /* ms, or 0 for none */
};

/* Creates t inside tx for portfolio pf (whose plan's tier is pf_tier),
 * fed by created_by ("user:..." / "client:..."), and sets its first
 * escalation timer. Returns 0 with the task's JSON in *out, or < 0. */
int task_create(struct store_tx *tx, const char *pf, const char *pf_tier, const struct task_new *t,
		const char *created_by, int64_t now, json_t **out) WUR;

/* Filters of the list; NULL or "" for none; escalated "true"/"false". */
struct task_filter {
	const char *status, *property_id, *sla_tier, *escalated;
	const char *const *props;
	int nprops;
};
int task_list(struct store_tx *tx, const char *pf, const char *after, const struct task_filter *f,
	      int limit, struct store_rows **rows) WUR;
json_t *task_from_row(struct store_rows *r);
const char *task_row_id(struct store_rows *r);
/* One task: 1, 0 (none), 2 (another portfolio's) or < 0. */
int task_load(struct store_tx *tx, const char *pf, const char *id, json_t **out) WUR;

/* Who acts on a task: the request's portfolio, user and reach. */
struct task_who {
	const char *portfolio_id;
	const char *user_id; /* "" when the token is not a user's */
	int (*reaches)(void *arg, const char *property_id);
	void *arg;
};

enum task_result {
	TASK_DONE,            /* body: the task */
	TASK_NOT_FOUND,       /* no such task */
	TASK_OTHER_PORTFOLIO, /* another portfolio's */
	TASK_OUT_OF_REACH,    /* body: {property_id} outside the request */
	TASK_NOT_OPS_MANAGER, /* why: a client, an unknown or inactive user, no role */
	TASK_CONFLICT,        /* why: its status forbids it */
};

struct task_outcome {
	enum task_result result;
	json_t *body;
	char why[200];
};

/* Acknowledges (resolve 0) or resolves (1, with an optional note) task id
 * for who, cancelling its escalations. Returns 0 with *out, or a negative
 * store status. */
int task_act(struct store *st, const struct task_who *who, const char *id, int resolve,
	     const char *note, struct task_outcome *out) WUR;

/* The scheduler's handler of TASK_TIMER (sched/timers.h): escalates task
 * t->subject_id to level t->step if it is still open and below it. */
int task_escalate_fire(struct store_tx *tx, const struct timer *t, int64_t now, void *arg) WUR;

#endif
