"""What the benchmark scripts share: the CPU line and a warm page cache."""

import os


def cpu_line(flags):
    """'cpu: MODEL, N cores; flags: ...', each of flags or -flag where absent."""
    model, have = "unknown", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = val.strip()
            elif key.strip() == "flags" and not have:
                have = set(val.split())
    return (f"cpu: {model}, {os.cpu_count()} cores; flags: "
            + " ".join(f if f in have else f"-{f}" for f in flags))


def warm(files):
    """Read every file once, so that the runs find them in the page cache."""
    buf = bytearray(1 << 20)
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
