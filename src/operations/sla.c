#include "operations/sla.h"

#include <string.h>

#include "store/store.h"

static const struct {
	const char *tier;
	struct sla_settings s;
} defaults[] = {
	{"platinum", {15, 15, 10}},
	{"gold", {30, 30, 20}},
	{"standard", {60, 60, 30}},
};

int sla_tier_valid(const char *tier)
{
	for (size_t i = 0; tier && i < ARRAY_LEN(defaults); i++)
		if (!strcmp(tier, defaults[i].tier))
			return 1;
	return 0;
}

void sla_defaults(const char *tier, struct sla_settings *out)
{
	*out = defaults[ARRAY_LEN(defaults) - 1].s;
	for (size_t i = 0; tier && i < ARRAY_LEN(defaults); i++)
		if (!strcmp(tier, defaults[i].tier))
			*out = defaults[i].s;
}

int sla_get(struct store_tx *tx, const char *pf, const char *tier, struct sla_settings *out)
{
	struct store_rows *r;
	int rc = store_query(tx,
			     "SELECT task_ack_minutes, task_escalate_minutes, guest_reply_minutes FROM"
			     " sla_tier_settings WHERE portfolio_id = $1 AND tier = $2",
			     (struct store_val[]){sv_text(pf), sv_text(tier)}, 2, &r);

	sla_defaults(tier, out);
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1) {
		out->task_ack_minutes = store_int(r, 0);
		out->task_escalate_minutes = store_int(r, 1);
		out->guest_reply_minutes = store_int(r, 2);
	}
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

int sla_set(struct store_tx *tx, const char *pf, const char *tier, const struct sla_settings *s,
	    int64_t now)
{
	int rc = store_exec(tx,
			    "INSERT INTO sla_tier_settings (portfolio_id, tier, task_ack_minutes,"
			    " task_escalate_minutes, guest_reply_minutes, updated_at) VALUES ($1, $2,"
			    " $3, $4, $5, $6) ON CONFLICT (portfolio_id, tier) DO UPDATE SET"
			    " task_ack_minutes = excluded.task_ack_minutes, task_escalate_minutes ="
			    " excluded.task_escalate_minutes, guest_reply_minutes ="
			    " excluded.guest_reply_minutes, updated_at = excluded.updated_at",
			    (struct store_val[]){sv_text(pf), sv_text(tier),
						 sv_int(s->task_ack_minutes),
						 sv_int(s->task_escalate_minutes),
						 sv_int(s->guest_reply_minutes), sv_int(now)},
			    6);

	/* announced: the nodes' caches of a portfolio's settings reload */
	if (rc >= 0)
		rc = store_notify(tx, STORE_CH_PROPERTIES);
	return rc < 0 ? rc : 0;
}
