/* libhoprelay without blocking calls: one thread drives a producer and a consumer with poll(2)
 * on their descriptors, every call with timeout 0. The topology's node is a head and a leaf at
 * once, so the consumer in this process is the node the producer sends to: neither handle can
 * make progress unless the loop below drives both (the library has no thread of its own).
 * Half the messages go by send (copies, some larger than a slot: chunks), half by reserve /
 * commit (zero copy, larger than a slot too since 1.5: one buffer across several of the
 * library's; every other one reserves a slot more than it commits). The first two are as
 * large as the head's whole ring, sent before the head runs: the library takes both at once.
 * Checks every payload, the order, the end of the stream, and that EAGAIN is what a full
 * pipe says.
 *
 *   nonblocking TOPOLOGY NODE COUNT     (exit 0 and "nonblocking: ok ..." on success) */
#include <hoprelay/client.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                     \
  do {                                \
    fprintf(stderr, "nonblocking: "); \
    fprintf(stderr, __VA_ARGS__);     \
    fprintf(stderr, "\n");            \
    exit(1);                          \
  } while (0)

/* The first two messages are as large as the head's ring (kWholeRing), the others 1 byte ..
 * 2.5 slots: whole messages and chunked ones. */
static size_t whole_ring;
enum { kWholeRing = 2 };

static size_t size_of(uint64_t seq, size_t slot) {
  if (seq < kWholeRing) return whole_ring;
  return 1 + (size_t)((seq * 7919) % (slot * 5 / 2));
}

static void fill(unsigned char* p, size_t n, uint64_t seq) {
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(seq * 31 + i);
}

/* The last warning a producer logged. */
static char warned[512];
static void keep_warning(void* user, int level, const char* line) {
  (void)user;
  if (level >= HOPRELAY_CLIENT_LOG_WARN) snprintf(warned, sizeof warned, "%s", line);
}

