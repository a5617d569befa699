/* libhoprelay: publish into a hoprelay pipeline and consume from it (docs/client.md).
 *
 * A producer connects to a head node of the topology and sends messages; the head
 * acknowledges each once it is safe downstream, and the library keeps every message until
 * then, sending again what was not acknowledged when the link drops and comes back. (Or,
 * with options.run_head, since 1.4, the producer runs the head node itself, in its process.)
 * A consumer *is* a node of the topology: it runs that node in the application's process (the
 * transports, admission, credits, deduplication and acknowledgements of hoprelayd) and hands
 * over each message as a view of the slot it landed in; the message is acknowledged upstream
 * when the application releases it. Usually a leaf; since 1.6 also a relay, which keeps what it
 * relays: each message goes on to the node's downstream peers as well, and is acknowledged
 * upstream once the application released it and every peer acknowledged it.
 *
 * Conventions of every call:
 *  - Handles are opaque and independent: the library keeps no state shared between handles.
 *  - Calls return HOPRELAY_OK (0) or a negative hoprelay_status; hoprelay_last_error() then
 *    says what went wrong, worded for a person, on the calling thread (the last failure: a call
 *    that succeeds leaves it as it was). Nothing is printed.
 *  - Threads: a handle takes one call at a time; different handles may be used from
 *    different threads at once. Since 1.8 a call made while another thread's call on the same
 *    handle is in progress returns HOPRELAY_ESTATE, naming that call, and changes nothing
 *    (checked without a lock); before, it could corrupt the handle. The getters that take a
 *    const handle (fd, max_message, origin, stats...) are not checked: call them from the
 *    thread that makes the handle's other calls.
 *  - Lifetime: *_open makes a handle, *_close closes it, *_destroy frees it. Since 1.8 a closed
 *    handle stays valid until destroy: every call on it returns HOPRELAY_ESTATE ("this
 *    producer is closed"), a second close does nothing and returns OK. Before 1.8, close freed
 *    the handle; a program written for that still works, and keeps a few dozen bytes per
 *    handle until it exits unless it calls destroy too.
 *  - Progress: the library moves data, acknowledgements and reconnections only inside its
 *    calls. It starts threads only where a node it runs asks for them (its stage's `threads`
 *    workers, its `link_threads`, the HTTP threads that serve its `metrics` address), and none
 *    of them calls the application. An application that does not block in recv, send,
 *    reserve or flush polls the handle's descriptor (hoprelay_*_fd(): readable when there is
 *    work) and calls hoprelay_*_process() when it is readable.
 *  - Timeouts are in milliseconds: 0 never waits (HOPRELAY_EAGAIN), -1 waits as long as it
 *    takes.
 *
 * Versioning: the soname's major number changes with an incompatible change of this header;
 * HOPRELAY_CLIENT_VERSION_MINOR grows with additions. Options structs carry their size and
 * the header's version (set by hoprelay_*_options_init()), which open checks. The structs the
 * library fills (hoprelay_message, hoprelay_producer_stats, hoprelay_outcome_counts) grow only
 * at their end, and the library fills as many bytes as the caller's header says they have:
 * the calls that fill them take that size (hoprelay_consumer_recv and hoprelay_producer_stats
 * are macros that pass sizeof of the caller's struct, since 1.9), so a program built against
 * an older header keeps working with a newer library.
 *
 * Language: C99 or later (static inline functions), or C++. */
#ifndef HOPRELAY_CLIENT_H
#define HOPRELAY_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HOPRELAY_CLIENT_VERSION_MAJOR 1
#define HOPRELAY_CLIENT_VERSION_MINOR 10

