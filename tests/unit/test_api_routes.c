/* The HTTP API's route table (api_route, engine/server/api.c) against its OpenAPI
 * description (engine/server/openapi.json, read from the source tree): every route
 * is documented as "METHOD path", every documented operation is a route, and
 * the copy built into the binary (GET /v1/openapi.json) is that file byte for
 * byte. tests/integration/test_api_openapi.sh checks the same against the
 * running server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "json.h"

#ifndef ENGINE_OPENAPI_JSON
#error "ENGINE_OPENAPI_JSON must name engine/server/openapi.json (tests/unit/CMakeLists.txt sets it)"
#endif

extern const unsigned char api_openapi_json[];
extern const unsigned long api_openapi_json_len;

/* The HTTP methods an OpenAPI path item can hold operations for. */
static const char *METHODS[] = {"get", "put", "post", "delete", "options", "head", "patch", "trace", NULL};

#define MAX_OPS 128

typedef struct ops {
  char *v[MAX_OPS]; /* "GET /v1/workflows" */
  size_t n;
} ops;

static void ops_add(ops *o, const char *method, const char *path) {
  if (o->n == MAX_OPS) fail_msg("more than %d operations", MAX_OPS);
  size_t len = strlen(method) + strlen(path) + 2;
  char *s = malloc(len);
  assert_non_null(s);
  snprintf(s, len, "%s %s", method, path);
  for (char *p = s; *p != ' '; p++) *p = (char)toupper((unsigned char)*p);
  o->v[o->n++] = s;
}

static int ops_has(const ops *o, const char *s) {
  for (size_t i = 0; i < o->n; i++)
    if (strcmp(o->v[i], s) == 0) return 1;
  return 0;
}

static void ops_free(ops *o) {
  for (size_t i = 0; i < o->n; i++) free(o->v[i]);
  o->n = 0;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  char *buf = NULL;
  size_t cap = 0, n = 0, got;
  do {
    if (n == cap) {
      cap = cap ? cap * 2 : 65536;
      buf = realloc(buf, cap + 1);
      assert_non_null(buf);
    }
    got = fread(buf + n, 1, cap - n, f);
    n += got;
  } while (got > 0);
  fclose(f);
  buf[n] = 0;
  *len = n;
  return buf;
}

/* The operations engine/server/openapi.json describes, "METHOD path" each. */
static void documented(ops *out) {
  size_t len;
  char *text = read_file(ENGINE_OPENAPI_JSON, &len), err[512];
  lua_State *L = luaL_newstate();
  assert_non_null(L);
  if (json_decode_safe(L, text, len, err, sizeof err) != 0) fail_msg("%s is not JSON: %s", ENGINE_OPENAPI_JSON, err);
  free(text);
  if (lua_getfield(L, -1, "paths") != LUA_TTABLE) fail_msg("%s has no \"paths\" object", ENGINE_OPENAPI_JSON);
  lua_pushnil(L);
  while (lua_next(L, -2)) { /* stack: doc paths path item */
    if (lua_type(L, -2) != LUA_TSTRING || !lua_istable(L, -1))
      fail_msg("a path of %s is not a path item", ENGINE_OPENAPI_JSON);
    const char *path = lua_tostring(L, -2);
    int any = 0;
    for (const char **m = METHODS; *m; m++) {
      if (lua_getfield(L, -1, *m) == LUA_TTABLE) {
        ops_add(out, *m, path);
        any = 1;
      }
      lua_pop(L, 1);
    }
    if (!any) fail_msg("path %s of %s has no operation", path, ENGINE_OPENAPI_JSON);
    lua_pop(L, 1);
  }
  lua_close(L);
}

/* The operations the server answers: its route table, and HEAD on each GET
 * route (the router answers HEAD as GET). */
static void routed(ops *out) {
  const char *method, *pattern;
  for (size_t i = 0; api_route(i, &method, &pattern); i++) {
    ops_add(out, method, pattern);
    for (size_t j = 0; j + 1 < out->n; j++)
      if (strcmp(out->v[j], out->v[out->n - 1]) == 0) fail_msg("route %s is in the table twice", out->v[j]);
    if (strcmp(method, "GET") == 0) ops_add(out, "HEAD", pattern);
  }
}

static void test_every_route_is_documented(void **state) {
  (void)state;
  ops doc = {0}, table = {0};
  documented(&doc);
  routed(&table);
  assert_true(table.n > 0);
  int missing = 0;
  for (size_t i = 0; i < table.n; i++)
    if (!ops_has(&doc, table.v[i])) {
      print_error("route %s (engine/server/api.c) is not in engine/server/openapi.json\n", table.v[i]);
      missing++;
    }
  ops_free(&doc);
  ops_free(&table);
  assert_int_equal(missing, 0);
}

static void test_every_operation_is_a_route(void **state) {
  (void)state;
  ops doc = {0}, table = {0};
  documented(&doc);
  routed(&table);
  int extra = 0;
  for (size_t i = 0; i < doc.n; i++)
    if (!ops_has(&table, doc.v[i])) {
      print_error("operation %s of engine/server/openapi.json is no route of engine/server/api.c\n", doc.v[i]);
      extra++;
    }
  ops_free(&doc);
  ops_free(&table);
  assert_int_equal(extra, 0);
}

/* CMake embeds the file when it configures: a stale copy would serve an old
 * description (re-run cmake). */
static void test_the_binary_serves_the_file(void **state) {
  (void)state;
  size_t len;
  char *text = read_file(ENGINE_OPENAPI_JSON, &len);
  if (len != api_openapi_json_len || memcmp(text, api_openapi_json, len) != 0)
    fail_msg("the built-in copy of engine/server/openapi.json (%lu bytes) differs from the file (%zu bytes): re-run cmake",
             api_openapi_json_len, len);
  free(text);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_route_is_documented),
      cmocka_unit_test(test_every_operation_is_a_route),
      cmocka_unit_test(test_the_binary_serves_the_file),
  };
  return cmocka_run_group_tests_name("unit_api_routes", tests, NULL, NULL);
}
