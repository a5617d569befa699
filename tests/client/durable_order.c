/* A consumer with a durable position (state_dir) whose application releases messages out of
 * the order recv gave them: the position may only advance over what was released before
 * every earlier message was, or a restarted consumer would skip the earlier one for ever
 * (the head replays it, the position says "taken"). One process, one thread: the topology's
 * node is a head and a leaf at once, so the consumer is the node the producer sends to.
 *
 * Last, a plain release (no position of the application's) keeps the position released last.
 *
 *   durable_order TOPOLOGY NODE STATE_DIR     (exit 0 and "durable_order: ok" on success) */
#include <hoprelay/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                       \
  do {                                  \
    fprintf(stderr, "durable_order: "); \
    fprintf(stderr, __VA_ARGS__);       \
    fprintf(stderr, "\n");              \
    exit(1);                            \
  } while (0)

enum { kOrigin = 7, kMessages = 3, kTries = 2000 /* of 5 ms */ };

static hoprelay_consumer* open_consumer(const char* topology, const char* node, const char* dir) {
  struct hoprelay_consumer_options o;
  hoprelay_consumer_options_init(&o);
  o.state_dir = dir;
  hoprelay_consumer* c = NULL;
  int rc = hoprelay_consumer_open(topology, node, &o, &c);
  if (rc) FAIL("consumer_open: %s", hoprelay_last_error());
  return c;
}

/* Receives the next message, driving the producer meanwhile (it reconnects after a restart). */
static void next(hoprelay_consumer* c, hoprelay_producer* p, struct hoprelay_message* m) {
  for (int i = 0; i < kTries; ++i) {
    hoprelay_producer_process(p);
    int rc = hoprelay_consumer_recv(c, m, 5);
    if (rc == HOPRELAY_OK) return;
    if (rc != HOPRELAY_ETIMEDOUT) FAIL("recv: %s", hoprelay_last_error());
  }
  FAIL("recv: nothing within %d s", kTries * 5 / 1000);
}

static void expect_seq(const struct hoprelay_message* m, uint64_t seq) {
  char want[8];
  snprintf(want, sizeof want, "m%llu", (unsigned long long)seq);
  if (m->origin != kOrigin || m->seq != seq || m->length != strlen(want) ||
      memcmp(m->data, want, m->length) != 0) {
    FAIL("expected %s (origin %d seq %llu), got origin %u seq %llu, %zu bytes", want, kOrigin,
         (unsigned long long)seq, m->origin, (unsigned long long)m->seq, m->length);
  }
}

static void settle(hoprelay_consumer* c, hoprelay_producer* p) {
  for (int i = 0; i < 20; ++i) {
    hoprelay_producer_process(p);
    if (hoprelay_consumer_process(c)) FAIL("process: %s", hoprelay_last_error());
  }
}

