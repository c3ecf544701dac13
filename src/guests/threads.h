/* threads: guests, their threads and messages (issue 16;
 * docs/guest-messaging.md), the one owner of the guests, guest_identities,
 * guest_threads, guest_thread_properties and guest_messages tables.
 *
 * A guest is one per portfolio, known by phone numbers (E.164) and e-mail
 * addresses: a message naming an address known for another guest than
 * its phone's merges the two into one guest (the older keeps its id).
 * One guest has one thread across the portfolio's properties; a thread
 * lists every property it has messages of.
 *
 * An inbound message starts a wait when none is open (an episode): a
 * timer of the durable scheduler (sched/timers.h) fires at the portfolio's
 * SLA tier's guest_reply_minutes, and escalates the thread (v2
 * guest.thread.escalated) if the wait is still open then. An inbound
 * message matching one of the portfolio's keywords (guests/keywords.h)
 * escalates at once. Either way once per episode. An outbound message
 * (an answer) ends the episode and cancels its timer. */
#ifndef REVOPS_THREADS_H
#define REVOPS_THREADS_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"
#include "operations/sla.h"

struct store_tx;
struct store_rows;
struct timer;

#define THREAD_TIMER "thread.escalate" /* the timer kind of a wait */
#define GUEST_PHONE_MAX 17             /* "+" and up to 15 digits, NUL */
#define GUEST_EMAIL_MAX 255
#define GUEST_TEXT_MAX 4096

/* A phone number as E.164 ("+48600100200") from "+48 600 100 200",
 * "0048600100200" or a WhatsApp wa_id ("48600100200"): 8 to 15 digits
 * after an optional "+" or "00", spaces, dots, dashes and parentheses
 * ignored. Returns 0 or -1. */
int guest_phone_e164(const char *in, char out[GUEST_PHONE_MAX]);
/* An e-mail address lower-cased, when it has one "@" with text on both
 * sides and no space. Returns 0 or -1. */
int guest_email_norm(const char *in, char out[GUEST_EMAIL_MAX]);

/* One message to record, its strings checked by the caller (phone and
 * email normalised, at least one of them). */
struct guest_msg {
	const char *property_id, *channel, *external_id, *text;
	int inbound;               /* 1: from the guest; 0: to the guest (an answer) */
	const char *phone;         /* E.164, or NULL */
	const char *email;         /* lower case, or NULL */
	const char *name;          /* the guest's name as the channel gives it, or NULL */
	const char *status;        /* received (inbound), queued, sent or delivered */
	const char *template_json; /* an outbound template, as JSON text, or NULL */
	const char *created_by;    /* who sent an outbound one, or NULL */
	/* the guest's address on the channel: where an outbound one goes, or
	 * where an inbound one came from (E.164 on WhatsApp), or NULL */
	const char *recipient;
	int64_t at; /* when it was written (ms) */
};

struct guest_msg_outcome {
	char message_id[ID_MAX], thread_id[ID_MAX], guest_id[ID_MAX];
	/* (portfolio, channel, external id) known: nothing changed, and only
	 * message_id and thread_id are set */
	int duplicate;
	int escalated; /* this message escalated the thread (a keyword) */
};

/* Called after message i of a batch was recorded (out: its outcome), in
 * the batch's transaction: the caller's events follow their message. */
typedef int (*guest_recorded_fn)(struct store_tx *tx, size_t i, const struct guest_msg_outcome *out,
				 void *arg);
/* What a portfolio's messages are recorded with: its escalation keywords
 * (guests/keywords.h) and its tier's SLA minutes. */
struct guest_rules {
	json_t *keywords;
	struct sla_settings sla;
};
/* Reads pf's rules for its tier into *out (guest_rules_free it, also
 * after a failure). Reads only: a writer may call it before its turn.
 * Returns 0 or < 0. */
int guest_rules_load(struct store_tx *tx, const char *pf, const char *tier,
		     struct guest_rules *out) WUR;
