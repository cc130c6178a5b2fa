/* json: canonical JSON encoding of Lua values (sorted object keys, so the same
 * value always gives the same bytes in every VM), decoding via lua-cjson. */
#ifndef ENGINE_JSON_H
#define ENGINE_JSON_H

#include <lua.h>
#include <stddef.h>

/* Encodes the value at idx and pushes the JSON text as a Lua string.
 * Raises a Lua error for values JSON cannot hold (functions, cycles, NaN). */
const char *json_encode(lua_State *L, int idx, size_t *len);

/* Decodes text and pushes the value; raises a Lua error on malformed JSON. */
void json_decode(lua_State *L, const char *text, size_t len);

/* Like json_decode, but returns 0 on success and -1 with the message in err. */
int json_decode_safe(lua_State *L, const char *text, size_t len, char *err, size_t errlen);

/* Opens module "json" = {encode=, decode=, null=}; leaves it on the stack. */
int luaopen_engine_json(lua_State *L);

/* Checks that text is valid JSON (uses a throwaway Lua state). */
int json_validate(const char *text, char *err, size_t errlen);

/* Returns text re-encoded canonically (compact, sorted keys), malloc'd, or
 * NULL with err when it is not JSON. */
char *json_canonical(const char *text, char *err, size_t errlen);

/* Returns s as a malloc'd JSON string literal (quoted and escaped). */
char *json_quote(const char *s);

/* JSON text as it is printed (--json, the API): strict JSON in valid UTF-8,
 * each invalid sequence in a string as \ufffd, and every control character,
 * DEL, C1 control and bidi control as a \u escape, so it parses anywhere and
 * is inert on a terminal. The log keeps the bytes as they were recorded (the
 * workflow reads them back, replay hashes them); only output is changed.
 * Returns malloc'd NUL-terminated text. */
char *json_for_output(const char *text, size_t n);

#endif
