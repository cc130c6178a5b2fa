/* store: the event log and everything durable. The only module that speaks SQL.
 *
 * Writes go into one open transaction (store_begin is lazy and idempotent); the
 * engine commits once per loop iteration, so every state transition made in that
 * iteration lands atomically together (group commit). Functions return 0 on
 * success and -1 on error, with the message available from store_errmsg().
 *
 * Any failed statement inside a batch loses the whole batch (SQLite may have
 * rolled it back on its own): from then on every write fails at once, and
 * store_commit rolls back and fails, until store_rollback ends the batch. A
 * batch is committed whole or not at all, never in pieces. */
#ifndef ENGINE_STORE_H
#define ENGINE_STORE_H

#include <stddef.h>
#include <stdint.h>

/* The schema versions this build reads and writes (engine --version): an
 * older database is migrated up at open, a newer one refused. */
#define STORE_SQLITE_SCHEMA_VERSION 10
#define STORE_PG_SCHEMA_VERSION 12

typedef struct store store;

/* STORE_ELEASE: store_commit refused a batch whose fenced lease is not ours any more;
 * STORE_PENDING: store_commit_start sent a commit whose answer is still to come */
/* STORE_EMPTY: store_open_readonly found nothing of the engine's there yet
 * (an empty file, or a PostgreSQL database with no tables): a store_open
 * creates the schema */
enum { STORE_OK = 0, STORE_ERR = -1, STORE_EBUSY = -2, STORE_ECORRUPT = -3, STORE_ELEASE = -4, STORE_EMPTY = -5,
       STORE_PENDING = 1 };

typedef struct wf_row {
  char *id;
  int64_t run;
  char *status; /* running | waiting | completed | failed | cancelled | stuck */
  char *script_name;
  char *script_dir;
  char *code_hash;
  char *input;
  char *result;
  char *error;
  int cancel; /* 0 none, 1 requested, 2 delivered, 3 terminate (a parent's close: no clean-up runs) */
  int64_t created_at, updated_at;
  char *parent;       /* the workflow that started it as a child (wf.child), or NULL */
  char *parent_close; /* what its parent's end does to it while it runs: terminate, request_cancel, abandon */
  char *forked_from;  /* a fork's source (engine fork): {"id","run","seq","at","by"} as JSON, or NULL */
} wf_row;
void wf_row_free(wf_row *w);

typedef struct hist_event {
  int64_t seq;
  const char *type;
  int64_t ref;
  const char *name;
  const char *hash; /* the command's argument hash (replay's check), not the chain's */
  const char *payload;
  int64_t time;
  /* what the event keeps of its link of its workflow's hash chain (the
   * link's first 16 hex digits: the chain runs on full links, recomputed;
   * NULL for an event older than the chain, and in what store_hist_get and
   * store_hist_range read): set by store_hist_append, never by its caller */
  const char *chain;
} hist_event;

/* An owned list of events (strings owned by the list). */
typedef struct hist_list {
  hist_event *v;
  size_t n, cap;
} hist_list;
void hist_list_free(hist_list *l);

typedef struct task_row {
  int64_t id;
  const char *wf_id;
  const char *kind; /* workflow | activity | timer | signal_timeout */
  int64_t seq;
  int64_t run_at;
  int attempt;
  int64_t first_at;
  int leased; /* an attempt in flight holds it (its attempt is then the next one) */
} task_row;

typedef struct domain_event {
  const char *session_id;
  int64_t seq;
  const char *type;
  int64_t time;
  const char *payload;
  const char *chain; /* what it keeps of its link of the session's chain (16 hex digits; NULL: older, or the feed) */
} domain_event;

/* Opens (and creates unless must_exist) the database at path; sets WAL mode and
 * synchronous=FULL (ENGINE_SYNCHRONOUS overrides). Returns STORE_EBUSY when the
 * database is locked and STORE_ECORRUPT when it is not a valid engine database. */
int store_open(const char *path, int must_exist, store **out, char *err, size_t errlen);
/* The same, the connection named who where the database server shows its
 * clients (PostgreSQL's application_name, pg_stat_activity; NULL:
 * "engine"); SQLite has no such name. */
int store_open_as(const char *path, int must_exist, const char *who, store **out, char *err, size_t errlen);
/* Opens the engine database at path for reading only (PRAGMA query_only),
 * waiting at most busy_ms for a lock, creating and migrating nothing: what
 * shell completion reads, which must answer at once and leave the database
 * as it was. STORE_ECORRUPT when the file is not an engine database,
 * STORE_EMPTY when it holds nothing yet. An older schema opens as it is. */
int store_open_readonly(const char *path, int busy_ms, store **out, char *err, size_t errlen);

/* ---- what `engine doctor` asks, changing nothing ---- */
/* The schema version this engine reads and writes for the database at path
 * (STORE_SQLITE_SCHEMA_VERSION or STORE_PG_SCHEMA_VERSION). The database's
 * own is store_meta_get's "schema_version". */
