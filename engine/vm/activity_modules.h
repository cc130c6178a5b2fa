/* activity_modules: the native modules every activity VM of the engine
 * offers (http, proc, fs, docker.native, sandbox.native, safefs,
 * webhook.verify), as the table actvm_new takes. */
#ifndef ENGINE_ACTIVITY_MODULES_H
#define ENGINE_ACTIVITY_MODULES_H

#include "actvm.h"

extern const actvm_module activity_modules[];

#endif
