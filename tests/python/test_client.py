#!/usr/bin/env python3
"""The Python binding (python/hoprelay) against a real pipeline: two hoprelayd (a -> b) and
the test process as leaf c.

    python3 tests/python/test_client.py BUILD_DIR

BUILD_DIR holds client/libhoprelay.so.1 and daemon/hoprelayd. Prints one line per check and
"N passed, M failed" last; exits 0 only when every check passed.
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

if len(sys.argv) != 2:
    sys.exit("usage: %s BUILD_DIR" % sys.argv[0])
BUILD = os.path.abspath(sys.argv[1])
LIBRARY = os.path.join(BUILD, "client", "libhoprelay.so.1")
DAEMON = os.path.join(BUILD, "daemon", "hoprelayd")
for path in (LIBRARY, DAEMON):
    if not os.path.exists(path):
        sys.exit("test_client.py: %s not found: build the project first" % path)
os.environ["HOPRELAY_LIBRARY"] = LIBRARY
sys.path.insert(0, os.path.join(REPO, "python"))

try:
    import hoprelay  # noqa: E402
except ImportError as e:
    print("FAIL import hoprelay: %s" % e)
    print("0 passed, 1 failed")
    sys.exit(1)

WATCHDOG_S = 150  # the whole run, on a slow machine; normally 10-20 s
RECV_TIMEOUT = 15.0  # one message

results = {"passed": 0, "failed": 0}
daemons = []  # (name, Popen, log path)


def check(name, fn, *args, **kwargs):
    """Runs one check: ok, or FAIL with the reason. Returns fn's result (None on failure)."""
    start = time.monotonic()
    try:
        value = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
        results["failed"] += 1
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
        traceback.print_exc(file=sys.stdout)
        return None
    results["passed"] += 1
    print("ok   %s (%.2f s)" % (name, time.monotonic() - start), flush=True)
    return value


def expect(condition, what):
    if not condition:
        raise AssertionError(what)


def expect_error(fn, status, text, cls=hoprelay.HoprelayError):
    try:
        fn()
    except cls as e:
        expect(isinstance(e, hoprelay.HoprelayError), "%r is not a HoprelayError" % e)
        expect(e.status == status, "status %d (%s), expected %d" % (e.status, e, status))
        expect(text in str(e), "%r does not mention %r" % (str(e), text))
        return e
    raise AssertionError("no error raised (expected status %d, %r)" % (status, text))


def free_ports(n):
    """n distinct free TCP ports of 127.0.0.1 (all held open until every one is chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        ports = [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
    assert len(set(ports)) == n
    return ports


def write_topology(directory, name="python-client", slot_size="16KiB", slots=32, a_slots=None,
                   c_metrics=False):
    """a -> b -> c (c: this process), every node on its own ports; returns the path and the
    metrics ports by node."""
    ports = free_ports(6)
    metrics = {"a": ports[3], "b": ports[4]}
    if c_metrics:
        metrics["c"] = ports[5]
    text = """\
[pipeline]
name = "%s"
transport = "tcp"
slot_size = "%s"
slots = %d
""" % (name, slot_size, slots)
    for i, (node, downstream) in enumerate((("a", "b"), ("b", "c"), ("c", None))):
        text += '\n[nodes.%s]\nlisten = "127.0.0.1:%d"\n' % (node, ports[i])
        if node in metrics:
            text += 'metrics = "127.0.0.1:%d"\n' % metrics[node]
        if downstream:
            text += 'downstream = ["%s"]\n' % downstream
        if node == "a" and a_slots:
            text += "slots = %d\n" % a_slots
    path = os.path.join(directory, name + ".toml")
    with open(path, "w") as f:
        f.write(text)
    return path, metrics


def start_daemon(topology, node, directory, metrics_port):
    # One log per topology and node, appended to by the node's restarts.
    log_path = os.path.join(directory, "hoprelayd-%s-%s.log" % (
        os.path.splitext(os.path.basename(topology))[0], node))
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([DAEMON, "--topology", topology, "--node", node],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                cwd=directory)
    daemons.append((node, proc, log_path))
    url = "http://127.0.0.1:%d/metrics" % metrics_port
    deadline = time.monotonic() + 10
    while True:
        if proc.poll() is not None:
            raise RuntimeError("hoprelayd --node %s exited with %d:\n%s"
                               % (node, proc.returncode, tail(log_path)))
        try:
            with urllib.request.urlopen(url, timeout=1) as reply:
                reply.read()
            # An answer from another process on the port (one not yet dead) is not this one's.
            if proc.poll() is not None:
                continue
            return proc
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("hoprelayd --node %s: no answer at %s within 10 s:\n%s"
                                   % (node, url, tail(log_path)))
            time.sleep(0.05)


def tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return "(%s)" % e


def stop_daemons():
    for _, proc, _ in daemons:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
    for _, proc, _ in daemons:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def watchdog():
    print("FAIL: the test did not finish within %d s: killing it" % WATCHDOG_S, flush=True)
    for node, _, log_path in daemons:
        print("--- hoprelayd %s log:\n%s" % (node, tail(log_path)), flush=True)
    stop_daemons()
    print("%d passed, %d failed" % (results["passed"], results["failed"] + 1), flush=True)
    os._exit(2)


# ---- the messages ---------------------------------------------------------------------------

SLOT = 16 * 1024
rng = random.Random(20240611)
SEND_SIZES = [1, 2, SLOT - 1, SLOT, SLOT + 1, 2 * SLOT, 2 * SLOT + 1, 40000]
SEND_SIZES += [rng.randint(1, 40000) if i % 3 else rng.randint(1, 512)
               for i in range(1000 - len(SEND_SIZES))]
rng.shuffle(SEND_SIZES)
SEND_PAYLOADS = [rng.randbytes(n) for n in SEND_SIZES]
# Larger than a slot too (since libhoprelay 1.5): one buffer across several of the library's,
# sent as chunks from where it lies. Empty ones too (since 1.7): an empty record.
RESERVE_SIZES = [0, 1, SLOT, SLOT + 1, 2 * SLOT + 1, 40000, 0]
RESERVE_SIZES += [rng.randint(1, SLOT) if i % 3 else rng.randint(1, 40000)
                  for i in range(500 - len(RESERVE_SIZES))]
rng.shuffle(RESERVE_SIZES)
RESERVE_PAYLOADS = [rng.randbytes(n) for n in RESERVE_SIZES]
EXPECTED = SEND_PAYLOADS + RESERVE_PAYLOADS


def produce(producer, report):
    """The producer's thread: 1000 messages by send, 500 by reserve/commit, then close."""
    try:
        seqs = []
        for i, payload in enumerate(SEND_PAYLOADS):
            # Alternate bytes, bytearray and memoryview: every bytes-like object goes.
            data = payload if i % 3 == 0 else bytearray(payload) if i % 3 == 1 \
                else memoryview(payload)
            seqs.append(producer.send(data, more=False, timeout=RECV_TIMEOUT))
        for payload in RESERVE_PAYLOADS:
            buf = producer.reserve(len(payload), timeout=RECV_TIMEOUT)
            if len(buf) != len(payload) or buf.readonly:
                raise AssertionError("reserve(%d) gave %r" % (len(payload), buf))
            buf[:] = payload
            seqs.append(producer.commit(len(payload)))
            try:  # the view is gone after commit
                buf[0]
                raise AssertionError("the reserved view is still usable after commit")
            except ValueError:
                pass
        report["seqs"] = seqs
        report["stats_before_close"] = producer.stats()
        report["outcomes"] = producer.outcomes()
        report["resume_seq"] = producer.resume_seq
        producer.close(timeout=RECV_TIMEOUT)
        report["closed"] = True
    except BaseException as e:  # noqa: BLE001 - reported by the main thread
        report["error"] = "".join(traceback.format_exception(e))
        producer.destroy()