int main(int argc, char** argv) {
  if (argc != 4) FAIL("usage: nonblocking TOPOLOGY NODE COUNT");
  const char* topology = argv[1];
  const char* node = argv[2];
  const uint64_t count = strtoull(argv[3], NULL, 10);

  hoprelay_consumer* c = NULL;
  int rc = hoprelay_consumer_open(topology, node, NULL, &c);
  if (rc) FAIL("consumer_open: %s: %s", hoprelay_strerror(rc), hoprelay_last_error());
  /* open with connect_timeout_ms 0 does not wait for the head's welcome, which the consumer
   * gives only when driven: wait_connected below, while the consumer's loop runs. */
  hoprelay_producer* p = NULL;
  struct hoprelay_producer_options po;
  hoprelay_producer_options_init(&po);
  po.connect_timeout_ms = 0;
  rc = hoprelay_producer_open(topology, node, &po, &p);
  if (rc) FAIL("producer_open: %s: %s", hoprelay_strerror(rc), hoprelay_last_error());
  /* Since 1.2: admitted only once the head (the consumer here) is driven. */
  if ((rc = hoprelay_producer_wait_connected(p, 0)) != HOPRELAY_EAGAIN) {
    FAIL("wait_connected before the head ran: %s, not EAGAIN", hoprelay_strerror(rc));
  }
  for (int tries = 0; (rc = hoprelay_producer_wait_connected(p, 0)) != HOPRELAY_OK; ++tries) {
    if (rc != HOPRELAY_EAGAIN || tries > 1000) {
      FAIL("wait_connected: %s: %s", hoprelay_strerror(rc), hoprelay_last_error());
    }
    struct pollfd head = {hoprelay_consumer_fd(c), POLLIN, 0};
    poll(&head, 1, 10);
    hoprelay_consumer_process(c);
  }
  const size_t slot = hoprelay_producer_max_reserve(p); /* the topology's, before the welcome */
  whole_ring = hoprelay_producer_max_message(p);
  unsigned char* copy = malloc(whole_ring > slot * 3 ? whole_ring : slot * 3);
  uint64_t sent = 0, received = 0, eagain = 0;
  /* Two messages of the head's whole ring are taken at once (the second waits in the library
   * for credits, behind the first), while the head (the consumer here) is not driven: nothing
   * is acknowledged meanwhile. A third message waits: EAGAIN. */
  for (; sent < kWholeRing; ++sent) {
    fill(copy, whole_ring, sent);
    rc = hoprelay_producer_send(p, copy, whole_ring, 0, NULL, 0);
    if (rc)
      FAIL(
          "message %llu of the whole ring (%zu bytes) with the one before it unacknowledged: "
          "%s: %s",
          (unsigned long long)sent, whole_ring, hoprelay_strerror(rc), hoprelay_last_error());
  }
  if ((rc = hoprelay_producer_send(p, copy, 1, 0, NULL, 0)) != HOPRELAY_EAGAIN)
    FAIL("a message after two of the whole ring: %s, not EAGAIN", hoprelay_strerror(rc));
  /* Waiting, its timeout says for what. */
  if ((rc = hoprelay_producer_send(p, copy, whole_ring, 0, NULL, 50)) != HOPRELAY_ETIMEDOUT)
    FAIL("a third message of the whole ring: %s, not ETIMEDOUT", hoprelay_strerror(rc));
  char want[160];
  snprintf(want, sizeof want,
           "takes %zu of the producer's %zu buffers, two per slot of the head; 0 are free",
           whole_ring / slot, 2 * (whole_ring / slot));
  if (!strstr(hoprelay_last_error(), want))
    FAIL("the timeout says \"%s\", not what it waits for (%s)", hoprelay_last_error(), want);
  int closing = 0, ended = 0, flushed_end = 0;
  /* A copy of the message released last: releasing it again must say ESTATE, even when the
   * library has handed its place to the next message (it reuses them). */
  struct hoprelay_message stale;
  int have_stale = 0;
  struct pollfd fds[2] = {{hoprelay_producer_fd(p), POLLIN, 0},
                          {hoprelay_consumer_fd(c), POLLIN, 0}};
  while (!(ended && closing == 2)) {
    /* Send until the library says it would wait. */
    while (sent < count) {
      size_t n = size_of(sent, slot);
      if (sent % 2 == 1) {
        void* buf = NULL;
        rc = hoprelay_producer_reserve(p, sent % 4 == 3 ? n + slot : n, &buf, 0);
        if (rc == HOPRELAY_OK) {
          fill(buf, n, sent);
          rc = hoprelay_producer_commit(p, n, 0, NULL);
        }
      } else {
        fill(copy, n, sent);
        rc = hoprelay_producer_send(p, copy, n, 0, NULL, 0);
      }
      if (rc == HOPRELAY_EAGAIN) {
        ++eagain;
        break;
      }
      if (rc)
        FAIL("send %llu: %s: %s", (unsigned long long)sent, hoprelay_strerror(rc),
             hoprelay_last_error());
      ++sent;
    }
    if (sent == count && !closing) {
      /* The end mark, behind the last message (since 1.8 at once), then its acknowledgement. */
      rc = hoprelay_producer_end(p, 0);
      if (rc == HOPRELAY_OK)
        closing = 1;
      else if (rc != HOPRELAY_EAGAIN)
        FAIL("end: %s: %s", hoprelay_strerror(rc), hoprelay_last_error());
      struct hoprelay_producer_stats st;
      hoprelay_producer_stats(p, &st);
      if (rc == HOPRELAY_EAGAIN && !flushed_end) {
        /* The end mark is out: a flush waits for it too (the consumer is not driven
         * meanwhile) and says so, with the messages still before it. */
        char want[96];
        snprintf(
            want, sizeof want, "%llu message%s and the end-of-stream mark not yet acknowledged",
            (unsigned long long)(count - st.acknowledged), count - st.acknowledged == 1 ? "" : "s");
        if ((rc = hoprelay_producer_flush(p, 1)) != HOPRELAY_ETIMEDOUT)
          FAIL("flush with the end mark out: %s, not ETIMEDOUT", hoprelay_strerror(rc));
        if (!strstr(hoprelay_last_error(), want))
          FAIL("flush with the end mark out says \"%s\", not \"%s\"", hoprelay_last_error(), want);
        flushed_end = 1;
      }
    }
    /* Take what arrived. */
    struct hoprelay_message m;
    while ((rc = hoprelay_consumer_recv(c, &m, 0)) == HOPRELAY_OK) {
      if (m.flags & HOPRELAY_MESSAGE_END) {
        if (m.seq != count)
          FAIL("end mark at %llu, not %llu", (unsigned long long)m.seq, (unsigned long long)count);
        ended = 1;
      } else {
        if (m.seq != received)
          FAIL("got seq %llu, expected %llu", (unsigned long long)m.seq,
               (unsigned long long)received);
        size_t n = size_of(m.seq, slot);
        if (m.length != n)
          FAIL("seq %llu: %zu bytes, not %zu", (unsigned long long)m.seq, m.length, n);
        fill(copy, n, m.seq);
        if (memcmp(copy, m.data, n) != 0)
          FAIL("seq %llu: payload differs", (unsigned long long)m.seq);
        ++received;
      }
      if (have_stale && (rc = hoprelay_consumer_release(c, &stale)) != HOPRELAY_ESTATE)
        FAIL("releasing a copy of seq %llu again gave %d, not ESTATE (seq %llu in hand)",
             (unsigned long long)stale.seq, rc, (unsigned long long)m.seq);
      stale = m;
      have_stale = 1;
      if ((rc = hoprelay_consumer_release(c, &m)) != HOPRELAY_OK)
        FAIL("release seq %llu: %s", (unsigned long long)m.seq, hoprelay_last_error());
    }
    if (rc != HOPRELAY_EAGAIN) FAIL("recv: %s: %s", hoprelay_strerror(rc), hoprelay_last_error());
    if (closing == 1) {
      rc = hoprelay_producer_close(p, 0); /* the end is acknowledged: nothing to wait for */
      if (rc) FAIL("close: %s: %s", hoprelay_strerror(rc), hoprelay_last_error());
      hoprelay_producer_destroy(p);
      p = NULL;
      fds[0].fd = -1;
      closing = 2;
    }
    if (ended && closing == 2) break;
    if (poll(fds, 2, 1000) < 0) FAIL("poll");
    if (p) hoprelay_producer_process(p);
    hoprelay_consumer_process(c);
  }
  if (received != count)
    FAIL("received %llu of %llu", (unsigned long long)received, (unsigned long long)count);
  if (!flushed_end) FAIL("the end mark was never seen waiting");

  /* A producer whose head goes away with one message unacknowledged, closed then: the close
   * gives it up and says so ("1 message", not "1 messages"), although its link was down
   * already. */
  po.log = keep_warning;
  po.log_level = HOPRELAY_CLIENT_LOG_WARN;
  if ((rc = hoprelay_producer_open(topology, node, &po, &p)))
    FAIL("second producer_open: %s: %s", hoprelay_strerror(rc), hoprelay_last_error());
  for (int tries = 0; (rc = hoprelay_producer_wait_connected(p, 0)) != HOPRELAY_OK; ++tries) {
    if (rc != HOPRELAY_EAGAIN || tries > 1000)
      FAIL("second wait_connected: %s", hoprelay_last_error());
    struct pollfd head = {hoprelay_consumer_fd(c), POLLIN, 0};
    poll(&head, 1, 10);
    hoprelay_consumer_process(c);
  }
  if ((rc = hoprelay_producer_send(p, copy, 1, 0, NULL, 0)))
    FAIL("second producer, send: %s: %s", hoprelay_strerror(rc), hoprelay_last_error());
  hoprelay_consumer_close(c); /* the head goes away, nothing acknowledged */
  for (int i = 0; i < 20; ++i) hoprelay_producer_process(p), poll(NULL, 0, 5); /* sees it */
  warned[0] = 0;
  if ((rc = hoprelay_producer_close(p, 50)) != HOPRELAY_ETIMEDOUT)
    FAIL("close with the head gone: %s, not ETIMEDOUT", hoprelay_strerror(rc));
  if (!strstr(warned,
              "closing with 1 message and the end-of-stream mark not yet acknowledged by solo: "
              "given up (the link is down; the consumers may or may not have them)"))
    FAIL("close with the head gone and 1 message unacknowledged warned \"%s\"", warned);
  /* Since 1.8 a closed handle stays valid until destroy: every call says it is closed, a
   * second close does nothing. */
  if ((rc = hoprelay_producer_send(p, copy, 1, 0, NULL, 0)) != HOPRELAY_ESTATE ||
      !strstr(hoprelay_last_error(), "send: this producer is closed"))
    FAIL("send after close: %s: %s", hoprelay_strerror(rc), hoprelay_last_error());
  if ((rc = hoprelay_producer_close(p, 0)) != HOPRELAY_OK)
    FAIL("a second close: %s: %s", hoprelay_strerror(rc), hoprelay_last_error());
  hoprelay_producer_destroy(p);
  struct hoprelay_message gone;
  if ((rc = hoprelay_consumer_recv(c, &gone, 0)) != HOPRELAY_ESTATE ||
      !strstr(hoprelay_last_error(), "recv: this consumer is closed"))
    FAIL("recv after close: %s: %s", hoprelay_strerror(rc), hoprelay_last_error());
  hoprelay_consumer_close(c); /* a second close does nothing */
  hoprelay_consumer_destroy(c);
  free(copy);
  printf("nonblocking: ok, %llu messages sent and received in order, %llu EAGAIN\n",
         (unsigned long long)count, (unsigned long long)eagain);
  return eagain > 0 ? 0 : 1;
}
