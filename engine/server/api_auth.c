/* api_auth: who is asking and what they may do. A token's identity and
 * scopes (tokens.c), or, with no token in the database, anonymous access for
 * programs on this machine only; the identity always comes from the token,
 * never from the body. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api_internal.h"
#include "json.h"

/* Anonymous access is for programs on this machine (curl, scripts), not for
 * web pages its user visits: a browser sends Origin with every cross-site
 * POST (one of text/plain needs no preflight, so the page never has to read
 * the answer to start or approve something), and a page that reaches us by
 * DNS rebinding names its own host in Host. A page of this server's own
 * origin (the web page it serves) is local like its Host. */
static int local_client(httpd_req *r) {
  const char *host = httpd_host(r), *origin = httpd_header(r, "Origin");
  /* a page this server itself served (same origin, a loopback Host) may ask */
  if (origin && (!host || strncmp(origin, "http://", 7) != 0 || strcmp(origin + 7, host) != 0)) return 0;
  if (!host) return 1; /* HTTP/1.0 */
  const char *from = host, *to, *port;
  if (host[0] == '[') { /* "[::1]:7420" */
    from = host + 1;
    to = strchr(from, ']');
    if (!to) return 0;
    port = to + 1;
  } else {
    to = strchr(host, ':');
    if (!to) to = host + strlen(host);
    port = to;
  }
  if (*port && (*port != ':' || strspn(port + 1, "0123456789") != strlen(port + 1))) return 0;
  char name[64];
  if ((size_t)(to - from) >= sizeof name) return 0;
  memcpy(name, from, (size_t)(to - from));
  name[to - from] = 0;
  struct in_addr v4;
  struct in6_addr v6;
  if (strcasecmp(name, "localhost") == 0) return 1;
  if (inet_pton(AF_INET, name, &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return inet_pton(AF_INET6, name, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

/* Who is asking: the token's identity and scopes, or (with no token in the
 * database, on loopback only) "anonymous" with every scope. 0, or -1 answered. */
int api_authenticate(api *a, httpd_req *r, ctx *c) {
  int64_t live = token_live_count_cached(a->tokens, a->rd);
  if (live < 0) {
    api_reply_store_error(a, r, a->rd);
    return -1;
  }
  const char *auth = httpd_header(r, "Authorization");
  static const char *challenge[] = {"WWW-Authenticate: Bearer realm=\"engine\"", NULL};
  if (live == 0 && !auth) {
    if (!a->loopback) {
      api_reply_error(r, 401, "no API token exists: create one with engine token create NAME --scopes ...");
      return -1;
    }
    if (!local_client(r)) {
      api_reply_error(r, 401,
                      "without a token only local programs are served, and this request came from a web page "
                      "(an Origin header) or for another host name (Host): create a token with engine token create "
                      "NAME --scopes ...");
      return -1;
    }
    snprintf(c->identity, sizeof c->identity, "anonymous");
    c->scopes = SCOPE_ADMIN;
    return 0;
  }
  if (!auth || strncasecmp(auth, "Bearer ", 7) != 0) {
    api_reply_error_h(r, 401, challenge, "a token is required: Authorization: Bearer TOKEN");
    return -1;
  }
  const char *tok = auth + 7;
  while (*tok == ' ') tok++;
  char name[TOKEN_NAME_MAX + 1];
  int ok = token_verify_cached(a->tokens, a->rd, tok, strlen(tok), name, &c->scopes);
  if (ok < 0) {
    api_reply_store_error(a, r, a->rd);
    return -1;
  }
  if (ok == 0) {
    api_reply_error_h(r, 401, challenge, "the token is not valid (or revoked)");
    return -1;
  }
  snprintf(c->identity, sizeof c->identity, "token:%s", name);
  return 0;
}

const char *api_scope_name(unsigned scope) {
  switch (scope) {
  case SCOPE_READ: return "read";
  case SCOPE_START: return "start";
  case SCOPE_SIGNAL: return "signal";
  case SCOPE_APPROVE: return "approve";
  case SCOPE_CANCEL: return "cancel";
  default: return "admin";
  }
}

/* Who the presented token is and what it may do: the page shows only what
 * the scopes allow (approve buttons only with approve). Asked without a token
 * while tokens exist, it says so (identity null, no scopes) instead of 401:
 * the page learns that it must ask for one without a failed request. */
void api_h_whoami(api *a, httpd_req *r, ctx *c) {
  static const struct {
    unsigned bit;
    const char *name;
  } ALL[] = {{SCOPE_READ, "read"},     {SCOPE_START, "start"},   {SCOPE_SIGNAL, "signal"},
             {SCOPE_APPROVE, "approve"}, {SCOPE_CANCEL, "cancel"}, {SCOPE_ADMIN, "admin"}};
  int64_t live = token_live_count_cached(a->tokens, a->rd);
  if (live < 0) return api_reply_store_error(a, r, a->rd);
  if (live > 0 && !httpd_header(r, "Authorization"))
    return api_reply_json(r, 200, util_strdup("{\"identity\":null,\"tokens\":true,\"scopes\":[]}"), NULL);
  if (api_authenticate(a, r, c) != 0) return;
  ubuf b = {0};
  char *who = json_quote(c->identity);
  char *head = util_fmt("{\"identity\":%s,\"tokens\":%s,\"scopes\":[", who, live > 0 ? "true" : "false");
  ubuf_add(&b, head, strlen(head));
  free(head);
  free(who);
  int n = 0;
  for (size_t i = 0; i < sizeof ALL / sizeof *ALL; i++) {
    if (!token_allows(c->scopes, ALL[i].bit)) continue;
    char *q = util_fmt("%s\"%s\"", n++ ? "," : "", ALL[i].name);
    ubuf_add(&b, q, strlen(q));
    free(q);
  }
  ubuf_add(&b, "]}", 3);
  api_reply_json(r, 200, b.p, NULL);
}