def main():
    timer = threading.Timer(WATCHDOG_S, watchdog)
    timer.daemon = True
    timer.start()
    directory = tempfile.mkdtemp(prefix="hoprelay-python-")
    ok = False
    try:
        topology, metrics = write_topology(directory)
        run(topology, directory, metrics)
        ok = True
    except Exception:  # noqa: BLE001 - a bug of the test itself: reported, counted
        results["failed"] += 1
        print("FAIL: the test stopped:", flush=True)
        traceback.print_exc(file=sys.stdout)
    finally:
        stop_daemons()
        timer.cancel()
        if results["failed"] or not ok:
            for node, _, log_path in daemons:
                print("--- hoprelayd %s log (%s):\n%s" % (node, log_path, tail(log_path)))
            print("(logs kept in %s)" % directory)
        else:
            shutil.rmtree(directory, ignore_errors=True)
    print("%d passed, %d failed" % (results["passed"], results["failed"]), flush=True)
    return 0 if results["failed"] == 0 and ok else 1


def run(topology, directory, metrics):
    check("library version is 1.x", lambda: expect(hoprelay.version()[0] == 1,
                                                   "version %r" % (hoprelay.version(),)))

    # The node checks come before any connection: no daemon is needed for them.
    check("Producer on a non-head node: ENODE, 'upstream peers'",
          expect_error, lambda: hoprelay.Producer(topology, "b", connect_timeout=2),
          hoprelay.ENODE, "upstream peers", hoprelay.NodeError)
    # (Before libhoprelay 1.6 a relay was refused with ENODE; now it keeps what it relays.)
    check("Consumer on a relay node opens and closes", lambda: hoprelay.Consumer(topology, "b").close())
    check("Consumer on an unknown node: ENODE, 'no node'",
          expect_error, lambda: hoprelay.Consumer(topology, "zz"), hoprelay.ENODE, "no node",
          hoprelay.NodeError)

    check("a producer its head has not admitted yet (connect_timeout=0, no daemon): end, send "
          "and close say so, no crash", unadmitted_producer, topology)
    check("integer arguments out of range raise ValueError, not an int TypeError: none wraps "
          "(origin 2**32+92 is not 92)", integer_arguments, topology)
    check("wait_connected() of a producer not admitted (no daemon): Timeout; send's Timeout "
          "names wait_connected(), not the C function", unadmitted_wait, topology)
    check("Producer() with no head: Timeout after connect_timeout, naming the head",
          expect_error, lambda: hoprelay.Producer(topology, "a", connect_timeout=0.5),
          hoprelay.ETIMEDOUT, "no connection to a within 500 ms: is hoprelayd running there?",
          hoprelay.Timeout)
    check("Producer() with no head says, a second in, what it waits for (libhoprelay 1.7)",
          open_waiting_is_said, topology)
    check("Ctrl-C while Producer() waits for its head: KeyboardInterrupt then, not after the "
          "30 s connect_timeout", interrupted_connect, topology)
    check("Producer(connect_timeout=None) waits for its head (as long as it takes, Ctrl-C gets "
          "through)", interrupted_connect, topology, None)

    consumer_log = []
    consumer = check("Consumer(c) opens (listens)", hoprelay.Consumer, topology, "c",
                     log=lambda level, line: consumer_log.append((level, line)))
    if consumer is None:
        return
    with consumer:
        check("recv(timeout=0.2) before its upstream runs says so (libhoprelay 1.7)",
              expect_error, lambda: consumer.recv(timeout=0.2), hoprelay.ETIMEDOUT,
              "recv: no message within 200 ms (no upstream link into node c is up: is its "
              "upstream node b running, with this topology?)", hoprelay.Timeout)
        check("daemons a and b start (metrics answer)", lambda: [
            start_daemon(topology, node, directory, metrics[node]) for node in ("b", "a")])

        check("recv(timeout=0) with nothing there raises Timeout (EAGAIN)",
              expect_error, lambda: consumer.recv(timeout=0), hoprelay.EAGAIN, "",
              hoprelay.Timeout)
        check("recv(timeout=0.05) with nothing there raises Timeout (ETIMEDOUT)",
              expect_error, lambda: consumer.recv(timeout=0.05), hoprelay.ETIMEDOUT, "",
              hoprelay.Timeout)

        producer_log = []
        producer = check("Producer(a) connects", hoprelay.Producer, topology, "a",
                         connect_timeout=10,
                         log=lambda level, line: producer_log.append((level, line)))
        if producer is None:
            return
        limits = check("producer properties", producer_properties, producer)
        check("send of more than max_message raises ETOOBIG (-4)", expect_error,
              lambda: producer.send(bytes(producer.max_message + 1)), hoprelay.ETOOBIG,
              "more than", hoprelay.TooBig)
        check("reserve of more than max_message raises ETOOBIG (-4)", expect_error,
              lambda: producer.reserve(producer.max_message + 1), hoprelay.ETOOBIG,
              "more than", hoprelay.TooBig)
        check("commit without reserve raises ESTATE (-9)", expect_error,
              lambda: producer.commit(1), hoprelay.ESTATE, "", hoprelay.StateError)
        origin = limits["origin"] if limits else producer.origin

        # The producer runs in a thread of its own (another handle: allowed), the consumer
        # here: each blocks in its calls while the other makes progress.
        report = {}
        thread = threading.Thread(target=produce, args=(producer, report), daemon=True)
        thread.start()
        check("1000 messages by send (1 to 40000 bytes) arrive in order, byte-equal",
              receive, consumer, origin, 0, SEND_PAYLOADS)
        check("500 messages by reserve/commit (0 to 40000 bytes) arrive in order, byte-equal",
              receive, consumer, origin, len(SEND_PAYLOADS), RESERVE_PAYLOADS)
        check("after close, one end-of-stream Message with seq 1500",
              receive_end, consumer, origin, len(EXPECTED))
        thread.join(RECV_TIMEOUT)
        check("the producer thread sent everything and closed", producer_done, thread,
              report)
        check("recv(timeout=0) after the end raises Timeout", expect_error,
              lambda: consumer.recv(timeout=0), hoprelay.EAGAIN, "", hoprelay.Timeout)
        check("a closed producer raises ClosedError, not a crash", closed_producer, producer)
        check("held messages keep their slots: 32 held, the 33rd waits; bytes intact",
              hold_all_slots, consumer, topology)
        check("a producer collected without close() flushes first (libhoprelay 1.8): 200 of 200, "
              "no end mark", finaliser_flushes, consumer, topology)
        check("log callbacks were called", lambda: expect(
            producer_log and all(isinstance(line, str) for _, line in producer_log),
            "producer log lines: %r" % producer_log[:3]))
    check("a closed consumer raises ClosedError", expect_error,
          lambda: consumer.recv(timeout=0), hoprelay.ESTATE, "closed", hoprelay.ClosedError)
    outcome_checks(directory)
    dedup_checks(directory)
    durable_checks(directory)
    run_head_checks(directory)
    tls_checks(directory)


