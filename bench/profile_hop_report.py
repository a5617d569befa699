#!/usr/bin/env python3
"""Where a relay hop's time goes: buckets of `perf script` samples (bench/profile_hop.sh).

Each row argument is "LABEL BYTES CPU_SECONDS SAMPLES_FILE": the message size (or the name of
the reference relay, socat), the bytes the relay forwarded while it was sampled, its CPU
seconds over that window, and the `perf script
-F comm,tid,ip,sym,dso` output of its samples. A sample goes in one bucket by its kernel call
chain (which system call it is in, and there what it does) or, in user space, by the function
and library it was taken in. Prints one column per size, then the hottest functions.
"""
import argparse
import collections
import re
import sys

RECEIVE = {"tcp_recvmsg", "tcp_recvmsg_locked", "sock_recvmsg", "sock_read_iter",
           "__sys_recvfrom", "___sys_recvmsg", "__sys_recvmsg", "do_iter_readv_writev"}
SEND = {"tcp_sendmsg", "tcp_sendmsg_locked", "sock_sendmsg", "____sys_sendmsg",
        "___sys_sendmsg", "__sys_sendmsg", "__sys_sendto", "sock_write_iter"}
# On loopback the sender's own system call runs the receiving side's TCP (a softirq at the
# end of the transmit): the next process's receive work is billed to this one.
LOOPBACK = {"net_rx_action", "process_backlog", "__netif_receive_skb",
            "__netif_receive_skb_one_core", "ip_rcv", "ip_local_deliver", "tcp_v4_rcv"}
EPOLL = {"do_epoll_wait", "ep_poll", "do_epoll_pwait", "__x64_sys_epoll_wait",
         "__x64_sys_epoll_pwait"}
FUTEX = {"do_futex", "futex_wait", "futex_wake", "__x64_sys_futex"}
FAULT = {"asm_exc_page_fault", "exc_page_fault", "handle_mm_fault"}
COPY = re.compile(r"copy|memcpy|memmove|rep_movs", re.I)

BUCKETS = [
    ("receive", "read its inbound socket (kernel)"),
    ("receive:copy", "  of which copying the bytes out"),
    ("send", "write its outbound socket (kernel)"),
    ("send:copy", "  of which copying the bytes in"),
    ("send:loopback", "  of which the next node's TCP receive (loopback)"),
    ("epoll", "epoll_wait: the event loop waiting or waking"),
    ("futex", "futex: threads handing work over"),
    ("fault", "page faults"),
    ("syscall", "other system calls"),
    ("kernel", "kernel, outside system calls (interrupts, scheduling)"),
    ("user:copy", "user space: memcpy, memmove"),
    ("user:own", "user space: the relay's own code, built-in stage included"),
    ("user:lib", "user space: libc, libstdc++ and other libraries"),
]


def samples(path):
    """Yields each sample's frames, leaf first, as (symbol, dso)."""
    frames = []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("\t", " ")):
                m = re.match(r"\s*[0-9a-f]+ (.*) \((.*)\)\s*$", line)
                if m:
                    frames.append((re.sub(r"\+0x[0-9a-f]+$", "", m.group(1)), m.group(2)))
            elif line.strip():
                if frames:
                    yield frames
                frames = []
    if frames:
        yield frames


def is_kernel(dso):
    return dso.startswith("[kernel")


def classify(frames):
    """The sample's buckets: its main one, and a detail inside it where there is one."""
    leaf, dso = frames[0]
    if not is_kernel(dso):
        if COPY.search(leaf):
            return ["user:copy"]
        if dso.endswith(("/hoprelayd", "/socat")):
            return ["user:own"]
        return ["user:lib"]
    kernel = {s for s, d in frames if is_kernel(d)}
    if kernel & SEND:
        if kernel & LOOPBACK:
            return ["send", "send:loopback"]
        return ["send", "send:copy"] if COPY.search(leaf) else ["send"]
    if kernel & RECEIVE:
        return ["receive", "receive:copy"] if COPY.search(leaf) else ["receive"]
    if kernel & EPOLL:
        return ["epoll"]
    if kernel & FUTEX:
        return ["futex"]
    if kernel & FAULT:
        return ["fault"]
    if "entry_SYSCALL_64_after_hwframe" in kernel or "do_syscall_64" in kernel:
        return ["syscall"]
    return ["kernel"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--smoke", type=int, default=0)
    ap.add_argument("rows", nargs="+")
    args = ap.parse_args()

    columns = []
    for row in args.rows:
        label, nbytes, cpu, path = row.split(maxsplit=3)
        counts = collections.Counter()
        leaves = collections.Counter()
        total = 0
        for frames in samples(path):
            total += 1
            for b in classify(frames):
                counts[b] += 1
            leaves[frames[0][0] + ("" if is_kernel(frames[0][1]) else " [user]")] += 1
        columns.append((label, int(nbytes), float(cpu), total, counts, leaves))

    def size_text(label):
        if not label.isdigit():
            return label
        n = int(label)
        return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 else f"{n} B"

    def per_gb(c):
        return c[2] / (c[1] / 1e9) if c[1] else float("nan")

    ref = next((c for c in columns if c[0] == "socat"), None)

    width = 56
    print(f"Where relay b's CPU goes in the chain hoprelay send -> a -> b -> c (TCP, loopback),"
          f" by message size, and socat's as the relay of one byte stream (read() and write()"
          f" of 256 KiB); perf record -e cpu-clock of the relay alone, {args.seconds:g} s each")
    print(f"{'':{width}}" + "".join(f"{size_text(c[0]):>12}" for c in columns))
    for key, label in BUCKETS:
        cells = []
        for c in columns:
            share = 100.0 * c[4][key] / c[3] if c[3] else 0.0
            cells.append(f"{share:11.1f}%")
        print(f"{label:{width}}" + "".join(cells))
    print(f"{'samples':{width}}" + "".join(f"{c[3]:>12}" for c in columns))
    print(f"{'GB forwarded by the relay while sampled':{width}}" +
          "".join(f"{c[1] / 1e9:12.3f}" for c in columns))
    print(f"{'the relay: CPU seconds per GB forwarded':{width}}" +
          "".join(f"{per_gb(c):12.3f}" for c in columns))
    if ref and per_gb(ref) > 0:
        print(f"{'  over socat, read() and write() alone (same run)':{width}}" +
              "".join(f"{per_gb(c) / per_gb(ref):11.2f}x" for c in columns))
    for c in columns:
        print(f"hottest functions, {size_text(c[0])}:")
        for name, n in c[5].most_common(10):
            print(f"  {100.0 * n / c[3]:5.1f}%  {name}")

    if args.smoke:
        bad = [size_text(c[0]) for c in columns if c[3] == 0 or c[1] == 0 or c[2] <= 0]
        if bad:
            print(f"profile_hop: no samples, bytes or CPU time at {', '.join(bad)}",
                  file=sys.stderr)
            return 1
        print("profile_hop smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
