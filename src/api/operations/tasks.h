/* tasks: the operations task routes (issue 16; docs/operations-tasks.md):
 * create (tasks:write), list and read (tasks:read), acknowledge and
 * resolve (tasks:write, a user with role ops-manager). */
#ifndef REVOPS_API_TASKS_H
#define REVOPS_API_TASKS_H

struct route_table;

extern const struct route_table task_routes;

#endif
