/* audit: a session's signed audit export (`engine audit export`, GET
 * /v1/workflows/{id}/audit) and its check without the database (`engine
 * audit verify`).
 *
 * The export is JSON lines (format "engine-audit/1"): a header, the
 * workflow's row, every history event of every run, every domain event, then
 * what an auditor asks first, drawn from those: the policy decisions (with
 * their policy set's hash), the approvals (who, when, why) and the artifacts
 * (their content hash, and whether the stored file still has it at the
 * export). Each line's first member is "prev": the SHA-256 of the line
 * before it (64 zeros for the first), so the lines are one hash chain; the
 * last line, the seal, carries the chain's head, the number of lines and the
 * engine's Ed25519 public key, and is signed (sign.h) as written without its
 * signature. A changed, removed, inserted or reordered line breaks the chain
 * at the first line after it; a changed seal breaks the signature. */
#ifndef ENGINE_AUDIT_H
#define ENGINE_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "sign.h"
#include "store.h"

#define AUDIT_FORMAT "engine-audit/1"

/* The engine's signing key for the database at db: in its data directory's
 * keys/ (engine_data_dir), made there at first use (sign_key_open): 0 with
 * *out, or -1 with err. */
int audit_key_open(const char *db, sign_key **out, char *err, size_t errlen);

/* Workflow id's export, signed with key, into *out (malloc'd, *len bytes):
 * 1; 0 when there is no such workflow; -1 with err (a read error, a damaged
 * log). exported_by is who asked (local:USER, token:NAME). */
int audit_export(store *st, const char *id, const sign_key *key, const char *exported_by, char **out, size_t *len,
                 char *err, size_t errlen);

typedef struct audit_check {
  int ok;
  char problem[512]; /* when not ok: the first line that does not check, and why */
  char workflow[256];
  int64_t lines, history, events, decisions, approvals, artifacts;
  int64_t signed_at; /* epoch ms */
  char key_id[17];   /* the first 16 hex digits of the signer's public key */
} audit_check;

/* Checks an export's text against the public key pub: *out says whether it
 * holds (and what it holds), or names the first problem. */
void audit_verify(const char *text, size_t len, const unsigned char pub[SIGN_PUBLIC_BYTES], audit_check *out);

#endif
