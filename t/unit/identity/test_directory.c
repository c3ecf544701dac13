/* Unit tests for the directory: the role vocabulary; the stored form of
 * users and groups (what a client cannot set dropped, columns, members
 * normalised and de-duplicated); and, on a fresh SQLite database, users
 * created by an operator and just in time, found by name in any case,
 * their roles from their own values and their groups, deactivation and
 * deletion with the events they describe, and groups that drop members
 * naming nothing in the portfolio. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "json_fixture.h"

#include "identity/directory.h"
#include "identity/scim_filter.h"
#include "identity/scim_schema.h"
#include "store/store.h"

#define PF "pf_test"

static void test_roles(void **state)
{
	char text[128];
	size_t i;

	(void)state;
	for (i = 0; i < DIRECTORY_NROLES; i++)
		assert_true(directory_is_role(directory_role_names[i]));
	assert_false(directory_is_role("admin"));
	assert_false(directory_is_role("Revenue-Approver"));
	assert_false(directory_is_role(""));
	directory_roles_text(text, sizeof text);
	assert_string_equal(text, "revenue-approver, finance-operator or ops-manager");
}

/* A user body loses id, meta, groups and its password in every spelling,
 * gets its string boolean normalised and the core schema first; the
 * columns follow the document. */
static void test_user_prepare(void **state)
{
	json_t *doc = load("{\"id\": \"x\", \"META\": {}, \"groups\": [], \"Password\": \"p\","
			   " \"" SCIM_URN_USER ":password\": \"q\","
			   " \"schemas\": [\"" SCIM_URN_ENTERPRISE "\"],"
			   " \"userName\": \"Ann@Example.com\", \"active\": \"False\","
			   " \"displayName\": \"Ann\", \"roles\": [\"ops-manager\","
			   " {\"value\": \"finance-operator\"}]}");
	json_t *clean = directory_sanitize(doc, 1), *s;
	struct directory_user u;
	char err[256];

	(void)state;
	assert_int_equal(directory_user_prepare(clean, NULL, &u, err, sizeof err), 0);
	assert_null(directory_get_ci(clean, "id"));
	assert_null(directory_get_ci(clean, "meta"));
	assert_null(directory_get_ci(clean, "groups"));
	assert_null(directory_get_ci(clean, "password"));
	assert_null(directory_get_ci(clean, SCIM_URN_USER ":password"));
	s = json_object_get(clean, "schemas");
	assert_string_equal(json_string_value(json_array_get(s, 0)), SCIM_URN_USER);
	assert_string_equal(json_string_value(json_array_get(s, 1)), SCIM_URN_ENTERPRISE);
	assert_string_equal(u.user_name, "Ann@Example.com");
	assert_string_equal(u.lower, "ann@example.com");
	assert_string_equal(u.display_name, "Ann");
	assert_null(u.external_id);
	assert_int_equal(u.active, 0);
	assert_string_equal(u.roles, "[\"ops-manager\",\"finance-operator\"]");
	assert_null(strstr(u.doc_s, "assword"));
	directory_user_release(&u);
	json_decref(clean);
	json_decref(doc);
}

/* What the user's stored form refuses, with the schema check's result. */
static void test_user_refused(void **state)
{
	json_t *body = load("{\"displayName\": \"no name\"}");
	char err[256];
	int rc;

	(void)state;
	assert_null(directory_prepare(body, 1, NULL, &rc, err, sizeof err));
	assert_true(rc < 0);
	assert_true(err[0] != '\0');
	json_decref(body);
	body = load("{\"userName\": \"a\", \"roles\": [{\"value\": 7}]}");
	assert_null(directory_prepare(body, 1, NULL, &rc, err, sizeof err));
	assert_int_equal(rc, SCIM_SCHEMA_INVALID_VALUE);
	json_decref(body);
	body = load("{\"userName\": \"a\", \"active\": true, \"ACTIVE\": false}");
	assert_null(directory_prepare(body, 1, NULL, &rc, err, sizeof err));
	assert_int_equal(rc, SCIM_SCHEMA_INVALID_SYNTAX);
	json_decref(body);
}

/* Members become objects, the first of equal values stays in place, and a
 * prepared group prepares again unchanged. */