void guest_rules_free(struct guest_rules *r);
/* Records the n messages m of portfolio pf (under its rules) inside tx
 * as above, in order, each as if alone (a later one sees what an earlier
 * one did), into out[0..n); fn (or NULL) after each. What a batch needs
 * is read in one statement per 32 messages, and the threads it changed
 * are written once at its end. The caller holds the writers' turn
 * (STORE_WRITE, or store_turn): a message id already known gives
 * duplicate. Returns 0 or a negative store status. */
int guest_messages_record(struct store_tx *tx, const char *pf, const struct guest_rules *rules,
			  const struct guest_msg *m, size_t n, int64_t now,
			  struct guest_msg_outcome *out, guest_recorded_fn fn, void *arg) WUR;
/* One message: guest_messages_record of m alone, under pf's rules for
 * pf_tier. */
int guest_message_record(struct store_tx *tx, const char *pf, const char *pf_tier,
			 const struct guest_msg *m, int64_t now, struct guest_msg_outcome *out) WUR;

/* The scheduler's handler of THREAD_TIMER: escalates thread t->subject_id
 * when its wait t->episode is still open and not yet escalated. */
int thread_escalate_fire(struct store_tx *tx, const struct timer *t, int64_t now, void *arg) WUR;

/* Sets the delivery status of the outbound message of channel known by
 * external_id (sent, delivered, read or failed, with error), never
 * backwards (a late "sent" leaves delivered as it is). Returns 1 when it
 * became delivered now (*message: the message's JSON, owned), 0 when it
 * changed otherwise or not at all, 2 when no such message, or < 0. */
int guest_message_status(struct store_tx *tx, const char *channel, const char *external_id,
			 const char *status, const char *error, int64_t now, json_t **message) WUR;

/* Filters of the thread list; NULL or "" for none. guest: a phone or
 * e-mail address of the guest. */
struct thread_filter {
	const char *status, *property_id, *guest, *escalated;
	const char *const *props;
	int nprops;
};
int thread_list(struct store_tx *tx, const char *pf, const char *after,
		const struct thread_filter *f, int limit, struct store_rows **rows) WUR;
/* A thread of the list as JSON (guest, properties and last message read
 * with tx). NULL when out of memory or a read failed. */
json_t *thread_from_row(struct store_tx *tx, struct store_rows *r, int64_t now);
const char *thread_row_id(struct store_rows *r);
/* One thread: 1, 0 (none), 2 (another portfolio's) or < 0. */
int thread_load(struct store_tx *tx, const char *pf, const char *id, int64_t now, json_t **out) WUR;
/* The thread's messages after message id after, oldest first, at most
 * limit; props narrows them to those properties (NULL: all). */
int thread_messages(struct store_tx *tx, const char *thread_id, const char *after,
		    const char *const *props, int nprops, int limit, struct store_rows **rows) WUR;
json_t *message_from_row(struct store_rows *r);
/* Message id as JSON: 1 (*out), 0 or < 0. */
int message_load(struct store_tx *tx, const char *id, json_t **out) WUR;
const char *message_row_id(struct store_rows *r);

/* The phone number to write to thread_id's guest on WhatsApp: the one
 * their latest WhatsApp message came from or went to, else their first
 * phone number. Returns 1 (out set), 0 (the thread has no phone number)
 * or < 0. */
int thread_phone(struct store_tx *tx, const char *thread_id, char out[GUEST_PHONE_MAX]) WUR;

/* Queued outbound messages of channel due at now, for the sender: each
 * claimed (next_attempt_at moved lease_ms on) in tx. Calls fn for each.
 * Returns how many, or < 0. */
struct guest_outbound {
	char id[ID_MAX], portfolio_id[ID_MAX], property_id[ID_MAX], phone[GUEST_PHONE_MAX];
	char *template_json, *text;
	int64_t attempts;
};
int guest_outbound_claim(struct store_tx *tx, const char *channel, int64_t now, int64_t lease_ms,
			 int max, struct guest_outbound *out) WUR;
void guest_outbound_free(struct guest_outbound *o, int n);
/* Records a send's outcome: sent with the channel's id, or failed for
 * good (error), or retry at next_at (error kept). Returns 0 or < 0. */
int guest_outbound_done(struct store_tx *tx, const char *id, const char *status,
			const char *external_id, const char *error, int64_t next_at, int64_t now) WUR;

#endif