int store_schema_version(const char *path);
/* Whether the database takes writes: a write transaction that touches a row
 * and rolls back (also on a store_open_readonly store). 0, or -1 with err. */
int store_write_probe(store *s, char *err, size_t errlen);
/* The database server's clock: *skew_ms is how far it is ahead of this
 * host's (negative: behind), measured at the middle of the round trip of
 * *rtt_ms. 0; 1 when there is no server (SQLite); -1 with store_errmsg. */
int store_clock_skew(store *s, int64_t *skew_ms, int64_t *rtt_ms);
void store_close(store *s);
/* 1 when path is a PostgreSQL URL (postgres:// or postgresql://): store_open
 * opens it with the PostgreSQL backend, and no file is involved. */
int store_is_url(const char *path);
/* The worker lock of the PostgreSQL database at url (engine_lock): a
 * descriptor to hand to store_remote_unlock, or -1 with holder saying who
 * has it (or why it could not be taken). */
int store_remote_lock(const char *url, const char *mode, char *holder, size_t holderlen);
/* Releases the lock behind fd: 1, or 0 when fd is not such a lock. */
int store_remote_unlock(int fd);
const char *store_errmsg(store *s);
const char *store_path(store *s);
/* The database's random instance id (labels its sandboxes). */
int store_instance_id(store *s, char *out, size_t n);

int store_begin(store *s); /* lazy: opens a write transaction if none is open */
int store_commit(store *s);
/* The commit without waiting for its answer (the worker's loop): STORE_PENDING
 * when it is on its way (PostgreSQL), else what store_commit would return
 * (SQLite commits at once). While it is pending, store_commit_socket is the
 * descriptor to wait on (readable, or writable when *writable: the request
 * is not all sent yet) and store_commit_poll reads what arrived, without
 * waiting: STORE_PENDING, or the commit's result, reported once (STORE_OK
 * when nothing was pending). Any other call of the store first waits for
 * the answer, which is still store_commit_poll's to report;
 * store_commit_wait waits and reports it. A read sent without waiting
 * (store_task_due_send, store_task_start_send) is waited on and polled the
 * same way. */
int store_commit_start(store *s);
int store_commit_socket(store *s, int *writable);
int store_commit_poll(store *s);
int store_commit_wait(store *s);  /* a failed batch is rolled back and reported as an error */
void store_rollback(store *s);
int store_in_txn(store *s);  /* SQLite has a transaction open */
/* A statement of the current batch failed (or SQLite rolled it back): the
 * batch is lost and writes fail until store_rollback. */
int store_batch_failed(store *s);
/* Statements that wrote in the last committed batch (events per commit, for /metrics). */
int64_t store_batch_writes(store *s);
/* Round trips the process has waited for the database server (0 for SQLite). */
int64_t store_round_trips(store *s);
/* Changes whenever another connection commits (PRAGMA data_version). */
int64_t store_data_version(store *s);
/* What the last commit left in SQLite's WAL: its frames (pages), and the ns
 * a checkpoint took inside that commit; zeros for PostgreSQL. */
void store_wal_stats(store *s, int64_t *frames, int64_t *checkpoint_ns);
/* SQLite's WAL is copied into the database file inside a commit only once
 * it holds this many frames (4 MB of 4 KiB pages, SQLite's own default
 * auto-checkpoint); the worker copies it in the background from half of it
 * (store_checkpoint). */
#define STORE_WAL_MAX_FRAMES 1000
/* Copies the WAL's committed frames into the database file (SQLite; 0 and
 * nothing done for PostgreSQL) without waiting for the store's writer or
 * blocking it, on a connection of its own. Unlike every other call it may
 * run on another thread while the store is in use, one call at a time, and
 * store_close only after it returned. *log: frames in the WAL when it
 * began; *copied: how many of them are in the database file now. */
int store_checkpoint(store *s, int64_t *log, int64_t *copied);
/* A descriptor that becomes readable when another process may have
 * committed (PostgreSQL: a LISTEN connection of its own for each caller;
 * every commit that wrote notifies), or -1 where there is none (SQLite:
 * watch the file). old: the caller's previous one, closed and replaced (-1
 * for a first one). */
int store_commit_fd(store *s, int old);
/* After descriptor fd was readable: takes what arrived; 1 when a commit of
 * another connection was announced (this store's own are not), 0 when not,
 * -1 when its connection is lost (store_commit_fd with it as old opens a
 * new one). */
int store_commit_drain(store *s, int fd);

/* ---- workflows ---- */
int store_wf_insert(store *s, const wf_row *w);
/* A start: workflow w (run 1) with its first event e (seq 1) and, when queue,
 * its first task, unless a workflow with its id exists. 1 when it was
 * written, 0 when one exists (its row in *existing, to be freed; nothing
 * written), or an error. On PostgreSQL one statement that inserts or finds
 * (INSERT ... ON CONFLICT): two starts of one id never both write, with no
 * lock but the row's own. */
