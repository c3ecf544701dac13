#include "operations/tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "events/outbox.h"
#include "identity/directory.h"
#include "operations/oncall.h"
#include "operations/sla.h"
#include "portfolio/portfolio.h"
#include "sched/timers.h"
#include "store/store.h"

#define TASK_COLS                                                                             \
	"id, property_id, title, category, priority, sla_tier, due_at, status, ack_deadline," \
	" escalate_every_ms, escalation_level, escalations, created_by, acknowledged_by,"     \
	" acknowledged_at, resolved_by, resolved_at, resolution, created_at, updated_at,"     \
	" portfolio_id"
#define TASK_OWNER_COL 20
#define TASK_BY_ID "SELECT " TASK_COLS " FROM operations_tasks WHERE id = $1"

static json_t *time_or_null(struct store_rows *r, int col)
{
	return store_is_null(r, col) ? json_null() : jsonw_time(store_int(r, col));
}

static json_t *text_or_null(struct store_rows *r, int col)
{
	return store_is_null(r, col) ? json_null() : json_string(store_text(r, col));
}

json_t *task_from_row(struct store_rows *r)
{
	json_t *esc = json_loads(store_text(r, 11), 0, NULL);

	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:I, s:o, s:s, s:o, s:o,"
			 " s:o, s:o, s:o, s:o, s:o}",
			 "id", store_text(r, 0), "property_id", store_text(r, 1), "title",
			 store_text(r, 2), "category", store_text(r, 3), "priority", store_text(r, 4),
			 "sla_tier", store_text(r, 5), "due_at", time_or_null(r, 6), "status",
			 store_text(r, 7), "acknowledge_by", jsonw_time(store_int(r, 8)),
			 "escalation_level", (json_int_t)store_int(r, 10), "escalations",
			 esc ? esc : json_array(), "created_by", store_text(r, 12),
			 "acknowledged_by", text_or_null(r, 13), "acknowledged_at",
			 time_or_null(r, 14), "resolved_by", text_or_null(r, 15), "resolved_at",
			 time_or_null(r, 16), "resolution", text_or_null(r, 17), "created_at",
			 jsonw_time(store_int(r, 18)), "updated_at", jsonw_time(store_int(r, 19)));
}

const char *task_row_id(struct store_rows *r)
{
	return store_text(r, 0);
}

static void *api_row(struct store_rows *r)
{
	return task_from_row(r);
}

int task_load(struct store_tx *tx, const char *pf, const char *id, json_t **out)
{
	void *v;
	int rc = store_get_owned(tx, TASK_BY_ID, id, TASK_OWNER_COL, pf, api_row, &v);

	*out = v;
	return rc;
}

int task_list(struct store_tx *tx, const char *pf, const char *after, const struct task_filter *f,
	      int limit, struct store_rows **rows)
{
	struct store_sql q = {.len = 0};

	store_sql_page(&q, "SELECT " TASK_COLS " FROM operations_tasks", pf, after);
	store_sql_eq(&q, "status", f->status);
	store_sql_eq(&q, "property_id", f->property_id);
	store_sql_eq(&q, "sla_tier", f->sla_tier);
	if (f->escalated && !strcmp(f->escalated, "true"))
		store_sql_add(&q, " AND escalation_level > 0", sv_null());
	else if (f->escalated && !strcmp(f->escalated, "false"))
		store_sql_add(&q, " AND escalation_level = 0", sv_null());
	return store_sql_page_end(tx, &q, f->props, f->nprops, limit, rows);
}

int task_create(struct store_tx *tx, const char *pf, const char *pf_tier, const struct task_new *t,
		const char *created_by, int64_t now, json_t **out)
{
	const char *tier = t->sla_tier && *t->sla_tier ? t->sla_tier : pf_tier;
	struct sla_settings s;
	int64_t ack, every;
	char id[ID_MAX];
	int rc;

	*out = NULL;
	if ((rc = sla_get(tx, pf, tier, &s)) < 0)
		return rc;
	if (id_new("ot_", id, sizeof id) < 0)
		return STORE_ERR;
	ack = now + clock_business_ms(s.task_ack_minutes * 60000);
	every = clock_business_ms(s.task_escalate_minutes * 60000);
	rc = store_send(tx,
			"INSERT INTO operations_tasks (id, portfolio_id, property_id, title, category,"
			" priority, sla_tier, due_at, status, ack_deadline, escalate_every_ms,"
			" created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8,"
			" 'open', $9, $10, $11, $12, $12)",
			(struct store_val[]){sv_text(id), sv_text(pf), sv_text(t->property_id),
					     sv_text(t->title), sv_text(t->category),
					     sv_text(t->priority), sv_text(tier),
					     t->due_at ? sv_int(t->due_at) : sv_null(), sv_int(ack),
					     sv_int(every), sv_text(created_by), sv_int(now)},
			12);
	if (rc == 0)
		rc = timer_set(tx, TASK_TIMER, id, 1, 1, pf, ack);
	if (rc == 0 && (rc = task_load(tx, pf, id, out)) == 1)
		return 0;
	return rc < 0 ? rc : STORE_ERR;
}

