"""What the whole machine did while a bench ran: busy core-seconds from /proc/stat, and the
cores this process may use. The runs and synthesis benches print the CPU left to them."""

from __future__ import annotations

import os
from pathlib import Path


def machine_busy() -> float:
    """Core-seconds every process on this machine has spent busy since boot (/proc/stat:
    user, nice, system, irq, softirq, steal); 0.0 where there is no /proc."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(f) for f in fields]
    busy = ticks[0] + ticks[1] + ticks[2] + sum(ticks[5:8])
    return busy / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