/* Status codes: 0, or one of these (negative). */
enum hoprelay_status {
  HOPRELAY_OK = 0,
  HOPRELAY_EINVAL = -1,        /* a bad argument: null pointer, zero length, bad option */
  HOPRELAY_ECONFIG = -2,       /* the topology does not load or validate */
  HOPRELAY_ENODE = -3,         /* no such node, or the wrong kind (not a head / not a leaf) */
  HOPRELAY_ETOOBIG = -4,       /* larger than the pipeline (or a reserved buffer) takes */
  HOPRELAY_ETIMEDOUT = -5,     /* the timeout passed first */
  HOPRELAY_EAGAIN = -6,        /* timeout 0 and the call would have to wait */
  HOPRELAY_EREFUSED = -7,      /* the head node refused this producer (the reason says why) */
  HOPRELAY_EVERSION = -8,      /* built against an incompatible header version */
  HOPRELAY_ESTATE = -9,        /* not valid now (commit without reserve, release twice...) */
  HOPRELAY_EUNAVAILABLE = -10, /* cannot start: port in use, no RDMA device, memlock limit;
                                * or, from any call of an open handle, its RDMA device went
                                * away (removed or failed): close the handle and open a new one
                                * once a device is back (the device stays in use until the
                                * process exits: librdmacm keeps its device contexts) */
  HOPRELAY_EINTERNAL = -11,    /* a failure of the library or the system; the message says */
  /* Since 1.1: the head has a producer of this origin connected already (origins are
   * identities: use another origin, or stop the other producer). */
  HOPRELAY_EORIGIN = -12
};

/* The status's name and meaning ("HOPRELAY_ETIMEDOUT: timed out"). Never null. */
const char* hoprelay_strerror(int status);
/* What the last failed call on this thread found wrong, worded for a person ("" if none).
 * Valid until the next call of this library on the same thread. */
const char* hoprelay_last_error(void);
/* The library's version: major << 16 | minor. */
uint32_t hoprelay_version(void);

/* Log lines of a handle's work (connections, reconnections, refusals), never per message.
 * Called on the thread that called into the library, inside that call. Levels: */
enum hoprelay_client_log_level { /* the stage ABI has its own HOPRELAY_LOG_* */
                                 HOPRELAY_CLIENT_LOG_DEBUG = 1,
                                 HOPRELAY_CLIENT_LOG_INFO = 2,
                                 HOPRELAY_CLIENT_LOG_WARN = 3,
                                 HOPRELAY_CLIENT_LOG_ERROR = 4
};
typedef void (*hoprelay_log_fn)(void* user, int level, const char* line);

/* ---- Producer --------------------------------------------------------------------------- */

typedef struct hoprelay_producer hoprelay_producer;

/* Since 1.1: what became of each message (docs/client.md, "Outcomes"). The head acknowledges
 * a message once every node it was routed to has delivered it or given it up; a node that
 * gives it up says where and why, and that travels back with the acknowledgement. */
enum hoprelay_outcome_status {
  HOPRELAY_DELIVERED = 0, /* delivered on every branch it was routed to */
  HOPRELAY_DROPPED = 1,   /* given up somewhere (records say where and why) */
  HOPRELAY_REPEAT = 2     /* not sent: the head had taken this sequence number of the origin */
};
/* Why a node gave a message up (the `reason` label of hoprelay_messages_dropped_total). */
enum hoprelay_drop_reason {
  HOPRELAY_DROP_STAGE_DROP = 1,         /* the node's stage said DROP */
  HOPRELAY_DROP_STAGE_ERROR = 2,        /* the node's stage said ERROR */
  HOPRELAY_DROP_TOO_LARGE_FOR_PEER = 3, /* larger than a downstream's slots */
  HOPRELAY_DROP_PEER_DOWN = 4,          /* a downstream down past peer_down_timeout */
  HOPRELAY_DROP_INCOMPLETE = 5,         /* a chunked message that lost chunks */
  HOPRELAY_DROP_REASSEMBLY_FULL = 6,    /* no room to reassemble a chunked message */
  HOPRELAY_DROP_REASONS = 7             /* size of hoprelay_outcome_counts.by_reason */
};
/* "stage_error", ... for a hoprelay_drop_reason; "unknown" otherwise. Never null. */
const char* hoprelay_drop_reason_name(int reason);

