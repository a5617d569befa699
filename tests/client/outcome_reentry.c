/* A producer's on_outcome callback that calls into its own producer (client.h says it must
 * not): every such call returns HOPRELAY_ESTATE with a sentence naming the callback, close and
 * destroy free nothing, and the producer goes on unharmed. Before, a send from the callback
 * returned OK and corrupted the producer's bookkeeping: a later flush crashed (SIGSEGV in
 * Producer::on_acked). One process, one thread: the topology's node is a head and a leaf at
 * once, so the consumer is the node the producer sends to.
 *
 *   outcome_reentry TOPOLOGY NODE     (exit 0 and "outcome_reentry: ok" on success) */
#include <hoprelay/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                         \
  do {                                    \
    fprintf(stderr, "outcome_reentry: "); \
    fprintf(stderr, __VA_ARGS__);         \
    fprintf(stderr, "\n");                \
    exit(1);                              \
  } while (0)

enum { kMessages = 3, kTries = 2000 /* of 5 ms */ };

static hoprelay_producer* producer;
static int outcomes, reentered;

static void expect_refused(const char* what, int rc) {
  if (rc != HOPRELAY_ESTATE)
    FAIL("%s from on_outcome: %s, expected HOPRELAY_ESTATE", what, hoprelay_strerror(rc));
  if (!strstr(hoprelay_last_error(), "on_outcome")) {
    FAIL("%s from on_outcome: \"%s\" does not name the callback", what, hoprelay_last_error());
  }
}

static void on_outcome(void* user, const struct hoprelay_outcome* o) {
  (void)user;
  if (o->status != HOPRELAY_DELIVERED || o->seq != (uint64_t)outcomes) {
    FAIL("outcome %d: seq %llu status %d", outcomes, (unsigned long long)o->seq, o->status);
  }
  ++outcomes;
  if (reentered++) return;
  void* buffer = NULL;
  expect_refused("send", hoprelay_producer_send(producer, "re", 2, 0, NULL, 0));
  expect_refused("reserve", hoprelay_producer_reserve(producer, 2, &buffer, 0));
  expect_refused("commit", hoprelay_producer_commit(producer, 2, 0, NULL));
  expect_refused("flush", hoprelay_producer_flush(producer, 0));
  expect_refused("process", hoprelay_producer_process(producer));
  expect_refused("wait_connected", hoprelay_producer_wait_connected(producer, 0));
  expect_refused("end", hoprelay_producer_end(producer, 0));
  expect_refused("close", hoprelay_producer_close(producer, 0)); /* frees nothing */
  hoprelay_producer_destroy(producer);                           /* frees nothing */
  if (hoprelay_producer_next_seq(producer) != kMessages) {
    FAIL("next_seq %llu after the refused calls, expected %d",
         (unsigned long long)hoprelay_producer_next_seq(producer), kMessages);
  }
}

int main(int argc, char** argv) {
  if (argc != 3) FAIL("usage: outcome_reentry TOPOLOGY NODE");
  const char *topology = argv[1], *node = argv[2];

  struct hoprelay_consumer_options co;
  hoprelay_consumer_options_init(&co);
  hoprelay_consumer* c = NULL;
  if (hoprelay_consumer_open(topology, node, &co, &c))
    FAIL("consumer_open: %s", hoprelay_last_error());
  struct hoprelay_producer_options po;
  hoprelay_producer_options_init(&po);
  po.connect_timeout_ms = 0; /* the consumer in this thread must run for the head to answer */
  po.on_outcome = on_outcome;
  if (hoprelay_producer_open(topology, node, &po, &producer))
    FAIL("producer_open: %s", hoprelay_last_error());
  for (int s = 0; s < kMessages; ++s) {
    char text[16];
    int n = snprintf(text, sizeof text, "m%d", s);
    int rc = HOPRELAY_EAGAIN;
    for (int i = 0; i < kTries && rc == HOPRELAY_EAGAIN; ++i) {
      hoprelay_consumer_process(c);
      rc = hoprelay_producer_send(producer, text, (size_t)n, 0, NULL, 0);
    }
    if (rc) FAIL("send %s: %s", text, hoprelay_last_error());
  }

  /* Every message once, in order, then the end mark: nothing the callback tried went out. */
  int received = 0, ended = 0, end_rc = HOPRELAY_EAGAIN;
  for (int i = 0; i < kTries && !ended; ++i) {
    int rc = hoprelay_producer_process(producer);
    if (rc) FAIL("process: %s", hoprelay_last_error());
    if (outcomes == kMessages && end_rc != HOPRELAY_OK) {
      end_rc = hoprelay_producer_end(producer, 0);
      if (end_rc != HOPRELAY_OK && end_rc != HOPRELAY_EAGAIN && end_rc != HOPRELAY_ETIMEDOUT)
        FAIL("end: %s", hoprelay_last_error());
    }
    struct hoprelay_message m;
    rc = hoprelay_consumer_recv(c, &m, 5);
    if (rc == HOPRELAY_ETIMEDOUT) continue;
    if (rc) FAIL("recv: %s", hoprelay_last_error());
    if (m.flags & HOPRELAY_MESSAGE_END) {
      if (received != kMessages) FAIL("end mark after %d messages", received);
      ended = 1;
    } else {
      char want[16];
      snprintf(want, sizeof want, "m%d", received);
      if (m.seq != (uint64_t)received || m.length != strlen(want) ||
          memcmp(m.data, want, m.length) != 0) {
        FAIL("message %d: seq %llu, %zu bytes", received, (unsigned long long)m.seq, m.length);
      }
      ++received;
    }
    if (hoprelay_consumer_release(c, &m)) FAIL("release: %s", hoprelay_last_error());
  }
  if (!ended)
    FAIL("no end mark within %d s (%d messages, %d outcomes)", kTries * 5 / 1000, received,
         outcomes);
  for (int i = 0; i < kTries && end_rc != HOPRELAY_OK; ++i) {
    hoprelay_consumer_process(c);
    end_rc = hoprelay_producer_end(producer, 0);
  }
  if (end_rc) FAIL("end: %s", hoprelay_last_error());
  if (outcomes != kMessages) FAIL("%d outcomes, expected %d", outcomes, kMessages);
  if (hoprelay_producer_close(producer, 0)) FAIL("close: %s", hoprelay_last_error());
  hoprelay_producer_destroy(producer);
  hoprelay_consumer_destroy(c);
  printf("outcome_reentry: ok\n");
  return 0;
}
