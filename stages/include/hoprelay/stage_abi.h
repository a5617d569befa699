/* hoprelay stage ABI: the one public header a stage plugin needs.
 *
 * A stage is a shared object that exports one C symbol, `hoprelay_stage_entry`, returning a
 * descriptor. The descriptor starts with the ABI major/minor and its own size so that the
 * daemon can refuse a plugin built against an incompatible header instead of reading a
 * struct whose layout it does not know (the classic plugin crash).
 *
 * Rules of the ABI:
 *  - major changes break compatibility: the daemon refuses a different major;
 *  - minor changes only append fields at the end of structs; the daemon reads a field only
 *    when `struct_size` says it is present;
 *  - the stage sees each message in place in its receive slot. It may rewrite the bytes and
 *    change `length` up to `capacity` (the slot's free room), but must not keep the pointer
 *    after `process` returns: the slot is reused.
 *  - `process` is called from the node's data loop, or with `threads` > 1 from its stage worker
 *    threads: it must not block. A stage built against minor 2 or older (caps without the
 *    thread bits below) always runs on the node's event loop, one call at a time, as before.
 *  - a message larger than a slot travels as chunks, each in its own slot (cut-through: a
 *    relay forwards a chunk as soon as it has passed the stage). A stage that sets
 *    HOPRELAY_STAGE_CHUNKS in `caps` is called once per chunk (`chunk` is its index, flag
 *    HOPRELAY_MSG_MORE says more follow); without it the node reassembles the message and
 *    calls the stage once, on the whole of it (then `chunk` is 0 and MORE is clear).
 *
 * Plain C, so a stage can be written in C, C++ or anything with a C FFI.
 */
#ifndef HOPRELAY_STAGE_ABI_H
#define HOPRELAY_STAGE_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HOPRELAY_STAGE_ABI_MAJOR 1
#define HOPRELAY_STAGE_ABI_MINOR 4
#define HOPRELAY_STAGE_ENTRY_SYMBOL "hoprelay_stage_entry"

/* What a stage decides for one message. */
typedef enum hoprelay_verdict {
  HOPRELAY_FORWARD = 0, /* send on to the downstream peers chosen by the route */
  HOPRELAY_DROP = 1,    /* consumed or filtered: release the slot, counted as a drop */
  HOPRELAY_ERROR = 2    /* the message is bad: release the slot, counted as a stage error */
} hoprelay_verdict;

/* Message flags carried end to end in the frame header. */
#define HOPRELAY_MSG_CRC32C_TRAILER 0x0001u /* last 4 bytes are a CRC32C of the rest (LE) */
/* Set by hoprelay, never by a stage: this is a chunk, and more chunks of its message follow. */
#define HOPRELAY_MSG_MORE 0x0002u
/* The payload (of this chunk, for a chunk) is one or more zstd frames, written by the built-in
 * `zstd` stage (mode "compress"); a stage that reads the bytes must not take them for the
 * message until a `zstd` stage with mode "decompress" has cleared it. Since wire version 5.
 * (0x0004 and 0x0008 are header flags of the wire protocol, never shown to a stage.)
 * A new flag value, not a new field: the structs are unchanged, so the ABI minor stays 2 and a
 * stage built against an older header keeps working (it carries a flag it does not know on
 * in `flags` as it is). */
#define HOPRELAY_MSG_ZSTD 0x0010u

/* One message, in place in its receive slot. */
typedef struct hoprelay_msg {
  uint8_t* data;     /* first payload byte, inside the slot */
  uint32_t length;   /* payload bytes; a stage may change it up to capacity */
  uint32_t capacity; /* room in the slot for the payload */
  uint32_t origin;   /* producer that created the message */
  uint32_t flags;    /* HOPRELAY_MSG_* */
  uint64_t seq;      /* per-origin sequence number, from 0: one per message, not per chunk */
  /* Since minor 1 (the daemon owns this struct, so older stages simply do not read it): */
  uint32_t chunk; /* index of this chunk in its message; 0 for a whole message */
} hoprelay_msg;

typedef struct hoprelay_param {
  const char* key;
  const char* value; /* always a string; numbers and booleans arrive in their TOML spelling */
} hoprelay_param;

enum {
  HOPRELAY_LOG_DEBUG = 0,
  HOPRELAY_LOG_INFO = 1,
  HOPRELAY_LOG_WARN = 2,
  HOPRELAY_LOG_ERROR = 3
};

/* What the daemon hands a stage when it creates it. */
typedef struct hoprelay_stage_config {
  uint32_t struct_size;
  const char* node;             /* name of the node the stage runs on */
  const hoprelay_param* params; /* the keys of the topology's `stage` table, without `plugin` */
  size_t n_params;
  void (*log)(void* log_ctx, int level, const char* message);
  void* log_ctx;
} hoprelay_stage_config;

