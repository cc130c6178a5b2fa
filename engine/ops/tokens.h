/* tokens: API tokens with an identity and scopes, for `engine serve --listen`.
 *
 * A token is printed once when created ("eng_" and 43 base64url characters,
 * 256 random bits); the database keeps only its SHA-256. A request presents it
 * as "Authorization: Bearer TOKEN"; its identity is "token:NAME". Scopes: read
 * (every GET), start, signal, approve, cancel, admin (all of them). Scopes
 * are the coarse layer over the API's routes; a token also carries grants
 * (docs/grants.md): what the sessions it starts may do on the trusted side. */
#ifndef ENGINE_TOKENS_H
#define ENGINE_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

enum {
  SCOPE_READ = 1,
  SCOPE_START = 2,
  SCOPE_SIGNAL = 4,
  SCOPE_APPROVE = 8,
  SCOPE_CANCEL = 16,
  SCOPE_ADMIN = 32 /* implies every other scope */
};

#define TOKEN_NAME_MAX 64
#define TOKEN_SECRET_MAX 64 /* bytes of a printed token, with its NUL */

/* Token names: 1 to TOKEN_NAME_MAX bytes of A-Z a-z 0-9 . _ @ -, the first a
 * letter or digit. Returns 0, or -1 with err naming the problem. */
int token_check_name(const char *name, char *err, size_t errlen);

/* "read,start,..." (comma-separated, spaces around names ignored) into a
 * mask. Returns 0, or -1 with err naming the unknown or missing scope. */
int token_scopes_parse(const char *csv, unsigned *mask, char *err, size_t errlen);
/* The mask as "read,start,..." in the order of the enum ("admin" alone when
 * set). */
void token_scopes_format(unsigned mask, char *out, size_t n);
/* Whether mask grants scope (admin grants all). */
int token_allows(unsigned mask, unsigned scope);

/* Creates token name with scopes (one transaction, committed): 0 with the
 * secret in secret (TOKEN_SECRET_MAX bytes), or -1 with err (a bad name, a
 * live token of that name, a store error). A revoked name may be reused: the
 * new token replaces the revoked row. */
int token_create(store *st, const char *name, unsigned scopes, char *secret, char *err, size_t errlen);
/* The same, with grants: a JSON list of canonical grants (token_grants_check),
 * or NULL for none. */
int token_create_granted(store *st, const char *name, unsigned scopes, const char *grants, char *secret, char *err,
                         size_t errlen);

/* Grants as given (--grant, repeatable) checked by lua/grants.lua, the one
 * reading of a grant: 0 with *json a malloc'd JSON list of their canonical
 * forms, or -1 with err naming each bad one. */
int token_grants_check(const char *const *grants, int n, char **json, char *err, size_t errlen);

/* The grants of the live token name: 1 with *grants a malloc'd JSON list
 * ("[]" when it carries none), 0 no live token of that name, -1 store error. */
int token_grants_of(store *st, const char *name, char **grants);
/* Revokes token name: 1 revoked now, 0 no live token of that name, -1 error. */
int token_revoke(store *st, const char *name, char *err, size_t errlen);

typedef struct token_info {
  const char *name;
  unsigned scopes;
  int64_t created_at, revoked_at; /* epoch ms; revoked_at 0 when live */
  const char *grants;             /* JSON list, NULL: none */
} token_info;
/* Every token, live and revoked, by name. Returns 0 or -1 (store_errmsg). */
int token_list(store *st, int (*cb)(void *ud, const token_info *t), void *ud);

/* How many live tokens exist (the server requires one from every request
 * once there is any): >= 0, or -1 on a store error. */
int64_t token_live_count(store *st);

/* Checks a presented secret against every live token, comparing hashes in
 * constant time (CRYPTO_memcmp, no early exit over the tokens): 1 with the
 * token's name (TOKEN_NAME_MAX + 1 bytes) and scopes, 0 when none matches, -1
 * on a store error. */
int token_verify(store *st, const char *secret, size_t len, char *name, unsigned *scopes);

/* The live tokens as read at most max_age_ms ago, for a server whose store is
 * a network away (PostgreSQL): a request's check then waits for no answer
 * except once per max_age_ms. A revoked token is refused at most max_age_ms
 * after its revocation committed; a token that matches none read is looked
 * for again at once (a new token is good at once), and a first token ends
 * tokenless access at the next reading. The *_cached calls are token_live_count,
 * token_verify and token_grants_of on it (c NULL: on the store directly). */
typedef struct token_cache token_cache;
token_cache *token_cache_new(int64_t max_age_ms);
void token_cache_free(token_cache *c);
int64_t token_live_count_cached(token_cache *c, store *st);
int token_verify_cached(token_cache *c, store *st, const char *secret, size_t len, char *name, unsigned *scopes);
int token_grants_of_cached(token_cache *c, store *st, const char *name, char **grants);

#endif
