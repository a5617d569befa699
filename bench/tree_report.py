#!/usr/bin/env python3
"""Turns the records bench/tree.sh collected into tables (stdout), results.json and tree.svg.

  tree_report.py --results RESULTS.tsv --out DIR [--meta KEY=VALUE ...]

Records, one per line:
  tree LEAVES NODES LEVELS COUNT SIZE SECONDS PRODUCER_CPU_S OTHERS
                                 one measured broadcast into a tree; OTHERS is the share of the
                                 CPUs other processes used meanwhile
  node LEAVES NAME DEPTH ROLE CPU_S HWM_KIB
                                 one daemon of that tree: its CPU time during the measured run
                                 and its peak RSS; ROLE is head, relay or leaf

Exits non-zero when a number is missing; it never judges performance.
"""
import json
import math
import sys

from report import command_line, svg_series, svg_start, write_svg

ROLES = ("head", "relay", "leaf")
COLORS = {"head": "#d62728", "relay": "#1f77b4", "leaf": "#2ca02c", "all": "#7f7f7f"}


def load(path):
    trees = {}
    for line in open(path):
        rec = line.split()
        if rec[0] == "tree":
            leaves, nodes, levels, count, size = (int(v) for v in rec[1:6])
            seconds, producer_cpu, others = (float(v) for v in rec[6:9])
            trees.setdefault(leaves, {"nodes_detail": []}).update({
                "leaves": leaves, "nodes": nodes, "levels": levels, "count": count,
                "size": size, "seconds": seconds, "producer_cpu_s": producer_cpu,
                "others_cpu_share": round(others, 3)})
        elif rec[0] == "node":
            trees.setdefault(int(rec[1]), {"nodes_detail": []})["nodes_detail"].append({
                "name": rec[2], "depth": int(rec[3]), "role": rec[4], "cpu_s": float(rec[5]),
                "peak_rss_kib": int(rec[6])})
    for t in trees.values():
        if "seconds" not in t or t["seconds"] <= 0:
            continue
        rate = t["count"] / t["seconds"]
        t["msgs_per_s"] = round(rate, 1)
        t["mb_per_s_per_leaf"] = round(rate * t["size"] / 1e6, 2)
        t["mb_per_s_all_leaves"] = round(rate * t["size"] * t["leaves"] / 1e6, 2)
        detail = t["nodes_detail"]
        t["daemons_cpu_s"] = round(sum(n["cpu_s"] for n in detail), 3)
        t["peak_rss_total_mib"] = round(sum(n["peak_rss_kib"] for n in detail) / 1024, 1)
        per_role = {}
        for role in ROLES:
            mine = [n for n in detail if n["role"] == role]
            if mine:
                per_role[role] = {
                    "count": len(mine),
                    "cpu_us_per_msg_mean": round(
                        1e6 * sum(n["cpu_s"] for n in mine) / len(mine) / t["count"], 2),
                    "peak_rss_mib_mean": round(
                        sum(n["peak_rss_kib"] for n in mine) / len(mine) / 1024, 2),
                    "peak_rss_mib_max": round(max(n["peak_rss_kib"] for n in mine) / 1024, 2)}
        t["roles"] = per_role
        t["cpu_us_per_msg_per_node"] = round(1e6 * t["daemons_cpu_s"] / t["count"] / len(detail),
                                             2)
        t["peak_rss_mib_per_node_max"] = round(max(n["peak_rss_kib"] for n in detail) / 1024, 2)
    return trees


def missing(trees):
    bad = []
    for leaves, t in sorted(trees.items()):
        # CPU time is counted in clock ticks: a short run's may be 0.
        for key, least in (("msgs_per_s", 1e-9), ("daemons_cpu_s", 0), ("peak_rss_total_mib", 1)):
            v = t.get(key)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < least:
                bad.append(f"{leaves} leaves: {key}")
        if len(t["nodes_detail"]) != t.get("nodes"):
            bad.append(f"{leaves} leaves: {len(t['nodes_detail'])} of {t.get('nodes')} nodes")
    return bad


