/* docker: the C half of the Docker Engine client (the REST calls are in
 * lua/docker.lua, over the async http module and the engine's unix socket). */
#ifndef ENGINE_DOCKER_H
#define ENGINE_DOCKER_H

#include <lua.h>

/* Module "docker.native": socket_path(), demuxer(max_bytes). */
int luaopen_engine_docker(lua_State *L);

#endif
