/* A consumer (no state_dir) that holds one message and releases every later one: credits go
 * back in ring order, so the released ones keep their slots behind the held one and the
 * stream stops once the node's 16 slots are used, not once 16 messages are held. recv's
 * timeout says so, naming the held message, rather than "holds 1 message ... of the 16
 * slots" (which read as if 15 were free); once it is released, the rest comes. One process,
 * one thread: the topology's node is a head and a leaf at once.
 *
 *   held_first TOPOLOGY NODE     (exit 0 and "held_first: ok" on success) */
#include <hoprelay/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                    \
  do {                               \
    fprintf(stderr, "held_first: "); \
    fprintf(stderr, __VA_ARGS__);    \
    fprintf(stderr, "\n");           \
    exit(1);                         \
  } while (0)

enum { kOrigin = 9, kSlots = 16, kMessages = 20, kTries = 2000 /* of 5 ms */ };

int main(int argc, char** argv) {
  if (argc != 3) FAIL("usage: held_first TOPOLOGY NODE");
  const char *topology = argv[1], *node = argv[2];

  struct hoprelay_consumer_options co;
  hoprelay_consumer_options_init(&co);
  hoprelay_consumer* c = NULL;
  if (hoprelay_consumer_open(topology, node, &co, &c))
    FAIL("consumer_open: %s", hoprelay_last_error());
  struct hoprelay_producer_options po;
  hoprelay_producer_options_init(&po);
  po.origin = kOrigin;
  po.connect_timeout_ms = 0; /* the consumer in this thread must run for the head to answer */
  hoprelay_producer* p = NULL;
  if (hoprelay_producer_open(topology, node, &po, &p))
    FAIL("producer_open: %s", hoprelay_last_error());
  for (int s = 0; s < kMessages; ++s) {
    char text[16];
    int n = snprintf(text, sizeof text, "m%d", s);
    int rc = HOPRELAY_EAGAIN;
    for (int i = 0; i < kTries && rc == HOPRELAY_EAGAIN; ++i) {
      hoprelay_consumer_process(c);
      rc = hoprelay_producer_send(p, text, (size_t)n, 0, NULL, 0);
    }
    if (rc) FAIL("send %s: %s", text, hoprelay_last_error());
  }

  /* The first held, the next ones released, until nothing more comes. */
  struct hoprelay_message first, m;
  int received = 0, idle = 0;
  for (int i = 0; i < kTries && idle < 40; ++i) {
    hoprelay_producer_process(p);
    int rc = hoprelay_consumer_recv(c, received == 0 ? &first : &m, 5);
    if (rc == HOPRELAY_ETIMEDOUT) {
      ++idle;
      continue;
    }
    if (rc) FAIL("recv: %s", hoprelay_last_error());
    idle = 0;
    struct hoprelay_message* got = received == 0 ? &first : &m;
    if (got->seq != (uint64_t)received)
      FAIL("seq %llu, expected %d", (unsigned long long)got->seq, received);
    if (received++ > 0 && hoprelay_consumer_release(c, &m)) {
      FAIL("release: %s", hoprelay_last_error());
    }
  }
  if (received != kSlots)
    FAIL("%d messages before the stream stopped, expected %d", received, kSlots);
  int rc = hoprelay_consumer_recv(c, &m, 50);
  if (rc != HOPRELAY_ETIMEDOUT) FAIL("recv: %s, expected a timeout", hoprelay_strerror(rc));
  const char* why = hoprelay_last_error();
  if (!strstr(why, "holds 1 message") ||
      !strstr(why, "up to 15 it released after message 0 of origin 9")) {
    FAIL("recv's timeout does not say that 15 released messages wait behind message 0: %s", why);
  }

  /* Released, the held one lets everything after it go, and the rest comes. */
  if (hoprelay_consumer_release(c, &first)) FAIL("release: %s", hoprelay_last_error());
  for (int i = 0; i < kTries && received < kMessages; ++i) {
    hoprelay_producer_process(p);
    rc = hoprelay_consumer_recv(c, &m, 5);
    if (rc == HOPRELAY_ETIMEDOUT) continue;
    if (rc) FAIL("recv: %s", hoprelay_last_error());
    if (m.seq != (uint64_t)received++) FAIL("seq %llu", (unsigned long long)m.seq);
    if (hoprelay_consumer_release(c, &m)) FAIL("release: %s", hoprelay_last_error());
  }
  if (received != kMessages) FAIL("%d messages in all, expected %d", received, kMessages);
  hoprelay_producer_destroy(p);
  hoprelay_consumer_destroy(c);
  printf("held_first: ok\n");
  return 0;
}
