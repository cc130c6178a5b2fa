/* migrate: `engine migrate`, moving a whole database between the backends
 * (SQLite <-> PostgreSQL) and bringing one's schema up to date. */
#ifndef ENGINE_MIGRATE_H
#define ENGINE_MIGRATE_H

#include <stddef.h>
#include <stdio.h>

/* Copies every table of the database at from into the one at to (a path or a
 * postgres:// URL each), in one transaction of the target: every workflow,
 * its history, code, tasks, signals, domain events, tokens, slots, counters,
 * deliveries, schedules and the engine's own values (its instance id with
 * them, so sandboxes stay the same session's). Refuses a target that holds
 * any of those, and either database while a worker holds its lock. Then reads
 * both back and compares every table's row count and SHA-256. Prints a line
 * per table to out. Returns 0, or -1 with err (nothing was written to the
 * target unless err says the check after the commit failed). */
int migrate_copy(const char *from, const char *to, FILE *out, char *err, size_t errlen);

/* Opens the database at db, which applies the schema's migrations, and
 * prints its schema version. Returns 0, or -1 with err (an engine older than
 * the schema refuses it, naming both versions). */
int migrate_schema(const char *db, FILE *out, char *err, size_t errlen);

#endif