# ---- outcomes: on_outcome ---------------------------------------------------------------------

def write_outcome_topology(directory):
    """head stamps a crc32c trailer: a message that fills its slot has no room for it and is
    dropped there as stage_error (with the stage's words); smaller ones reach the leaf."""
    listen_head, metrics_head, listen_leaf = free_ports(3)
    text = """\
[pipeline]
name = "python-outcomes"
transport = "tcp"
slot_size = "16KiB"
slots = 32

[nodes.head]
listen = "127.0.0.1:%d"
metrics = "127.0.0.1:%d"
downstream = ["leaf"]
stage = { plugin = "crc32c", mode = "stamp" }

[nodes.leaf]
listen = "127.0.0.1:%d"
""" % (listen_head, metrics_head, listen_leaf)
    path = os.path.join(directory, "outcomes.toml")
    with open(path, "w") as f:
        f.write(text)
    return path, metrics_head


def outcome_checks(directory):
    topology, metrics_head = write_outcome_topology(directory)
    consumer = check("Consumer(leaf) of the outcomes topology opens", hoprelay.Consumer,
                     topology, "leaf")
    if consumer is None:
        return
    delivered = []  # (origin, seq) of every message the leaf got
    stop = threading.Event()

    def drain():
        while not stop.is_set():
            try:
                with consumer.recv(timeout=0.2) as msg:
                    if not msg.end:
                        delivered.append((msg.origin, msg.seq))
            except hoprelay.Timeout:
                pass

    with consumer:
        if check("daemon head starts", start_daemon, topology, "head", directory,
                 metrics_head) is None:
            return
        thread = threading.Thread(target=drain, daemon=True)
        thread.start()
        try:
            check("on_outcome: one Outcome per message, in order, with where and why",
                  outcomes_reported, topology, delivered)
            check("an exception raised in on_outcome is raised by the call it ran in",
                  outcome_exception, topology)
            check("on_outcome calling into its own producer: RuntimeError that says so",
                  outcome_reentry, topology)
            check("connect_timeout=None connects; connect_timeout=0 then wait_connected(): "
                  "admitted, sends", connected_waits, topology)
        finally:
            stop.set()
            thread.join(RECV_TIMEOUT)


def outcomes_reported(topology, delivered):
    seen = []
    sizes = [100, SLOT, 200, SLOT, 300]  # a full slot leaves no room for the trailer
    with hoprelay.Producer(topology, "head", connect_timeout=10, on_outcome=seen.append) as p:
        for n in sizes:
            p.send(bytes(n), timeout=RECV_TIMEOUT)
        p.flush(timeout=RECV_TIMEOUT)
        origin, counts = p.origin, p.outcomes()
    expect([o.seq for o in seen] == [0, 1, 2, 3, 4], "outcomes for seqs %r" % seen)
    expect([o.status for o in seen] ==
           ["delivered", "dropped", "delivered", "dropped", "delivered"], "statuses %r" % seen)
    expect(all(o.origin == origin for o in seen), "origins %r" % seen)
    why = "crc32c: message leaves no room for the 4-byte trailer"
    for o in (seen[1], seen[3]):
        expect(o.reason == "stage_error" and not o.partial and o.drops == 1 and
               o.records == [hoprelay.Drop("stage_error", "head", why)], "dropped: %r" % o)
    for o in (seen[0], seen[2], seen[4]):
        expect(o.reason is None and o.records == [] and o.drops == 0, "delivered: %r" % o)
    expect(counts["delivered"] == 3 and counts["dropped"] == 2 and
           counts["by_reason"]["stage_error"] == 2, "outcomes() %r" % counts)
    deadline = time.monotonic() + RECV_TIMEOUT
    while time.monotonic() < deadline and len([d for d in delivered if d[0] == origin]) < 3:
        time.sleep(0.05)
    expect(sorted(seq for o, seq in delivered if o == origin) == [0, 2, 4],
           "the leaf got %r" % delivered)


def outcome_exception(topology):
    def boom(outcome):
        raise ValueError("boom at seq %d" % outcome.seq)

    p = hoprelay.Producer(topology, "head", connect_timeout=10, on_outcome=boom)
    try:
        try:
            p.send(b"x" * 10, timeout=RECV_TIMEOUT)
            p.flush(timeout=RECV_TIMEOUT)
            raise AssertionError("the callback's ValueError was not raised")
        except ValueError as e:
            expect(str(e) == "boom at seq 0", "raised %r" % e)
        p.send(b"y" * 10, timeout=RECV_TIMEOUT)  # the producer goes on
        try:
            p.flush(timeout=RECV_TIMEOUT)
        except ValueError as e:
            expect(str(e) == "boom at seq 1", "raised %r" % e)
        expect(p.outcomes()["delivered"] == 2, "outcomes %r" % p.outcomes())
    finally:
        p.destroy()