def per_level(trees):
    """From the smallest tree with two leaves up: what each added level costs, on average (the
    geometric mean of the throughput ratios of successive levels) and at most."""
    levels = sorted((t["levels"], t) for t in trees.values() if t["leaves"] >= 2)
    if len(levels) < 2:
        return None
    ratios = [b["msgs_per_s"] / a["msgs_per_s"] for (_, a), (_, b) in zip(levels, levels[1:])]
    rss = [b["peak_rss_mib_per_node_max"] - a["peak_rss_mib_per_node_max"]
           for (_, a), (_, b) in zip(levels, levels[1:])]
    cpu = [b["cpu_us_per_msg_per_node"] - a["cpu_us_per_msg_per_node"]
           for (_, a), (_, b) in zip(levels, levels[1:])]
    return {"from_levels": levels[0][0], "to_levels": levels[-1][0],
            "throughput_ratio_geomean": round(math.prod(ratios) ** (1 / len(ratios)), 3),
            "throughput_ratio_worst": round(min(ratios), 3),
            "throughput_ratios": [round(r, 3) for r in ratios],
            "peak_rss_per_node_mib_added_max": round(max(rss), 2),
            "cpu_us_per_msg_per_node_added_max": round(max(cpu), 2)}


def table(title, columns, rows):
    """Prints `title`, a header of `columns` ((name, width, cell(row) -> text), right-aligned),
    a rule, and a line per row."""
    print(title)
    print(" | ".join(f"{name:>{width}}" for name, width, _ in columns))
    print("-" * (sum(width for _, width, _ in columns) + 3 * (len(columns) - 1)))
    for row in rows:
        print(" | ".join(f"{cell(row):>{width}}" for _, width, cell in columns))


def role_columns(key):
    """A column per role: the mean of `key` over the tree's nodes of that role, or "-"."""
    return [(role, 6, lambda t, role=role: f"{t['roles'][role][key]:.1f}"
             if role in t["roles"] else "-") for role in ROLES]


def print_tables(trees, meta, level):
    p = print
    rows = [trees[leaves] for leaves in sorted(trees)]
    base, size = rows[0]["msgs_per_s"], rows[0]["size"]
    leaves = ("leaves", 6, lambda t: str(t["leaves"]))
    table(f"\nThroughput: {rows[0]['count']:,} messages of {size:,} B broadcast into a complete "
          "binary tree (one hoprelayd per node), timed to the last leaf's acknowledgement",
          [leaves, ("nodes", 5, lambda t: str(t["nodes"])),
           ("levels", 6, lambda t: str(t["levels"])),
           ("msg/s into tree", 15, lambda t: f"{t['msgs_per_s']:,.0f}"),
           ("MB/s per leaf", 13, lambda t: f"{t['mb_per_s_per_leaf']:,.1f}"),
           ("MB/s all leaves", 15, lambda t: f"{t['mb_per_s_all_leaves']:,.1f}"),
           (f"vs {rows[0]['leaves']} leaf", 9, lambda t: f"{t['msgs_per_s'] / base:.2f}x"),
           ("others used", 11, lambda t: f"{100 * t['others_cpu_share']:.0f} %")], rows)
    table("\nCPU: microseconds of CPU (user + system) per message, per node (mean by role); the "
          "daemons' total CPU seconds and `hoprelay send`'s",
          [leaves, ("per node", 8, lambda t: f"{t['cpu_us_per_msg_per_node']:.1f}")] +
          role_columns("cpu_us_per_msg_mean") +
          [("daemons s", 9, lambda t: f"{t['daemons_cpu_s']:.2f}"),
           ("producer s", 10, lambda t: f"{t['producer_cpu_s']:.2f}")], rows)
    table(f"\nPeak RSS (VmHWM), MiB: every daemon together, the largest one, mean by role (slots: "
          f"{meta.get('slots', '?')} x {size:,} B per inbound link)",
          [leaves, ("total", 7, lambda t: f"{t['peak_rss_total_mib']:.1f}"),
           ("largest", 7, lambda t: f"{t['peak_rss_mib_per_node_max']:.1f}")] +
          role_columns("peak_rss_mib_mean"), rows)
    if level:
        p(f"\nPer added level (levels {level['from_levels']} to {level['to_levels']}): "
          f"throughput x{level['throughput_ratio_geomean']:.2f} on average (geometric mean), "
          f"x{level['throughput_ratio_worst']:.2f} at worst "
          f"({', '.join(f'{r:.2f}' for r in level['throughput_ratios'])}); largest daemon's "
          f"peak RSS +{level['peak_rss_per_node_mib_added_max']:.2f} MiB at most; CPU per "
          f"message per node +{level['cpu_us_per_msg_per_node_added_max']:.1f} us at most")
    others = sorted(t["others_cpu_share"] for t in trees.values())
    p(f"\nNoise: other processes used {100 * others[len(others) // 2]:.0f} % of the CPUs during "
      f"the median run, {100 * others[-1]:.0f} % at most; load average before "
      f"{meta.get('load_before', '?')}, after {meta.get('load_after', '?')}; "
      f"{meta.get('cores', '?')} cores, {meta.get('seconds', '?')} s in all")