struct hoprelay_drop {
  int reason;         /* hoprelay_drop_reason */
  const char* node;   /* the node that gave it up */
  const char* detail; /* its words, e.g. "crc32c: message leaves no room for ..." ("" if none) */
};
#define HOPRELAY_OUTCOME_RECORDS 3
struct hoprelay_outcome {
  uint32_t origin;
  uint64_t seq;
  int status;     /* hoprelay_outcome_status */
  int reason;     /* DROPPED: the main reason (the first drop that is not a consequence of an
                     earlier one: incomplete only when nothing else is known); 0 otherwise */
  int partial;    /* DROPPED: it was delivered on some branches and dropped on others */
  uint32_t drops; /* DROPPED: how many places gave it up; the first n_drops are in `drop` */
  uint32_t n_drops;
  struct hoprelay_drop drop[HOPRELAY_OUTCOME_RECORDS];
  /* Since 1.9 (the library fills the struct, so it grows at its end): DELIVERED (or DROPPED
   * on other branches) except where it waits in a spool (docs/topology.md, "Spooling a slow
   * or down branch"): `spooled` spools hold it, the first at node `spooled_at` for its branch
   * `spooled_for`; it goes on from there once that branch takes it. 0 and null otherwise, and
   * always with a head of an older release (it says delivered). */
  uint32_t spooled;
  const char* spooled_at;
  const char* spooled_for;
};
/* Called once per message, in sequence order, on the thread that called into the library,
 * inside that call (send, commit, flush, process, close...). The outcome and its strings are
 * valid only during the call. It must not call into the same producer: such a call returns
 * HOPRELAY_ESTATE, and close and destroy free nothing from there. */
typedef void (*hoprelay_outcome_fn)(void* user, const struct hoprelay_outcome* outcome);

struct hoprelay_producer_options {
  uint32_t struct_size;   /* sizeof(struct hoprelay_producer_options): set by _init */
  uint16_t version_major; /* HOPRELAY_CLIENT_VERSION_MAJOR: set by _init */
  uint16_t version_minor;
  uint32_t origin;    /* the origin id every message carries; 0: a random one */
  uint64_t first_seq; /* the first message's sequence number (a restart resumes) */
  /* How long open waits for the head (default 30000). 0: open returns at once and the
   * connection proceeds inside later calls: send and reserve say EAGAIN until the head has
   * admitted the producer, EREFUSED if it refused. */
  int connect_timeout_ms;
  hoprelay_log_fn log; /* null: log lines are discarded */
  void* log_user;
  int log_level; /* the least level passed to log (default HOPRELAY_CLIENT_LOG_INFO) */
  /* Since 1.1: each message's outcome (null: only counted, hoprelay_producer_outcomes). */
  hoprelay_outcome_fn on_outcome;
  void* outcome_user;
  /* Since 1.4: nonzero: this process runs the head node itself, as a consumer runs its leaf
   * (docs/client.md, "A producer that runs its head"): no hoprelayd for that node, whose
   * listen address (and metrics endpoint) this process then binds; messages go from the
   * producer's buffers straight to the head's downstream links, one copy fewer. The head
   * moves only inside this producer's calls, and stops with it. */
  int run_head;
  /* Since 1.10: TLS to a head whose topology has `tls` (docs/security.md, "TLS"): this
   * producer's certificate chain, private key and the CA the head's certificate must chain to
   * (PEM files; all three or none). None: the topology's top-level tls, if it has one (this
   * host's own files). The strings are read during open only. */
  const char* tls_cert;
  const char* tls_key;
  const char* tls_ca;
};

static inline void hoprelay_producer_options_init(struct hoprelay_producer_options* o) {
  struct hoprelay_producer_options d = {sizeof(struct hoprelay_producer_options),
                                        HOPRELAY_CLIENT_VERSION_MAJOR,
                                        HOPRELAY_CLIENT_VERSION_MINOR,
                                        0,
                                        0,
                                        30000,
                                        0,
                                        0,
                                        HOPRELAY_CLIENT_LOG_INFO,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0,
                                        0};
  *o = d;
}

