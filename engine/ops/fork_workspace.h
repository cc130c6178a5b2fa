/* fork_workspace: whether an agent session's workspace can go with a fork
 * (docs/forking.md, "The workspace"). The session records what it cannot
 * keep (workflows/agent_session.lua: a workspace.unrebuildable event, when
 * its snapshot budget is spent or its tree holds what a snapshot cannot
 * keep); a fork at or after such an event is refused when it is asked for.
 * What is only known while the fork runs (a point between a turn's writes
 * and its snapshot) the fork's session refuses itself, before its first
 * tool runs. */
#ifndef ENGINE_FORK_WORKSPACE_H
#define ENGINE_FORK_WORKSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* 1 when the workspace of source at domain event upto cannot be rebuilt
 * (why says so: the reason the session recorded, its event, and the last
 * point before it), 0 when nothing says so, -1 when the store cannot be read. */
int fork_workspace_refused(store *st, const char *source, int64_t upto, char *why, size_t whylen);

#endif