def outcome_reentry(topology):
    holder = {}
    p = hoprelay.Producer(topology, "head", connect_timeout=10,
                          on_outcome=lambda o: holder["p"].next_seq)
    holder["p"] = p
    try:
        expect_error_type(lambda: (p.send(b"z" * 10, timeout=RECV_TIMEOUT),
                                   p.flush(timeout=RECV_TIMEOUT)),
                          RuntimeError, "on_outcome called into its own producer")
        expect(p.next_seq == 1, "next_seq after the callback: %r" % p.next_seq)
    finally:
        p.destroy()


def expect_error_type(fn, cls, text):
    try:
        fn()
    except cls as e:
        expect(text in str(e), "%s without %r: %s" % (cls.__name__, text, e))
        return
    raise AssertionError("no %s raised" % cls.__name__)


def producer_properties(producer):
    got = {"origin": producer.origin, "next_seq": producer.next_seq,
           "max_message": producer.max_message, "max_reserve": producer.max_reserve}
    expect(got["origin"] != 0, "origin 0: %r" % got)
    expect(got["next_seq"] == 0, "next_seq: %r" % got)
    expect(got["max_message"] == 32 * SLOT, "max_message (32 slots of 16 KiB): %r" % got)
    expect(got["max_reserve"] == SLOT, "max_reserve (one slot): %r" % got)
    expect(producer.fileno() >= 0, "fileno %r" % producer.fileno())
    stats = producer.stats()
    expect(stats == {"sent": 0, "acknowledged": 0, "bytes_acknowledged": 0, "reconnects": 0,
                     "bytes_sent": 0, "failovers": 0},
           "stats %r" % stats)
    return got


def receive(consumer, origin, first_seq, payloads):
    for i, payload in enumerate(payloads):
        seq = first_seq + i
        msg = consumer.recv(timeout=RECV_TIMEOUT)
        with msg:
            expect(not msg.end, "message %d: an end mark" % seq)
            expect(msg.origin == origin, "message %d: origin %d, expected %d"
                   % (seq, msg.origin, origin))
            expect(msg.seq == seq, "expected seq %d, got %d" % (seq, msg.seq))
            data = msg.data
            expect(data.readonly and data.format == "B", "data is not a read-only byte view")
            expect(len(data) == len(payload), "message %d: %d bytes, expected %d"
                   % (seq, len(data), len(payload)))
            # Larger than a slot: reassembled into a copy, and said (libhoprelay 1.8).
            expect(msg.copied == (len(payload) > SLOT), "message %d (%d bytes): copied is %r"
                   % (seq, len(payload), msg.copied))
            if bytes(data) != payload:
                at = next(j for j in range(len(payload)) if data[j] != payload[j])
                raise AssertionError("message %d (%d bytes) differs from byte %d on"
                                     % (seq, len(payload), at))
        # Released: the data view is gone with the slot.
        expect(msg.released, "message %d not released" % seq)
        try:
            data[0]
            raise AssertionError("message %d: data still readable after release" % seq)
        except ValueError:
            pass


def receive_end(consumer, origin, seq):
    msg = consumer.recv(timeout=RECV_TIMEOUT)
    with msg:
        expect(msg.end, "not an end mark: %r" % msg)
        expect(msg.seq == seq, "end mark seq %d, expected %d" % (msg.seq, seq))
        expect(msg.origin == origin, "end mark origin %d, expected %d" % (msg.origin, origin))
        expect(len(msg.data) == 0, "end mark with %d bytes" % len(msg.data))


def finaliser_flushes(consumer, topology):
    """A Producer that is collected without close(): its finaliser waits (flush_on_destroy,
    5 s) for what it sent to be acknowledged, then goes without the end mark."""
    payloads = [b"finaliser %d " % i + b"x" * 1000 for i in range(200)]
    report = {}

    def send_and_drop():
        try:
            p = hoprelay.Producer(topology, "a", connect_timeout=10)
            for payload in payloads:
                p.send(payload, timeout=RECV_TIMEOUT)
            del p  # the finaliser runs here (the last reference)
            report["done"] = True
        except BaseException as e:  # noqa: BLE001 - reported below
            report["error"] = "".join(traceback.format_exception(e))

    thread = threading.Thread(target=send_and_drop, daemon=True)
    thread.start()
    for i, payload in enumerate(payloads):
        with consumer.recv(timeout=RECV_TIMEOUT) as msg:
            expect(not msg.end and bytes(msg.data) == payload, "message %d: %r" % (i, msg))
    # The finaliser's flush waits for this consumer's acknowledgements: it is driven until the
    # producer is gone, and nothing more may come (no end mark: the stream was not closed).
    while thread.is_alive():
        try:
            msg = consumer.recv(timeout=0.05)
            raise AssertionError("after the 200, %r" % msg)
        except hoprelay.Timeout:
            pass
    expect(report.get("done"), "the producer: %s" % report.get("error", "still running"))


def hold_all_slots(consumer, topology):
    """c has 32 slots per inbound link, and each node holds a message until the next one
    acknowledges it: with all 32 held by the application (zero copy, unreleased), nothing more
    arrives (the producer waits for credits), and what is held is not overwritten."""
    payloads = [bytes([i]) * 1000 + i.to_bytes(4, "little") for i in range(40)]
    report = {}

    def send_all():
        try:
            with hoprelay.Producer(topology, "a", connect_timeout=10) as producer:
                for payload in payloads:
                    producer.send(payload, timeout=3 * RECV_TIMEOUT)
                producer.close(timeout=RECV_TIMEOUT)
            report["done"] = True
        except BaseException as e:  # noqa: BLE001 - reported below
            report["error"] = "".join(traceback.format_exception(e))

    thread = threading.Thread(target=send_all, daemon=True)
    thread.start()
    held = [consumer.recv(timeout=RECV_TIMEOUT) for _ in range(32)]
    try:
        consumer.recv(timeout=1.0)
        raise AssertionError("a 33rd message arrived while all 32 slots were held")
    except hoprelay.Timeout:
        pass
    for i, msg in enumerate(held):
        expect(bytes(msg.data) == payloads[i], "held message %d was overwritten" % i)
        msg.release()
    for i in range(32, 40):
        with consumer.recv(timeout=RECV_TIMEOUT) as msg:
            expect(bytes(msg.data) == payloads[i], "message %d differs" % i)
    with consumer.recv(timeout=RECV_TIMEOUT) as msg:
        expect(msg.end, "no end mark after the 40")
    thread.join(RECV_TIMEOUT)
    expect(report.get("done"), "the producer: %s" % report.get("error", "still running"))


