/* A program written and built against libhoprelay 1.5's client.h (taken from the repository's
 * history by tests/client/old_header.sh), run with this library: the structs the library fills
 * have grown since (hoprelay_producer_stats in 1.9), and a program of an older header must
 * get what it asked for and not a byte more. A child process consumes node `solo`, the parent
 * produces into it; each struct the library fills sits in front of 64 guard bytes that must
 * stay as they were.
 *
 *   old_header PORT COUNT     (exit 0 and "old_header: ok ..." on success)
 *
 * C99, against the old header and this shared library only: nothing of 1.6 or later. */
#include <hoprelay/client.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define GUARD 64

static int guard_intact(const unsigned char* g) {
  for (int i = 0; i < GUARD; ++i) {
    if (g[i] != 0xA5) return 0;
  }
  return 1;
}

/* Message i: its length, and byte j of it. Every 250th is larger than a slot (chunks). */
static size_t length_of(unsigned i) {
  return i % 250 == 7 ? 10000 : 1 + (i * 37) % 3000;
}
static unsigned char byte_of(unsigned i, size_t j) {
  return (unsigned char)(i * 131 + j);
}

static int consume(const char* topology, unsigned count) {
  struct hoprelay_consumer_options o;
  hoprelay_consumer_options_init(&o);
  hoprelay_consumer* c = NULL;
  int rc = hoprelay_consumer_open(topology, "solo", &o, &c);
  if (rc) {
    fprintf(stderr, "old_header: consumer_open: %s\n", hoprelay_last_error());
    return 1;
  }
  unsigned got = 0;
  uint64_t first = 0;
  for (;;) {
    struct {
      struct hoprelay_message m;
      unsigned char guard[GUARD];
    } box;
    memset(box.guard, 0xA5, GUARD);
    rc = hoprelay_consumer_recv(c, &box.m, 20000);
    if (rc) {
      fprintf(stderr, "old_header: recv after %u: %s\n", got, hoprelay_last_error());
      return 1;
    }
    if (!guard_intact(box.guard)) {
      fprintf(stderr, "old_header: recv wrote past 1.5's struct hoprelay_message\n");
      return 1;
    }
    if (box.m.flags & HOPRELAY_MESSAGE_END) break;
    if (got == 0) first = box.m.seq;
    const unsigned char* d = box.m.data;
    int same = box.m.seq == first + got && box.m.length == length_of(got);
    for (size_t j = 0; same && j < box.m.length; ++j) same = d[j] == byte_of(got, j);
    if (!same) {
      fprintf(stderr, "old_header: message %u (seq %llu, %zu bytes) is not the one sent\n", got,
              (unsigned long long)box.m.seq, box.m.length);
      return 1;
    }
    ++got;
    if (hoprelay_consumer_release(c, &box.m)) {
      fprintf(stderr, "old_header: release: %s\n", hoprelay_last_error());
      return 1;
    }
  }
  hoprelay_consumer_close(c);
  if (got != count) {
    fprintf(stderr, "old_header: %u messages before the end mark, not %u\n", got, count);
    return 1;
  }
  printf("old_header: the consumer got %u of %u, each byte-equal, in order\n", got, count);
  return 0;
}

static int produce(const char* topology, unsigned count) {
  struct hoprelay_producer_options o;
  hoprelay_producer_options_init(&o);
  o.connect_timeout_ms = 20000;
  hoprelay_producer* p = NULL;
  if (hoprelay_producer_open(topology, "solo", &o, &p)) {
    fprintf(stderr, "old_header: producer_open: %s\n", hoprelay_last_error());
    return 1;
  }
  static unsigned char buf[10000];
  uint64_t bytes = 0;
  for (unsigned i = 0; i < count; ++i) {
    size_t n = length_of(i);
    for (size_t j = 0; j < n; ++j) buf[j] = byte_of(i, j);
    if (hoprelay_producer_send(p, buf, n, 0, NULL, 20000)) {
      fprintf(stderr, "old_header: send %u: %s\n", i, hoprelay_last_error());
      return 1;
    }
    bytes += n;
  }
  if (hoprelay_producer_flush(p, 20000)) {
    fprintf(stderr, "old_header: flush: %s\n", hoprelay_last_error());
    return 1;
  }
  struct {
    struct hoprelay_producer_stats s;
    unsigned char guard[GUARD];
  } box;
  memset(box.guard, 0xA5, GUARD);
  hoprelay_producer_stats(p, &box.s);
  if (!guard_intact(box.guard)) {
    fprintf(stderr, "old_header: stats wrote past 1.5's struct hoprelay_producer_stats\n");
    return 1;
  }
  if (box.s.sent != count || box.s.acknowledged != count || box.s.bytes_acknowledged != bytes) {
    fprintf(stderr,
            "old_header: stats say %llu sent, %llu acknowledged (%llu bytes), not %u (%llu)\n",
            (unsigned long long)box.s.sent, (unsigned long long)box.s.acknowledged,
            (unsigned long long)box.s.bytes_acknowledged, count, (unsigned long long)bytes);
    return 1;
  }
  if (hoprelay_producer_close(p, 20000)) {
    fprintf(stderr, "old_header: close: %s\n", hoprelay_last_error());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: old_header PORT COUNT\n");
    return 2;
  }
  char topology[256];
  snprintf(topology, sizeof topology,
           "[pipeline]\nname = \"old\"\ntransport = \"tcp\"\nslot_size = \"4KiB\"\nslots = 16\n\n"
           "[nodes.solo]\nlisten = \"127.0.0.1:%s\"\n",
           argv[1]);
  unsigned count = (unsigned)strtoul(argv[2], NULL, 10);
  uint32_t v = hoprelay_version();
  printf("old_header: built against client.h %d.%d, running with libhoprelay %u.%u\n",
         HOPRELAY_CLIENT_VERSION_MAJOR, HOPRELAY_CLIENT_VERSION_MINOR, v >> 16, v & 0xffff);
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) _exit(consume(topology, count));
  int rc = produce(topology, count);
  int status = 0;
  if (rc) kill(child, SIGKILL);
  waitpid(child, &status, 0);
  if (rc || !WIFEXITED(status) || WEXITSTATUS(status)) return 1;
  printf("old_header: ok: %u messages, stats and every message within 1.5's structs\n", count);
  return 0;
}
