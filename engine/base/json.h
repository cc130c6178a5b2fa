/* json: canonical JSON encoding of Lua values (sorted object keys, so the same
 * value always gives the same bytes in every VM), decoding via lua-cjson. */
#ifndef ENGINE_JSON_H
#define ENGINE_JSON_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

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

/* A top-level integer field of an object the engine wrote itself with known
 * keys ({"fire_at":N}, {"deadline":N,...}), found by its text; dflt when
 * absent. Never for JSON from outside: a nested key of that name would match. */
int64_t json_int_field(const char *json, const char *key, int64_t dflt);

/* Returns s as a malloc'd JSON string literal (quoted and escaped). s is a C
 * string: text that may hold NUL bytes goes through json_encode (lengths). */
char *json_quote(const char *s);

/* JSON text as it is printed (--json, the API): strict JSON in valid UTF-8,
 * each invalid sequence in a string as \ufffd, and every control character,
 * DEL, C1 control and bidi control as a \u escape, so it parses anywhere and
 * is inert on a terminal. The log keeps the bytes as they were recorded (the
 * workflow reads them back, replay hashes them); only output is changed.
 * Returns malloc'd NUL-terminated text. */
char *json_for_output(const char *text, size_t n);

/* ---- JSON from outside the engine: inputs, signal payloads, results ----
 * One payload (a workflow input, a signal payload, an activity or workflow
 * result, a checkpoint value) is at most ENGINE_MAX_PAYLOAD_BYTES (default
 * 4 MiB, 1 KiB to 1 GiB), checked before anything is written: an oversized one
 * costs neither a workflow VM's memory nor space in the log. */
#define JSON_MAX_PAYLOAD_DEFAULT ((size_t)4 << 20)
/* The limit in bytes (the default when the variable is unset or invalid). */
size_t json_max_payload(void);
/* Returns 0, or -1 with err saying ENGINE_MAX_PAYLOAD_BYTES is invalid. */
int json_max_payload_check(char *err, size_t errlen);
/* Returns 0 when len is within the limit, else -1 with err naming what, its
 * size and the limit. */
int json_check_size(size_t len, const char *what, char *err, size_t errlen);
/* Returns 0 when s[0..n) is UTF-8 (RFC 8259 requires it of JSON text) without
 * NUL bytes, else -1 with err naming what and the byte. A NUL inside a string
 * is written \u0000 and is fine: JSON text itself never holds one. */
int json_check_text(const char *s, size_t n, const char *what, char *err, size_t errlen);
/* All of the above plus well-formed JSON with finite numbers; returns the
 * canonical form the log keeps (malloc'd), or NULL with err ("--input is not
 * valid JSON: ..."). what names the text in the message. */
char *json_accept(const char *text, size_t len, const char *what, char *err, size_t errlen);

/* ---- reading JSON the engine wrote (the CLI reads the API's answers) ----
 * Raw spans, not decoded values: a payload reaches the printer as the server
 * sent it, byte for byte, so a client prints what the local CLI prints. */
/* The end of the JSON value starting at s (leading whitespace skipped), or
 * NULL when s..end does not start one well-formed value. */
const char *json_skip(const char *s, const char *end);
/* Member key of the object text[0..n): 1 with its value's text in *v[0..*vn),
 * 0 when absent, -1 when text is not a well-formed object. Keys are compared
 * as written (the engine's keys have no escapes). */
int json_get(const char *text, size_t n, const char *key, const char **v, size_t *vn);
/* Calls cb with each member of the object text[0..n): its key as written
 * (the string literal, quotes and escapes included) and its value's text;
 * returns 0, -1 when text is not a well-formed object, or the first nonzero
 * cb result. */
int json_members(const char *text, size_t n,
                 int (*cb)(void *ud, const char *k, size_t kn, const char *v, size_t vn), void *ud);
/* RFC 7386: the JSON merge patch patch applied to target (both JSON text;
 * target NULL: none), canonical and malloc'd, or NULL with err when either
 * is not JSON. A patch that is not an object replaces the target; a null
 * member removes the target's, an object member merges into it. */
char *json_merge_patch(const char *target, const char *patch, char *err, size_t errlen);
/* Calls cb with the text of each element of the array text[0..n); returns 0,
 * -1 when text is not a well-formed array, or the first nonzero cb result. */
int json_each(const char *text, size_t n, int (*cb)(void *ud, const char *v, size_t vn), void *ud);
/* The JSON string literal v[0..vn) decoded (escapes, surrogate pairs; a lone
 * surrogate as U+FFFD), malloc'd; NULL when it is not a string. A \u0000
 * ends the C string. */
char *json_string(const char *v, size_t vn);
/* The JSON integer v[0..vn) in *out: 0, or -1 when it is not one. */
int json_int(const char *v, size_t vn, int64_t *out);
/* Member key as a decoded string (malloc'd, NULL when absent or not a
 * string) or as an integer (dflt when absent or not an integer). */
char *json_get_string(const char *text, size_t n, const char *key);
int64_t json_get_int(const char *text, size_t n, const char *key, int64_t dflt);

#endif