/* Connects to head node `head` of `topology` (a file path, or the topology's TOML text when
 * the string contains a newline) and waits until the head has admitted this producer.
 * `options` may be null (the defaults). On success *out is the handle; on failure it is null
 * and nothing was sent. Errors: ECONFIG, ENODE (not in the topology, not a head), EREFUSED,
 * EORIGIN (a producer of this origin is connected to the head already), ETIMEDOUT (no head
 * within connect_timeout_ms), EUNAVAILABLE, EVERSION.
 * Messages whose sequence number the head had already taken from this origin when the
 * producer connected (hoprelay_producer_resume_seq()) are not sent: their outcome is
 * HOPRELAY_REPEAT. */
int hoprelay_producer_open(const char* topology, const char* head,
                           const struct hoprelay_producer_options* options,
                           hoprelay_producer** out);

/* Flag for send and commit: more messages follow at once, so the library may hold this one
 * until the next send or commit without the flag (or flush, close, a call that waits): a
 * burst then leaves in fewer system calls. The only flag: any other bit is EINVAL. */
#define HOPRELAY_SEND_MORE 0x1

/* Sends a copy of `length` bytes (0 to hoprelay_producer_max_message()) as the next message;
 * *seq (if not null) gets its sequence number. `data` may be reused when the call returns.
 * Waits up to timeout_ms for buffer space: the library keeps two buffers per slot of the head
 * (registered memory, over verbs), so a message as large as the head's ring is taken while the
 * one before it is still on its way, and waits for the head's credits in the library. A
 * message larger than the head's slots travels as chunks. ETOOBIG: larger than the pipeline
 * takes (nothing sent). */
int hoprelay_producer_send(hoprelay_producer* p, const void* data, size_t length, int flags,
                           uint64_t* seq, int timeout_ms);

/* Zero copy: a buffer of `length` bytes (0 to hoprelay_producer_max_message(); 0, an empty
 * message, since 1.7: before, EINVAL) in memory
 * registered with the device, for the next message. Over verbs the message leaves by RDMA
 * from this very buffer. The application writes its message into *buffer and commits it;
 * it must not touch the buffer after the commit (the library owns it until it is
 * acknowledged). One reservation at a time: reserve again only after commit.
 * Since 1.5 a buffer may be larger than hoprelay_producer_max_reserve() (one slot of the
 * head; 1.4 and before: ETOOBIG): it spans several of the library's buffers, side by side,
 * and the message leaves as chunks from where it lies, still without a copy. It waits for
 * that many free buffers in a row (ETIMEDOUT / EAGAIN say how many). ETOOBIG: larger than
 * the pipeline takes. */
int hoprelay_producer_reserve(hoprelay_producer* p, size_t length, void** buffer, int timeout_ms);
/* Sends the reserved buffer's first `length` bytes (0 to the reserved length; 0, an empty
 * message, since 1.7); the buffers of a large reservation that the message does not reach
 * are free again at once. */
int hoprelay_producer_commit(hoprelay_producer* p, size_t length, int flags, uint64_t* seq);

/* Waits until every message sent so far is acknowledged by the head. */
int hoprelay_producer_flush(hoprelay_producer* p, int timeout_ms);

/* Since 1.2: waits until the head has admitted this producer: OK at once when it has (open
 * with a connect_timeout_ms waits for this itself). For a producer opened with
 * connect_timeout_ms 0 that waits in short steps, so that it can stop between them (a
 * binding's Ctrl-C). OK means admitted once: the link may have dropped again since (it
 * reconnects inside later calls, as always). Errors: EREFUSED or EORIGIN (the head refused
 * it, with its reason), ETIMEDOUT, EAGAIN (timeout 0), EUNAVAILABLE (the RDMA device went
 * away), EINVAL (a null handle). */
