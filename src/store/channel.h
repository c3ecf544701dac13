/* store/channel: the notification channels of store.h (store_notify,
 * store_wait), apart so that backend.h, which store.c includes, need not
 * include store.h back. */
#ifndef REVOPS_STORE_CHANNEL_H
#define REVOPS_STORE_CHANNEL_H

enum store_channel {
	STORE_CH_OUTBOX,     /* events were added to the outbox */
	STORE_CH_DELIVERIES, /* webhook deliveries were made due */
	STORE_CH_PROPERTIES, /* a portfolio's settings changed: a property or ceiling was
			      * added (portfolio/snapshot.h), SLA minutes or escalation
			      * keywords were set (guests/whatsapp.c's rules) */
	STORE_CHANNELS
};

#endif
