/* cmd_audit: `engine audit export ID` (the session's signed export, from the
 * database or --server), `engine audit verify FILE --key PUB` (checked with
 * nothing but the file and the public key) and `engine audit key` (where the
 * engine's public key is, to hand to whoever checks). audit.h says what an
 * export holds. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit.h"
#include "client_ops.h"
#include "render.h"
#include "util.h"

static const char *AUDIT_HELP =
    "usage: engine audit export ID [--db PATH] > FILE\n"
    "       engine audit verify FILE --key PUB\n"
    "       engine audit key [--db PATH]\n"
    "\n"
    "export writes session ID's history, domain events, policy decisions (with\n"
    "their policy set's hash), approvals and artifact hashes as JSON lines, each\n"
    "chained to the one before by its SHA-256 and the last one signed with the\n"
    "engine's Ed25519 key (made at first use in the data directory's keys/,\n"
    "readable only by the engine's user). With --server, the server signs it.\n"
    "verify checks such a file against the public key PUB (a PEM file, or 64 hex\n"
    "digits in a file), without the database: exit 0 when it holds, 1 naming the\n"
    "first line that does not. key prints the public key's file and its hex.\n";

static int export_cmd(args *a, common *c) {
  const char *id = NULL;
  int bad = 0, rc;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(AUDIT_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return cli_die(EXIT_USAGE, "audit export: unknown option %s", cur);
    else if (!id) id = cur;
    else return cli_die(EXIT_USAGE, "audit export: unexpected argument %s", cur);
  }
  if (!id) return cli_die(EXIT_USAGE, "audit export: missing ID (see engine audit --help)");
  client *cl;
  if ((rc = client_open(c, &cl))) return rc;
  client_err e = {0};
  char *text = NULL;
  size_t len = 0;
  rc = cl->ops->audit(cl, id, &text, &len, &e);
  client_close(cl);
  if (rc != 0) return client_fail(&e, "audit export: ");
  int ok = fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0;
  free(text);
  if (!ok) return cli_die(EXIT_FAILED, "audit export: cannot write the export: %s", strerror(errno));
  return EXIT_OK;
}

static int verify_cmd(args *a) {
  const char *file = NULL, *keyfile = NULL;
  int bad = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--key", &bad))) keyfile = v;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(AUDIT_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1]) return cli_die(EXIT_USAGE, "audit verify: unknown option %s", cur);
    else if (!file) file = cur;
    else return cli_die(EXIT_USAGE, "audit verify: unexpected argument %s", cur);
  }
  if (!file) return cli_die(EXIT_USAGE, "audit verify: missing FILE (see engine audit --help)");
  if (!keyfile)
    return cli_die(EXIT_USAGE, "audit verify: --key PUB is required: the public key you trust to have signed it "
                               "(engine audit key on the engine's host prints where it is)");
  char err[512];
  unsigned char pub[SIGN_PUBLIC_BYTES];
  if (sign_public_read(keyfile, pub, err, sizeof err) != 0) return cli_die(EXIT_USAGE, "audit verify: %s", err);
  size_t len;
  char *text = util_read_file(file, &len);
  if (!text) return cli_die(EXIT_USAGE, "audit verify: cannot read %s: %s", file, strerror(errno));
  audit_check ck;
  audit_verify(text, len, pub, &ck);
  free(text);
  if (!ck.ok) {
    render_line(stderr, DIE_MAX, "engine: %s does not verify: %s", file, ck.problem);
    return EXIT_FAILED;
  }
  char when[64] = "?";
  time_t t = (time_t)(ck.signed_at / 1000);
  struct tm tm;
  if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  render_line(stdout, DIE_MAX,
              "%s verifies: session %s, %lld lines (%lld history events, %lld domain events, %lld policy decisions, "
              "%lld approvals, %lld artifacts), signed at %s by key %s",
              file, ck.workflow, (long long)ck.lines, (long long)ck.history, (long long)ck.events,
              (long long)ck.decisions, (long long)ck.approvals, (long long)ck.artifacts, when, ck.key_id);
  return EXIT_OK;
}

static int key_cmd(args *a, common *c) {
  int bad = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(AUDIT_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else return cli_die(EXIT_USAGE, "audit key: unexpected argument %s", cur);
  }
  char err[1024];
  sign_key *k;
  if (audit_key_open(c->db, &k, err, sizeof err) != 0) return cli_die(EXIT_USAGE, "audit key: %s", err);
  unsigned char pub[SIGN_PUBLIC_BYTES];
  char hex[2 * SIGN_PUBLIC_BYTES + 1];
  sign_key_public(k, pub);
  util_hex(pub, sizeof pub, hex);
  printf("%s\n%s\n", sign_key_public_path(k), hex);
  sign_key_free(k);
  return EXIT_OK;
}

int cmd_audit(args *a, common *c) {
  if (a->i >= a->argc) return cli_die(EXIT_USAGE, "audit: missing export, verify or key (see engine audit --help)");
  const char *sub = a->argv[a->i++];
  if (cli_is_flag(sub, "--help") || cli_is_flag(sub, "-h")) return fputs(AUDIT_HELP, stdout), EXIT_OK;
  if (strcmp(sub, "export") == 0) return export_cmd(a, c);
  if (strcmp(sub, "verify") == 0) return verify_cmd(a);
  if (strcmp(sub, "key") == 0) {
    if (c->server && !(a->i < a->argc && (cli_is_flag(a->argv[a->i], "--help") || cli_is_flag(a->argv[a->i], "-h")))) return cli_die(EXIT_USAGE, "audit key: the key is on the engine's host: run it there, without --server");
    return key_cmd(a, c);
  }
  return cli_die(EXIT_USAGE, "audit: unknown subcommand %s (export, verify or key)", sub);
}