int hoprelay_producer_wait_connected(hoprelay_producer* p, int timeout_ms);

/* A descriptor that is readable (POLLIN) when the producer has work: call process then. */
int hoprelay_producer_fd(const hoprelay_producer* p);
/* Does the work that is ready, without waiting (acknowledgements, reconnection, sending). */
int hoprelay_producer_process(hoprelay_producer* p);

/* The largest message send takes and (since 1.5) the largest buffer reserve gives; and the
 * largest message that travels as one frame (one slot of the head: larger ones go as
 * chunks; before 1.5 also the largest buffer reserve gave). */
size_t hoprelay_producer_max_message(const hoprelay_producer* p);
size_t hoprelay_producer_max_reserve(const hoprelay_producer* p);
uint32_t hoprelay_producer_origin(const hoprelay_producer* p);
/* The sequence number the next message gets. */
uint64_t hoprelay_producer_next_seq(const hoprelay_producer* p);

/* The producer's counters. Grows at its end in minor versions (filled through its size). */
struct hoprelay_producer_stats {
  uint64_t sent;         /* messages sent (handed to send or commit) */
  uint64_t acknowledged; /* of them, acknowledged by the head */
  uint64_t bytes_acknowledged;
  uint64_t reconnects; /* times the link to the head came back after a drop */
  /* Since 1.9: */
  uint64_t bytes_sent; /* of the messages sent */
  uint64_t failovers;  /* times the producer moved between its head and the head's standby */
};
/* Fills the first `size` bytes of *out (sizeof(struct hoprelay_producer_stats) of the caller's
 * header; larger than the library's: the rest zeroed). Since 1.9. */
void hoprelay_producer_stats_sized(const hoprelay_producer* p, struct hoprelay_producer_stats* out,
                                   size_t size);
/* Fills the counters of 1.0 (sent to reconnects). The macro below replaces it in programs
 * built against this header, passing the struct's size; the function stays for programs built
 * against an older one, and for callers that take its address. */
void hoprelay_producer_stats(const hoprelay_producer* p, struct hoprelay_producer_stats* out);
#define hoprelay_producer_stats(p, out) hoprelay_producer_stats_sized((p), (out), sizeof *(out))

/* Since 1.1: one past the highest sequence number the head had taken from this origin when
 * the producer connected (0: none): where a restarted producer resumes (first_seq). */
uint64_t hoprelay_producer_resume_seq(const hoprelay_producer* p);

/* Since 1.1: the outcomes so far (messages acknowledged or found to be repeats). */
struct hoprelay_outcome_counts {
  uint64_t delivered;
  uint64_t dropped; /* by main reason in by_reason */
  uint64_t repeat;
  uint64_t partial; /* of dropped, delivered on some branches */
  uint64_t by_reason[HOPRELAY_DROP_REASONS];
  uint64_t spooled; /* since 1.9: of delivered (and dropped), waiting in a spool somewhere */
};
/* Fills `size` bytes of *out (sizeof(struct hoprelay_outcome_counts) of the caller's header). */
void hoprelay_producer_outcomes(const hoprelay_producer* p, struct hoprelay_outcome_counts* out,
                                size_t size);

/* Ends the stream without closing: sends the end-of-stream mark behind every message sent
 * (the consumers learn that this origin's stream ended after its last message) and waits up to
 * timeout_ms for its acknowledgement, which comes once every message before it is
 * acknowledged. Since 1.8 the mark goes at once, so that a consumer holding messages it has not
 * released yet (a batch it has not committed) gets it too; before, it went once everything
 * was acknowledged. EAGAIN / ETIMEDOUT: not yet; call again (the mark is sent once). After the
 * first call, send and reserve return ESTATE. For an application that drives the producer
 * from its own event loop (timeout 0). */
int hoprelay_producer_end(hoprelay_producer* p, int timeout_ms);