def svg_plot(trees, path):
    """Three panels against the number of leaves (log2 axis): throughput, CPU per message per
    node by role, peak RSS per node by role."""
    ls = sorted(trees)
    W, L, R, PH, T, GAP = 900, 80, 200, 200, 50, 70
    H = T + 3 * (PH + GAP)
    pw = W - L - R
    x0, x1 = math.log2(ls[0]) - 0.3, math.log2(ls[-1]) + 0.3

    def X(v):
        return L + (math.log2(v) - x0) / (x1 - x0) * pw

    out = svg_start(W, H, L, 22, "hoprelay broadcast into complete binary trees over TCP on "
                    "loopback, by number of leaves")

    def panel(top, title, series):
        vals = [v for _, _, pts in series for _, v in pts]
        # All zero happens: a smoke run's daemons may use less CPU than one 10 ms clock tick.
        hi = max(vals) * 1.1 if vals and max(vals) > 0 else 1.0
        step = 10 ** math.floor(math.log10(hi))
        while hi / step < 4:
            step /= 2

        def Y(v):
            return top + PH - v / hi * PH

        out.append(f'<text x="{L}" y="{top - 8}" font-size="13">{title}</text>')
        out.append(f'<rect x="{L}" y="{top}" width="{pw}" height="{PH}" fill="none" '
                   'stroke="black"/>')
        v = 0.0
        while v <= hi:
            out.append(f'<line x1="{L}" y1="{Y(v):.1f}" x2="{L + pw}" y2="{Y(v):.1f}" '
                       'stroke="#ddd"/>')
            out.append(f'<text x="{L - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:,.6g}</text>')
            v += step
        for leaves in ls:
            out.append(f'<text x="{X(leaves):.1f}" y="{top + PH + 16}" text-anchor="middle">'
                       f'{leaves}</text>')
        for k, (label, color, pts) in enumerate(series):
            svg_series(out, [(X(x), Y(v)) for x, v in pts], label, color, None, L + pw + 15,
                       top + 10 + 20 * k)

    def by_role(key):
        return [(role, COLORS[role], [(lv, trees[lv]["roles"][role][key]) for lv in ls
                                      if role in trees[lv]["roles"]]) for role in ROLES]

    panel(T + 20, "Throughput: messages/s into the tree (each reaches every leaf)",
          [("msg/s", COLORS["all"], [(lv, trees[lv]["msgs_per_s"]) for lv in ls])])
    panel(T + 20 + PH + GAP, "CPU per message at each node, microseconds (mean by role)",
          by_role("cpu_us_per_msg_mean"))
    panel(T + 20 + 2 * (PH + GAP), "Peak RSS of each node, MiB (mean by role)",
          by_role("peak_rss_mib_mean"))
    out.append(f'<text x="{L + pw / 2}" y="{H - 12}" text-anchor="middle">leaves (log2 scale; '
               'nodes = 2 x leaves - 1)</text>')
    write_svg(out, path)


def main():
    args, meta = command_line()
    trees = load(args.results)
    bad = missing(trees)
    if bad or not trees:
        sys.exit("tree_report.py: measurements without a number: " +
                 "; ".join(bad or ["none at all"]))
    level = per_level(trees)
    print_tables(trees, meta, level)
    doc = {"meta": meta, "per_added_level": level,
           "trees": {str(leaves): trees[leaves] for leaves in sorted(trees)}}
    with open(f"{args.out}/results.json", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    svg_plot(trees, f"{args.out}/tree.svg")
    print(f"\nwrote {args.out}/results.json and {args.out}/tree.svg")


if __name__ == "__main__":
    main()
