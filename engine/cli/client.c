/* client: which implementation of client_ops.h a command gets (the local
 * database, or the server --server names), and how a command says what one
 * answered. */
#include "client_ops.h"

int client_open(const common *c, client **out) {
  *out = NULL;
  if (!c->server) {
    *out = client_local_new(c->db);
    return EXIT_OK;
  }
  if (c->db != c->db_default)
    return cli_die(EXIT_USAGE, "--db and --server cannot be used together: with --server the server's database is used");
  char err[600];
  *out = client_http_new(c->server, c->token, err, sizeof err);
  return *out ? EXIT_OK : cli_die(EXIT_USAGE, "%s", err);
}

void client_close(client *cl) {
  if (cl) cl->ops->close(cl);
}

int client_fail(const client_err *err, const char *prefix) {
  return cli_die(EXIT_USAGE, "%s%s", err->refused && prefix ? prefix : "", err->msg);
}
