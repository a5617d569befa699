/* A stage that claims a future ABI major: the daemon must refuse it by version, before it
 * reads a single other field of the descriptor. */
#include <hoprelay/stage_abi.h>

static const hoprelay_stage_descriptor future = {HOPRELAY_STAGE_ABI_MAJOR + 1,
                                                 0,
                                                 sizeof(hoprelay_stage_descriptor),
                                                 "future",
                                                 NULL,
                                                 NULL,
                                                 NULL,
                                                 NULL,
                                                 NULL};

const hoprelay_stage_descriptor* hoprelay_stage_entry(void) {
  return &future;
}