/* hoprelay_producer_end() with timeout_ms, then closes the link and frees what the producer
 * holds, whatever it returns (since 1.8 the handle itself stays, for hoprelay_producer_destroy;
 * calls on it return ESTATE, a second close returns OK). ETIMEDOUT: messages (or the end mark)
 * were still unacknowledged. They are given up, with a warning through the log callback that
 * says how many, whether the link was up or not; a consumer that has the end mark has every
 * message before it that was not dropped on the way (the outcomes say which were). */
int hoprelay_producer_close(hoprelay_producer* p, int timeout_ms);

/* Frees the handle. An open one at once: no flush and no end-of-stream mark (the consumers do
 * not learn that the stream ended); messages not yet acknowledged are given up (error paths).
 * After hoprelay_producer_close: frees the rest of the handle. The handle is invalid after. */
void hoprelay_producer_destroy(hoprelay_producer* p);

/* ---- Consumer --------------------------------------------------------------------------- */

typedef struct hoprelay_consumer hoprelay_consumer;

struct hoprelay_consumer_options {
  uint32_t struct_size;
  uint16_t version_major;
  uint16_t version_minor;
  hoprelay_log_fn log;
  void* log_user;
  int log_level;
  /* Since 1.1: a directory for the consumer's durable position (null: none). Per origin, what
   * the application released is recorded there and made durable (fdatasync) before it is
   * acknowledged upstream; a consumer opened again on the same directory does not hand over
   * what was released before, whatever else restarted meanwhile: exactly once into the
   * application, across its crashes, for what it makes durable itself before releasing
   * (docs/client.md, "Exactly once into the application"). The directory is created if
   * missing. */
  const char* state_dir;
  /* Since 1.10: TLS for the node's links (docs/security.md, "TLS"), in place of the node's
   * tls in the topology: its certificate chain (naming the node), private key and CA (PEM
   * files; all three or none). The strings are read during open only. */
  const char* tls_cert;
  const char* tls_key;
  const char* tls_ca;
};

static inline void hoprelay_consumer_options_init(struct hoprelay_consumer_options* o) {
  struct hoprelay_consumer_options d = {sizeof(struct hoprelay_consumer_options),
                                        HOPRELAY_CLIENT_VERSION_MAJOR,
                                        HOPRELAY_CLIENT_VERSION_MINOR,
                                        0,
                                        0,
                                        HOPRELAY_CLIENT_LOG_INFO,
                                        0,
                                        0,
                                        0,
                                        0};
  *o = d;
}

/* A message received, or the end of a stream (flags & HOPRELAY_MESSAGE_END, length 0: the
 * producer of `origin` closed after the message before `seq`). Since 1.8, flags &
 * HOPRELAY_MESSAGE_COPY: a message larger than one slot, reassembled from its chunks into a
 * buffer of the library's (one copy), where other messages are views of the slot they landed
 * in (none). */
#define HOPRELAY_MESSAGE_END 0x1
#define HOPRELAY_MESSAGE_COPY 0x2
struct hoprelay_message { /* grows at its end in minor versions (filled through its size) */
  uint32_t origin;
  uint32_t flags;
  uint64_t seq;
  const void* data; /* valid until hoprelay_consumer_release(); never written by the library */
  size_t length;
  void* internal_; /* the library's: leave it alone */
};

/* Runs node `node` of `topology` (a path, or TOML text when it contains a newline) in this
 * process: listens on its address and takes its upstream peers' links. Its stage runs on
 * every message before the application sees it, and a message larger than a slot is handed
 * over whole (reassembled). Since 1.6 `node` may have downstream peers (a relay): the node
 * connects to them and forwards every message as hoprelayd would; a message is acknowledged
 * upstream once the application released it and the peers acknowledged it, and close waits
 * up to 10 s for the peers to acknowledge what the application released (what they have not
 * comes again from upstream to the node's next run). Errors: ECONFIG, ENODE (not in the
 * topology; before 1.6 also a node with downstream peers), EUNAVAILABLE (address in use:
 * another hoprelayd or consumer for this node?), EVERSION. */
