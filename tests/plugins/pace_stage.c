/* A test stage that makes its node slow: it sleeps `us` microseconds (default 1000) on every
 * message and forwards it unchanged, so a relay running it takes messages at a known pace, and
 * the branch to it falls behind its siblings (the spool's tests, spool_test.cpp). */
#include <hoprelay/stage_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct pace_stage {
  long us;
} pace_stage;

static void* pace_create(const hoprelay_stage_config* config, char* err, size_t err_len) {
  long us = 1000;
  for (size_t i = 0; i < config->n_params; ++i) {
    if (strcmp(config->params[i].key, "us") == 0) {
      char* end = NULL;
      us = strtol(config->params[i].value, &end, 0);
      if (*end != '\0' || us < 0 || us > 1000000) {
        snprintf(err, err_len, "us must be 0..1000000, not \"%s\"", config->params[i].value);
        return NULL;
      }
    }
  }
  pace_stage* s = malloc(sizeof(*s));
  if (!s) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  s->us = us;
  return s;
}

static hoprelay_verdict pace_process(void* self, hoprelay_msg* msg) {
  (void)msg;
  long us = ((pace_stage*)self)->us;
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
  return HOPRELAY_FORWARD;
}

static void pace_destroy(void* self) {
  free(self);
}

static const char* const pace_keys[] = {"us", NULL};

static const hoprelay_stage_descriptor pace_descriptor = {HOPRELAY_STAGE_ABI_MAJOR,
                                                          HOPRELAY_STAGE_ABI_MINOR,
                                                          sizeof(hoprelay_stage_descriptor),
                                                          "pace",
                                                          pace_keys,
                                                          pace_create,
                                                          pace_process,
                                                          NULL,
                                                          pace_destroy};

const hoprelay_stage_descriptor* hoprelay_stage_entry(void) {
  return &pace_descriptor;
}
