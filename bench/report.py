#!/usr/bin/env python3
"""Turns the records bench/run.sh collected into the tables (stdout), results.json and bench.svg.

  report.py --results RESULTS.tsv --out DIR [--smoke 0|1] [--meta KEY=VALUE ...]

Records, one per line (sizes in bytes):
  tput  SYSTEM SIZE COUNT SECONDS CPU_S OTHERS
                                            throughput run; CPU of every process involved, and
                                            the share of the CPUs other processes used meanwhile
  lat   SYSTEM SIZE RATE COUNT FILE         latency run; FILE is a histogram (latency_hist.h),
                                            relative to the directory of RESULTS.tsv
  rss   SYSTEM SIZE NODE KIB                peak RSS (VmHWM) of a daemon, or of zmq_chain
  slots SYSTEM SIZE SLOTS SLOT_SIZE         the topology's slot geometry at that size

Systems mpi_SHAPE_ALG are Open MPI's MPI_Bcast (bench/mpi_bcast.c) with algorithm ALG, for the
receivers of hoprelay's SHAPE (chain: 3, fanout: 2); --meta mpi_missing=REASON says they were not
measured, and why (no MPI at build time).

Exits non-zero when a measurement has no number (what the smoke test checks); it never judges
performance.
"""
import argparse
import json
import math
import os
import sys

TPUT = ["hop1", "chain", "chaintls", "fanout", "fanoutlt", "fanouthead", "zmq", "tcp"]
LAT = ["hop1", "chain", "chainbusy", "zmq"]
# Latency-only systems, and whose throughput tells whether their offered load is an overload.
TPUT_OF = {"chainbusy": "chain"}
LABELS = {
    "hop1": "hoprelay one hop (send -> x)",
    "chain": "hoprelay chain (send -> a -> b -> c)",
    "chainbusy": "hoprelay chain, b busy-polling (poll = \"busy\", cpu = N)",
    "chaintls": "hoprelay chain over TLS 1.3 on every link (tls; kernel TLS where the kernel has it)",
    "fanout": "hoprelay fan-out 1->2 (send -> a -> l1, l2)",
    "fanoutlt": "hoprelay fan-out 1->2, a's links on 2 threads (link_threads = 2)",
    "fanouthead": "hoprelay fan-out 1->2, the producer runs head a (send --run-head -> l1, l2)",
    "zmq": "ZeroMQ chain (push -> proxy -> proxy -> pull)",
    "tcp": "raw TCP one hop (ceiling)",
}
DAEMONS = {"hop1": ["x"], "chain": ["a", "b", "c"], "chaintls": ["a", "b", "c"],
           "fanout": ["a", "l1", "l2"],
           "fanoutlt": ["a", "l1", "l2"],
           "fanouthead": ["l1", "l2"]}
# (name, numerator, denominator, size, minimum ratio): the throughput targets of issue #6.
TARGETS = [
    ("TCP chain >= 1.5x ZeroMQ chain at 64 KiB", "chain", "zmq", 65536, 1.5),
    ("TCP chain >= 1.0x ZeroMQ chain at 64 B", "chain", "zmq", 64, 1.0),
    ("one hop >= 0.8x raw TCP at 64 KiB", "hop1", "tcp", 65536, 0.8),
]
COLORS = {"hop1": "#1f77b4", "chain": "#d62728", "chainbusy": "#ff7f0e", "chaintls": "#e377c2",
          "fanout": "#9467bd",
          "fanoutlt": "#17becf", "fanouthead": "#bcbd22", "zmq": "#2ca02c", "tcp": "#7f7f7f"}
REFERENCE = {"zmq", "tcp"}  # drawn dashed
# MPI_Bcast: the algorithms bench/run.sh runs, and hoprelay's topology each rank count stands for.
MPI_ALGS = ["default", "chain", "pipeline", "bintree"]
MPI_SHAPES = {"chain": "rank 0 to 3 ranks, as send -> a -> b -> c",
              "fanout": "rank 0 to 2 ranks, as send -> a -> {l1, l2}"}