int store_wf_start(store *s, const wf_row *w, const hist_event *e, int queue, wf_row *existing);
/* The same start (queued: its first task written) sent into the open batch
 * without waiting for its answer, which comes with the batch's (its commit,
 * or a read of the batch meanwhile): on PostgreSQL, where the loop must not
 * wait for it. STORE_OK with *t, or an error; STORE_ERR on a store that
 * cannot (store_can_send_starts: 0). When made, the start writes its chain's
 * head itself: the batch's heads are sent before its answers are read. */
typedef struct store_start store_start;
int store_can_send_starts(store *s);
int store_wf_start_send(store *s, const wf_row *w, const hist_event *e, store_start **t);
/* Once the batch that sent t committed: 1 written, 0 a workflow with its id
 * exists (its row in *existing, to be freed), 2 neither (a start of that id
 * by another connection committed while this one ran: send it again), or
 * STORE_ERR when no answer came. Reads no store. */
int store_start_result(store *s, store_start *t, wf_row *existing);
void store_start_free(store *s, store_start *t);
/* Returns 1 and fills *out when found, 0 when not found, -1 on error. */
int store_wf_get(store *s, const char *id, wf_row *out);
int store_wf_set_status(store *s, const char *id, const char *status, const char *result, const char *error);
int store_wf_set_cancel(store *s, const char *id, int cancel);
int store_wf_set_code(store *s, const char *id, const char *code_hash, const char *script_name, const char *script_dir);
int store_wf_new_run(store *s, const char *id, int64_t run, const char *input);
typedef int (*store_wf_cb)(void *ud, const wf_row *w);
int store_wf_list(store *s, const char *status, store_wf_cb cb, void *ud);
/* Up to limit workflows after (after_created, after_id) in (created_at, id)
 * order (newest_first: before it, in the reverse order), of status and
 * script_name when those are not NULL: stable pages however many are created
 * meanwhile. The rows have their input and result. */
int store_wf_page(store *s, const char *status, const char *script, int64_t after_created, const char *after_id,
                  int newest_first, int limit, store_wf_cb cb, void *ud);
/* Up to limit workflows whose id starts with prefix ("" for any), in id
 * order, whose status is in statuses (comma-separated, NULL for any); only
 * id, run, status, script and times are read. A range of the id index, so as
 * quick with 100,000 workflows as with ten (shell completion). */
int store_wf_ids(store *s, const char *prefix, const char *statuses, int limit, store_wf_cb cb, void *ud);
/* The workflows parent started as children (wf.child), oldest first; the
 * rows have no input and no result. */
int store_wf_children(store *s, const char *parent, store_wf_cb cb, void *ud);
/* The workflows forked from source (engine fork: forked_from's id), oldest
 * first; an index of the column's id answers it. */
int store_wf_forks(store *s, const char *source, store_wf_cb cb, void *ud);
/* The workflows under root by the parent column (its children, theirs, ...;
 * not root itself), at most depth levels down and at most limit rows, oldest
 * first; the rows have their result and error, no input. One query. */
int store_wf_subtree(store *s, const char *root, int64_t depth, int64_t limit, store_wf_cb cb, void *ud);
/* How deep workflow id sits in a tree of children: the parents that lead up
 * from it by the parent column (0: it has none, or it is unknown), followed
 * at most cap steps (a longer chain answers cap). One query; -1 on error. */
int64_t store_wf_depth(store *s, const char *id, int64_t cap);
/* How many of the workflows parent started as children have not ended (a
 * status other than completed, failed and cancelled); -1 on error. */
int64_t store_wf_children_running(store *s, const char *parent);

/* ---- history ---- */
/* Appends e (its chain is computed here: the hash of its canonical bytes
 * chained to the workflow's head, which the batch's commit writes to the
 * workflow's head row). */
int store_hist_append(store *s, const char *wf_id, int64_t run, const hist_event *e);
/* Every event of a run, checked: dense from seq 1 and, from where the
 * chain starts, each one's hash chained to the one before and the last one
 * the workflow's recorded head (an older run: its whole chain up to the
 * next run). A damaged log (a missing, altered, reordered or cut event, or
 * a damaged database page) is STORE_ECORRUPT with store_errmsg naming the
 * first bad seq, never a shorter history. */
int store_hist_load(store *s, const char *wf_id, int64_t run, hist_list *out);
/* The events from_seq..to_seq of a run (a range of its key: what a step
 * reads of the history before it, activity.history). Not checked against
 * the chain (a point read of a run the worker loaded, checked, before). */
