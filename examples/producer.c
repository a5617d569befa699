/* A producer in C: sends COUNT messages of SIZE bytes to head node HEAD of TOPOLOGY, half by
 * copy (send) and half in place (reserve / commit), then ends its stream. Byte i of message
 * seq is (seq + i) % 251, which consumer.cpp checks. reserve takes 0 bytes (libhoprelay 1.7:
 * an empty message) up to the largest message (1.5: one larger than a slot of the head leaves
 * as chunks, from the reserved buffer all the same).
 *
 *   cc producer.c $(pkg-config --cflags --libs hoprelay) -o producer
 *   ./producer TOPOLOGY HEAD COUNT SIZE */
#include <hoprelay/client.h>
#include <stdio.h>
#include <stdlib.h>

static void fill(unsigned char* p, size_t n, uint64_t seq) {
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)((seq + i) % 251);
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s TOPOLOGY HEAD COUNT SIZE\n", argv[0]);
    return 2;
  }
  unsigned long count = strtoul(argv[3], NULL, 10);
  size_t size = strtoul(argv[4], NULL, 10);
  struct hoprelay_producer_options o;
  hoprelay_producer_options_init(&o);
  hoprelay_producer* p = NULL;
  int rc = hoprelay_producer_open(argv[1], argv[2], &o, &p);
  if (rc != HOPRELAY_OK) {
    fprintf(stderr, "open: %s: %s\n", hoprelay_strerror(rc), hoprelay_last_error());
    return 1;
  }
  unsigned char* copy = malloc(size);
  for (unsigned long n = 0; n < count && rc == HOPRELAY_OK; ++n) {
    uint64_t seq = hoprelay_producer_next_seq(p);
    if (n % 2 == 0) {
      fill(copy, size, seq);
      rc = hoprelay_producer_send(p, copy, size, HOPRELAY_SEND_MORE, NULL, -1);
    } else {
      void* buffer = NULL;
      rc = hoprelay_producer_reserve(p, size, &buffer, -1);
      if (rc == HOPRELAY_OK) {
        fill(buffer, size, seq); /* written where the device sends it from */
        rc = hoprelay_producer_commit(p, size, HOPRELAY_SEND_MORE, NULL);
      }
    }
  }
  free(copy);
  if (rc != HOPRELAY_OK) {
    fprintf(stderr, "send: %s: %s\n", hoprelay_strerror(rc), hoprelay_last_error());
    hoprelay_producer_destroy(p);
    return 1;
  }
  uint32_t origin = hoprelay_producer_origin(p);
  rc = hoprelay_producer_close(p, 30000); /* flush, end of stream */
  if (rc != HOPRELAY_OK)
    fprintf(stderr, "close: %s: %s\n", hoprelay_strerror(rc), hoprelay_last_error());
  hoprelay_producer_destroy(p); /* frees the handle (since 1.8 close keeps it) */
  if (rc != HOPRELAY_OK) return 1;
  printf("producer: origin %u sent %lu messages\n", origin, count);
  return 0;
}
