/* names: the rules for the names a user gives (workflow ids, signal names,
 * token and schedule names) and the words of a workflow's status, checked
 * alike by every client (CLI, API, worker), so an error reads the same from
 * each. */
#ifndef ENGINE_NAMES_H
#define ENGINE_NAMES_H

#include <stddef.h>

/* Workflow ids: 1 to ENGINE_ID_MAX bytes of A-Z a-z 0-9 . _ : @ -, the first a
 * letter or a digit, without "..". Returns 0, or -1 with err naming the
 * problem (the id escaped and cut short). Creating a workflow requires it;
 * every operation that finds no workflow for an id explains the id with it,
 * so ids stored before the rule stay addressable. */
#define ENGINE_ID_MAX 128
int engine_check_id(const char *id, char *err, size_t errlen);
/* What is wrong with name as a name of 1 to max bytes of A-Z a-z 0-9 and the
 * bytes of punct, the first a letter or a digit (ids, token names): -1 with
 * what ("a space at byte 3"), or 0. */
int engine_name_problem(const char *name, size_t max, const char *punct, char *what, size_t n);
/* An id for a start that names none (ENGINE_ID_MAX + 1 bytes): the script's
 * base name made to follow the rules, '-' and 8 random hex digits. */
void engine_generate_id(const char *script, char *out, size_t n);

/* Signal names (what `engine signal` and the API send): 1 to
 * ENGINE_SIGNAL_NAME_MAX bytes of UTF-8 without control characters (C0, DEL,
 * C1) or bidi controls. Returns 0, or -1 with err naming the problem. */
#define ENGINE_SIGNAL_NAME_MAX 256
int engine_check_signal_name(const char *name, char *err, size_t errlen);
/* What a person tells a running session arrives as this signal (see
 * workflow_ops.h, engine_session_input). */
#define ENGINE_SESSION_SIGNAL "session:input"
#define ENGINE_MESSAGE_MAX 65536
/* 1 when name is a session signal (session:*), which only
 * engine_session_input's callers send, or the engine's own (child:*, a
 * child workflow's end for its parent), with err saying why. */
int engine_reserved_signal(const char *name, char *err, size_t errlen);

/* 1 for the statuses a workflow never leaves: completed, failed, cancelled. */
int engine_status_terminal(const char *status);

#endif
