#!/usr/bin/env python3
"""Report of scripts/bench-load: merges the phase results of a results folder into
load.json, prints Markdown tables with the targets of issue 8 and the Noted/pycrdt ratios,
the durable-edits table of issue 18, and draws the chart (not for --durable-only). Usage: bench_load_report.py RESULTS_DIR --chart PNG [--machine TEXT]"""
import argparse
import glob
import json
import os


def load(folder):
    results = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        name = os.path.basename(path)[:-5]
        if name == "load":
            continue
        with open(path) as f:
            results[name] = json.load(f)
    return results


def fmt(value, digits=1):
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "–"


DURABLE_SYSTEMS = [("noted-sqlite", "Noted (SQLite)"), ("noted-postgres", "Noted (PostgreSQL)"),
                   ("yjs", "pycrdt-websocket + SQLiteYStore"), ("relay", "bare relay (floor, no storage)")]


def durable_lines(r):
    """The durable-edits phase (issue 18): users × 2 edits/s, as is and with every fsync held 2 ms."""
    runs = [(key, label, d) for key, label in DURABLE_SYSTEMS for d in ("0ms", "0ms-traced", "2ms")
            if r.get(f"durable-{key}-{d}")]
    if not runs and not r.get("durable-fsync-rate"):
        return []
    first = runs[0][2] if runs else None
    shape = r[f"durable-{runs[0][0]}-{runs[0][2]}"] if runs else {}
    lines = [f"### Durable edits: {shape.get('users', '?'):,} users × {shape.get('edits_per_user_per_s', 2):g} edits/s"
             if runs else "### Durable edits", "",
             "Push → ack (pycrdt: own update echoed back; relay: own message echoed back), one connection and one "
             "note (room) per user, at most one change in flight per note. *lost*: acknowledged changes not found "
             "after the server was killed (SIGKILL; PostgreSQL stopped with `-m immediate`) and started again. "
             "*probe*: one user alone, 50 pushes one at a time (p50). The 2 ms rows hold every fsync/fdatasync 2 ms "
             "after it returns (scripts/fsync-delay.c preloaded; with NOTED_BENCH_FSYNC_DELAY=strace, strace's "
             "fault injection, whose *fsyncs traced* counts the calls held, probe and run together); the control "
             "rows run with the same prefix without holding them.", "",
             "| system | fsync delay | offered/s | accepted/s | p50 ms | p99 ms | max ms | errors | acked | lost | "
             "server CPU | PostgreSQL CPU | probe p50 ms | fsyncs traced | load avg |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    delay_names = {"0ms": "none", "0ms-traced": "none, delay's prefix only (control)", "2ms": "2 ms"}
    for key, label, d in runs:
        v = r[f"durable-{key}-{d}"]
        verify = r.get(f"durable-{key}-{d}-verify")
        if key == "relay":
            lost = "n/a (stores nothing)"
        elif verify:
            lost = str(verify["lost_changes"])
            if verify.get("store_errors_logged"):
                lost += f" ({verify['store_errors_logged']} store errors logged)"
        else:
            lost = "not verified"
        if key == "yjs" and "stored_at_drain" in v:
            lost += f"; {v['stored_at_drain']:,} stored when the last echo arrived"
        probe = r.get(f"durable-{key}-{d}-probe", {})
        held = v.get("fsync_calls_held")
        held = ", ".join(f"{n} {k}" for k, n in sorted(held.items())) if held else ("–" if d == "0ms" else "not counted")
        load = v.get("loadavg_1min")
        lines.append(f"| {label} | {delay_names[d]} | {fmt(v['offered_per_s'])} | {fmt(v['accepted_per_s'])} | "
                     f"{fmt(v['p50_ms'])} | {fmt(v['p99_ms'])} | {fmt(v['max_ms'])} | {v['errors']} | {v.get('acked_changes', '–')} | "
                     f"{lost} | {fmt(v.get('server_cpu'), 2)} | {fmt(v.get('database_cpu'), 2)} | {fmt(probe.get('p50_ms'), 2)} | "
                     f"{held} | {'–' if not load else f'{load[0]} → {load[1]}'} |")
    lines.append("")
    f = r.get("durable-fsync-rate")
    if f:
        lines.append(f"The disk under the data folders (scripts/fsync-rate.c, 4 KiB write + fdatasync in a loop): "
                     f"{f['overwrite']['ops_per_s']:,.0f} fdatasyncs/s rewriting one block (p50 {f['overwrite']['p50_us']:.0f} µs, "
                     f"p99 {f['overwrite']['p99_us']:.0f} µs), {f['append']['ops_per_s']:,.0f}/s appending "
                     f"(p50 {f['append']['p50_us']:.0f} µs, p99 {f['append']['p99_us']:.0f} µs).")
        g = r.get("durable-fsync-rate-2ms")
        if g:
            lines.append(f"Under the delay (the check that it holds each call 2 ms): {g['overwrite']['ops_per_s']:,.0f}/s "
                         f"rewriting (p50 {g['overwrite']['p50_us']:.0f} µs), {g['append']['ops_per_s']:,.0f}/s appending "
                         f"(p50 {g['append']['p50_us']:.0f} µs): one process syncing one call after the other gets at most "
                         f"500/s; only a server that commits many users' changes per fsync reaches 2,000 edits/s.")
        lines.append("")
    relay = r.get("durable-relay-0ms")
    if relay:
        lines.append(f"The floor (a bare WebSocket relay, Python `websockets` + uvloop, no parsing, no storage, pinned as the "
                     f"servers are, same generator and shape): p50 {fmt(relay['p50_ms'])} ms, p99 {fmt(relay['p99_ms'])} ms at "
                     f"{fmt(relay['accepted_per_s'])} accepted/s (server CPU {fmt(relay.get('server_cpu'), 2)}).")
        lines.append("")
    # Noted against pycrdt with its store, per delay.
    rows = []
    for d in (0, 2):
        y = r.get(f"durable-yjs-{d}ms")
        for b in ("sqlite", "postgres"):
            n = r.get(f"durable-noted-{b}-{d}ms")
            if n and y:
                rows.append(f"| {'2 ms' if d else 'none'} | {b} | {ratio(n['accepted_per_s'], y['accepted_per_s'])} | "
                            f"{ratio(y['p99_ms'], n['p99_ms'])} | {ratio(y['p50_ms'], n['p50_ms'])} |")
    if rows:
        lines += ["Noted against pycrdt-websocket with its SQLiteYStore (accepted/s Noted / pycrdt; p99 and p50 "
                  "pycrdt / Noted: above 1.00 Noted is ahead). pycrdt's echo is sent before its store writes the "
                  "update, so its latency has no disk in it; its *lost* column is what that costs.", "",
                  "| fsync delay | Noted on | accepted/s ratio | p99 ratio | p50 ratio |", "| --- | --- | ---: | ---: | ---: |"] + rows + [""]
    # Issue 18's rows.
    targets = []
    for b, name in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        v = r.get(f"durable-noted-{b}-2ms")
        verify = r.get(f"durable-noted-{b}-2ms-verify")
        if v:
            ok = (v["accepted_per_s"] >= 2000 and v["p99_ms"] is not None and v["p99_ms"] < 100 and v["errors"] == 0
                  and verify is not None and verify["lost_changes"] == 0)
            targets.append(f"| durable edits/s, {name}, {v['users']:,} users × {v['edits_per_user_per_s']:g}/s, every fsync held 2 ms: "
                           f"≥ 2,000/s, p99 < 100 ms, nothing lost | {fmt(v['accepted_per_s'])}/s, p99 {fmt(v['p99_ms'])} ms, "
                           f"{v['errors']} errors, lost {verify['lost_changes'] if verify else 'not verified'} | {'met' if ok else 'MISSED'} |")
    for d in (0, 2):
        y = r.get(f"durable-yjs-{d}ms")
        for b in ("sqlite", "postgres"):
            n = r.get(f"durable-noted-{b}-{d}ms")
            if n and y:
                ok = n["accepted_per_s"] >= y["accepted_per_s"] and (n["p99_ms"] or 1e9) < (y["p99_ms"] or 0)
                targets.append(f"| ahead of pycrdt + SQLiteYStore on accepted rate and p99 ({b}, fsync delay {d} ms) | "
                               f"{fmt(n['accepted_per_s'])} vs {fmt(y['accepted_per_s'])}/s, p99 {fmt(n['p99_ms'])} vs "
                               f"{fmt(y['p99_ms'])} ms | {'met' if ok else 'MISSED'} |")
    if targets:
        lines += ["Targets of issue 18, as found:", "", "| target | found | |", "| --- | --- | --- |"] + targets + [""]
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--chart", required=True)
    parser.add_argument("--machine", default="")
    args = parser.parse_args()
    r = load(args.folder)
    if not any(not k.startswith("durable-") for k in r):
        # scripts/bench-load --durable-only: that table alone, no chart.
        text = "\n".join([f"Machine: {args.machine}", ""] + durable_lines(r))
        print(text)
        with open(os.path.join(args.folder, "load.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(args.folder, "load.json"), "w") as f:
            json.dump({"machine": args.machine, "results": r}, f, indent=1)
        return
    backends = [b for b in ["sqlite", "postgres"] if f"noted-{b}-setup" in r]
    lines = [f"Machine: {args.machine}", ""]
    targets = []

    def verdict(ok):
        return "met" if ok else "MISSED"

    # Fan-out.
    lines += ["### Fan-out: one writer, N readers; push to change received (ms)", "",
              "| system | N | pushes | samples | missing | p50 | p95 | p99 | generator CPU |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    systems = [(f"noted-{b}", f"Noted ({'SQLite' if b == 'sqlite' else 'PostgreSQL'})") for b in backends] + [("yjs", "pycrdt-websocket")]
    readers = sorted({int(k.rsplit("-", 1)[1]) for k in r if "-fanout-" in k})
    for key, label in systems:
        for n in readers:
            v = r.get(f"{key}-fanout-{n}")
            if v:
                lines.append(f"| {label} | {n} | {v['pushes']} | {v['n']} | {v['missing']} | {fmt(v['p50_ms'])} | "
                             f"{fmt(v['p95_ms'])} | {fmt(v['p99_ms'])} | {fmt(v['generator_cpu'], 2)} |")
    lines.append("")
    # Sustained.
    lines += ["### Sustained editing (push to ack; pycrdt: push to own update echoed back)", "",
              "| system | users | offered/s | seconds | accepted/s | p50 ms | p99 ms | errors | server CPU | generator CPU |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key, label in systems:
        v = r.get(f"{key}-sustained")
        if v:
            lines.append(f"| {label} | {v['users']} | {fmt(v['offered_per_s'])} | {v['seconds']} | {fmt(v['accepted_per_s'])} | "
                         f"{fmt(v['p50_ms'])} | {fmt(v['p99_ms'])} | {v['errors']} | {fmt(v.get('server_cpu'), 2)} | {fmt(v['generator_cpu'], 2)} |")
    lines.append("")
    # Max rate.
    lines += ["### Maximum accepted edits/s with p99 ack latency ≤ 100 ms (offered rate stepped up)", "",
              "| system | offered/s | accepted/s | p50 ms | p99 ms | errors | server CPU | PostgreSQL CPU | generator CPU |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key, label in systems:
        v = r.get(f"{key}-maxrate")
        if v:
            for s in v["steps"]:
                lines.append(f"| {label} | {s['offered_per_s']} | {fmt(s['accepted_per_s'])} | {fmt(s['p50_ms'])} | "
                             f"{fmt(s['p99_ms'])} | {s['errors']} | {fmt(s.get('server_cpu'), 2)} | {fmt(s.get('database_cpu'), 2)} | {fmt(s['generator_cpu'], 2)} |")
            lines.append(f"| **{label} maximum** | | **{fmt(v['max_accepted_per_s'])}** | | | | | | |")
    lines.append("")
    # Idle.
    lines += ["### Idle authenticated connections: server resident memory", "",
              "| backend | connections | RSS MiB | bytes per connection |", "| --- | ---: | ---: | ---: |"]
    for b in backends:
        v = r.get(f"noted-{b}-idle")
        if v:
            base = v["steps"][0]["rss_bytes"]
            for s in v["steps"]:
                per = (s["rss_bytes"] - base) / s["connections"] if s["connections"] else None
                lines.append(f"| {b} | {s['connections']} | {s['rss_bytes'] / 2**20:.1f} | {fmt(round(per) if per else None)} |")
    lines.append("")
    for b in backends:
        v = r.get(f"noted-{b}-idle-deflate")
        if v and v.get("bytes_per_connection"):
            per = ", ".join(f"{s['connections']}: {fmt(round((s['rss_bytes'] - v['steps'][0]['rss_bytes']) / s['connections']))}"
                            for s in v["steps"][1:])
            lines.append(f"With permessage-deflate ({b}; a fresh server; bytes per connection at each step): {per}.")
    lines.append("")
    for b in backends:
        v = r.get(f"noted-{b}-idle")
        if v and "server_cpu_while_idle" in v:
            lines.append(f"Server CPU with {v['steps'][-1]['connections']} idle connections open ({b}): "
                         f"{v['server_cpu_while_idle'] * 100:.1f} % of a core.")
    lines.append("")
    for b in backends:
        v = r.get(f"noted-{b}-idle-stages")
        if v:
            lines += [f"Where an idle connection's memory goes ({b}; each stage added on top of the previous, none closed):", "",
                      "| stage | connections | RSS added | bytes per connection |", "| --- | ---: | ---: | ---: |"]
            for s in v["stages"]:
                lines.append(f"| {s['stage']} | {s['connections']} | {s['rss_delta_bytes'] / 2**20:.1f} MiB | {s['bytes_per_connection']} |")
            lines.append("")
    # Initial sync.
    lines += ["### Initial sync into an empty client", "",
              "| backend | notes | NotedClient s | `noted sync` s (whole process) | notes listed after |",
              "| --- | ---: | ---: | ---: | ---: |"]
    for b in backends:
        v = r.get(f"noted-{b}-initial-sync")
        if v:
            c = v["noted_client"]
            lines.append(f"| {b} | {v['notes']} | {fmt(c.get('seconds'), 2)} ({c.get('notes')} notes) | "
                         f"{fmt(v['noted_cli']['seconds'], 2)} (exit {v['noted_cli']['exit']}) | {v['noted_cli']['notes']} |")
    lines.append("")
    for b in backends:
        v = r.get(f"noted-{b}-pull")
        if v:
            lines.append(f"The server's part ({b}): every page of `pull since 0` (limit {v['limit']}) read by the Python "
                         f"generator and dropped: {v['records']} records in {v['pages']} pages, {v['payload_bytes'] / 2**20:.1f} MiB, "
                         f"{v['seconds']:.2f} s (page p50 {fmt(v['page_ms']['p50_ms'])} ms, max {fmt(v['page_ms']['max_ms'])} ms).")
    lines.append("")
    # Bytes.
    v = r.get("noted-sqlite-bytes")
    if v:
        lines += ["### Bytes on the wire for one single-keystroke change (1,000-character note)", "",
                  "| system | compression | push payload | push on TCP | ack payload | ack on TCP | change payload | change on TCP |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        labels = {"none": "none", "deflate": "deflate", "deflate-random-ccid": "deflate, random v4 ccids (the clients before `ChangeID`)"}
        for mode in ["none", "deflate", "deflate-random-ccid"]:
            m = v.get(mode)
            if m:
                lines.append(f"| Noted | {labels[mode]} ({m['negotiated'] or 'not negotiated'}) | {m['push_payload_bytes']} | {m['push_tcp_bytes']} | "
                             f"{m['ack_payload_bytes']} | {m['ack_tcp_bytes']} | {m['change_payload_bytes']} | {m['change_tcp_bytes']} |")
        if "yjs" in v:
            y = v["yjs"]
            lines.append(f"| pycrdt-websocket | none | {y['push_payload_bytes']} | {y['push_tcp_bytes']} | – | – | "
                         f"{y['change_payload_bytes']} | {y['change_tcp_bytes']} |")
        lines += ["", "With permessage-deflate the server compresses every message of 24 bytes or more, small ones through the "
                  "session's compressor (1 KiB window), pages through one of their own (32 KiB window); the clients' `ccid`s "
                  "share a random prefix and count up, so deflate's context takeover sends a keystroke's `ccid` as a back-reference."]
        lines += ["", "Noted push example: `" + v["none"]["push_example"] + "`",
                  "", "Noted change example: `" + v["none"]["change_example"] + "`", ""]

    # Targets.
    lines += ["### Targets (issue 8), as found", "", "| target | found | |", "| --- | --- | --- |"]
    for b in backends:
        v = r.get(f"noted-{b}-initial-sync")
        if v:
            c = v["noted_client"].get("seconds")
            lines.append(f"| initial sync of {v['notes']} notes < 2 s ({b}) | NotedClient {fmt(c, 2)} s, noted sync {fmt(v['noted_cli']['seconds'], 2)} s | "
                         f"{verdict(c is not None and c < 2 and v['noted_cli']['seconds'] < 2)} |")
        w = r.get(f"noted-{b}-web-initial-sync")
        if w and w.get("runs"):
            times = [run["seconds"] for run in w["runs"]]
            lines.append(f"| initial sync of {w['notes']} notes in the web app < 4 s ({b}; headless Chromium, sign-in to listed and online) | "
                         f"{', '.join(fmt(t, 2) for t in times)} s | {verdict(max(times) < 4)} |")
        f = r.get(f"noted-{b}-fanout-1000")
        if f:
            lines.append(f"| fan-out p99 < 50 ms at 1,000 ({b}) | {fmt(f['p99_ms'])} ms | {verdict(f['p99_ms'] is not None and f['p99_ms'] < 50)} |")
        m = r.get(f"noted-{b}-maxrate")
        if m and b == "sqlite":
            best = m["max_accepted_per_s"]
            lines.append(f"| ≥ 2,000 accepted edits/s per node on SQLite | {fmt(best)} | {verdict(best is not None and best >= 2000)} |")
        s = r.get(f"noted-{b}-sustained")
        if s:
            lines.append(f"| sustained {s['users']} users × {s['edits_per_user_per_s']:g}/s: zero errors ({b}) | {s['errors']} errors, {fmt(s['accepted_per_s'])} accepted/s | {verdict(s['errors'] == 0)} |")
        i = r.get(f"noted-{b}-idle")
        if i and i["bytes_per_connection"]:
            lines.append(f"| ≤ 32 KiB per idle connection ({b}) | {i['bytes_per_connection']} bytes | {verdict(i['bytes_per_connection'] <= 32768)} |")
        i = r.get(f"noted-{b}-idle-deflate")
        if i and i["bytes_per_connection"]:
            lines.append(f"| ≤ 32 KiB per idle connection with permessage-deflate ({b}; {i['steps'][-1]['connections']} open, as browsers connect) | "
                         f"{i['bytes_per_connection']} bytes | {verdict(i['bytes_per_connection'] <= 32768)} |")
    v = r.get("noted-sqlite-bytes")
    if v:
        m = v["none"]
        worst = max(m["push_tcp_bytes"], m["change_tcp_bytes"])
        lines.append(f"| ≤ 150 bytes per keystroke change (push {m['push_tcp_bytes']}, broadcast {m['change_tcp_bytes']} on TCP, uncompressed) | {worst} | {verdict(worst <= 150)} |")
        d = v.get("deflate")
        if d:
            worst = max(d["push_tcp_bytes"], d["change_tcp_bytes"])
            lines.append(f"| ≤ 40 bytes per keystroke change with deflate (push {d['push_tcp_bytes']}, broadcast {d['change_tcp_bytes']} on TCP) | {worst} | {verdict(worst <= 40)} |")

    # Ratios.
    lines += ["", "### Noted against pycrdt-websocket (same generator, same machine, same run)", "",
              "Latency ratios are pycrdt / Noted and throughput ratios Noted / pycrdt: above 1.00 Noted is ahead.", "",
              "| shape | " + " | ".join(b for b in backends) + " |", "| --- |" + " ---: |" * len(backends)]
    rows = []
    for n in readers:
        y = r.get(f"yjs-fanout-{n}")
        for q in ["p50_ms", "p99_ms"]:
            cells = [ratio(y and y[q], r.get(f"noted-{b}-fanout-{n}", {}).get(q)) for b in backends]
            rows.append(f"| fan-out N={n} {q[:3]} | " + " | ".join(cells) + " |")
    y = r.get("yjs-sustained")
    cells = [ratio(y and y["p99_ms"], r.get(f"noted-{b}-sustained", {}).get("p99_ms")) for b in backends]
    rows.append("| sustained p99 push→ack | " + " | ".join(cells) + " |")
    cells = [ratio(r.get(f"noted-{b}-sustained", {}).get("accepted_per_s"), y and y["accepted_per_s"]) for b in backends]
    rows.append("| sustained accepted/s | " + " | ".join(cells) + " |")
    y = r.get("yjs-maxrate")
    cells = [ratio(r.get(f"noted-{b}-maxrate", {}).get("max_accepted_per_s"), y and y["max_accepted_per_s"]) for b in backends]
    rows.append("| max accepted/s (p99 ≤ 100 ms) | " + " | ".join(cells) + " |")
    lines += rows
    lines += [""] + durable_lines(r)
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.folder, "load.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.folder, "load.json"), "w") as f:
        json.dump({"machine": args.machine, "results": r}, f, indent=1)
    chart(r, systems, readers, backends, args.chart)
    print(f"\nchart: {args.chart}")


def chart(r, systems, readers, backends, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    colors = {"noted-sqlite": "tab:blue", "noted-postgres": "tab:green", "yjs": "tab:red"}
    ax = axes[0][0]
    for key, label in systems:
        xs = [n for n in readers if r.get(f"{key}-fanout-{n}")]
        if xs:
            ax.plot(xs, [r[f"{key}-fanout-{n}"]["p99_ms"] for n in xs], "o-", color=colors[key], label=label + " p99")
            ax.plot(xs, [r[f"{key}-fanout-{n}"]["p50_ms"] for n in xs], "o--", color=colors[key], alpha=0.5, label=label + " p50")
    ax.axhline(50, color="grey", linestyle=":", label="target p99 50 ms at 1,000")
    ax.set_xscale("log"); ax.set_yscale("log")
    ax.set_xlabel("connections receiving (N)"); ax.set_ylabel("push → change received, ms")
    ax.set_title("Fan-out"); ax.legend(fontsize=7)
    ax = axes[0][1]
    for key, label in systems:
        v = r.get(f"{key}-maxrate")
        if v:
            steps = [s for s in v["steps"] if s["p99_ms"] is not None]
            ax.plot([s["accepted_per_s"] for s in steps], [s["p99_ms"] for s in steps], "o-", color=colors[key], label=label)
    ax.axhline(100, color="grey", linestyle=":", label="p99 limit 100 ms")
    ax.axvline(2000, color="grey", linestyle="--", label="target 2,000/s (SQLite)")
    ax.set_yscale("log"); ax.set_xlabel("accepted edits/s"); ax.set_ylabel("p99 push → ack, ms")
    ax.set_title("Offered rate stepped up"); ax.legend(fontsize=7)
    ax = axes[1][0]
    for b in backends:
        v = r.get(f"noted-{b}-idle")
        if v:
            ax.plot([s["connections"] for s in v["steps"]], [s["rss_bytes"] / 2**20 for s in v["steps"]], "o-",
                    color=colors[f"noted-{b}"], label=f"Noted ({b})")
    if backends and r.get(f"noted-{backends[0]}-idle"):
        base = r[f"noted-{backends[0]}-idle"]["steps"][0]["rss_bytes"] / 2**20
        top = max(s["connections"] for s in r[f"noted-{backends[0]}-idle"]["steps"])
        ax.plot([0, top], [base, base + top * 32 / 1024], ":", color="grey", label="target 32 KiB per connection")
    ax.set_xlabel("idle authenticated connections"); ax.set_ylabel("server RSS, MiB")
    ax.set_title("Idle connections"); ax.legend(fontsize=7)
    ax = axes[1][1]
    names, values, cols = [], [], []
    for key, label in systems:
        v = r.get(f"{key}-sustained")
        if v and v["p99_ms"] is not None:
            names.append(label.replace(" (", "\n(")); values.append(v["p99_ms"]); cols.append(colors[key])
    ax.bar(names, values, color=cols)
    ax.set_ylabel("p99 push → ack (pycrdt: echo), ms")
    users = next((r[f"{k}-sustained"]["users"] for k, _ in systems if r.get(f"{k}-sustained")), "?")
    ax.set_title(f"Sustained: {users} users × 2 edits/s")
    fig.suptitle("noted-server load benchmarks (scripts/bench-load)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
