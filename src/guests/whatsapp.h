/* whatsapp: the WhatsApp Cloud API channel of each property (issue 16;
 * docs/guest-messaging.md, "WhatsApp"), the one owner of the
 * whatsapp_channels table.
 *
 * A property's channel is its Cloud API phone number id, the access token
 * revops sends with (sealed, core/crypto.h), the Meta app's secret that
 * signs the webhook calls (sealed) and the verify token of the webhook's
 * subscription handshake (kept as its SHA-256 only).
 *
 * Inbound: whatsapp_check checks X-Hub-Signature-256 against the app
 * secret of every channel the body names, then whatsapp_record records
 * each message (guests/threads.h; v1 whatsapp.received) and each delivery
 * status (delivered: v1 whatsapp.sent, once). Outbound: a queued template
 * message is sent by the worker (whatsapp_send_due) through the Cloud
 * API's messages call, transient failures retried on WHATSAPP_RETRY,
 * permanent ones recorded on the message. */
#ifndef REVOPS_WHATSAPP_H
#define REVOPS_WHATSAPP_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"

struct store;
struct store_tx;

#define WHATSAPP_API_VERSION "v21.0"
#define WHATSAPP_TIMEOUT_MS 10000
#define WHATSAPP_SEND_LEASE_MS 60000
#define WHATSAPP_SEND_BUDGET_MS 2000

/* The Cloud API connector: --whatsapp-api-url, "sim:" (answers every send
 * with a made-up message id) or an http(s) base URL
 * ("https://graph.facebook.com"). */
struct whatsapp;
int whatsapp_open(const char *url, struct store *st, struct whatsapp **out) WUR;
void whatsapp_close(struct whatsapp *wa);

/* Sets (or replaces) property_id's channel in portfolio pf, sealing the
 * secrets under key. Returns 0, 1 (phone_number_id is another property's
 * already) or < 0. */
int whatsapp_channel_set(struct store_tx *tx, const unsigned char key[32], const char *pf,
			 const char *property_id, const char *phone_number_id,
			 const char *access_token, const char *app_secret, const char *verify_token,
			 int64_t now) WUR;
/* 1 when property_id has a channel, 0 when not, or < 0. */
int whatsapp_channel_exists(struct store_tx *tx, const char *property_id) WUR;

/* GET /channels/whatsapp/webhook: 1 when token is the verify token of a
 * channel, 0 when not, or < 0. */
int whatsapp_verify_token(struct store_tx *tx, const char *token) WUR;

/* What whatsapp_check found. */
enum whatsapp_result {
	WHATSAPP_OK,       /* to record (maybe nothing: statuses of messages not ours) */
	WHATSAPP_BAD_BODY, /* not Meta's shape: why says where */
	WHATSAPP_UNSIGNED, /* a signature missing or wrong, or no channel known to check it */
};

/* A webhook call checked, to record (whatsapp_record). */
struct whatsapp_call;

/* POST /channels/whatsapp/webhook, first half: checks raw (len bytes,
 * parsed as doc) signed by signature ("sha256=<hex>", may be NULL)
 * against the app secret of each channel it names (kept in memory, or
 * read). Returns 0 with *result (and why), or a negative store status;
 * when *result is OK, *call (which owns what it needs of doc) is to be
 * handed to whatsapp_record. Writes nothing. */
int whatsapp_check(struct whatsapp *wa, const unsigned char key[32], const json_t *doc,
		   const char *raw, size_t len, const char *signature, struct whatsapp_call **call,
		   enum whatsapp_result *result, char *why, size_t cap) WUR;
/* The second half: records call (its messages and statuses) in a write
 * transaction shared with the calls handed in meanwhile (store/group.h:
 * the messages of all of them read and written together), then calls
 * done(arg, rc) on the recording thread: rc is STORE_OK once committed,
 * else a negative store status, and nothing was written. Takes call
 * (freed before done is called: the references it held to doc's parts
 * are dropped by then, so whoever keeps doc frees the tree). Returns 0,
 * or -1 (no memory: done is not called). */
int whatsapp_record(struct whatsapp *wa, struct whatsapp_call *call,
		    void (*done)(void *arg, int rc), void *arg) WUR;
/* Frees a call not handed to whatsapp_record. NULL is ignored. */
void whatsapp_call_free(struct whatsapp_call *call);

/* The worker: sends the queued messages due now (at most 16, none started
 * after WHATSAPP_SEND_BUDGET_MS), each claimed first. Returns how many it
 * tried, or < 0. */
int whatsapp_send_due(struct store *st, const unsigned char key[32], struct whatsapp *wa) WUR;

#endif
