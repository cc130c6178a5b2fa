/* crash: fault injection for the crash and store-fault tests.
 *   ENGINE_CRASH="point:n[,point:n]"      kills the process with SIGKILL the
 *                                          n-th time it passes a named point.
 *   ENGINE_STOP="point:n[,point:n]"       sends it SIGTERM there instead (a
 *                                          graceful stop at that moment).
 *   ENGINE_STORE_FAIL="kind:n[,kind:n]"   makes the n-th store write of that
 *                                          kind fail as a disk I/O error does
 *                                          (store.c names the kinds). */
#ifndef ENGINE_CRASH_H
#define ENGINE_CRASH_H

void crash_point(const char *name);
/* 1 when this pass of the named store write must fail (ENGINE_STORE_FAIL). */
int fault_point(const char *name);
/* Reads ENGINE_STORE_FAIL again and restarts its counts (unit tests). */
void fault_reset(void);

#endif
