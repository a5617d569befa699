/* libhoprelay's options versioning, as an application's first mistakes and a version skew meet
 * it: options never filled in by _init (zeroed, or garbage), options of another major version,
 * and options from a newer header than the library's are refused with HOPRELAY_EVERSION and a
 * text that says what to do; options of an older minor version (1.3's producer options, before
 * run_head) open as before; send and commit refuse flags they do not know; the structs the
 * library fills go by the caller's size (1.9). C, against the public header and the shared
 * library only.
 *
 *   abi_version     (exit 0 and "abi_version: ok" on success)
 *
 * Its topology is given as text, on a port of its own: the producer that opens connects to
 * nothing that another test runs. */
#include <hoprelay/client.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

/* open must fail with EVERSION and a last error containing every one of `words`. */
static void expect_refused(const char* what, int rc, const char* const* words) {
  const char* text = hoprelay_last_error();
  if (rc != HOPRELAY_EVERSION) {
    fprintf(stderr, "abi_version: %s: %s (%d), not HOPRELAY_EVERSION: %s\n", what,
            hoprelay_strerror(rc), rc, text);
    ++failures;
    return;
  }
  for (; *words; ++words) {
    if (!strstr(text, *words)) {
      fprintf(stderr, "abi_version: %s: \"%s\" not in: %s\n", what, *words, text);
      ++failures;
    }
  }
  printf("abi_version: %s: %s\n", what, text);
}

int main(void) {
  const char* topology =
      "[pipeline]\nname = \"abi\"\ntransport = \"tcp\"\n\n[nodes.solo]\n"
      "listen = \"127.0.0.1:17939\"\n";
  const char* head = "solo";
  char mine[32], newer[32];
  snprintf(mine, sizeof mine, "%d.%d", HOPRELAY_CLIENT_VERSION_MAJOR,
           HOPRELAY_CLIENT_VERSION_MINOR);
  snprintf(newer, sizeof newer, "%d.%d", HOPRELAY_CLIENT_VERSION_MAJOR,
           HOPRELAY_CLIENT_VERSION_MINOR + 1);
  hoprelay_producer* p = NULL;
  hoprelay_consumer* c = NULL;

  /* Zeroed, as `struct hoprelay_producer_options o = {0};` leaves them. */
  struct hoprelay_producer_options zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  zeroed.connect_timeout_ms = 0;
  const char* init_words[] = {"hoprelay_producer_options_init", NULL};
  expect_refused("zeroed producer options", hoprelay_producer_open(topology, head, &zeroed, &p),
                 init_words);
  struct hoprelay_consumer_options czeroed;
  memset(&czeroed, 0, sizeof czeroed);
  const char* cinit_words[] = {"hoprelay_consumer_options_init", NULL};
  expect_refused("zeroed consumer options", hoprelay_consumer_open(topology, head, &czeroed, &c),
                 cinit_words);

  /* Another major version (or garbage where the version goes). */
  struct hoprelay_producer_options o;
  hoprelay_producer_options_init(&o);
  o.version_major = HOPRELAY_CLIENT_VERSION_MAJOR + 1;
  char other[32];
  snprintf(other, sizeof other, "%d.%d", HOPRELAY_CLIENT_VERSION_MAJOR + 1,
           HOPRELAY_CLIENT_VERSION_MINOR);
  const char* major_words[] = {other, mine, "another major version",
                               "hoprelay_producer_options_init", NULL};
  expect_refused("options of another major version", hoprelay_producer_open(topology, head, &o, &p),
                 major_words);

  /* A newer header: one minor version up, its options 8 bytes larger. */
  struct {
    struct hoprelay_producer_options o;
    uint64_t added_in_a_later_minor;
  } later;
  memset(&later, 0, sizeof later);
  hoprelay_producer_options_init(&later.o);
  later.o.struct_size = sizeof later;
  later.o.version_minor = HOPRELAY_CLIENT_VERSION_MINOR + 1;
  char install[64];
  snprintf(install, sizeof install, "install libhoprelay %s or newer", newer);
  const char* newer_words[] = {newer, mine, install, NULL};
  expect_refused("options of a newer minor version",
                 hoprelay_producer_open(topology, head, &later.o, &p), newer_words);
  if (p || c) {
    fprintf(stderr, "abi_version: a refused open left a handle\n");
    ++failures;
  }

  /* 1.3's options (everything before run_head): opened as they always were. connect_timeout 0:
   * no head needs to run for open to succeed. */
  hoprelay_producer_options_init(&o);
  o.struct_size = (uint32_t)offsetof(struct hoprelay_producer_options, run_head);
  o.version_minor = 3;
  o.connect_timeout_ms = 0;
  int rc = hoprelay_producer_open(topology, head, &o, &p);
  if (rc != HOPRELAY_OK) {
    fprintf(stderr, "abi_version: 1.3's producer options: %s: %s\n", hoprelay_strerror(rc),
            hoprelay_last_error());
    ++failures;
  } else {
    /* A flag this library does not know (a newer header's, or a mistake) is refused, not
     * ignored. */
    const char* flag_words[] = {"send: unknown flags 0x80", "HOPRELAY_SEND_MORE", NULL};
    const char* commit_words[] = {"commit: unknown flags 0x6", NULL};
    rc = hoprelay_producer_send(p, "x", 1, 0x80 | HOPRELAY_SEND_MORE, NULL, 0);
    if (rc != HOPRELAY_EINVAL) {
      fprintf(stderr, "abi_version: send with flag 0x80: %s, not EINVAL\n", hoprelay_strerror(rc));
      ++failures;
    } else {
      for (const char* const* w = flag_words; *w; ++w) {
        if (!strstr(hoprelay_last_error(), *w)) {
          fprintf(stderr, "abi_version: \"%s\" not in: %s\n", *w, hoprelay_last_error());
          ++failures;
        }
      }
    }
    rc = hoprelay_producer_commit(p, 1, 0x6, NULL);
    if (rc != HOPRELAY_EINVAL || !strstr(hoprelay_last_error(), commit_words[0])) {
      fprintf(stderr, "abi_version: commit with flags 0x6: %s: %s\n", hoprelay_strerror(rc),
              hoprelay_last_error());
      ++failures;
    }
    hoprelay_producer_destroy(p);
  }

  /* The structs the library fills go by the caller's size (1.9): a newer header's larger
   * stats get the rest zeroed; a message smaller than 1.0's is refused, naming the fix. */
  {
    struct {
      struct hoprelay_producer_stats s;
      uint64_t added_in_a_later_minor[3];
    } big;
    memset(&big, 0xFF, sizeof big);
    hoprelay_producer_stats_sized(NULL, &big.s, sizeof big);
    const unsigned char* b = (const unsigned char*)&big;
    for (size_t i = 0; i < sizeof big; ++i) {
      if (b[i] != 0) {
        fprintf(stderr, "abi_version: stats of a newer header: byte %zu not zeroed\n", i);
        ++failures;
        break;
      }
    }
    struct hoprelay_message m;
    int src = hoprelay_consumer_recv_sized(NULL, &m, 8, 0);
    if (src != HOPRELAY_EINVAL ||
        !strstr(hoprelay_last_error(), "pass sizeof(struct hoprelay_message)")) {
      fprintf(stderr, "abi_version: recv into 8 bytes: %s: %s\n", hoprelay_strerror(src),
              hoprelay_last_error());
      ++failures;
    } else {
      printf("abi_version: recv into 8 bytes: %s\n", hoprelay_last_error());
    }
  }

  if (failures) return 1;
  printf("abi_version: ok (this libhoprelay is %s)\n", mine);
  return 0;
}