def interrupted_connect(topology, connect_timeout=30):
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        hoprelay.Producer(topology, "a", connect_timeout=connect_timeout)
        raise AssertionError("Producer() connected with no hoprelayd running")
    except KeyboardInterrupt:
        pass
    finally:
        timer.cancel()
    elapsed = time.monotonic() - start
    expect(elapsed < 20, "KeyboardInterrupt after %.1f s (connect_timeout 30 s)" % elapsed)


def unadmitted_producer(topology):
    producer = hoprelay.Producer(topology, "a", connect_timeout=0)
    expect_error(lambda: producer.end(timeout=0), hoprelay.EAGAIN, "end of stream",
                 hoprelay.Timeout)
    expect_error(lambda: producer.send(b"late", timeout=0), hoprelay.ESTATE,
                 "the stream has ended", hoprelay.StateError)
    expect_error(lambda: producer.close(timeout=0.3), hoprelay.ETIMEDOUT, "the head is down",
                 hoprelay.Timeout)
    expect(producer.closed, "closed after close()")


def integer_arguments(topology):
    origin = "0 (a random one) to 2**32-1"
    seq = "0 to 2**64-1"
    level = "LOG_DEBUG (1) to LOG_ERROR (4), lines of that level and above (a C int)"
    cases = [
        ({"origin": 2**32 + 92}, ValueError, "Producer(origin=4294967388): out of range, " + origin),
        ({"origin": -1}, ValueError, "Producer(origin=-1): out of range, " + origin),
        ({"origin": 1.0}, TypeError, "Producer(origin=1.0): an int, " + origin),
        ({"origin": True}, TypeError, "Producer(origin=True): an int, " + origin),
        ({"first_seq": -1}, ValueError, "Producer(first_seq=-1): out of range, " + seq),
        ({"first_seq": 2**64}, ValueError,
         "Producer(first_seq=18446744073709551616): out of range, " + seq),
        ({"first_seq": "5"}, TypeError, "Producer(first_seq='5'): an int, " + seq),
        ({"log_level": 2**32 + 2}, ValueError,
         "Producer(log_level=4294967298): out of range, " + level),
        ({"connect_timeout": -1}, ValueError, "Producer(connect_timeout=-1): None (wait as "
         "long as it takes) or 0 or more seconds"),
    ]
    for kwargs, cls, text in cases:
        try:
            hoprelay.Producer(topology, "a", **dict({"connect_timeout": 0}, **kwargs))
            raise AssertionError("Producer(%r) was taken" % kwargs)
        except cls as e:
            expect(str(e) == text, "Producer(%r): %r, expected %r" % (kwargs, str(e), text))
    try:
        hoprelay.Consumer(topology, "c", log_level=-2**31 - 1)
        raise AssertionError("Consumer(log_level=-2**31-1) was taken")
    except ValueError as e:
        expect(str(e) == "Consumer(log_level=-2147483649): out of range, " + level, str(e))
    # In range: taken as given (the limits themselves).
    p = hoprelay.Producer(topology, "a", origin=2**32 - 1, first_seq=2**64 - 1, connect_timeout=0)
    try:
        expect(p.origin == 2**32 - 1 and p.next_seq == 2**64 - 1,
               "origin %d, next_seq %d" % (p.origin, p.next_seq))
        for fn, text in ((lambda: p.reserve(-1), "reserve(-1): out of range, a length of 0 to "
                          "max_message"),
                         (lambda: p.commit(-1), "commit(-1): out of range, a length of 0 to the "
                          "reserved length")):
            try:
                fn()
                raise AssertionError("%s was taken" % text.split(":")[0])
            except ValueError as e:
                expect(str(e) == text, "%r, expected %r" % (str(e), text))
    finally:
        p.destroy()


def open_waiting_is_said(topology):
    lines = []
    expect_error(lambda: hoprelay.Producer(topology, "a", connect_timeout=1.5,
                                           log=lambda level, line: lines.append(line)),
                 hoprelay.ETIMEDOUT, "within 1500 ms", hoprelay.Timeout)
    said = [line for line in lines if "waiting for head node a at" in line]
    expect(len(said) == 1 and said[0].endswith("to accept this producer: is hoprelayd running "
                                               "there?"), repr(lines))


def unadmitted_wait(topology):
    p = hoprelay.Producer(topology, "a", connect_timeout=0)
    try:
        e = expect_error(lambda: p.wait_connected(timeout=0), hoprelay.EAGAIN, "",
                         hoprelay.Timeout)
        expect(str(e) == "HOPRELAY_EAGAIN: connect: would wait", str(e))
        e = expect_error(lambda: p.wait_connected(timeout=0.3), hoprelay.ETIMEDOUT, "",
                         hoprelay.Timeout)
        expect(str(e) == "HOPRELAY_ETIMEDOUT: no connection to a within 300 ms: is hoprelayd "
               "running there?", str(e))
        e = expect_error(lambda: p.send(b"x", timeout=0.3), hoprelay.ETIMEDOUT, "",
                         hoprelay.Timeout)
        expect(str(e) == "HOPRELAY_ETIMEDOUT: send: timed out after 300 ms (the head is down) "
               "(not admitted by a yet: Producer.wait_connected() waits for that)", str(e))
    finally:
        p.destroy()


def connected_waits(topology):
    with hoprelay.Producer(topology, "head", connect_timeout=None) as p:
        expect(p.send(b"n" * 10, timeout=RECV_TIMEOUT) == 0, "first seq")
        p.flush(timeout=RECV_TIMEOUT)
    p = hoprelay.Producer(topology, "head", connect_timeout=0)
    try:
        p.wait_connected()  # None: as long as it takes
        p.wait_connected(timeout=0)  # admitted already: at once
        expect(p.send(b"w" * 10, timeout=RECV_TIMEOUT) == 0, "first seq")
        p.flush(timeout=RECV_TIMEOUT)
        expect(p.outcomes()["delivered"] == 1, "outcomes %r" % p.outcomes())
    finally:
        p.destroy()