int store_hist_range(store *s, const char *wf_id, int64_t run, int64_t from_seq, int64_t to_seq, hist_list *out);
/* Highest seq of a run (0 when empty), -1 on error. */
int64_t store_hist_max_seq(store *s, const char *wf_id, int64_t run);
/* 1 when an event of the run refers to the command at seq (its outcome is
 * logged), 0 when none does, -1 on error. */
int store_hist_outcome(store *s, const char *wf_id, int64_t run, int64_t seq);
/* Returns 1 and copies the event into out (owned by out) when found (not
 * checked against the chain, as store_hist_range). */
int store_hist_get(store *s, const char *wf_id, int64_t run, int64_t seq, hist_list *out);

/* ---- the hash chains (docs/durability.md#the-hash-chain) ----
 * Each workflow has two: its history through all its runs, and its domain
 * events. An event's link is SHA-256 over its canonical bytes, which begin
 * with the link before it (32 zero bytes for the first), so changing,
 * removing or moving any event breaks every link after it; the workflow's
 * head row holds each chain's head (the last link and its seq), so cutting the
 * end off shows too. A database made before the chain records, per
 * workflow, where its chain starts (the next event at the upgrade). */
/* The link of history event e of run of wf_id after prev (64 hex digits, or
 * NULL/"" for the first), into out (65 bytes). */
void store_chain_hist(const char *prev, const char *wf_id, int64_t run, const hist_event *e, char out[65]);
/* The link of domain event e after prev, into out. */
void store_chain_domain(const char *prev, const domain_event *e, char out[65]);
/* What store_verify_chains found. */
typedef struct store_verify {
  int ok;            /* every link and both heads check */
  int64_t checked;   /* events whose link was checked (history and domain) */
  int64_t unchained; /* events older than the chain (before the upgrade): not checked */
  int64_t runs;      /* runs of its history read */
  char problem[512]; /* when not ok: the first problem, naming its seq */
} store_verify;
/* Checks every chain of workflow wf_id, all runs: 1 with *out (ok or the
 * problem; a damaged page SQLite reports is a problem too), 0 unknown
 * workflow, -1 the database could not be read (store_errmsg). */
int store_verify_chains(store *s, const char *wf_id, store_verify *out);

/* ---- code by content hash ---- */
int store_code_put(store *s, const char *hash, const char *name, const char *src, size_t len);
/* Returns a malloc'd copy of the source or NULL when unknown. */
char *store_code_get(store *s, const char *hash, size_t *len);
int store_module_pin(store *s, const char *wf_id, int64_t run, const char *module, const char *hash);
/* Returns a malloc'd hash of the module pinned for this run, or NULL. */
char *store_module_get(store *s, const char *wf_id, int64_t run, const char *module);
int store_modules_clear(store *s, const char *wf_id, int64_t run);
int store_modules_copy(store *s, const char *wf_id, int64_t from_run, int64_t to_run);

/* ---- forks (engine fork, ops/fork.c) ---- */
/* Copies into the open batch what a fork dst takes of workflow src's run:
 * its history events hist_from..hist_to (as dst's, in the same run with the
 * same seqs), src's domain events 1..domain_to (as dst's, with feed
 * positions in seq order), and, when modules, the modules pinned to that
 * run. Rows are copied, never shared: a fork does not depend on what later
 * happens to its source (retention, compaction). dst's row and its first
 * event come first (store_wf_insert, store_hist_append): the copies are
 * linked into dst's own hash chains, after its first event; the source's
 * are read checked, so a damaged source is STORE_ECORRUPT naming its first
 * bad seq and nothing is copied. */
int store_fork_copy(store *s, const char *src, int64_t run, int64_t hist_from, int64_t hist_to, int64_t domain_to,
                    int modules, const char *dst);

/* ---- tasks: a durable to-do list keyed by (wf_id, kind, seq) with run_at ---- */
int store_task_put(store *s, const char *wf_id, const char *kind, int64_t seq, int64_t run_at, int attempt,
                   int64_t first_at, const char *owner, int64_t lease_until);
int store_task_del(store *s, const char *wf_id, const char *kind, int64_t seq);
/* Deletes the task: 1 when this call deleted it (the caller owns what it asks
 * for), 0 when it was gone already, -1 on error. */
int store_task_take(store *s, const char *wf_id, const char *kind, int64_t seq);
/* Due tasks this worker acts on now, all in one round trip where the
 * backend can (PostgreSQL's pipeline), else one call after another. For
 * each, in order: the lease of its workflow claimed when claim
 * (store_lease_claim), the task taken (store_task_take; on a shared store
 * only while the lease is this worker's), and the workflow's row read, with
 * its current run's events when history (store_wf_get, store_hist_load).
 * STORE_OK with each one's owned (a claim asked and refused: another worker
 * has it, nothing taken), took, found, w and h; else an error.
 * store_task_start_free frees one's answers. */
