#!/usr/bin/env python3
"""Turns the records bench/fleet.sh collected into tables (stdout), results.json and fleet.svg.

  fleet_report.py --results RESULTS.tsv --out DIR [--meta KEY=VALUE ...]

Records, one per line:
  run SYSTEM N RATE_BITS BYTES SECONDS CPU_S HOST0_SENT BUSIEST_MBIT [SLOW_SECONDS]
      one file sent to every host of an N-host fleet whose NICs run at RATE_BITS/s; CPU_S is
      every process of the system on every host while it was timed ("-": not measured);
      HOST0_SENT the bytes host 0's NIC carried, BUSIEST_MBIT the rate of the busiest NIC;
      SLOW_SECONDS (SYSTEM+slow, "-" otherwise) when the host at a quarter of the rate had it
      too, SECONDS being when every other host had
  failed SYSTEM N WHY...
      a system that did not deliver a byte-equal copy to every host, and why

Exits non-zero when a measured system has no number or failed in a --meta smoke=1 run; it never
judges performance.
"""
import json
import math
import sys

from report import command_line, svg_series, svg_start, write_svg

COLORS = {"chain": "#d62728", "tree:2": "#ff7f0e", "tree:4": "#bcbd22", "racks:4": "#9467bd",
          "uftp": "#1f77b4", "torrent": "#2ca02c", "mpi": "#17becf", "mpi:pipeline": "#8c564b", "naive": "#7f7f7f"}
DASHED = {"uftp", "torrent", "mpi", "mpi:pipeline", "naive"}  # the references


def load(path):
    runs, failed = [], []
    for line in open(path):
        rec = line.split()
        if not rec:
            continue
        if rec[0] == "run":
            system, n, rate, size = rec[1], int(rec[2]), int(rec[3]), int(rec[4])
            seconds = float(rec[5])
            limit = size * 8 / rate
            cpu = None if rec[6] == "-" else float(rec[6])
            delivered_gb = size * (n - 1) / 1e9
            runs.append({
                "system": system, "hosts": n, "rate_mbit": rate / 1e6, "bytes": size,
                "seconds": seconds, "limit_s": round(limit, 3),
                "over_limit": round(seconds / limit, 3),
                "cpu_s": cpu,
                "cpu_s_per_gb_delivered": None if cpu is None else round(cpu / delivered_gb, 3),
                "host0_sent_bytes": int(float(rec[7])), "busiest_nic_mbit": float(rec[8])})
            if len(rec) > 9 and rec[9] != "-":
                runs[-1]["slow_host_seconds"] = float(rec[9])
                runs[-1]["slow_host_over_limit"] = round(float(rec[9]) / limit, 3)
        elif rec[0] == "failed":
            failed.append({"system": rec[1], "hosts": int(rec[2]), "why": " ".join(rec[3:])})
    return runs, failed