def producer_done(thread, report):
    expect(not thread.is_alive(), "the producer thread is still running")
    expect("error" not in report, "the producer thread failed:\n%s" % report.get("error"))
    expect(report.get("seqs") == list(range(len(EXPECTED))),
           "send/commit returned seqs other than 0..1499")
    stats = report.get("stats_before_close")
    expect(stats and stats["sent"] == len(EXPECTED), "stats before close: %r" % stats)
    # (libhoprelay 1.9's counter, filled through the struct's size)
    expect(stats["bytes_sent"] == sum(len(e) for e in EXPECTED),
           "bytes_sent %r of %d" % (stats["bytes_sent"], sum(len(e) for e in EXPECTED)))
    # Nothing dropped (the consumer's stage drops nothing); a fresh origin.
    outcomes = report.get("outcomes")
    # (read before close: what was acknowledged by then; none of it dropped)
    expect(outcomes is not None and outcomes["dropped"] == 0 and outcomes["repeat"] == 0 and
           outcomes["delivered"] <= len(EXPECTED) and
           outcomes["by_reason"] == {r: 0 for r in hoprelay._DROP_REASONS},
           "outcomes: %r" % outcomes)
    expect(report.get("resume_seq") == 0, "resume_seq: %r" % report.get("resume_seq"))
    expect(report.get("closed"), "close did not return")


def closed_producer(producer):
    expect(producer.closed, "not closed")
    expect_error(lambda: producer.send(b"x"), hoprelay.ESTATE, "closed", hoprelay.ClosedError)
    expect_error(lambda: producer.origin, hoprelay.ESTATE, "closed", hoprelay.ClosedError)
    expect_error(lambda: producer.fileno(), hoprelay.ESTATE, "closed", hoprelay.ClosedError)
    producer.close()  # closing twice does nothing
    producer.destroy()


# ---- deduplication forgets no origin a sender may still send again ---------------------------

DEDUP_ORIGINS = 1100  # more than a node remembers (1,024)


def metric(port, name, label):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + "{") and label in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def dedup_checks(directory):
    # c can hold one message while more than 1,024 others pass behind it: rings of 4,096 small
    # slots at b and c (at a, each producer's is 2).
    topology, metrics = write_topology(directory, "python-dedup", "256B", 4096, a_slots=2,
                                       c_metrics=True)
    consumer = check("Consumer(c) of the dedup topology opens", hoprelay.Consumer, topology, "c")
    if consumer is None:
        return
    with consumer:
        if check("daemons a and b of the dedup topology start", lambda: [
                start_daemon(topology, node, directory, metrics[node]) for node in ("b", "a")]) \
                is None:
            return
        check("a consumer holding one message while %d other origins pass, then its link "
              "dropped: every replay is taken for a repeat" % DEDUP_ORIGINS,
              replays_after_many_origins, consumer, topology, directory, metrics)


def replays_after_many_origins(consumer, topology, directory, metrics):
    """c holds origin 1's message unreleased, so c's credits to b stop behind it and b (and a)
    keep everything after it; DEDUP_ORIGINS more origins pass, one message each. Then b is
    killed and started again: a replays all of them through the new b, and c must take each
    for a repeat. Its deduplication remembers 1,024 origins: it must not forget those whose
    frames b may send again (it forgot the oldest, origin 1 first, and delivered them twice)."""
    def one(origin):
        p = hoprelay.Producer(topology, "a", origin=origin, connect_timeout=10)
        try:
            p.send(b"%d" % origin, timeout=RECV_TIMEOUT)
            msg = consumer.recv(timeout=RECV_TIMEOUT)
        finally:
            p.destroy()  # no end mark: one message per origin, nothing else
        expect((msg.origin, msg.seq, bytes(msg.data)) == (origin, 0, b"%d" % origin),
               "origin %d: got origin %d seq %d" % (origin, msg.origin, msg.seq))
        return msg

    held = one(1)
    for origin in range(2, DEDUP_ORIGINS + 2):
        one(origin).release()
    for i, (node, proc, _) in enumerate(daemons):
        if node == "b" and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
    start_daemon(topology, "b", directory, metrics["b"])
    want = DEDUP_ORIGINS + 1
    deadline = time.monotonic() + 30
    while metric(metrics["c"], "hoprelay_messages_dropped_total", 'reason="duplicate"') < want:
        expect(time.monotonic() < deadline,
               "c dropped %d replays as repeats within 30 s, expected %d"
               % (metric(metrics["c"], "hoprelay_messages_dropped_total",
                         'reason="duplicate"'), want))
        try:
            msg = consumer.recv(timeout=0.2)
            raise AssertionError("delivered twice: origin %d seq %d" % (msg.origin, msg.seq))
        except hoprelay.Timeout:
            pass
    expect_error(lambda: consumer.recv(timeout=0.5), hoprelay.ETIMEDOUT, "", hoprelay.Timeout)
    held.release()


# ---- a durable consumer (state_dir): exactly once into the application's file -----------------

# The application: a consumer of c with a state_dir that appends each message to a file. At
# start it cuts the file back to its durable app_position; it writes a batch, makes it durable
# (fdatasync), then releases each message with the file's length after it, as `hoprelay recv
# --output --state-dir` does. It exits 0 at the end mark.
DURABLE_APP = r"""
import os, sys
import hoprelay
topology, state_dir, output = sys.argv[1:]
with hoprelay.Consumer(topology, "c", state_dir=state_dir) as c:
    fd = os.open(output, os.O_WRONLY | os.O_CREAT, 0o644)
    written = c.app_position
    if os.fstat(fd).st_size < written:
        sys.exit("the output is shorter than its durable position %d" % written)
    os.ftruncate(fd, written)
    os.lseek(fd, written, os.SEEK_SET)
    print("resumed at %d" % written, flush=True)
    batch, ended = [], False
    while not ended:
        m = c.recv(timeout=60)
        while True:
            if m.origin != 42:  # left by an earlier check that failed: not this stream's
                m.release()
            elif m.end:
                ended = True
                break
            else:
                view = m.data
                while view:
                    view = view[os.write(fd, view):]
                written += len(m)
                batch.append((m, written))
                if len(batch) == 32:
                    break
            try:
                m = c.recv(timeout=0)
            except hoprelay.Timeout:
                break
        os.fdatasync(fd)
        for held, position in batch:
            held.release(app_position=position)
        batch.clear()
    m.release()
"""

# ---- a producer that runs its head (run_head=True, 1.4) ---------------------------------------

