/* scope: which properties a request reaches (API-CONTRACT §2): those of
 * its token, narrowed further by X-Service-Property. The one place the
 * handlers ask it. */
#ifndef REVOPS_API_SCOPE_H
#define REVOPS_API_SCOPE_H

struct ctx;

/* 1 when the request (a struct ctx *, as void * for the domain modules'
 * callbacks) reaches property_id, else 0. */
int scope_reaches(void *c, const char *property_id);

/* The properties a list is narrowed to: NULL when the request reaches
 * every property of its portfolio, else an array of *n ids (borrowed from
 * c, valid during the request). */
const char *const *scope_props(struct ctx *c, int *n);

#endif