def tables(runs, failed):
    systems = list(dict.fromkeys(r["system"] for r in runs + failed))
    sizes = sorted({r["hosts"] for r in runs + failed})
    cell = {(r["system"], r["hosts"]): r for r in runs}
    bad = {(f["system"], f["hosts"]): f for f in failed}

    def row(label, values):
        return f"| {label} | " + " | ".join(values) + " |"

    head = "| system | " + " | ".join(f"{n} hosts" for n in sizes) + " |"
    rule = "|---|" + "---|" * len(sizes)
    print("Time until the last host has the whole file, over the limit S/R (1.0 is the limit):")
    if any("+slow" in r["system"] for r in runs + failed):
        print("(SYSTEM+slow: until every host but the one at a quarter of the rate has it)")
    print(head + "\n" + rule)
    for s in systems:
        print(row(s, [f"{cell[s, n]['over_limit']:.2f}" if (s, n) in cell else
                      ("failed" if (s, n) in bad else "") for n in sizes]))
    print("\nCPU seconds of all the system's processes per GB delivered (S x (N - 1)):")
    print(head + "\n" + rule)
    for s in systems:
        print(row(s, [f"{cell[s, n]['cpu_s_per_gb_delivered']:.2f}"
                      if (s, n) in cell and cell[s, n]["cpu_s_per_gb_delivered"] is not None
                      else "" for n in sizes]))
    print("\nThe busiest NIC's rate over each run, Mbit/s (the shaping held if at most the rate):")
    print(head + "\n" + rule)
    for s in systems:
        print(row(s, [f"{cell[s, n]['busiest_nic_mbit']:.0f}" if (s, n) in cell else ""
                      for n in sizes]))
    slow = [r for r in runs if "slow_host_seconds" in r]
    if slow:
        print("\nThe host at a quarter of the rate: its own time over S/R (4.0 is its limit):")
        print(head + "\n" + rule)
        for s in dict.fromkeys(r["system"] for r in slow):
            print(row(s, [f"{cell[s, n]['slow_host_over_limit']:.2f}"
                          if (s, n) in cell and "slow_host_over_limit" in cell[s, n] else ""
                          for n in sizes]))
    for f in failed:
        print(f"\n{f['system']} at {f['hosts']} hosts failed: {f['why']}")


def svg_plot(runs, meta, path):
    """Time over the limit against the number of hosts (log2), one line per system."""
    W, H, L, T, PW, PH = 900, 460, 70, 60, 560, 340
    sizes = sorted({r["hosts"] for r in runs})
    top = max([r["over_limit"] for r in runs] + [2.0])
    top = 2 ** math.ceil(math.log2(top))
    lo, hi = math.log2(min(sizes)), math.log2(max(sizes))
    span = hi - lo or 1

    def X(n):
        return L + (math.log2(n) - lo) / span * PW

    def Y(v):  # log2 too: 1 .. top
        return T + PH - math.log2(max(v, 1)) / math.log2(top) * PH

    out = svg_start(W, H, L, 25, f"One file to every host of an emulated fleet "
                    f"({meta.get('mib', '?')} MiB, NICs at {meta.get('rate', '?')})")
    out.append(f'<rect x="{L}" y="{T}" width="{PW}" height="{PH}" fill="none" stroke="#999"/>')
    for n in sizes:
        out.append(f'<text x="{X(n):.1f}" y="{T + PH + 18}" text-anchor="middle">{n}</text>')
    v = 1
    while v <= top:
        out.append(f'<line x1="{L}" y1="{Y(v):.1f}" x2="{L + PW}" y2="{Y(v):.1f}" '
                   'stroke="#eee"/>')
        out.append(f'<text x="{L - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v}</text>')
        v *= 2
    out.append(f'<text x="{L + PW / 2}" y="{T + PH + 40}" text-anchor="middle">hosts</text>')
    out.append(f'<text x="18" y="{T + PH / 2}" transform="rotate(-90 18 {T + PH / 2})" '
               'text-anchor="middle">time / (S / R)</text>')
    legend_y = T + 10
    for system in dict.fromkeys(r["system"] for r in runs):
        pts = sorted((r["hosts"], r["over_limit"]) for r in runs if r["system"] == system)
        svg_series(out, [(X(n), Y(v)) for n, v in pts], system, COLORS.get(system.split("+")[0], "#000"),
                   "5,3" if system in DASHED else None, L + PW + 20, legend_y)
        legend_y += 20
    write_svg(out, path)


def main():
    args, meta = command_line()
    runs, failed = load(args.results)
    tables(runs, failed)
    with open(f"{args.out}/results.json", "w") as f:
        json.dump({"meta": meta, "runs": runs, "failed": failed}, f, indent=1)
    if runs:
        svg_plot(runs, meta, f"{args.out}/fleet.svg")
    print(f"\nwrote {args.out}/results.json and {args.out}/fleet.svg")
    missing = [r for r in runs if r["seconds"] <= 0]
    if args.smoke == "1" and (failed or missing or not runs):
        print("fleet_report.py: the smoke run is missing numbers", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
