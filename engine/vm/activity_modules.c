/* activity_modules: the engine's native modules for activities. A table
 * rather than calls inside actvm.c: the bindings use the VM's yield and
 * resume (actvm.h), so the VM taking them from its creator keeps the two
 * from calling each other in a loop. */
#include "activity_modules.h"

#include "docker.h"
#include "lua_fs.h"
#include "lua_http.h"
#include "lua_proc.h"
#include "safefs.h"
#include "sandbox_native.h"
#include "webhook_verify.h"

const actvm_module activity_modules[] = {
    {"http", luaopen_engine_http},
    {"safefs", luaopen_engine_safefs},
    {"docker.native", luaopen_engine_docker},
    {"proc", luaopen_engine_proc},
    {"sandbox.native", luaopen_engine_sandbox_native},
    {"fs", luaopen_engine_fs}, /* no shell on the loop thread: realpath, ls, mkdir -p, ... */
    /* webhook signatures, for the trigger HTTP handler: secrets stay in this VM */
    {"webhook.verify", luaopen_engine_webhook_verify},
    {NULL, NULL},
};