int main(int argc, char** argv) {
  if (argc != 4) FAIL("usage: durable_order TOPOLOGY NODE STATE_DIR");
  const char *topology = argv[1], *node = argv[2], *dir = argv[3];

  hoprelay_consumer* c = open_consumer(topology, node, dir);
  struct hoprelay_producer_options po;
  hoprelay_producer_options_init(&po);
  po.origin = kOrigin;
  po.connect_timeout_ms = 0; /* the consumer in this thread must run for the head to answer */
  hoprelay_producer* p = NULL;
  if (hoprelay_producer_open(topology, node, &po, &p))
    FAIL("producer_open: %s", hoprelay_last_error());
  for (uint64_t s = 0; s < kMessages; ++s) {
    char text[8];
    int n = snprintf(text, sizeof text, "m%llu", (unsigned long long)s);
    int rc = HOPRELAY_EAGAIN;
    for (int i = 0; i < kTries && rc == HOPRELAY_EAGAIN; ++i) {
      hoprelay_consumer_process(c);
      rc = hoprelay_producer_send(p, text, (size_t)n, 0, NULL, 0);
    }
    if (rc) FAIL("send %s: %s", text, hoprelay_last_error());
  }

  /* Released newest first, the oldest not at all; then the consumer "crashes" (closes). */
  struct hoprelay_message m[kMessages];
  for (uint64_t s = 0; s < kMessages; ++s) {
    next(c, p, &m[s]);
    expect_seq(&m[s], s);
  }
  if (hoprelay_consumer_release_at(c, &m[2], 30) || hoprelay_consumer_release_at(c, &m[1], 20)) {
    FAIL("release: %s", hoprelay_last_error());
  }
  settle(c, p);
  if (hoprelay_consumer_app_position(c) != 0) {
    FAIL("app_position %llu after releasing m2 and m1 before m0: nothing may be durable yet",
         (unsigned long long)hoprelay_consumer_app_position(c));
  }
  hoprelay_consumer_destroy(c);

  /* Restarted: the position says nothing was taken, and every message comes again. */
  c = open_consumer(topology, node, dir);
  if (hoprelay_consumer_resume_seq(c, kOrigin) != 0) {
    FAIL("resume_seq %llu after a restart with m0 never released: m0 would be skipped",
         (unsigned long long)hoprelay_consumer_resume_seq(c, kOrigin));
  }
  for (uint64_t s = 0; s < kMessages; ++s) {
    next(c, p, &m[s]);
    expect_seq(&m[s], s);
  }
  /* m1 first again, then m0: both m0 and m1 become durable, with m1's position. */
  if (hoprelay_consumer_release_at(c, &m[1], 20)) FAIL("release: %s", hoprelay_last_error());
  settle(c, p);
  if (hoprelay_consumer_app_position(c) != 0) FAIL("m1 durable before m0");
  if (hoprelay_consumer_release_at(c, &m[0], 10)) FAIL("release: %s", hoprelay_last_error());
  settle(c, p);
  if (hoprelay_consumer_app_position(c) != 20) {
    FAIL("app_position %llu after m0 and m1 were released, expected 20",
         (unsigned long long)hoprelay_consumer_app_position(c));
  }
  hoprelay_consumer_destroy(c);

  /* m2 was never released in this run: it comes again, and only it. */
  c = open_consumer(topology, node, dir);
  if (hoprelay_consumer_resume_seq(c, kOrigin) != 2) {
    FAIL("resume_seq %llu, expected 2",
         (unsigned long long)hoprelay_consumer_resume_seq(c, kOrigin));
  }
  next(c, p, &m[2]);
  expect_seq(&m[2], 2);
  if (hoprelay_consumer_release_at(c, &m[2], 30)) FAIL("release: %s", hoprelay_last_error());
  settle(c, p);
  if (hoprelay_consumer_app_position(c) != 30) FAIL("app_position after m2");

  /* A plain release (no position of the application's own) keeps the last one: 0 there made
   * a restarted `hoprelay recv --state-dir` cut its whole output file away. */
  int rc = HOPRELAY_EAGAIN;
  for (int i = 0; i < kTries && rc == HOPRELAY_EAGAIN; ++i) {
    hoprelay_consumer_process(c);
    rc = hoprelay_producer_send(p, "m3", 2, 0, NULL, 0);
  }
  if (rc) FAIL("send m3: %s", hoprelay_last_error());
  struct hoprelay_message m3;
  next(c, p, &m3);
  expect_seq(&m3, 3);
  if (hoprelay_consumer_release(c, &m3)) FAIL("release: %s", hoprelay_last_error());
  settle(c, p);
  hoprelay_consumer_destroy(c);
  c = open_consumer(topology, node, dir);
  if (hoprelay_consumer_resume_seq(c, kOrigin) != 4 || hoprelay_consumer_app_position(c) != 30) {
    FAIL(
        "after a plain release of m3: resume_seq %llu (expected 4), app_position %llu "
        "(expected 30, kept from m2)",
        (unsigned long long)hoprelay_consumer_resume_seq(c, kOrigin),
        (unsigned long long)hoprelay_consumer_app_position(c));
  }
  hoprelay_producer_destroy(p);
  hoprelay_consumer_destroy(c);
  printf("durable_order: ok\n");
  return 0;
}