MPI_COLORS = {"chain": "#8c564b", "fanout": "#e377c2"}
# The hoprelay systems each MPI_Bcast shape is set against: the fan-out with a hoprelayd head,
# and with the producer running its head (rank 0 is the application and the root at once).
HOPRELAY_OF = {"chain": ["chain"], "fanout": ["fanout", "fanoutlt", "fanouthead"]}
# Issue 17: hoprelay's chain and fan-out at least level with the best MPI_Bcast algorithm from
# 64 KiB on, and ahead of it below.
MPI_LEVEL_FROM = 65536


def human(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def read_histogram(path):
    """Returns (count, invalid, [(low_ns, high_ns, n), ...]) of a latency_hist.h file."""
    count = invalid = 0
    buckets = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts[0] == "count":
                count = int(parts[1])
            elif parts[0] == "invalid":
                invalid = int(parts[1])
            else:
                buckets.append(tuple(int(p) for p in parts))
    return count, invalid, buckets


def percentile(buckets, count, p):
    """Midpoint of the bucket holding the sample of rank ceil(p * count), in ns."""
    rank = max(1, math.ceil(p * count))
    seen = 0
    for low, high, n in buckets:
        seen += n
        if seen >= rank:
            return (low + high) / 2
    return float("nan")


def load(results):
    data = {}  # size -> system -> entry
    slots = {}  # (system, size) -> (slots, slot_size)
    for line in open(results):
        rec = line.split()
        kind, system, size = rec[0], rec[1], int(rec[2])
        entry = data.setdefault(size, {}).setdefault(system, {})
        if kind == "tput":
            count, seconds, cpu = int(rec[3]), float(rec[4]), float(rec[5])
            if count > 0 and seconds > 0:
                rate = count / seconds
                entry.update({
                    "count": count, "seconds": round(seconds, 6), "msgs_per_s": round(rate, 1),
                    "gbit_per_s": round(rate * size * 8 / 1e9, 4), "cpu_s": round(cpu, 3),
                    "cpu_s_per_gb": round(cpu / (count * size / 1e9), 4),
                    "others_cpu_share": round(float(rec[6]), 3)})
        elif kind == "lat":
            rate, expected = float(rec[3]), int(rec[4])
            path = os.path.join(os.path.dirname(os.path.abspath(results)), rec[5])
            lat = {"offered_msgs_per_s": rate, "sent": expected}
            try:
                count, invalid, buckets = read_histogram(path)
                lat.update({"recorded": count, "invalid": invalid})
                if count:
                    lat.update({"p50_us": round(percentile(buckets, count, 0.5) / 1e3, 2),
                                "p99_us": round(percentile(buckets, count, 0.99) / 1e3, 2),
                                "max_us": round(buckets[-1][1] / 1e3, 2)})
            except OSError as e:
                lat["error"] = str(e)
            entry["latency"] = lat
        elif kind == "rss":
            entry.setdefault("peak_rss_kib", {})[rec[3]] = int(rec[4])
        elif kind == "slots":
            slots[(system, size)] = (int(rec[3]), int(rec[4]))
            stride = (32 + int(rec[4]) + 63) // 64 * 64
            entry["slots"] = {"slots": int(rec[3]), "slot_size": int(rec[4]),
                              "bytes_per_inbound_link": int(rec[3]) * stride}
    return data


def mpi_systems(meta):
    """The MPI_Bcast systems this run measured: none when MPI was missing at build time."""
    if meta.get("mpi_missing"):
        return []
    return [f"mpi_{shape}_{alg}" for shape in MPI_SHAPES for alg in MPI_ALGS]


def best_mpi(data, shape, size):
    """(algorithm, msg/s) of the fastest MPI_Bcast algorithm for SHAPE at SIZE, or None."""
    runs = [(data[size].get(f"mpi_{shape}_{alg}", {}).get("msgs_per_s"), alg) for alg in MPI_ALGS]
    runs = [(rate, alg) for rate, alg in runs if rate]
    if not runs:
        return None
    rate, alg = max(runs)
    return alg, rate


def mpi_targets(data):
    """Issue 17's target per shape and size: (shape, size, ratio to the best, wanted, met)."""
    out = []
    for size in sorted(data):
        for shape in MPI_SHAPES:
            best = best_mpi(data, shape, size)
            for sy in HOPRELAY_OF[shape]:
                if best is None or "msgs_per_s" not in data[size].get(sy, {}):
                    continue
                r = data[size][sy]["msgs_per_s"] / best[1]
                level = size >= MPI_LEVEL_FROM
                out.append((sy, size, r, ">= 1" if level else "> 1", r >= 1 if level else r > 1))
    return out


def missing_numbers(data, meta):
    """Every measurement run.sh makes, as 'SIZE SYSTEM WHAT', that has no finite number."""
    bad = []

    def finite(v):
        return isinstance(v, (int, float)) and math.isfinite(v) and v > 0

    for size, systems in sorted(data.items()):
        for sy in TPUT + mpi_systems(meta):
            e = systems.get(sy, {})
            for key in ("msgs_per_s", "gbit_per_s", "cpu_s_per_gb"):
                if not finite(e.get(key)):
                    bad.append(f"{size} {sy} {key}")
        for sy in LAT:
            lat = systems.get(sy, {}).get("latency", {})
            for key in ("p50_us", "p99_us"):
                if not finite(lat.get(key)):
                    bad.append(f"{size} {sy} latency {key} {lat.get('error', '')}".strip())
            if lat.get("recorded") != lat.get("sent"):
                bad.append(f"{size} {sy} latency: {lat.get('recorded')} of {lat.get('sent')} "
                           "messages recorded")
        for sy, nodes in DAEMONS.items():
            rss = systems.get(sy, {}).get("peak_rss_kib", {})
            bad += [f"{size} {sy}.{n} peak RSS" for n in nodes if not finite(rss.get(n))]
    return bad


def ratio(data, num, den, size):
    try:
        return data[size][num]["msgs_per_s"] / data[size][den]["msgs_per_s"]
    except (KeyError, ZeroDivisionError):
        return None


def print_tables(data, meta):
    sizes = sorted(data)
    p = print
    p()
    p("Throughput: messages/s and Gb/s of payload (fanout: messages into the tree, each delivered "
      "to both leaves)")
    if meta.get("fill") == "pattern":
        p("  hoprelay send --fill pattern: the producer writes every byte of each message "
          "(the references write a sequence number only)")
    elif meta.get("fill"):
        p("  hoprelay send --fill header: the producer writes each message's 24-byte header, "
          "as the references write a sequence number")
    hdr = f"{'size':>7} |" + "|".join(f"{sy:>20} " for sy in TPUT) + "| chain/zmq | hop1/tcp"
    p(hdr)
    p("-" * len(hdr))
    for s in sizes:
        cells = "|".join(f"{data[s][sy]['msgs_per_s']:>11,.0f} {data[s][sy]['gbit_per_s']:>8.3f} "
                         for sy in TPUT)
        p(f"{human(s):>7} |{cells}| {ratio(data, 'chain', 'zmq', s):>8.2f}x "
          f"| {ratio(data, 'hop1', 'tcp', s):>7.2f}x")

    p()
    p("TLS: the chain over TLS 1.3 against the same chain in clear text, throughput ratio "
      f"(kernel TLS: {meta.get('ktls', '?')})")
    for s in sizes:
        p(f"{human(s):>7} | chaintls/chain {ratio(data, 'chaintls', 'chain', s):.2f}x, CPU per GB "
          f"{data[s]['chaintls']['cpu_s_per_gb']:.2f} s against {data[s]['chain']['cpu_s_per_gb']:.2f} s")

    print_mpi(data, meta)

    p()
    p("Latency, microseconds, p50 / p99, at the offered load (sent from the producer to the "
      "leaf's stage / the sink)")
    hdr = (f"{'size':>7} | {'offered':>9} |" + "|".join(f"{sy:>18} " for sy in LAT) +
           "| per added hop (chain-hop1)/2, p50 | b busy saves (chain-chainbusy), p50")
    p(hdr)
    p("-" * len(hdr))
    for s in sizes:
        lat = {sy: data[s][sy]["latency"] for sy in LAT}
        cells = "|".join(f"{lat[sy]['p50_us']:>8.1f} /{lat[sy]['p99_us']:>8.1f} " for sy in LAT)
        per_hop = (lat["chain"]["p50_us"] - lat["hop1"]["p50_us"]) / 2
        busy_saves = lat["chain"]["p50_us"] - lat["chainbusy"]["p50_us"]
        overload = [sy for sy in LAT if lat[sy]["offered_msgs_per_s"] >
                    0.5 * data[s][TPUT_OF.get(sy, sy)]["msgs_per_s"]]
        note = f"   (offered > 50 % of {', '.join(overload)}'s throughput)" if overload else ""
        p(f"{human(s):>7} | {lat['hop1']['offered_msgs_per_s']:>5,.0f}/s |{cells}| "
          f"{per_hop:>33.1f} | {busy_saves:>8.1f}{note}")

    p()
    p("CPU seconds per GB of payload (user + system of every process: the daemons and "
      "`hoprelay send`; the whole reference program)")
    p(f"{'size':>7} |" + "|".join(f"{sy:>9} " for sy in TPUT))
    for s in sizes:
        p(f"{human(s):>7} |" + "|".join(f"{data[s][sy]['cpu_s_per_gb']:>9.2f} " for sy in TPUT))

    p()
    p("Peak RSS (VmHWM), MiB, of every daemon; slots = the slot memory of one inbound link")
    cols = [(sy, n) for sy, nodes in DAEMONS.items() for n in nodes]
    p(f"{'size':>7} | {'slots':>7} |" + "|".join(f"{sy + '.' + n:>10} " for sy, n in cols) +
      f"| {'zmq_chain':>9}")
    for s in sizes:
        slot_mib = data[s]["hop1"]["slots"]["bytes_per_inbound_link"] / 2**20
        rss = "|".join(f"{data[s][sy]['peak_rss_kib'][n] / 1024:>10.1f} " for sy, n in cols)
        zmq = data[s]["zmq"].get("peak_rss_kib", {}).get("process", float("nan")) / 1024
        p(f"{human(s):>7} | {slot_mib:>7.1f} |{rss}| {zmq:>9.1f}")

    p()
    p("Against the targets of issue #6 (throughput ratios of this run)")
    for name, num, den, size, want in TARGETS:
        r = ratio(data, num, den, size)
        if r is None:
            p(f"  {name:<44} not measured (size {size} not in this run)")
        else:
            p(f"  {name:<44} {r:>6.2f}x  {'met' if r >= want else 'NOT MET'}")
    if not meta.get("mpi_missing"):
        p()
        p("Against the target of issue 17: chain and fan-out at least level with the best "
          f"MPI_Bcast algorithm from {human(MPI_LEVEL_FROM)} on, ahead of it below")
        for shape, size, r, want, met in mpi_targets(data):
            p(f"  {shape:<10} {human(size):>7}  {r:>6.2f}x best MPI_Bcast (want {want})  "
              f"{'met' if met else 'NOT MET'}")
    over = max_over_slots(data)
    p(f"  {'memory per daemon: slots + a small constant':<44} VmHWM - slot memory of its inbound "
      f"link: at most {over:.1f} MiB (at the loads of this run)")
    p()
    others = sorted((data[s][sy]["others_cpu_share"], sy, s) for s in sizes for sy in TPUT)
    worst = others[-1]
    p(f"Noise: other processes used {100 * others[len(others) // 2][0]:.0f} % of the CPUs during "
      f"the median throughput run, {100 * worst[0]:.0f} % at most ({worst[1]} {human(worst[2])}); "
      f"load average before {meta.get('load_before')}, after {meta.get('load_after')}; "
      f"{meta.get('cores')} cores, {meta.get('seconds')} s in all")


def print_mpi(data, meta):
    """The MPI_Bcast table: every algorithm, the best, and hoprelay against it."""
    p = print
    p()
    if meta.get("mpi_missing"):
        p(f"MPI_Bcast reference: NOT MEASURED: {meta['mpi_missing']}")
        return
    p(f"MPI_Bcast ({meta.get('mpi', 'MPI')}, TCP BTL on loopback): messages/s and Gb/s per "
      "algorithm; hoprelay's chain and fan-out against the best")
    hdr = (f"{'size':>7} | {'shape':<6} |" + "|".join(f"{a:>19} " for a in MPI_ALGS) +
           f"| {'best':>8} | {'hoprelay':<10} | {'msg/s':>10} | vs best")
    p(hdr)
    p("-" * len(hdr))
    for s in sorted(data):
        for shape in MPI_SHAPES:
            cells = "|".join(f"{data[s][f'mpi_{shape}_{a}']['msgs_per_s']:>10,.0f} "
                             f"{data[s][f'mpi_{shape}_{a}']['gbit_per_s']:>7.3f} "
                             for a in MPI_ALGS)
            alg, rate = best_mpi(data, shape, s)
            for i, sy in enumerate(HOPRELAY_OF[shape]):
                hop = data[s][sy]["msgs_per_s"]
                if i:  # the same MPI runs, another hoprelay system against them
                    cells = " " * len(cells)
                p(f"{human(s):>7} | {shape:<6} |{cells}| {alg:>8} | {sy:<10} | {hop:>10,.0f} | "
                  f"{hop / rate:>6.2f}x")
    for shape, what in MPI_SHAPES.items():
        p(f"  {shape}: {what}")
    p("  fanouthead: the fan-out with the producer running head a (send --run-head): rank 0 "
      "is likewise the application and the root")


def max_over_slots(data):
    """Largest VmHWM minus the slot memory of the daemon's one inbound link, in MiB."""
    worst = -math.inf
    for s, systems in data.items():
        for sy, nodes in DAEMONS.items():
            slot = systems[sy]["slots"]["bytes_per_inbound_link"] / 2**20
            for n in nodes:
                worst = max(worst, systems[sy]["peak_rss_kib"][n] / 1024 - slot)
    return worst


def svg_start(width, height, title_x, title_y, title):
    """The opening elements of an SVG document: its size, a white background, the title."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            'font-family="sans-serif" font-size="12">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            f'<text x="{title_x}" y="{title_y}" font-size="15">{title}</text>']


def write_svg(out, path):
    """Closes the SVG document whose elements `out` holds and writes it to `path`."""
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def svg_series(out, points, label, color, dash, legend_x, legend_y):
    """Appends to `out` a line through `points` (SVG coordinates) with a dot at each, dashed
    when `dash` is set, and its legend entry at (legend_x, legend_y)."""
    d = f' stroke-dasharray="{dash}"' if dash else ""
    xy = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    out.append(f'<polyline points="{xy}" fill="none" stroke="{color}" stroke-width="2"{d}/>')
    out.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in points)
    out.append(f'<line x1="{legend_x}" y1="{legend_y}" x2="{legend_x + 25}" y2="{legend_y}" '
               f'stroke="{color}" stroke-width="2"{d}/>')
    out.append(f'<text x="{legend_x + 31}" y="{legend_y + 4}" font-size="11">{label}</text>')


def svg_plot(data, meta, path):
    """Two log-log panels: throughput (Gb/s) and latency (p50 solid, p99 dotted) against size."""
    sizes = sorted(data)
    W, L, R, PH, T, GAP = 960, 80, 330, 300, 70, 90
    H = T + 2 * PH + GAP + 75
    pw = W - L - R
    lx = [math.log2(s) for s in sizes]
    x0, x1 = min(lx) - 0.5, max(lx) + 0.5

    def X(v):
        return L + (math.log2(v) - x0) / (x1 - x0) * pw

    out = svg_start(W, H, L, 20, "hoprelay over TCP on loopback against ZeroMQ, MPI_Bcast and raw "
                    "TCP, by message size")
    sub = []
    for name, num, den, size, want in TARGETS:
        r = ratio(data, num, den, size)
        if r is not None:
            sub.append(f"{num}/{den} at {human(size)}: {r:.2f}x (target {want})")
    out.append(f'<text x="{L}" y="38" font-size="11" fill="#444">{"; ".join(sub)}</text>')
    others = sorted(data[s][sy]["others_cpu_share"] for s in sizes for sy in TPUT)
    out.append(f'<text x="{L}" y="54" font-size="11" fill="#444">{meta.get("cores", "?")} cores, '
               f'one run; other processes used {100 * others[len(others) // 2]:.0f} % of the CPUs '
               f'during the median throughput run, {100 * others[-1]:.0f} % at most</text>')

    def panel(top, title, unit, series, marks=()):
        """series: list of (label, color, dash, [(size, value)]); marks: (color, size, value),
        drawn as hollow diamonds (the targets)"""
        vals = [v for _, _, _, pts in series for _, v in pts if v and v > 0]
        lo = 10 ** math.floor(math.log10(min(vals)))
        hi = 10 ** math.ceil(math.log10(max(vals)))
        ly0, ly1 = math.log10(lo), math.log10(hi)

        def Y(v):
            return top + PH - (math.log10(v) - ly0) / (ly1 - ly0) * PH

        out.append(f'<text x="{L}" y="{top - 8}" font-size="13">{title}</text>')
        out.append(f'<rect x="{L}" y="{top}" width="{pw}" height="{PH}" fill="none" '
                   'stroke="black"/>')
        e = ly0
        while e <= ly1 + 1e-9:
            v = 10 ** e
            out.append(f'<line x1="{L}" y1="{Y(v):.1f}" x2="{L + pw}" y2="{Y(v):.1f}" '
                       'stroke="#ddd"/>')
            label = f"{v:,.0f}" if v >= 1 else f"{v:g}"
            out.append(f'<text x="{L - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{label}</text>')
            e += 1
        for s in sizes:
            out.append(f'<line x1="{X(s):.1f}" y1="{top}" x2="{X(s):.1f}" y2="{top + PH}" '
                       'stroke="#eee"/>')
            out.append(f'<text x="{X(s):.1f}" y="{top + PH + 16}" text-anchor="middle">'
                       f'{human(s)}</text>')
        out.append(f'<text x="20" y="{top + PH / 2}" transform="rotate(-90 20 {top + PH / 2})" '
                   f'text-anchor="middle">{unit} (log scale)</text>')
        for k, (label, color, dash, pts) in enumerate(series):
            svg_series(out, [(X(s), Y(v)) for s, v in pts if v and v > 0], label, color, dash,
                       L + pw + 15, top + 10 + 20 * k)
        for color, s, v in marks:
            x, y = X(s), Y(v)
            out.append(f'<path d="M{x:.1f},{y - 7:.1f} l7,7 l-7,7 l-7,-7 z" fill="none" '
                       f'stroke="{color}" stroke-width="1.5"/>')
        if marks:
            ly = top + 10 + 20 * len(series)
            x = L + pw + 27
            out.append(f'<path d="M{x},{ly - 6} l6,6 l-6,6 l-6,-6 z" fill="none" stroke="black"/>')
            out.append(f'<text x="{L + pw + 46}" y="{ly + 4}" font-size="11">target of issue #6 '
                       '(ratio x reference)</text>')

    marks = [(COLORS[num], size, want * data[size][den]["gbit_per_s"])
             for _, num, den, size, want in TARGETS if size in data]
    tput_series = [(LABELS[sy], COLORS[sy], "6,4" if sy in REFERENCE else None,
                    [(s, data[s][sy]["gbit_per_s"]) for s in sizes]) for sy in TPUT]
    if not meta.get("mpi_missing"):
        for shape in MPI_SHAPES:
            tput_series.append((f"best MPI_Bcast, as {shape}", MPI_COLORS[shape], "6,4",
                                [(s, best_mpi(data, shape, s)[1] * s * 8 / 1e9) for s in sizes]))
    panel(T + 20, "Throughput", "Gb/s of payload", tput_series, marks)
    lat_series = []
    for sy in LAT:
        for q, dash in (("p50", "6,4" if sy in REFERENCE else None), ("p99", "2,3")):
            lat_series.append((f"{LABELS[sy].split(' (')[0]} {q}", COLORS[sy], dash,
                               [(s, data[s][sy]["latency"][f"{q}_us"]) for s in sizes]))
    panel(T + 20 + PH + GAP, f"Latency, p50 and p99 (dotted), at a fixed offered load of "
          f"{meta.get('lat_rate', '?')} msg/s, at most {meta.get('lat_gbps', '?')} Gb/s",
          "microseconds", lat_series)
    out.append(f'<text x="{L + pw / 2}" y="{H - 10}" text-anchor="middle">message size (log '
               'scale)</text>')
    write_svg(out, path)


def command_line():
    """The arguments of this script and of tree_report.py: --results FILE --out DIR [--smoke
    0|1] [--meta KEY=VALUE ...]; returns them and the meta values (numbers where they are)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", default="0")
    ap.add_argument("--meta", nargs="*", default=[])
    args = ap.parse_args()
    meta = {}
    for kv in args.meta:
        key, value = kv.split("=", 1)
        try:
            meta[key] = int(value) if value.isdigit() else float(value)
        except ValueError:
            meta[key] = value
    return args, meta


def main():
    args, meta = command_line()
    data = load(args.results)
    bad = missing_numbers(data, meta)
    if bad or not data:
        sys.exit("report.py: measurements without a number: " + "; ".join(bad or ["none at all"]))
    print_tables(data, meta)

    for s in data:
        data[s]["ratios"] = {"chain_over_zmq": round(ratio(data, "chain", "zmq", s), 3),
                             "hop1_over_tcp": round(ratio(data, "hop1", "tcp", s), 3),
                             "chaintls_over_chain": round(ratio(data, "chaintls", "chain", s), 3)}
        for shape in MPI_SHAPES:
            best = best_mpi(data, shape, s)
            if best:
                for sy in HOPRELAY_OF[shape]:
                    data[s]["ratios"][f"{sy}_over_best_mpi_bcast"] = round(
                        data[s][sy]["msgs_per_s"] / best[1], 3)
                data[s][f"best_mpi_bcast_{shape}"] = best[0]
    targets = []
    for name, num, den, size, want in TARGETS:
        r = ratio(data, num, den, size)
        targets.append({"target": name, "minimum": want,
                        "ratio": None if r is None else round(r, 3),
                        "met": None if r is None else r >= want})
    for shape, size, r, want, met in mpi_targets(data):
        targets.append({"target": f"{shape} against the best MPI_Bcast at {human(size)} "
                        "(issue 17)", "want": f"ratio {want}", "ratio": round(r, 3), "met": met})
    mpi = {"measured": not meta.get("mpi_missing"), "missing": meta.get("mpi_missing") or None,
           "algorithms": MPI_ALGS, "shapes": MPI_SHAPES}
    doc = {"smoke": args.smoke == "1", "meta": meta, "systems": LABELS, "targets": targets,
           "mpi_bcast": mpi,
           "max_rss_over_slots_mib": round(max_over_slots(data), 2),
           "sizes": {str(s): data[s] for s in sorted(data)}}
    with open(f"{args.out}/results.json", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    svg_plot(data, meta, f"{args.out}/bench.svg")
    print(f"\nwrote {args.out}/results.json and {args.out}/bench.svg")


if __name__ == "__main__":
    main()