typedef struct task_start {
  const char *wf_id, *kind; /* asked */
  int64_t seq;
  int claim, history;
  int owned, took, found; /* answered */
  wf_row w;
  hist_list h;
  /* the run's events are damaged (store_hist_load's STORE_ECORRUPT): why,
   * malloc'd; h is then empty, and the others' answers stand */
  char *damaged;
} task_start;
int store_task_start(store *s, const char *owner, int64_t now, int64_t until, task_start *t, size_t n);
/* The same without waiting for the answers where the store can
 * (PostgreSQL), as store_task_due_send: 1 sent, 0 not (call
 * store_task_start), -1 on error (then store_task_start_result frees what
 * was asked, with an error). Once store_commit_poll answers rc, its answers
 * are read by store_task_start_result(rc), which returns rc or an error. */
int store_task_start_send(store *s, const char *owner, int64_t now, int64_t until, task_start *t, size_t n);
int store_task_start_result(store *s, int rc, task_start *t, size_t n);
void store_task_start_free(task_start *t);
/* Voids every lease owner holds. */
int store_task_release(store *s, const char *owner);
int store_task_del_wf(store *s, const char *wf_id);
/* Returns 1 and fills the numbers of *out (wf_id and kind are NULL) when found. */
int store_task_get(store *s, const char *wf_id, const char *kind, int64_t seq, task_row *out);
typedef int (*store_task_cb)(void *ud, const task_row *t);
/* Up to limit tasks with run_at <= now that owner does not hold a lease on.
 * Leases of any other owner are void (SQLite: one worker holds the database,
 * engine_lock); on a shared store, tasks of a workflow whose lease another
 * owner holds unexpired are not due for owner, and of the workflows owner
 * holds no lease on it returns at most unheld tasks (the rows it returns
 * stay locked to its batch: those it cannot claim are left to the others),
 * after the tasks of the workflows it holds. */
int store_task_due(store *s, int64_t now, const char *owner, int limit, int unheld, store_task_cb cb, void *ud);
/* The same without waiting for the answer where the store can: 1 when it
 * was sent in the open batch's pipeline with a sync point (PostgreSQL) and
 * is on its way as a commit of store_commit_start is (store_commit_socket
 * to wait on, store_commit_poll to read what arrived; any other call of the
 * store waits for it first); 0 when it was not (SQLite, or an answer not
 * yet reported): call store_task_due; -1 on error. Once store_commit_poll
 * answers rc, store_task_due_result(rc) calls cb for each due task, and
 * returns rc or an error. */
int store_task_due_send(store *s, int64_t now, const char *owner, int limit, int unheld);
int store_task_due_result(store *s, int rc, store_task_cb cb, void *ud);
/* Earliest time a task becomes due for owner (its run_at, or on a shared
 * store the expiry of the lease another owner holds on its workflow), -1
 * when there is none, -2 on error. */
int64_t store_task_next_at(store *s, const char *owner);
/* The same without waiting for the answer where the store can: 1 when it
 * was sent in the open batch (PostgreSQL) and store_task_next_result tells
 * it once that batch committed; 0 with *next_at answered at once (as
 * store_task_next_at: no batch open, one sent in it already, or SQLite);
 * -1 on error. */
int store_task_next_send(store *s, const char *owner, int64_t *next_at);
/* After the commit of the batch that sent it: as store_task_next_at. */
int64_t store_task_next_result(store *s);
int store_task_count(store *s, const char *wf_id);

/* ---- leases: which worker runs a workflow, when several share the store
 * (PostgreSQL). A worker runs a workflow only under its lease (owner, epoch,
 * expiry): claimed when it first touches the workflow, renewed by heartbeat,
 * given up when the workflow ends. A batch that appended to a workflow
 * commits only if the lease it claimed is still its own at that epoch
 * (store_lease_fence), so a worker that lost a lease can never append.
 * SQLite is held by one worker (engine_lock): every lease is its own, and
 * these calls do nothing. All writes go into the open batch. ---- */
/* 1 when several workers may share the store (leases matter). */
int store_shared(store *s);
/* Claims or renews wf_id's lease for owner until `until` (epoch ms): 1 when
 * owner holds it now (the store remembers its epoch), 0 when another owner
 * holds one that has not expired at now, -1 on error. */
int store_lease_claim(store *s, const char *wf_id, const char *owner, int64_t now, int64_t until);
/* 1 when this store claimed wf_id's lease and has not seen it lost (no query). */
int store_lease_held(store *s, const char *wf_id);
/* The open batch commits only if wf_id's lease is still the one claimed
 * (else store_commit fails with STORE_ELEASE and nothing of it is written). */
int store_lease_fence(store *s, const char *wf_id);
/* Extends every lease owner holds to `until`; lost(ud, wf_id) for each one
 * remembered that another owner took meanwhile (forgotten after the call). */
int store_lease_renew(store *s, const char *owner, int64_t until, void (*lost)(void *ud, const char *wf_id),
                      void *ud);
