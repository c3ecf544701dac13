/* currency: ISO 4217 currency codes in use. */
#ifndef REVOPS_CURRENCY_H
#define REVOPS_CURRENCY_H

/* 1 when code is an active ISO 4217 alphabetic code (e.g. "PLN"), else 0. */
int currency_known(const char *code);

#endif
