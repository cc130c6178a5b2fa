/* crash: fault injection for the crash tests. ENGINE_CRASH="point:n[,point:n]"
 * kills the process with SIGKILL the n-th time it passes a named point. */
#ifndef ENGINE_CRASH_H
#define ENGINE_CRASH_H

void crash_point(const char *name);

#endif