/* ---------------------------------------------------------- acting on */

/* What task_act reads of the task. */
struct acting {
	char property_id[ID_MAX];
	char status[16];
};

static void *acting_row(struct store_rows *r)
{
	struct acting *a = calloc(1, sizeof *a);

	if (a) {
		snprintf(a->property_id, sizeof a->property_id, "%s", store_text(r, 1));
		snprintf(a->status, sizeof a->status, "%s", store_text(r, 7));
	}
	return a;
}

/* Checks that who may act on task id: found, its portfolio's, reached, an
 * active ops-manager (actor "user:<name>" then). Returns 0 (may act), 1
 * (out says why not) or < 0. */
static int check_actor(struct store_tx *tx, const struct task_who *who, const char *id,
		       struct acting *a, char *actor, size_t cap, struct task_outcome *out)
{
	char name[300], user_id[ID_MAX];
	json_t *roles = NULL, *v;
	size_t i;
	void *row;
	int rc = store_get_owned(tx, TASK_BY_ID, id, TASK_OWNER_COL, who->portfolio_id, acting_row,
				 &row),
	    has = 0;

	if (rc <= 0 || rc == 2) {
		out->result = rc == 0 ? TASK_NOT_FOUND : TASK_OTHER_PORTFOLIO;
		return rc < 0 ? rc : 1;
	}
	*a = *(struct acting *)row;
	free(row);
	if (!who->reaches(who->arg, a->property_id)) {
		out->result = TASK_OUT_OF_REACH;
		out->body = json_pack("{s:s}", "property_id", a->property_id);
		return 1;
	}
	out->result = TASK_NOT_OPS_MANAGER;
	snprintf(out->why, sizeof out->why, "only a user with role ops-manager may act on a task");
	if (!who->user_id[0])
		return 1;
	rc = directory_user_name(tx, who->portfolio_id, who->user_id, name, sizeof name);
	if (rc == 0)
		rc = directory_user_find_roles(tx, who->portfolio_id, name, user_id, sizeof user_id,
					       &roles);
	json_array_foreach(roles, i, v)
		has |= !strcmp(json_string_value(v), "ops-manager");
	json_decref(roles);
	if (rc < 0)
		return rc;
	if (rc == 2)
		snprintf(out->why, sizeof out->why, "the user is deactivated");
	if (rc != 0 || !has)
		return 1;
	snprintf(actor, cap, "user:%s", name);
	out->result = TASK_DONE;
	return 0;
}

/* The acknowledgement or resolution, if a's status allows it. Returns 1
 * (done), 0 (conflict: out->why) or < 0. */
static int apply(struct store_tx *tx, const char *id, const struct acting *a, int resolve,
		 const char *note, const char *actor, int64_t now, struct task_outcome *out)
{
	int rc;

	if (!resolve && strcmp(a->status, "open")) {
		snprintf(out->why, sizeof out->why,
			 "the task is %s; only an open task is acknowledged", a->status);
		return 0;
	}
	if (resolve && !strcmp(a->status, "resolved")) {
		snprintf(out->why, sizeof out->why, "the task is resolved already");
		return 0;
	}
	if (resolve)
		rc = store_exec(tx,
				"UPDATE operations_tasks SET status = 'resolved', resolved_by = $2,"
				" resolved_at = $3, resolution = $4, updated_at = $3 WHERE id = $1",
				(struct store_val[]){sv_text(id), sv_text(actor), sv_int(now),
						     sv_text(note)},
				4);
	else
		rc = store_exec(tx,
				"UPDATE operations_tasks SET status = 'acknowledged', acknowledged_by ="
				" $2, acknowledged_at = $3, updated_at = $3 WHERE id = $1",
				(struct store_val[]){sv_text(id), sv_text(actor), sv_int(now)}, 3);
	if (rc >= 0)
		rc = timer_cancel(tx, TASK_TIMER, id);
	return rc < 0 ? rc : 1;
}

int task_act(struct store *st, const struct task_who *who, const char *id, int resolve,
	     const char *note, struct task_outcome *out)
{
	struct store_tx *tx;
	struct acting a;
	char actor[320];
	int rc;

	memset(out, 0, sizeof *out);
	if ((rc = store_begin(st, STORE_WRITE, &tx)) != STORE_OK)
		return rc;
	rc = check_actor(tx, who, id, &a, actor, sizeof actor, out);
	if (rc == 0 && (rc = apply(tx, id, &a, resolve, note, actor, clock_now_ms(), out)) == 0)
		out->result = TASK_CONFLICT;
	if (rc == 1 && out->result == TASK_DONE &&
	    task_load(tx, who->portfolio_id, id, &out->body) != 1)
		rc = STORE_ERR;
	if (rc < 0) {
		json_decref(out->body);
		out->body = NULL;
	}
	rc = store_finish(tx, rc);
	return rc < 0 ? rc : 0;
}

