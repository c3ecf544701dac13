/* Files compiled into the binary by cmake/embed.cmake. */
#ifndef REVOPS_EMBEDDED_H
#define REVOPS_EMBEDDED_H
#include <stddef.h>

struct embedded_migration {
	int version;      /* from the file name's leading number */
	const char *name; /* file name, e.g. "001_init.sql" */
	const char *sql;  /* NUL-terminated script */
};

/* Terminated by an entry whose name is NULL; sorted by version. */
extern const struct embedded_migration embedded_migrations_sqlite[];
extern const struct embedded_migration embedded_migrations_postgres[];
extern const char *const embedded_openapi;
extern const size_t embedded_openapi_len;
/* src/identity/scim_meta.json: ServiceProviderConfig, ResourceTypes and Schemas. */
extern const char *const embedded_scim_meta;

#endif
