/* dbfile: the files around a database: the worker lock beside it, how it is
 * shown in messages, the data directory, and watching it for commits by
 * other processes. */
#ifndef ENGINE_DBFILE_H
#define ENGINE_DBFILE_H

#include <uv.h>

#include "store.h"

/* ---- the worker lock: one worker per database ---- */
/* Returns an fd holding the lock, or -1 with *holder describing the holder.
 * The lock is <the database's resolved path>.lock, so every name of one
 * database file (a symlink, "x/../engine.db") shares it. */
int engine_lock(const char *db_path, const char *mode, char *holder, size_t holderlen);
void engine_unlock(int fd);
/* 0 when the database at db may exist (a file that exists, or a PostgreSQL
 * URL: only connecting tells), -1 when there is no such file. */
int engine_db_missing(const char *db);
/* db as messages show it: a URL without its password (buf, n bytes), a path as it is. */
const char *engine_db_shown(const char *db, char *buf, size_t n);
/* The directory of the engine's files that live beside the database (limits.lua,
 * workspaces, the crash note): the database file's directory, resolved; for a
 * PostgreSQL URL $ENGINE_DATA_DIR, else ./engine-data, created if missing.
 * out has PATH_MAX bytes; returns 0, or -1 with out empty. */
int engine_data_dir(const char *db, char *out);

/* ---- watching a database for commits by other processes ---- */
typedef struct dbwatch dbwatch;
/* cb runs (on loop) soon after another process commits to st's database. */
dbwatch *dbwatch_start(uv_loop_t *loop, store *st, void (*cb)(void *ud), void *ud);
void dbwatch_stop(dbwatch *w);

#endif
