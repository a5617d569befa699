/* An example stage built outside the daemon against nothing but <hoprelay/stage_abi.h>:
 * XORs every payload byte with `key` (0-255), in place. Applied twice it restores the data,
 * which is what the integration test uses to prove the plugin really ran on every message. */
#include <hoprelay/stage_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ABI minor this build declares: the header's, or an older one, to stand for a plugin built
 * before minor 3 (the threads test builds it with -DXOR_ABI_MINOR=2). It declares no thread
 * capability either way, so a node runs it on its event loop alone. */
#ifndef XOR_ABI_MINOR
#define XOR_ABI_MINOR HOPRELAY_STAGE_ABI_MINOR
#endif

typedef struct xor_stage {
  uint8_t key;
} xor_stage;

static void* xor_create(const hoprelay_stage_config* config, char* err, size_t err_len) {
  long key = 0x5a;
  for (size_t i = 0; i < config->n_params; ++i) {
    if (strcmp(config->params[i].key, "key") == 0) {
      char* end = NULL;
      key = strtol(config->params[i].value, &end, 0);
      if (*end != '\0' || key < 0 || key > 255) {
        snprintf(err, err_len, "key must be 0..255, not \"%s\"", config->params[i].value);
        return NULL;
      }
    }
  }
  xor_stage* s = malloc(sizeof(*s));
  if (!s) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  s->key = (uint8_t)key;
  return s;
}

static hoprelay_verdict xor_process(void* self, hoprelay_msg* msg) {
  uint8_t key = ((xor_stage*)self)->key;
  for (uint32_t i = 0; i < msg->length; ++i) msg->data[i] ^= key;
  return HOPRELAY_FORWARD;
}

static void xor_destroy(void* self) {
  free(self);
}

static const char* const xor_keys[] = {"key", NULL};

static const hoprelay_stage_descriptor xor_descriptor = {HOPRELAY_STAGE_ABI_MAJOR,
                                                         XOR_ABI_MINOR,
                                                         sizeof(hoprelay_stage_descriptor),
                                                         "xor",
                                                         xor_keys,
                                                         xor_create,
                                                         xor_process,
                                                         NULL,
                                                         xor_destroy};

const hoprelay_stage_descriptor* hoprelay_stage_entry(void) {
  return &xor_descriptor;
}
