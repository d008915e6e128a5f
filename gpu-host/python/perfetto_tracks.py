#!/usr/bin/env python3
"""The tracks of a Perfetto trace that `gpu-tools export --perfetto` (or `trace --perfetto`) wrote, decoded with the
standard library alone (no protobuf package): its size, each group (a track with a process), and each counter
track under its group with its unit, how many values it holds, their range and the span they cover.

    python3 perfetto_tracks.py run.perfetto-trace [--all]

`--all` lists the slice tracks too. Field numbers are those of Perfetto's `protos/perfetto/trace/`: `Trace.packet`
1; `TracePacket.timestamp` 8, `track_event` 11, `track_descriptor` 60; `TrackDescriptor.uuid` 1, `name` 2,
`process` 3 (`ProcessDescriptor.pid` 1, `process_name` 6), `parent_uuid` 5, `counter` 8 (`unit_name` 6);
`TrackEvent.type` 9 (4: counter), `track_uuid` 11, `double_counter_value` 44.
"""
import os
import struct
import sys


def fields(buf):
    """(field number, wire type, value) of a protobuf message: varints as int, 64-bit as bytes, lengths as bytes."""
    i, n = 0, len(buf)
    while i < n:
        key, i = varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            v, i = buf[i : i + 8], i + 8
        elif wire == 2:
            length, i = varint(buf, i)
            v, i = buf[i : i + length], i + length
        elif wire == 5:
            v, i = buf[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire} at byte {i}")
        yield num, wire, v


def varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    show_all = "--all" in sys.argv
    path = args[0]
    with open(path, "rb") as f:
        data = f.read()
    tracks = {}  # uuid -> dict
    order = []
    values = {}  # uuid -> [(ts, value)]
    slices = {}  # uuid -> count of slice begins and instants
    for num, _, packet in fields(data):
        if num != 1:
            continue
        ts = None
        event = descriptor = None
        for pn, _, pv in fields(packet):
            if pn == 8:
                ts = pv
            elif pn == 11:
                event = pv
            elif pn == 60:
                descriptor = pv
        if descriptor is not None:
            t = {"name": "", "parent": None, "process": None, "unit": None, "counter": False}
            for dn, _, dv in fields(descriptor):
                if dn == 1:
                    t["uuid"] = dv
                elif dn == 2:
                    t["name"] = dv.decode("utf-8", "replace")
                elif dn == 5:
                    t["parent"] = dv
                elif dn == 3:
                    t["process"] = {cn: cv for cn, _, cv in fields(dv)}
                elif dn == 8:
                    t["counter"] = True
                    for cn, _, cv in fields(dv):
                        if cn == 6:
                            t["unit"] = cv.decode("utf-8", "replace")
            tracks[t["uuid"]] = t
            order.append(t["uuid"])
        if event is not None:
            kind = track = value = None
            for en, _, ev in fields(event):
                if en == 9:
                    kind = ev
                elif en == 11:
                    track = ev
                elif en == 44:
                    value = struct.unpack("<d", ev)[0]
            if kind == 4:
                values.setdefault(track, []).append((ts, value))
            elif kind in (1, 3):
                slices[track] = slices.get(track, 0) + 1
    counters = [u for u in order if tracks[u]["counter"]]
    print(f"{path}: {len(data)} bytes, {len(order)} tracks, {len(counters)} counter tracks, "
          f"{sum(len(v) for v in values.values())} counter values")
    for u in order:
        t = tracks[u]
        if t["process"] is None:
            continue
        print(f"group {t['name']!r} (pid {t['process'].get(1)})")
        for c in order:
            ct = tracks[c]
            if ct["parent"] != u:
                continue
            if ct["counter"]:
                vs = values.get(c, [])
                if vs:
                    lo = min(v for _, v in vs)
                    hi = max(v for _, v in vs)
                    span = (max(at for at, _ in vs) - min(at for at, _ in vs)) / 1e6
                    print(f"  counter {ct['name']!r} unit {ct['unit']!r}: {len(vs)} values in [{lo:g}, {hi:g}] "
                          f"over {span:.3f} ms")
                else:
                    print(f"  counter {ct['name']!r} unit {ct['unit']!r}: no values")
            elif show_all or ct["name"] == "counter gaps":
                print(f"  track {ct['name']!r}: {slices.get(c, 0)} slices")
    return 0


if __name__ == "__main__":
    sys.exit(main())