/* Leases this store holds or claimed in the open batch (0 on SQLite). */
int64_t store_lease_count(store *s);
/* Gives up wf_id's lease (NULL: every lease of owner). */
int store_lease_release(store *s, const char *owner, const char *wf_id);

/* ---- signals buffered until a workflow waits for them ---- */
int store_signal_put(store *s, const char *wf_id, const char *name, const char *payload, int64_t time);
/* Takes the oldest buffered signal named name: returns 1 with *payload malloc'd. */
int store_signal_take(store *s, const char *wf_id, const char *name, char **payload);
/* Buffers a signal for wf_id and puts its wake-up (a "workflow" task at seq
 * 0, due at time), both only while wf_id exists and has not ended (its
 * status none of completed, failed, cancelled): nothing is written for one
 * that ended or is not there. In the batch; PostgreSQL sends it without
 * waiting for an answer (an error loses the batch, store_batch_failed). */
int store_signal_wake(store *s, const char *wf_id, const char *name, const char *payload, int64_t time);
int store_signal_count(store *s, const char *wf_id);
/* 1 when a signal named name is buffered for wf_id, 0 when not, -1 on error. */
int store_signal_has(store *s, const char *wf_id, const char *name);
int store_signal_del_wf(store *s, const char *wf_id);

/* ---- the per-session domain event stream (dense seq from 1) ---- */
/* Appends an event (its link of the session's chain computed here). */
int64_t store_domain_append(store *s, const char *session_id, const char *type, int64_t time, const char *payload);
typedef int (*store_domain_cb)(void *ud, const domain_event *e);
/* The session's events after after_seq, in order, checked before the first
 * is handed to cb: dense, each link chained to the one before (all of them
 * are read, from #1: an event keeps only the start of its link), and the
 * last the session's head. A
 * damaged stream is STORE_ECORRUPT naming the first bad seq, with nothing
 * handed to cb. */
int store_domain_list(store *s, const char *session_id, int64_t after_seq, store_domain_cb cb, void *ud);
/* What a workflow's page reads (session_view.c), in one round trip where
 * the backend can (PostgreSQL's pipeline, one snapshot), else one call
 * after another: its row, its current run's events, its task and buffered
 * signal counts, and its domain events (each to cb, in order; nonzero
 * stops). 1 found (w and h filled: store_wf_view_free), 0 not, -1 error.
 * Both chains are checked as store_hist_load and store_domain_list check
 * them (STORE_ECORRUPT for a damaged one, nothing handed to cb). */
typedef struct wf_view {
  wf_row w;
  hist_list h;
  int tasks, signals;
} wf_view;
int store_wf_view(store *s, const char *id, wf_view *out, store_domain_cb cb, void *ud);
void store_wf_view_free(wf_view *v);
/* Every session's events in the order they were written: up to limit after
 * feed position after_id (cb gets each one's position; nonzero stops). Not
 * checked against the chains (each session's stream is, by
 * store_domain_list). */
typedef int (*store_feed_cb)(void *ud, int64_t id, const domain_event *e);
int store_feed_after(store *s, int64_t after_id, int limit, store_feed_cb cb, void *ud);
/* The last feed position (0 when empty), or -1 on error. */
int64_t store_feed_last(store *s);

/* ---- meta: the engine's own small named values ---- */
/* Returns 1 with *value malloc'd when key is set, 0 when not, -1 on error. */
int store_meta_get(store *s, const char *key, char **value);
/* Sets key to value; a NULL value removes it. */
int store_meta_put(store *s, const char *key, const char *value);

/* ---- API tokens: name, SHA-256 of the secret, scopes (tokens.c) ---- */
typedef struct token_row {
  const char *name;
  const char *hash; /* 64 hex chars; NULL from store_token_list */
  unsigned scopes;
  int64_t created_at, revoked_at; /* epoch ms; revoked_at 0 when live */
  const char *grants;             /* a JSON list of grants (docs/grants.md); NULL: none */
} token_row;
typedef int (*store_token_cb)(void *ud, const token_row *t);
/* Inserts token name, or replaces a revoked row of that name: 1 written, 0 a
 * live token has that name (nothing written), -1 on error. */
int store_token_put(store *s, const char *name, const char *hash, unsigned scopes, const char *grants,
                    int64_t created_at);
/* Marks the live token name revoked: 1 revoked, 0 no live token of that name,
 * -1 on error. */
int store_token_revoke(store *s, const char *name, int64_t revoked_at);
/* Every token by name, live and revoked, without its hash. */
int store_token_list(store *s, store_token_cb cb, void *ud);
/* Every live token by name, with its hash. */
int store_token_live(store *s, store_token_cb cb, void *ud);
/* Live tokens: >= 0, or -1 on error. */
int64_t store_token_live_count(store *s);

/* ---- slots: at most a limit of workflows hold a (pool, key) at once; the
 * others queue, first come first served (slots.c) ---- */