static void test_group_members(void **state)
{
	json_t *body = load("{\"displayName\": \"ops-manager\", \"members\": [\"usr_b\","
			    " {\"value\": \"usr_a\", \"displayName\": \"A\"}, {\"value\": \"usr_b\"},"
			    " \"usr_a\"]}");
	json_t *doc, *again, *m;
	char err[256];
	int rc;

	(void)state;
	doc = directory_prepare(body, 0, NULL, &rc, err, sizeof err);
	assert_non_null(doc);
	m = json_object_get(doc, "members");
	assert_int_equal(json_array_size(m), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(m, 0), "value")),
			    "usr_b");
	assert_string_equal(json_string_value(json_object_get(json_array_get(m, 1), "display")), "A");
	again = directory_prepare(doc, 0, doc, &rc, err, sizeof err);
	assert_non_null(again);
	assert_true(json_equal(doc, again));
	json_decref(again);
	json_decref(doc);
	json_decref(body);
	body = load("{\"displayName\": \"g\", \"members\": [\"\"]}");
	assert_null(directory_prepare(body, 0, NULL, &rc, err, sizeof err));
	assert_string_equal(err, "members[0].value must be a non-empty string");
	json_decref(body);
}

/* ------------------------------------------------------- with a store */

struct fixture {
	char dir[64];
	char url[160];
	struct store *st;
	struct store_tx *tx; /* a write transaction on PF */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);

	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/revops-directory-XXXXXX");
	if (!mkdtemp(f->dir))
		goto fail;
	snprintf(f->url, sizeof f->url, "sqlite:%s/revops.db", f->dir);
	if (store_open(f->url, 2, &f->st) != 0)
		goto fail;
	if (store_begin(f->st, 1, &f->tx) != STORE_OK ||
	    store_exec(f->tx,
		       "INSERT INTO portfolios (id, name, plan, created_at)"
		       " VALUES ($1, 'Test', 'group', 0)",
		       (struct store_val[]){sv_text(PF)}, 1) != 1)
		goto fail;
	*state = f;
	return 0;
fail:
	free(f);
	return -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	store_rollback(f->tx);
	store_close(f->st);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

/* Creates an operator user with the roles in roles_text (a JSON array). */
static void make_user(struct store_tx *tx, const char *name, const char *roles_text, char *id)
{
	json_t *roles = load(roles_text);

	assert_int_equal(directory_user_create(tx, PF, name, NULL, roles, "admin", id, ID_MAX), 0);
	json_decref(roles);
}

/* Roles: the user's own values that are role names, then the groups'
 * display names that are, each once; none for an unknown or inactive user. */
static void test_user_roles(void **state)
{
	struct fixture *f = *state;
	char id[ID_MAX], found[ID_MAX], name[64];
	json_t *roles, *group;

	make_user(f->tx, "Bob@Example.com", "[\"finance-operator\", \"pilot\"]", id);
	assert_int_equal(directory_user_name(f->tx, PF, id, name, sizeof name), 0);
	assert_string_equal(name, "Bob@Example.com");
	assert_int_equal(directory_user_name(f->tx, PF, "usr_none", name, sizeof name), 1);
	group = load("{\"displayName\": \"ops-manager\", \"members\": []}");
	json_array_append_new(json_object_get(group, "members"), json_pack("{s:s}", "value", id));
	json_array_append_new(json_object_get(group, "members"),
			      json_pack("{s:s}", "value", "usr_elsewhere"));
	assert_int_equal(directory_group_save(f->tx, PF, "grp_1", group, 1), 0);
	assert_int_equal(json_array_size(json_object_get(group, "members")), 1);
	/* by userName, case-insensitively: the user's id and roles */
	assert_int_equal(directory_user_find_roles(f->tx, PF, "bob@EXAMPLE.com", found,
						   sizeof found, &roles),
			 0);
	assert_string_equal(found, id);
	assert_int_equal(json_array_size(roles), 2);
	assert_string_equal(json_string_value(json_array_get(roles, 0)), "finance-operator");
	assert_string_equal(json_string_value(json_array_get(roles, 1)), "ops-manager");
	json_decref(roles);
	assert_int_equal(directory_user_find_roles(f->tx, PF, "nobody", found, sizeof found, &roles),
			 1);
	assert_null(roles);
	json_decref(group);
}