int hoprelay_consumer_open(const char* topology, const char* node,
                           const struct hoprelay_consumer_options* options,
                           hoprelay_consumer** out);

/* The next message, in the order it arrived, waiting up to timeout_ms. The application owns
 * it until it releases it; unreleased messages are not acknowledged, so they come again
 * (to whoever runs the node next) if this process ends. Many may be held at once, up to the
 * node's slots: then the upstream waits (backpressure). Slots are acknowledged in the order
 * messages arrived, so one message held keeps the slots of those released after it too: the
 * stream stops once `slots` frames have arrived after it (recv's ETIMEDOUT names it). */
int hoprelay_consumer_recv(hoprelay_consumer* c, struct hoprelay_message* msg, int timeout_ms);
/* Since 1.9: recv into a struct hoprelay_message of `size` bytes (sizeof of the caller's
 * header; at least that of 1.0), filling what it has: the macro below makes every
 * hoprelay_consumer_recv() of a program built against this header this call. The function
 * hoprelay_consumer_recv fills the message of 1.0, for programs built against older headers.
 * EINVAL: a size smaller than 1.0's message. */
int hoprelay_consumer_recv_sized(hoprelay_consumer* c, struct hoprelay_message* msg, size_t size,
                                 int timeout_ms);
#define hoprelay_consumer_recv(c, msg, timeout_ms) \
  hoprelay_consumer_recv_sized((c), (msg), sizeof *(msg), (timeout_ms))
/* Gives a message back (acknowledged upstream, in order). Its data must not be read after.
 * With a state_dir, the acknowledgement waits until the release is durable (one fdatasync for
 * all releases of one round of the library's work, inside a later call), and the durable
 * position covers a message once it and every message recv gave before it are released: one
 * released early waits for those (recorded alone, it would make a restarted consumer skip an
 * earlier one that was never released). */
int hoprelay_consumer_release(hoprelay_consumer* c, struct hoprelay_message* msg);
/* Since 1.1: release, and keep `app_position` (the application's own: an output file's length
 * after this message, a database's transaction id...) with the durable position, to be read
 * back with hoprelay_consumer_app_position() after a restart. Without a state_dir: release. */
int hoprelay_consumer_release_at(hoprelay_consumer* c, struct hoprelay_message* msg,
                                 uint64_t app_position);
/* Since 1.3: gives a message up without releasing it, for an application that could not take
 * it (its write failed) and stops: not acknowledged, it keeps its slot until the consumer is
 * closed and comes again to the node's next consumer (with a state_dir, the position never
 * passes it). Nothing received after it can be acknowledged (acknowledgements go in order),
 * so from then on recv returns ESTATE, naming the message, instead of stalling once the
 * node's slots fill: close the consumer and open it again. To skip a message, release it.
 * ESTATE: not a message from recv, or released or abandoned already. */
int hoprelay_consumer_abandon(hoprelay_consumer* c, struct hoprelay_message* msg);
/* Since 1.1: with a state_dir, the app_position of the last durable release (0: none), and
 * one past the highest sequence number of `origin` taken (0: none). Read at start: an
 * application that writes a file truncates it to app_position and appends from there. */
uint64_t hoprelay_consumer_app_position(const hoprelay_consumer* c);
uint64_t hoprelay_consumer_resume_seq(const hoprelay_consumer* c, uint32_t origin);

int hoprelay_consumer_fd(const hoprelay_consumer* c);
int hoprelay_consumer_process(hoprelay_consumer* c);

/* Closes the node's links. Messages not released are not acknowledged (they come again).
 * Since 1.8 the handle stays valid until hoprelay_consumer_destroy: calls on it return ESTATE,
 * a second close does nothing. */
void hoprelay_consumer_close(hoprelay_consumer* c);
/* Since 1.8: closes the consumer if it is open, then frees the handle; invalid after. */
void hoprelay_consumer_destroy(hoprelay_consumer* c);

#ifdef __cplusplus
}
#endif

#endif /* HOPRELAY_CLIENT_H */
