/* settings: every setting of the engine, one row each (config.h). The key in
 * the configuration file is the environment variable's name without ENGINE_,
 * in lower case, so the two never drift apart; docs/operations.md has the
 * same table for people, and test_config checks that it names every row. */
#include "config.h"

#define KIB 1024LL
#define MIB (1024LL * 1024)
#define GIB (1024LL * 1024 * 1024)

/* {key, env, type, default, min, max, choices, reloadable, help} */
const setting SETTINGS[] = {
    /* where things are */
    {"home", "ENGINE_HOME", SET_PATH, "../share/engine beside the binary", 0, 0, NULL, 0,
     "the engine's own files (lua/, workflows/, policies/, skills/, web/)"},
    {"db", "ENGINE_DB", SET_PATH, "./engine.db", 0, 0, NULL, 0, "the database: a SQLite file or a postgres:// URL"},
    {"data_dir", "ENGINE_DATA_DIR", SET_PATH, "./engine-data", 0, 0, NULL, 0,
     "with PostgreSQL: where limits.lua, workspaces and artifacts live"},
    {"workspaces", "ENGINE_WORKSPACES", SET_PATH, "DB_DIR/workspaces", 0, 0, NULL, 0, "the sessions' workspaces"},
    {"artifacts", "ENGINE_ARTIFACTS", SET_PATH, "beside the workspaces", 0, 0, NULL, 1, "the sessions' artifacts"},
    {"reviews_dir", "ENGINE_REVIEWS_DIR", SET_PATH, "./reviews", 0, 0, NULL, 1, "where publish_review writes reviews"},
    {"pr_checkouts", "ENGINE_PR_CHECKOUTS", SET_PATH, "DB_DIR/pr-checkouts", 0, 0, NULL, 1,
     "the pull-request review's checkouts"},
    {"policies_dir", "ENGINE_POLICIES_DIR", SET_PATH, "HOME/policies", 0, 0, NULL, 0, "the approval policy set"},
    {"workflows_dir", "ENGINE_WORKFLOWS_DIR", SET_PATH, "./workflows, else HOME/workflows", 0, 0, NULL, 0,
     "the workflows serve --listen starts by name (as --workflows)"},
    {"triggers_dir", "ENGINE_TRIGGERS_DIR", SET_PATH, "WORKFLOWS_DIR/triggers", 0, 0, NULL, 0,
     "the webhook trigger scripts of serve --listen"},
    {"skills_dir", "ENGINE_SKILLS_DIR", SET_PATH, "HOME/skills", 0, 0, NULL, 1, "the skills sessions may load"},
    {"lua_dir", "ENGINE_LUA_DIR", SET_PATH, "HOME/lua", 0, 0, NULL, 0, "the engine's Lua library"},
    {"web_dir", "ENGINE_WEB_DIR", SET_PATH, "HOME/web", 0, 0, NULL, 0, "the web page's files"},
    {"limits", "ENGINE_LIMITS", SET_PATH, "DB_DIR/limits.lua when it exists", 0, 0, NULL, 1,
     "the limits file (quotas, rates, concurrency)"},
    {"credentials_file", "ENGINE_CREDENTIALS_FILE", SET_PATH, "", 0, 0, NULL, 1,
     "a JSON object of credentials (OPENAI_API_KEY, GITHUB_TOKEN, ...)"},
    {"context_roots", "ENGINE_CONTEXT_ROOTS", SET_LIST, "the working directory", 0, 0, NULL, 1,
     "host folders a session's context files must be under"},
    /* serving */
    {"listen", "ENGINE_LISTEN", SET_STRING, "", 0, 0, NULL, 0,
     "serve's HTTP API address (as --listen), e.g. 127.0.0.1:8420"},
    {"log_format", "ENGINE_LOG_FORMAT", SET_ENUM, "text", 0, 0, "text|json", 0, "serve's log lines: text or json (as --log-format)"},
    {"stop_timeout_s", "ENGINE_STOP_TIMEOUT_S", SET_INT, "10", 0, 3600, NULL, 1,
     "how long SIGTERM waits for what is in flight"},
    {"host_id", "ENGINE_HOST_ID", SET_STRING, "the host name", 0, 0, NULL, 0, "this worker's host, in sandbox labels"},
    {"lease_ms", "ENGINE_LEASE_MS", SET_INT, "10000", 100, 3600000, NULL, 0, "a worker's lease on a workflow"},
    {"max_leases", "ENGINE_MAX_LEASES", SET_INT, "256", 1, 1000000, NULL, 0, "workflows a worker runs at once"},
    {"max_cached_runs", "ENGINE_MAX_CACHED_RUNS", SET_INT, "256", 0, 1000000, NULL, 0,
     "runs kept in memory while they wait"},
    {"busy_timeout_ms", "ENGINE_BUSY_TIMEOUT_MS", SET_INT, "5000", 0, 3600000, NULL, 0,
     "how long a write waits for another's lock"},
    {"synchronous", "ENGINE_SYNCHRONOUS", SET_ENUM, "FULL", 0, 0, "FULL|NORMAL|OFF", 0,
     "SQLite's synchronous: FULL survives a power cut"},
    {"pg_poll_ms", "ENGINE_PG_POLL_MS", SET_INT, "1000", 1, 60000, NULL, 0,
     "with PostgreSQL: how often a worker looks for work it was not told of"},
    {"sweep_interval_ms", "ENGINE_SWEEP_INTERVAL_MS", SET_INT, "300000", 0, 86400000, NULL, 0,
     "how often serve removes leftover sandboxes (0: never)"},
    {"no_sweep", "ENGINE_NO_SWEEP", SET_BOOL, "false", 0, 0, NULL, 0, "no sandbox sweep at all"},
    {"no_policy_watch", "ENGINE_NO_POLICY_WATCH", SET_BOOL, "false", 0, 0, NULL, 0,
     "no reload when a policy file changes"},
    {"sse_heartbeat_ms", "ENGINE_SSE_HEARTBEAT_MS", SET_INT, "15000", 1, 3600000, NULL, 0,
     "a comment line on idle event streams"},
    {"http_max_body_bytes", "ENGINE_HTTP_MAX_BODY_BYTES", SET_INT, "1048576", KIB, GIB, NULL, 0,
     "an API request's body at most"},
    {"http_max_hook_body_bytes", "ENGINE_HTTP_MAX_HOOK_BODY_BYTES", SET_INT, "26214400", KIB, GIB, NULL, 0,
     "a webhook delivery's body at most"},
    {"http_max_header_bytes", "ENGINE_HTTP_MAX_HEADER_BYTES", SET_INT, "16384", KIB, MIB, NULL, 0,
     "a request line and headers at most"},
    {"http_max_connections", "ENGINE_HTTP_MAX_CONNECTIONS", SET_INT, "1024", 1, 65536, NULL, 0,
     "connections at once (503 beyond)"},
    {"http_idle_timeout_s", "ENGINE_HTTP_IDLE_TIMEOUT_S", SET_INT, "30", 1, 86400, NULL, 0,
     "a silent connection is closed after"},
    {"http_request_timeout_s", "ENGINE_HTTP_REQUEST_TIMEOUT_S", SET_INT, "30", 1, 86400, NULL, 0,
     "a request must arrive whole within"},
    /* workflows */
    {"max_payload_bytes", "ENGINE_MAX_PAYLOAD_BYTES", SET_INT, "4194304", KIB, GIB, NULL, 0,
     "an input, result, signal or checkpoint value at most"},
    {"wf_memory_mb", "ENGINE_WF_MEMORY_MB", SET_INT, "64", 1, 65536, NULL, 0, "a workflow's Lua memory"},
    {"wf_instructions", "ENGINE_WF_INSTRUCTIONS", SET_INT, "200000000", 1000, 1000000000000LL, NULL, 0,
     "a workflow's instructions per step"},
    /* sandboxes */
    {"sandbox_driver", "ENGINE_SANDBOX_DRIVER", SET_ENUM, "docker", 0, 0, "docker|bwrap", 1,
     "how sandboxes run: Docker or bubblewrap"},
    {"sandbox_image", "ENGINE_SANDBOX_IMAGE", SET_STRING, "engine-sandbox:latest", 0, 0, NULL, 0,
     "the Docker sandbox image"},
    {"sandbox_rootfs", "ENGINE_SANDBOX_ROOTFS", SET_PATH, "/var/cache/engine/sandbox-rootfs", 0, 0, NULL, 1,
     "bubblewrap's root file system"},
    {"mcp_allow", "ENGINE_MCP_ALLOW", SET_STRING, "", 0, 0, NULL, 1,
     "MCP server commands and URL prefixes sessions may use (comma-separated; * any)"},
    /* integrations */
    {"github_api_url", "ENGINE_GITHUB_API_URL", SET_STRING, "GitHub's API", 0, 0, NULL, 1,
     "the GitHub API the pull-request review talks to"},
    {"pr_review_model", "ENGINE_PR_REVIEW_MODEL", SET_STRING, "", 0, 0, NULL, 1,
     "the model of the pull-request review, JSON {\"name\":...}"},
    {"publish_url", "ENGINE_PUBLISH_URL", SET_STRING, "", 0, 0, NULL, 1, "where publish_review also POSTs a review"},
    {"publish_token", "ENGINE_PUBLISH_TOKEN", SET_SECRET, "", 0, 0, NULL, 1, "the bearer token of publish_url"},
    /* the command line as a client */
    {"server", "ENGINE_SERVER", SET_STRING, "", 0, 0, NULL, 0,
     "commands go to this engine serve --listen (http:// or https://)"},
    {"token", "ENGINE_TOKEN", SET_SECRET, "", 0, 0, NULL, 0, "the API token the command line sends to server"},
};

const size_t SETTINGS_COUNT = sizeof SETTINGS / sizeof *SETTINGS;