/* --------------------------------------------------------- escalation */

/* What an escalation reads of the task. */
struct escalating {
	char portfolio_id[ID_MAX], property_id[ID_MAX], title[256], category[64], priority[16],
		tier[16], status[16];
	int64_t ack_deadline, every, level;
	json_t *escalations;
};

static void *escalating_row(struct store_rows *r)
{
	struct escalating *e = calloc(1, sizeof *e);

	if (!e)
		return NULL;
	snprintf(e->property_id, sizeof e->property_id, "%s", store_text(r, 1));
	snprintf(e->title, sizeof e->title, "%s", store_text(r, 2));
	snprintf(e->category, sizeof e->category, "%s", store_text(r, 3));
	snprintf(e->priority, sizeof e->priority, "%s", store_text(r, 4));
	snprintf(e->tier, sizeof e->tier, "%s", store_text(r, 5));
	snprintf(e->status, sizeof e->status, "%s", store_text(r, 7));
	e->ack_deadline = store_int(r, 8);
	e->every = store_int(r, 9);
	e->level = store_int(r, 10);
	e->escalations = json_loads(store_text(r, 11), 0, NULL);
	snprintf(e->portfolio_id, sizeof e->portfolio_id, "%s", store_text(r, TASK_OWNER_COL));
	return e;
}

/* operations.task.escalated's data. */
static json_t *escalated_data(const char *id, const struct escalating *e, int64_t level,
			      int64_t now, json_t *person)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:o, s:o, s:O}", "task_id", id,
			 "property_id", e->property_id, "title", e->title, "category", e->category,
			 "priority", e->priority, "sla_tier", e->tier, "level", (json_int_t)level,
			 "acknowledge_by", jsonw_time(e->ack_deadline), "escalated_at",
			 jsonw_time(now), "on_call", person ? person : json_null());
}

/* Records level on task e (found open and below it) with the person on
 * call, emits the event and sets the next level's timer when the rota has
 * one. */
static int escalate(struct store_tx *tx, const struct timer *t, struct escalating *e, int64_t now)
{
	struct portfolio_property p;
	json_t *person = NULL, *data = NULL, *props = NULL;
	char *esc = NULL;
	int levels = 0, rc = portfolio_property_get(tx, e->portfolio_id, e->property_id, &p);

	if (rc == 1)
		rc = oncall_who(tx, e->portfolio_id, &p, (int)t->step, now, &person, &levels);
	if (rc < 0)
		goto out;
	if (!person)
		log_msg(LOG_WARN, "operations",
			"task %s escalated to level %lld with nobody on call for property %s",
			t->subject_id, (long long)t->step, e->property_id);
	json_array_append_new(e->escalations,
			      json_pack("{s:I, s:o, s:O}", "level", (json_int_t)t->step, "at",
					jsonw_time(now), "on_call", person ? person : json_null()));
	esc = json_dumps(e->escalations, JSON_COMPACT);
	data = escalated_data(t->subject_id, e, t->step, now, person);
	props = json_pack("[s]", e->property_id);
	rc = esc && data && props ? 0 : STORE_ERR;
	if (rc == 0)
		rc = store_exec(tx,
				"UPDATE operations_tasks SET escalation_level = $2, escalations = $3,"
				" updated_at = $4 WHERE id = $1",
				(struct store_val[]){sv_text(t->subject_id), sv_int(t->step),
						     sv_text(esc), sv_int(now)},
				4);
	if (rc >= 0)
		rc = outbox_append(tx, "v2", "operations.task.escalated", e->portfolio_id, props,
				   data, NULL, 0);
	if (rc >= 0 && t->step < (levels > 1 ? levels : 1))
		rc = timer_set(tx, TASK_TIMER, t->subject_id, t->episode, t->step + 1,
			       e->portfolio_id, t->due_at + e->every);
out:
	json_decref(person);
	json_decref(data);
	json_decref(props);
	free(esc);
	return rc < 0 ? rc : 0;
}

int task_escalate_fire(struct store_tx *tx, const struct timer *t, int64_t now, void *arg)
{
	struct escalating *e;
	void *row;
	int rc = store_get_owned(tx, TASK_BY_ID, t->subject_id, TASK_OWNER_COL, t->portfolio_id,
				 escalating_row, &row);

	(void)arg;
	if (rc != 1)
		return rc < 0 ? rc : 0; /* gone, or not this portfolio's: nothing to do */
	e = row;
	rc = 0;
	if (!e->escalations)
		rc = STORE_ERR;
	else if (!strcmp(e->status, "open") && e->level < t->step)
		rc = escalate(tx, t, e, now);
	json_decref(e->escalations);
	free(e);
	return rc;
}
