/* A chunk-by-chunk stage (HOPRELAY_STAGE_CHUNKS) for the cut-through tests: drops chunk
 * `chunk` (default 1) of every message whose sequence number is a multiple of `every`
 * (default 10), forwards everything else. A drop after earlier chunks went on must reach the
 * nodes downstream as the end of an incomplete message, never as a message with a hole. */
#include <hoprelay/stage_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct drop_chunk_stage {
  unsigned long every;
  unsigned long chunk;
} drop_chunk_stage;

static void* drop_chunk_create(const hoprelay_stage_config* config, char* err, size_t err_len) {
  drop_chunk_stage s = {10, 1};
  for (size_t i = 0; i < config->n_params; ++i) {
    unsigned long* field = strcmp(config->params[i].key, "every") == 0   ? &s.every
                           : strcmp(config->params[i].key, "chunk") == 0 ? &s.chunk
                                                                         : NULL;
    char* end = NULL;
    if (field) *field = strtoul(config->params[i].value, &end, 10);
    if (field && (*end != '\0' || (field == &s.every && *field == 0))) {
      snprintf(err, err_len, "%s must be a positive number", config->params[i].key);
      return NULL;
    }
  }
  drop_chunk_stage* p = malloc(sizeof(*p));
  if (!p) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  *p = s;
  return p;
}

static hoprelay_verdict drop_chunk_process(void* self, hoprelay_msg* msg) {
  const drop_chunk_stage* s = (const drop_chunk_stage*)self;
  if (msg->seq % s->every == 0 && msg->chunk == s->chunk) return HOPRELAY_DROP;
  return HOPRELAY_FORWARD;
}

static void drop_chunk_destroy(void* self) {
  free(self);
}

static const char* const drop_chunk_keys[] = {"every", "chunk", NULL};

static const hoprelay_stage_descriptor drop_chunk_descriptor = {HOPRELAY_STAGE_ABI_MAJOR,
                                                                HOPRELAY_STAGE_ABI_MINOR,
                                                                sizeof(hoprelay_stage_descriptor),
                                                                "drop-chunk",
                                                                drop_chunk_keys,
                                                                drop_chunk_create,
                                                                drop_chunk_process,
                                                                NULL,
                                                                drop_chunk_destroy,
                                                                HOPRELAY_STAGE_CHUNKS};

const hoprelay_stage_descriptor* hoprelay_stage_entry(void) {
  return &drop_chunk_descriptor;
}