def run_head_checks(directory):
    """Head a run by the producer (no hoprelayd), leaf c this process's consumer."""
    ports = free_ports(2)
    topology = """\
[pipeline]
name = "python-run-head"
transport = "tcp"
slot_size = "16KiB"
slots = 32

[nodes.a]
listen = "127.0.0.1:%d"
downstream = ["c"]

[nodes.c]
listen = "127.0.0.1:%d"
""" % tuple(ports)
    with hoprelay.Consumer(topology, "c") as consumer:
        check("Producer(run_head=True) runs head a itself: 1000 messages by send and 500 by "
              "reserve/commit reach consumer c in order, byte-equal, then the end mark",
              run_head_stream, consumer, topology)


def receive_expected(consumer, origin, thread, report):
    """What produce() sends, from `thread`, checked at `consumer`; then the producer's report."""
    receive(consumer, origin, 0, SEND_PAYLOADS)
    receive(consumer, origin, len(SEND_PAYLOADS), RESERVE_PAYLOADS)
    receive_end(consumer, origin, len(EXPECTED))
    thread.join(RECV_TIMEOUT)
    producer_done(thread, report)


def run_head_stream(consumer, topology):
    producer = hoprelay.Producer(topology, "a", run_head=True, connect_timeout=10)
    expect_error(lambda: hoprelay.Producer(topology, "a", run_head=True), hoprelay.EUNAVAILABLE,
                 "cannot run node a", hoprelay.HoprelayError)
    origin = producer.origin  # read here: the thread has the handle from now on
    report = {}
    thread = threading.Thread(target=produce, args=(producer, report), daemon=True)
    thread.start()
    receive_expected(consumer, origin, thread, report)


def tls_checks(directory):
    """Producer -> consumer c over TLS (libhoprelay 1.10's tls options): c's topology names
    files that do not exist, so only the options' certificates can carry the link."""
    openssl = "/usr/bin/openssl"
    run = lambda *argv: subprocess.run(argv, check=True, capture_output=True, cwd=directory)
    run(openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "py-ca.key", "-out", "py-ca.pem", "-days", "2", "-subj", "/CN=py-ca")
    for name in ("c", "producer"):
        with open(os.path.join(directory, "py-%s.ext" % name), "w") as f:
            f.write("subjectAltName = DNS:%s\n" % name)
        run(openssl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "py-%s.key" % name, "-out", "py-%s.csr" % name, "-subj", "/CN=" + name)
        run(openssl, "x509", "-req", "-in", "py-%s.csr" % name, "-CA", "py-ca.pem", "-CAkey",
            "py-ca.key", "-CAcreateserial", "-out", "py-%s.pem" % name, "-days", "2", "-extfile",
            "py-%s.ext" % name)
    files = lambda name: tuple(os.path.join(directory, "py-%s.%s" % (name, ext))
                               for ext in ("pem", "key")) + (os.path.join(directory, "py-ca.pem"),)
    topology = """\
[pipeline]
name = "python-tls"
transport = "tcp"
slot_size = "16KiB"
slots = 32

[nodes.c]
listen = "127.0.0.1:%d"
tls = { cert = "/nonexistent/c.pem", key = "/nonexistent/c.key", ca = "/nonexistent/ca.pem" }
""" % free_ports(1)[0]
    expect_error(lambda: hoprelay.Consumer(topology, "c"), hoprelay.EUNAVAILABLE,
                 "tls.cert /nonexistent/c.pem")
    try:
        hoprelay.Consumer(topology, "c", tls=("only-a-cert.pem",))
        raise AssertionError("Consumer(tls=(one path,)) raised nothing")
    except ValueError as e:
        expect("a (cert, key, ca) tuple" in str(e), "%r does not say what tls takes" % str(e))
    with hoprelay.Consumer(topology, "c", tls=files("c")) as consumer:
        check("Producer(tls=...) to Consumer(tls=...): 1000 messages by send and 500 by "
              "reserve/commit over TLS 1.3, in order, byte-equal, then the end mark",
              tls_stream, consumer, topology, files("producer"))


def tls_stream(consumer, topology, tls):
    # Opened on the producer's thread: the consumer's node (its listener, its TLS handshakes)
    # moves only inside this thread's calls, in receive().
    origin = 4242
    report = {}

    def open_and_produce():
        try:
            producer = hoprelay.Producer(topology, "c", tls=tls, origin=origin, connect_timeout=20)
        except Exception as e:  # noqa: BLE001 - reported by producer_done
            report["error"] = "open: %s" % e
            return
        produce(producer, report)

    thread = threading.Thread(target=open_and_produce, daemon=True)
    thread.start()
    receive_expected(consumer, origin, thread, report)


DURABLE_MESSAGES = 3000


def durable_checks(directory):
    topology, metrics = write_topology(directory, "python-durable", "16KiB", 32)
    procs = check("daemons a and b of the durable topology start", lambda: {
        node: start_daemon(topology, node, directory, metrics[node]) for node in ("b", "a")})
    if procs is None:
        return
    check("Consumer(state_dir=...): release(app_position) is kept durable; app_position and "
          "resume_seq read it back; a bad app_position is refused before the release; an "
          "abandoned message comes again, and so does one whose with block raised (recv refuses "
          "to go on past it)",
          durable_positions, topology, directory)
    check("an application consumer with a state_dir killed (SIGKILL) twice, then with the "
          "relay before it: its file is byte-equal to the %d messages sent" % DURABLE_MESSAGES,
          durable_application_killed, topology, directory, metrics, procs["b"])