typedef struct slot_row {
  const char *pool, *key, *wf_id;
  int64_t seq;      /* the command that asked */
  int64_t limit;    /* the limit it asked with */
  int held;         /* 1 held, 0 queued */
  int64_t since;    /* queued or held since (epoch ms) */
  int64_t position; /* store_slot_get: 1 for the head of its queue, 0 when held */
} slot_row;
typedef int (*store_slot_cb)(void *ud, const slot_row *r);
/* Queues wf_id for (pool, key) unless it has a row there already. */
int store_slot_put(store *s, const char *pool, const char *key, const char *wf_id, int64_t seq, int64_t limit,
                   int64_t since);
/* The row of wf_id for (pool, key): 1 with cb called, 0 none, -1 error. */
int store_slot_get(store *s, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud);
/* The oldest queued row of (pool, key): 1 with cb called, 0 none, -1 error. */
int store_slot_head(store *s, const char *pool, const char *key, store_slot_cb cb, void *ud);
/* Rows of (pool, key) held (held 1) or queued (held 0); -1 on error. */
int64_t store_slot_count(store *s, const char *pool, const char *key, int held);
int store_slot_hold(store *s, const char *wf_id, const char *pool, const char *key, int64_t since);
/* 1 when a row was deleted, 0 none, -1 error. */
int store_slot_del(store *s, const char *wf_id, const char *pool, const char *key);
/* The rows of wf_id (when not NULL), else of (pool, key) (when pool is not
 * NULL), else every row; cb returning nonzero stops. */
int store_slot_list(store *s, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud);

/* ---- counters: named totals (quotas) and rate windows (slots.c) ---- */
typedef struct counter_row {
  const char *name; /* set by store_counter_list only */
  double value;
  int64_t window_start, paused_until, updated_at; /* epoch ms */
} counter_row;
typedef int (*store_counter_cb)(void *ud, const counter_row *c);
/* 1 with *out filled when the counter exists, 0 when not (zeros), -1 error. */
int store_counter_get(store *s, const char *name, counter_row *out);
int store_counter_put(store *s, const char *name, const counter_row *c);
/* Counters whose name starts with prefix, by name. */
int store_counter_list(store *s, const char *prefix, store_counter_cb cb, void *ud);

/* ---- webhook deliveries: each one received by a trigger, with its outcome.
 * An accepted one (outcome "started" or "existing") holds its (trigger,
 * delivery id) once: the key that makes a redelivery start nothing. ---- */
typedef struct delivery_row {
  int64_t id;            /* set by the store */
  const char *trigger;   /* the trigger's name */
  const char *delivery;  /* the sender's delivery id; "" when it sent none */
  int64_t received_at;   /* epoch ms */
  const char *outcome;   /* started, existing, duplicate, ignored, rejected */
  int status;            /* the HTTP status answered */
  const char *wf_id;     /* the workflow it started or found; NULL */
  const char *detail;    /* why (ignored, rejected), or NULL */
} delivery_row;
typedef int (*store_delivery_cb)(void *ud, const delivery_row *d);
/* Records a delivery (accepted ones under their unique key: 0 written, 1 the
 * key was taken, nothing written; -1 error). Rejected and ignored rows beyond
 * the newest 1000 of their trigger are dropped. */
int store_delivery_put(store *s, const delivery_row *d);
/* The accepted delivery (trigger, delivery): 1 with cb called, 0 none, -1 error. */
int store_delivery_find(store *s, const char *trigger, const char *delivery, store_delivery_cb cb, void *ud);
/* The newest deliveries of trigger (NULL: of every trigger), at most limit. */
int store_delivery_list(store *s, const char *trigger, int limit, store_delivery_cb cb, void *ud);

/* ---- schedules: cron-driven starts (schedules.c). Times are epoch ms;
 * next_fire_at is the next fire's nominal instant (before jitter), 0 when the
 * expression never fires again; buffered_fire_at a fire of overlap
 * buffer_one waiting for the previous run to end (0 none). ---- */
typedef struct schedule_row {
  const char *name, *cron, *tz, *script, *input, *overlap;
  int64_t catchup_window_ms, jitter_ms;
  int paused;
  int64_t next_fire_at, last_fire_at, buffered_fire_at, skipped_count;
  int64_t created_at, updated_at;
} schedule_row;
typedef int (*store_schedule_cb)(void *ud, const schedule_row *r);
/* Inserts a schedule: 1 written, 0 the name is taken (nothing written), -1 error. */
int store_schedule_insert(store *s, const schedule_row *r);
/* Rewrites every field of schedule r->name but created_at: 1 updated, 0 no
 * such schedule, -1 error. */
