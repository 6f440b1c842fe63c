"""Which address the Spark driver binds and advertises (driver side, before Spark starts).

A driver bound to loopback cannot be reached by executors on other hosts; one bound to the
machine's address is reachable from anywhere the machine is, which a local master does not
need. `driver_address` is the pure choice; `host_interfaces`, `default_route_interface` and
`resolve_master` read what it chooses from (iproute2, /proc/net/route, the resolver).

The choice, first match wins:
1. `spark.driver.host` / `spark.driver.bindAddress` in the deployment's `spark.conf`: taken as
   given (a wildcard bind address still needs a routable host to advertise: steps 4-6 give it);
2. a local master (`local`, `local[...]`, `local-cluster[...]`, or a master whose every
   address is loopback): 127.0.0.1 for both;
3. `SPARK_LOCAL_IP` when it is set and not loopback (the operator's choice of interface);
4. the address of the interface whose network holds one of the master's addresses (the
   interface that reaches the master without a gateway);
5. the address of the interface of the default route;
6. otherwise there is no routable address: an error naming the settings to give.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import subprocess
from dataclasses import dataclass
from typing import Mapping, Sequence

from treedist.spark.errors import SparkLayerError

LOOPBACK = "127.0.0.1"
HOST_KEY = "spark.driver.host"
BIND_KEY = "spark.driver.bindAddress"
WILDCARDS = {"0.0.0.0", "::"}
_LOCAL = re.compile(r"local(\[.*\])?|local-cluster\[.*\]")


class DriverAddressError(SparkLayerError):
    """No routable address for the driver of a non-local master; names the settings to give."""


@dataclass(frozen=True)
class Interface:
    name: str
    address: str  # IPv4
    prefixlen: int


@dataclass(frozen=True)
class DriverAddress:
    host: str  # spark.driver.host: what executors connect to
    bind: str  # spark.driver.bindAddress: what the driver listens on
    reason: str  # which rule chose it (logged)


def master_hosts(master: str) -> list[str]:
    """Host names or addresses in a master URL: `spark://h1:7077,h2:7077`, `k8s://https://h:6443`,
    `mesos://h:5050`; none for `yarn` or a local master."""
    master = master.strip()
    if _LOCAL.fullmatch(master) or master == "yarn":
        return []
    rest = master.split("://", 1)[1] if "://" in master else master
    if "://" in rest:  # k8s://https://host:port
        rest = rest.split("://", 1)[1]
    hosts = []
    for part in rest.split("/", 1)[0].split(","):
        part = part.strip()
        if part.startswith("["):  # [v6]:port
            hosts.append(part[1:].split("]", 1)[0])
        elif part:
            hosts.append(part.rsplit(":", 1)[0] if part.count(":") == 1 else part)
    return hosts


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def is_local_master(master: str, master_ips: Sequence[str]) -> bool:
    """A `local*` master, or one whose every known address is loopback."""
    if _LOCAL.fullmatch(master.strip()):
        return True
    return bool(master_ips) and all(_is_loopback(ip) for ip in master_ips)


def driver_address(master: str, conf: Mapping[str, str], interfaces: Sequence[Interface],
                   default_interface: str | None, master_ips: Sequence[str] = (),
                   local_ip_env: str | None = None) -> DriverAddress:
    """The rules of the module's docstring (pure: every input is given)."""
    host, bind = conf.get(HOST_KEY), conf.get(BIND_KEY)
    if host:  # rule 1
        return DriverAddress(host, bind or host, f"{HOST_KEY} in spark.conf")
    if bind and bind not in WILDCARDS:
        return DriverAddress(bind, bind, f"{BIND_KEY} in spark.conf")
    if is_local_master(master, master_ips):  # rule 2
        return DriverAddress(LOOPBACK, bind or LOOPBACK, "local master")
    routed = _routed(interfaces, default_interface, master_ips, local_ip_env)
    if routed is None:  # rule 6
        raise DriverAddressError(
            f"spark.master {master!r} is not local and this host has no routable IPv4 address (no interface "
            f"reaches {list(master_ips) or 'the master'}, no default route): set spark.conf {HOST_KEY} "
            f"(and {BIND_KEY}) to an address executors can reach")
    address, reason = routed
    return DriverAddress(address, bind or address, reason)


def _routed(interfaces: Sequence[Interface], default_interface: str | None, master_ips: Sequence[str],
            local_ip_env: str | None) -> tuple[str, str] | None:
    """Rules 3-5."""
    if local_ip_env and not _is_loopback(local_ip_env):
        return local_ip_env, "SPARK_LOCAL_IP"
    usable = [i for i in interfaces if not _is_loopback(i.address)]
    for ip in master_ips:
        try:
            target = ipaddress.ip_address(ip)
        except ValueError:
            continue
        for iface in usable:
            network = ipaddress.ip_interface(f"{iface.address}/{iface.prefixlen}").network
            if target.version == network.version and target in network:
                return iface.address, f"interface {iface.name} reaches the master {ip}"
    for iface in usable:
        if iface.name == default_interface:
            return iface.address, f"interface {iface.name} of the default route"
    return None


# -- what the choice reads (I/O) ---------------------------------------------------------------

def host_interfaces() -> list[Interface]:
    """This network namespace's IPv4 addresses (`ip -j -4 addr`); empty without iproute2."""
    try:
        out = subprocess.run(["ip", "-j", "-4", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
        links = json.loads(out or "[]")
    except (OSError, ValueError, subprocess.SubprocessError):
        return []
    return [Interface(link["ifname"], a["local"], int(a["prefixlen"]))
            for link in links for a in link.get("addr_info", []) if a.get("family") == "inet" and "local" in a]


def default_route_interface(route_table: str = "/proc/net/route") -> str | None:
    """The interface of the IPv4 default route (destination 0 and mask 0), if any."""
    try:
        with open(route_table) as table:
            for line in list(table)[1:]:
                fields = line.split()
                if len(fields) > 7 and fields[1] == "00000000" and fields[7] == "00000000":
                    return fields[0]
    except OSError:
        return None
    return None


def resolve_master(master: str) -> list[str]:
    """The IPv4 addresses of the master URL's hosts; a name that does not resolve is left out."""
    found: list[str] = []
    for host in master_hosts(master):
        try:
            infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
        except OSError:
            continue
        found.extend(info[4][0] for info in infos if info[4][0] not in found)
    return found


def resolve_driver_address(master: str, conf: Mapping[str, str], local_ip_env: str | None = None) -> DriverAddress:
    """`driver_address` with this host's interfaces, default route and the master's addresses
    (the master's names are resolved only when neither conf nor a local master decides)."""
    if conf.get(HOST_KEY) or (conf.get(BIND_KEY) and conf[BIND_KEY] not in WILDCARDS) or _LOCAL.fullmatch(master.strip()):
        return driver_address(master, conf, [], None)
    return driver_address(master, conf, host_interfaces(), default_route_interface(), resolve_master(master),
                          local_ip_env)