def durable_positions(topology, directory):
    state = os.path.join(directory, "durable-positions")
    with hoprelay.Consumer(topology, "c", state_dir=state) as c:
        p = hoprelay.Producer(topology, "a", origin=41, connect_timeout=10)
        try:
            durable_releases(c, p)
        finally:
            p.destroy()  # no end mark: the stream goes on below
    with hoprelay.Consumer(topology, "c", state_dir=state) as c:
        expect(c.app_position == (1 << 64) - 1 and c.resume_seq(41) == 3,
               "reopened: app_position %d, resume_seq %d; expected 2**64-1 and 3"
               % (c.app_position, c.resume_seq(41)))
        try:
            with c.recv(timeout=RECV_TIMEOUT) as m:  # b replays the abandoned one
                expect((m.origin, m.seq, bytes(m.data)) == (41, 3, b"m3"),
                       "after the abandon: origin %d seq %d" % (m.origin, m.seq))
                raise OSError(28, "No space left on device")  # the application's write
        except OSError:
            pass
        # Nothing after it could be acknowledged: the consumer says so rather than stall.
        expect_error(lambda: c.recv(timeout=RECV_TIMEOUT), hoprelay.ESTATE,
                     "recv: message 3 of origin 41 was abandoned (its with block raised "
                     "OSError): nothing after it can be acknowledged", hoprelay.StateError)
    with hoprelay.Consumer(topology, "c", state_dir=state) as c:
        # Its with block left by an exception: abandoned, not recorded as taken.
        expect(c.resume_seq(41) == 3, "after the exception: resume_seq %d, not 3"
               % c.resume_seq(41))
        with c.recv(timeout=RECV_TIMEOUT) as m:
            expect((m.origin, m.seq, bytes(m.data)) == (41, 3, b"m3"),
                   "after the exception in its with block: origin %d seq %d"
                   % (m.origin, m.seq))
    with hoprelay.Consumer(topology, "c") as c:
        expect(c.app_position == 0, "no state_dir: app_position %d" % c.app_position)
    try:
        hoprelay.Consumer(topology, "c", state_dir="")
        raise AssertionError("state_dir='' was taken")
    except ValueError as e:
        expect("state_dir" in str(e), str(e))


def durable_releases(c, p):
    expect(c.app_position == 0 and c.resume_seq(41) == 0,
           "a new state_dir: app_position %d, resume_seq %d" % (c.app_position,
                                                                c.resume_seq(41)))
    for i in range(4):
        p.send(b"m%d" % i, timeout=RECV_TIMEOUT)
    first = c.recv(timeout=RECV_TIMEOUT)
    # c holds one and does no work meanwhile: a flush times out and says for what (what a
    # send that waits for buffers says: tests/client/nonblocking.c).
    expect_error(lambda: p.flush(timeout=0.2), hoprelay.ETIMEDOUT,
                 "(4 messages not yet acknowledged by a: a consumer holding messages",
                 hoprelay.Timeout)
    for bad, cls in (("12", TypeError), (-1, ValueError), (1 << 64, ValueError),
                     (True, TypeError)):
        try:
            first.release(app_position=bad)
            raise AssertionError("release(app_position=%r) was taken" % (bad,))
        except cls as e:
            expect("app_position" in str(e), "%r does not name app_position" % str(e))
    expect(not first.released, "a refused release released the message")
    c.recv(timeout=RECV_TIMEOUT).release(app_position=(1 << 64) - 1)
    c.recv(timeout=RECV_TIMEOUT).release()  # keeps the previous number
    last = c.recv(timeout=RECV_TIMEOUT)
    # Two released behind the first: recorded (and acknowledged) only in order, after it.
    expect_error(lambda: c.recv(timeout=0.2), hoprelay.ETIMEDOUT,
                 "(the application holds 2 messages it has not released, and 2 it released "
                 "after them wait for them to be recorded in order, of the 32 slots",
                 hoprelay.Timeout)
    first.release(app_position=1000)
    last.abandon()  # not taken: comes again, not recorded
    for bad, cls in ((-1, ValueError), (1 << 32, ValueError), ("1", TypeError)):
        try:
            c.resume_seq(bad)
            raise AssertionError("resume_seq(%r) was taken" % (bad,))
        except cls:
            pass
    # The releases become durable (and are acknowledged) in a later call of the consumer.
    deadline = time.monotonic() + RECV_TIMEOUT
    while p.stats()["acknowledged"] < 3:
        expect(time.monotonic() < deadline, "3 releases not acknowledged in %d s: %r"
               % (RECV_TIMEOUT, p.stats()))
        c.process()
        p.process()
        time.sleep(0.01)


def durable_application_killed(topology, directory, metrics, b):
    state = os.path.join(directory, "durable-state")
    output = os.path.join(directory, "durable-output")
    app_log = os.path.join(directory, "durable-app.log")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    sizes = [rng.randint(1, 3000) for _ in range(DURABLE_MESSAGES)]
    payloads = [rng.randbytes(n) for n in sizes]
    want = b"".join(payloads)

    def start_app():
        with open(app_log, "ab") as log:
            return subprocess.Popen([sys.executable, "-c", DURABLE_APP, topology, state, output],
                                    env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def wait_for_output(app, size):
        deadline = time.monotonic() + 60
        while not os.path.exists(output) or os.path.getsize(output) < size:
            expect(app.poll() is None, "the application exited with %s:\n%s"
                   % (app.returncode, tail(app_log)))
            expect(time.monotonic() < deadline, "the output did not reach %d bytes in 60 s "
                   "(%s):\n%s" % (size, os.path.exists(output) and os.path.getsize(output),
                                   tail(app_log)))
            time.sleep(0.01)

    report = {}

    def produce_all():
        try:
            with hoprelay.Producer(topology, "a", origin=42, connect_timeout=10) as p:
                for payload in payloads:
                    p.send(payload, timeout=60)
                p.close(timeout=60)
            report["done"] = True
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            report["error"] = "".join(traceback.format_exception(e))

    app = start_app()
    thread = threading.Thread(target=produce_all, daemon=True)
    thread.start()
    for fraction in (0.25, 0.5):
        wait_for_output(app, int(len(want) * fraction))
        app.send_signal(signal.SIGKILL)
        app.wait(timeout=10)
        app = start_app()
    wait_for_output(app, int(len(want) * 0.75))
    b.send_signal(signal.SIGKILL)
    app.send_signal(signal.SIGKILL)
    b.wait(timeout=10)
    app.wait(timeout=10)
    start_daemon(topology, "b", directory, metrics["b"])
    app = start_app()
    try:
        expect(app.wait(timeout=90) == 0, "the application exited with %s:\n%s"
               % (app.returncode, tail(app_log)))
    finally:
        if app.poll() is None:
            app.kill()
    thread.join(30)
    expect(report.get("done"), "the producer: %s" % report.get("error", "still running"))
    with open(output, "rb") as f:
        got = f.read()
    if got != want:
        at = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                  min(len(got), len(want)))
        raise AssertionError("the output (%d bytes) differs from what was sent (%d bytes) at "
                             "byte %d" % (len(got), len(want), at))
    with open(app_log) as f:
        resumed = [line for line in f if line.startswith("resumed at ")]
    expect(len(resumed) == 4 and resumed[0] == "resumed at 0\n" and
           all(line != "resumed at 0\n" for line in resumed[1:]),
           "the application's starts: %r" % resumed)


if __name__ == "__main__":
    sys.exit(main())