typedef struct hoprelay_stage_descriptor {
  uint16_t abi_major; /* HOPRELAY_STAGE_ABI_MAJOR the stage was built with */
  uint16_t abi_minor;
  uint32_t struct_size; /* sizeof(hoprelay_stage_descriptor) the stage was built with */
  const char* name;
  /* NULL-terminated list of the parameter keys the stage accepts; the topology validator
   * rejects any other key. NULL means "accepts anything". */
  const char* const* param_keys;
  /* Returns the stage instance, or NULL after writing a reason into err (NUL-terminated). */
  void* (*create)(const hoprelay_stage_config* config, char* err, size_t err_len);
  hoprelay_verdict (*process)(void* self, hoprelay_msg* msg);
  /* Called about once a second and at shutdown: persist reports, flush files. May be NULL. */
  void (*flush)(void* self);
  void (*destroy)(void* self);
  /* Since minor 1; read only when struct_size covers it (a minor-0 stage has none):
   * HOPRELAY_STAGE_* capability bits. */
  uint32_t caps;
  /* Since minor 2; read only when struct_size covers it, and may be NULL: why the last call of
   * `process` said ERROR (or DROP), in a few words for an operator ("message leaves no room
   * for the 4-byte trailer"), or NULL. The node reports it to the producer with the drop
   * (cut to 96 bytes), so it must not name anything secret. Called right after that
   * `process`; the string must stay valid until the next call on the instance. */
  const char* (*last_error)(void* self);
} hoprelay_stage_descriptor;

/* The stage can take a large message chunk by chunk (see the rules above): the node then
 * forwards each chunk as soon as it passed, instead of reassembling the message first. */
#define HOPRELAY_STAGE_CHUNKS 0x0001u

/* Since minor 3; ignored in a descriptor of an older minor. How a node with `threads` > 1 may
 * call the stage (docs/stages.md, "Threads"). With neither bit the stage runs on the node's
 * event loop only, one call at a time (every stage built before minor 3), and `threads` does
 * not speed it up.
 *
 * HOPRELAY_STAGE_THREADSAFE: one instance; `process` (and `last_error`, right after it on the
 * same thread) may be called from several threads at once, and `flush` from the event loop
 * while they run. The instance's state is the stage's to protect.
 *
 * HOPRELAY_STAGE_PER_THREAD: the node creates one more instance per worker thread (`create`
 * with the same parameters, from the event loop); each is called from one thread at a time
 * (its worker's `process` and `flush`). The node's own instance is called on the event loop:
 * messages the node reassembles for a stage without HOPRELAY_STAGE_CHUNKS, and a share of the
 * others (messages and chunks) when every worker is busy (the loop lends a hand). Each
 * instance sees a share of the messages (the chunks of one message may go to different
 * instances), in no fixed pattern: a stage whose result depends on seeing every message (a
 * counter, a report, a file written) must not declare it.
 *
 * Either way the node forwards and acknowledges messages in the order they arrived. A chunk is
 * staged ahead of the node's bookkeeping, so a stage with either bit may see a replayed copy of
 * a chunk that the node then drops as a repeat (whole messages are checked first). */
#define HOPRELAY_STAGE_THREADSAFE 0x0002u
#define HOPRELAY_STAGE_PER_THREAD 0x0004u

/* Since minor 4; ignored in a descriptor of an older minor. Where the stage's effect is
 * (docs/stages.md, "Effect"). A node standing in for a relay that is down (on_peer_down =
 * "bypass") runs that relay's stage on its own host, and must give the relay's branch what it
 * depends on without doing there what belongs to the relay's host:
 *
 * HOPRELAY_STAGE_TRANSFORM: the effect is on the message it forwards (a stamp, a compression,
 * a filter): the nodes below depend on it, so a stand-in runs the stage.
 *
 * HOPRELAY_STAGE_LOCAL: the effect is on its own host (a file written, a report, a copy kept)
 * and the message goes on unchanged: a stand-in does not run it (the message passes as it
 * arrived) and says so in its log; the relay's host misses what went around it.
 *
 * Both bits: the nodes below depend on the payload it writes and it also has a local effect,
 * which a stand-in cannot run apart: it runs the stage, and its log warns that the local
 * effect happens on the stand-in's host too. Neither bit (every stage built before minor 4) is
 * taken as a transform, as before minor 4, with the same warning: declare the effect. */
#define HOPRELAY_STAGE_TRANSFORM 0x0008u
#define HOPRELAY_STAGE_LOCAL 0x0010u

typedef const hoprelay_stage_descriptor* (*hoprelay_stage_entry_fn)(void);

/* The one symbol a plugin exports. */
const hoprelay_stage_descriptor* hoprelay_stage_entry(void);

#ifdef __cplusplus
}
#endif

#endif /* HOPRELAY_STAGE_ABI_H */
