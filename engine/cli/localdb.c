/* localdb: the database on this machine as a command opens it, and who acts
 * from this shell. */
#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_internal.h"
#include "dbfile.h"
#include "util.h"

/* SQLite says only "unable to open database file" there, and the worker lock
 * only that its file cannot be opened: say which file or directory is
 * read-only instead. */
const char *cli_unwritable(const char *db, char *why, size_t n) {
  if (store_is_url(db)) return NULL; /* PostgreSQL's own message says it */
  char *tmp = util_strdup(db);
  const char *dir = dirname(tmp);
  const char *out = why;
  if (access(db, F_OK) == 0 && access(db, W_OK) != 0)
    snprintf(why, n, "the database %s is read-only (%s)", db, strerror(errno));
  else if (access(dir, W_OK) != 0)
    snprintf(why, n, "the directory %s is not writable (%s): SQLite writes the database's -wal and -shm files and "
             "the engine its lock file there", dir, strerror(errno));
  else
    out = NULL;
  free(tmp);
  return out;
}

int cli_db_open(const char *db, store **st, char *err, size_t errlen) {
  char msg[512], why[768];
  if (engine_db_missing(db)) {
    util_seterr(err, errlen, "no database at %s (start a workflow first, or pass --db)", db);
    return -1;
  }
  if (store_open(db, 1, st, msg, sizeof msg) != STORE_OK) {
    if (cli_unwritable(db, why, sizeof why)) util_seterr(err, errlen, "cannot open database %s: %s", db, why);
    else util_seterr(err, errlen, "%s", msg);
    return -1;
  }
  return 0;
}

int cli_open_existing(const char *db, store **st) {
  char err[1400];
  return cli_db_open(db, st, err, sizeof err) == 0 ? 0 : cli_die(EXIT_USAGE, "%s", err);
}

int cli_read_failed(store *st, const char *what, const char *id) {
  char msg[600];
  snprintf(msg, sizeof msg, "%s", store_errmsg(st));
  store_close(st);
  return cli_die(EXIT_USAGE, "cannot read %s of %s: %s", what, id, msg);
}

void cli_local_identity(char *out, size_t n) {
  const char *user = getenv("USER");
  snprintf(out, n, "local:%s", user && *user ? user : "unknown");
}
