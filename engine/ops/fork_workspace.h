/* fork_workspace: whether an agent session's workspace can go with a fork
 * (docs/forking.md, "The workspace"). The session records what it cannot
 * keep (workflows/agent_session.lua: a workspace.unrebuildable event, when
 * its snapshot budget is spent or its tree holds what a snapshot cannot
 * keep), and which tool results may have written it ("writes": true); a
 * fork at or after such an event, or between such a result and the turn's
 * workspace.snapshot, is refused when it is asked for. What only the fork's
 * run knows (a snapshot's blobs gone, a source from before snapshots) the
 * fork's session refuses itself, before its first tool runs. */
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
