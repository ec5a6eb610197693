"""The TCP sockets a process listens on, as addresses to connect to (shared by tests/chaos/chaos.py
and tests/netattack/attack.py).

Ranks bind their bootstrap inbox and data listeners to the interface they chose, not to loopback:
a connection to 127.0.0.1 on those ports is refused. The address comes from the kernel's tables,
a wildcard bind is reached over loopback."""
import ipaddress
import os
import socket


def listening_addresses(pid):
    """(address, port) of every TCP socket process pid listens on."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return []
    out = set()
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] != "0A" or f[9] not in inodes:  # 0A: LISTEN
                continue
            hexaddr, hexport = f[1].split(":")
            raw = bytes.fromhex(hexaddr)
            if family == 4:
                addr = str(ipaddress.IPv4Address(raw[::-1]))
                addr = "127.0.0.1" if addr == "0.0.0.0" else addr
            else:  # four little-endian 32-bit words
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                a = ipaddress.IPv6Address(words)
                addr = str(a.ipv4_mapped) if a.ipv4_mapped else ("::1" if a.is_unspecified else str(a))
            out.add((addr, int(hexport, 16)))
    return sorted(out)


def connect_to(target, blocking=False, timeout=None):
    """A TCP connection to (address, port): non-blocking (connect in progress) unless asked."""
    family = socket.AF_INET6 if ":" in target[0] else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    if blocking:
        s.settimeout(timeout)
        try:
            s.connect(target)
        except OSError:
            s.close()
            raise
    else:
        s.setblocking(False)
        s.connect_ex(target)
    return s
