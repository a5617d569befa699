/* `bench-latency`: the stage bench/run.sh gives hoprelay's leaf nodes. Built like any outside
 * plugin, against <hoprelay/stage_abi.h> only (plus the benchmark's latency_hist.h).
 *
 * For every message whose origin is at least `min_origin`, it reads the send time that
 * `hoprelay send --stamp` wrote into the first 8 bytes (CLOCK_MONOTONIC ns) and records
 * now - stamp in a histogram of that origin. Messages of lower origins (the throughput runs)
 * are forwarded untouched and unread. Every flush (about once a second) and at destroy, the
 * histogram of each origin that changed is written to DIR/NODE-ORIGIN.lat (latency_hist.h).
 * Always returns FORWARD, which at a leaf means "consumed".
 *
 * Chunk by chunk (HOPRELAY_STAGE_CHUNKS): a message larger than a slot is not reassembled for
 * it. The stamp is taken from its first chunk and the latency recorded at its last, so what is
 * measured is the time until the whole message has reached the leaf.
 *
 * Parameters: dir (required, must exist), min_origin (default 0: every message).
 * Memory: one histogram (about 9 KiB) per recorded origin, at most 64 origins; messages of
 * further origins are counted in the log at destroy, not recorded. */
#include <errno.h>
#include <hoprelay/stage_abi.h>
#include <stdlib.h>

#include "latency_hist.h"

#define MAX_ORIGINS 64

typedef struct origin_hist {
  uint32_t origin;
  int dirty;
  int has_stamp;          /* the first chunk of a message in passage was seen */
  uint64_t stamp_seq;     /* that message */
  unsigned char stamp[8]; /* its first 8 bytes: the send time */
  lat_hist hist;
} origin_hist;

typedef struct latency_stage {
  char node[128];
  char dir[2048];
  uint64_t min_origin;
  origin_hist* origins[MAX_ORIGINS];
  int n_origins;
  int last; /* index of the last origin seen: consecutive messages mostly share it */
  uint64_t unrecorded;
  void (*log)(void*, int, const char*);
  void* log_ctx;
} latency_stage;

static void* latency_create(const hoprelay_stage_config* config, char* err, size_t err_len) {
  const char* dir = NULL;
  unsigned long long min_origin = 0;
  for (size_t i = 0; i < config->n_params; ++i) {
    const hoprelay_param* p = &config->params[i];
    if (strcmp(p->key, "dir") == 0) dir = p->value;
    if (strcmp(p->key, "min_origin") == 0) {
      char* end = NULL;
      errno = 0;
      min_origin = strtoull(p->value, &end, 10);
      if (errno || *end != '\0' || min_origin > UINT32_MAX) {
        snprintf(err, err_len, "min_origin must be 0..4294967295, not \"%s\"", p->value);
        return NULL;
      }
    }
  }
  if (!dir || !*dir) {
    snprintf(err, err_len, "dir is required (where NODE-ORIGIN.lat files are written)");
    return NULL;
  }
  latency_stage* s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  snprintf(s->node, sizeof s->node, "%s", config->node);
  snprintf(s->dir, sizeof s->dir, "%s", dir);
  s->min_origin = min_origin;
  s->log = config->log;
  s->log_ctx = config->log_ctx;
  return s;
}

static origin_hist* find_origin(latency_stage* s, uint32_t origin) {
  if (s->n_origins > 0 && s->origins[s->last]->origin == origin) return s->origins[s->last];
  for (int i = 0; i < s->n_origins; ++i) {
    if (s->origins[i]->origin == origin) {
      s->last = i;
      return s->origins[i];
    }
  }
  if (s->n_origins == MAX_ORIGINS) return NULL;
  origin_hist* o = calloc(1, sizeof *o);
  if (!o) return NULL;
  o->origin = origin;
  s->last = s->n_origins;
  s->origins[s->n_origins++] = o;
  return o;
}

static hoprelay_verdict latency_process(void* self, hoprelay_msg* msg) {
  latency_stage* s = self;
  if (msg->origin < s->min_origin) return HOPRELAY_FORWARD;
  uint64_t now = lat_now_ns();
  origin_hist* o = find_origin(s, msg->origin);
  const int more = (msg->flags & HOPRELAY_MSG_MORE) != 0;
  if (o && msg->chunk == 0 && more && msg->length >= sizeof(uint64_t)) {
    /* The first chunk of a larger message: keep the stamp until its last chunk (a leaf fed
     * by one path gets one message of an origin at a time; otherwise it is not recorded). */
    memcpy(o->stamp, msg->data, sizeof o->stamp);
    o->stamp_seq = msg->seq;
    o->has_stamp = 1;
    return HOPRELAY_FORWARD;
  }
  if (more) return HOPRELAY_FORWARD; /* a middle chunk */
  const int whole = msg->chunk == 0; /* else the last chunk of a larger message */
  if (!o || (whole ? msg->length < sizeof(uint64_t) : !o->has_stamp || o->stamp_seq != msg->seq)) {
    ++s->unrecorded;
    return HOPRELAY_FORWARD;
  }
  lat_record(&o->hist, whole ? (const void*)msg->data : (const void*)o->stamp, now);
  o->has_stamp = 0;
  o->dirty = 1;
  return HOPRELAY_FORWARD;
}

static void latency_flush(void* self) {
  latency_stage* s = self;
  for (int i = 0; i < s->n_origins; ++i) {
    origin_hist* o = s->origins[i];
    if (!o->dirty) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-%u.lat", s->dir, s->node, o->origin);
    if (lat_write(&o->hist, path) != 0) {
      char msg[4200];
      snprintf(msg, sizeof msg, "cannot write %s: %s", path, strerror(errno));
      s->log(s->log_ctx, HOPRELAY_LOG_WARN, msg);
      continue;
    }
    o->dirty = 0;
  }
}

static void latency_destroy(void* self) {
  latency_stage* s = self;
  latency_flush(s);
  if (s->unrecorded) {
    char msg[128];
    snprintf(msg, sizeof msg, "%llu messages not recorded (more than %d origins, or < 8 bytes)",
             (unsigned long long)s->unrecorded, MAX_ORIGINS);
    s->log(s->log_ctx, HOPRELAY_LOG_WARN, msg);
  }
  for (int i = 0; i < s->n_origins; ++i) free(s->origins[i]);
  free(s);
}

static const char* const latency_keys[] = {"dir", "min_origin", NULL};

static const hoprelay_stage_descriptor latency_descriptor = {HOPRELAY_STAGE_ABI_MAJOR,
                                                             HOPRELAY_STAGE_ABI_MINOR,
                                                             sizeof(hoprelay_stage_descriptor),
                                                             "bench-latency",
                                                             latency_keys,
                                                             latency_create,
                                                             latency_process,
                                                             latency_flush,
                                                             latency_destroy,
                                                             HOPRELAY_STAGE_CHUNKS};

const hoprelay_stage_descriptor* hoprelay_stage_entry(void) {
  return &latency_descriptor;
}