int store_schedule_update(store *s, const schedule_row *r);
/* Schedule name: 1 with cb called, 0 none, -1 error. */
int store_schedule_get(store *s, const char *name, store_schedule_cb cb, void *ud);
/* Every schedule by name; cb returning nonzero stops. */
int store_schedule_list(store *s, store_schedule_cb cb, void *ud);
/* 1 deleted, 0 none, -1 error. */
int store_schedule_del(store *s, const char *name);

/* ---- memory: the knowledge and preferences sessions proposed and a person
 * approved (ops/memory.c, docs/memory.md). An entry is written once, by
 * its id (made from the proposing activity's idempotency key: a rerun
 * writes nothing), and only its revocation changes it after. ---- */
typedef struct memory_row {
  const char *id, *kind, *identity; /* identity: the preferences' owner; NULL for knowledge */
  const char *text, *evidence;      /* evidence may be NULL */
  const char *session_id, *request_id, *approver;
  int64_t approved_at;                 /* epoch ms */
  int64_t revoked_at;                  /* epoch ms; 0 when live */
  const char *revoked_by, *revoke_reason; /* NULL when live (a reason may be NULL after) */
} memory_row;
typedef int (*store_memory_cb)(void *ud, const memory_row *m);
/* Inserts entry m (revoked_at and after ignored): 1 written, 0 an entry with
 * its id exists (nothing written), -1 error. */
int store_memory_put(store *s, const memory_row *m);
/* Marks live entry id revoked: 1 revoked, 0 no live entry of that id, -1 error. */
int store_memory_revoke(store *s, const char *id, int64_t at, const char *by, const char *reason);
/* The entries with id (NULL: any), kind (NULL: any) and identity (NULL:
 * any), oldest approval first; live_only: without the revoked ones. cb
 * returning nonzero stops. */
int store_memory_list(store *s, const char *id, const char *kind, const char *identity, int live_only,
                      store_memory_cb cb, void *ud);

/* Counts for /metrics: workflows by status, tasks by kind, the workflows
 * that have not finished and have a domain event (under their id as
 * session_id) of one of types (one row, key "live"), or slots by pool and
 * state (key "POOL\x1fheld" or "POOL\x1fqueued"). types: a NULL-terminated
 * list of event types, read for STORE_GROUP_LIVE_WITH only (NULL for the
 * others; the caller names what it counts, the store knows no event). */
typedef enum { STORE_GROUP_STATUS, STORE_GROUP_TASKS, STORE_GROUP_LIVE_WITH, STORE_GROUP_SLOTS } store_group;
int store_group_count(store *s, store_group what, const char *const *types,
                      int (*cb)(void *ud, const char *key, int64_t n), void *ud);

/* Every workflow that has not finished, with the payload of the latest of
 * its domain events (under its id as session_id) whose type is one of types
 * (a NULL-terminated list), or NULL when it has none: what the orphan sweeps
 * of each host read (hooks.c names the event types). cb returning nonzero
 * stops. */
typedef int (*store_live_cb)(void *ud, const char *wf_id, const char *payload);
int store_live_list(store *s, const char *const *types, store_live_cb cb, void *ud);

/* ---- whole tables, for engine migrate (migrate.c): every durable table
 * of either backend, read in key order and written with its own ids ---- */
typedef enum { STORE_V_NULL, STORE_V_INT, STORE_V_REAL, STORE_V_TEXT, STORE_V_BLOB } store_vtype;
typedef struct store_value {
  store_vtype type;
  int64_t i;
  double r;
  const char *p; /* TEXT and BLOB: n bytes (not NUL-terminated for a BLOB) */
  size_t n;
} store_value;
typedef struct store_table {
  const char *name;
  const char *const *columns; /* the key's columns first */
  const char *types;          /* per column: i integer, r real, t text, b blob */
  int ncolumns, nkey;
  int rowid; /* the first column is SQLite's rowid (a table without an id column of its own there) */
} store_table;
/* The tables engine migrate copies, in the order it copies them (at most STORE_TABLES_MAX). */
#define STORE_TABLES_MAX 16
extern const store_table store_tables[];
extern const int store_ntables;
typedef int (*store_row_cb)(void *ud, const store_value *row);
/* Up to limit rows of t in key order after the key values after (NULL: from
 * the first); cb returning nonzero stops. Returns the rows read, or -1. */
int store_table_page(store *s, const store_table *t, const store_value *after, int limit, store_row_cb cb, void *ud);
/* Inserts a row (t->ncolumns values) in the open batch; replace: a row with
 * its key is overwritten instead of refused. */
int store_table_insert(store *s, const store_table *t, const store_value *row, int replace);
/* Rows of t: >= 0, or -1 on error. */
int64_t store_table_count(store *s, const store_table *t);
/* After rows were inserted with their ids: the next id PostgreSQL makes is
 * past them (SQLite needs nothing). */
int store_table_finish(store *s, const store_table *t);

/* Counts rows of a table for diagnostics (show). */
int64_t store_count(store *s, const char *what, const char *wf_id);

#endif