/* SAML logins: an unknown user is provisioned (with its event), a JIT
 * user's roles follow each assertion, an operator's user keeps its own. */
static void test_login(void **state)
{
	struct fixture *f = *state;
	struct directory_event ev;
	char id[ID_MAX], again[ID_MAX], admin[ID_MAX];
	json_t *roles = load("[\"ops-manager\"]"), *now, *none = json_array();

	assert_int_equal(directory_user_login(f->tx, PF, "Jit@Example.com", "", roles, id,
					      sizeof id, &ev),
			 0);
	assert_string_equal(ev.type, "sso.user.provisioned");
	assert_string_equal(ev.via, "saml_jit");
	assert_string_equal(ev.user_id, id);
	assert_int_equal(ev.revoked, -1);
	assert_int_equal(directory_user_login(f->tx, PF, "jit@example.com", "", none, again,
					      sizeof again, &ev),
			 0);
	assert_null(ev.type);
	assert_string_equal(again, id);
	assert_int_equal(directory_user_find_roles(f->tx, PF, "jit@example.com", again,
						   sizeof again, &now),
			 0);
	assert_int_equal(json_array_size(now), 0);
	json_decref(now);
	make_user(f->tx, "admin@example.com", "[\"revenue-approver\"]", admin);
	assert_int_equal(directory_user_login(f->tx, PF, "ADMIN@example.com", "", none, again,
					      sizeof again, &ev),
			 0);
	assert_int_equal(directory_user_find_roles(f->tx, PF, "admin@example.com", again,
						   sizeof again, &now),
			 0);
	assert_string_equal(again, admin);
	assert_string_equal(json_string_value(json_array_get(now, 0)), "revenue-approver");
	json_decref(now);
	json_decref(roles);
	json_decref(none);
}

/* Deactivation describes sso.user.deprovisioned and refuses logins;
 * deletion takes the user out of its groups. */
static void test_deactivate_delete(void **state)
{
	struct fixture *f = *state;
	struct directory_event ev;
	struct directory_user u;
	struct directory_row row, grp;
	char id[ID_MAX], err[256];
	json_t *doc, *group;

	make_user(f->tx, "carol@example.com", "[]", id);
	assert_int_equal(directory_load(f->tx, DIRECTORY_USER, PF, id, &row), 1);
	doc = json_deep_copy(row.doc);
	json_object_set_new(doc, "active", json_false());
	assert_int_equal(directory_user_prepare(doc, row.doc, &u, err, sizeof err), 0);
	assert_int_equal(directory_user_update(f->tx, PF, &row, &u, &ev), 0);
	assert_string_equal(ev.type, "sso.user.deprovisioned");
	assert_int_equal(ev.revoked, 0);
	assert_string_equal(ev.user_name, "carol@example.com");
	directory_user_release(&u);
	json_decref(doc);
	assert_int_equal(directory_user_login(f->tx, PF, "carol@example.com", "", NULL, err,
					      sizeof err, &ev),
			 1);
	/* an inactive user has no roles: 2 (governance names it) */
	assert_int_equal(directory_user_find_roles(f->tx, PF, "Carol@example.com", err, sizeof err,
						   &group),
			 2);
	assert_null(group);
	group = json_pack("{s:s, s:[{s:s}]}", "displayName", "g", "members", "value", id);
	assert_int_equal(directory_group_save(f->tx, PF, "grp_2", group, 1), 0);
	assert_int_equal(directory_user_delete(f->tx, PF, &row, &ev), 0);
	assert_string_equal(ev.type, "sso.user.deprovisioned");
	assert_int_equal(directory_load(f->tx, DIRECTORY_GROUP, PF, "grp_2", &grp), 1);
	assert_int_equal(json_array_size(json_object_get(grp.doc, "members")), 0);
	assert_int_equal(grp.version, 2);
	directory_row_free(&grp);
	directory_row_free(&row);
	assert_int_equal(directory_load(f->tx, DIRECTORY_USER, PF, id, &row), 0);
	json_decref(group);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roles),
		cmocka_unit_test(test_user_prepare),
		cmocka_unit_test(test_user_refused),
		cmocka_unit_test(test_group_members),
		cmocka_unit_test_setup_teardown(test_user_roles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_login, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deactivate_delete, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
