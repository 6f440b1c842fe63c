"""The link between two data centres as a real network link: the WAN proxy
(treedist.local.wanproxy) runs in a network namespace of its own, joined to the machine's
namespace by one veth pair. Every byte between the data centres crosses that pair, so the link
can be cut (`ip link set down`: nothing crosses, both ways) and capped (`tc` tbf on both ends;
this kernel has tbf but not netem, hence the proxy's delay).

Runs on the machine that starts the clusters (tests and scripts), as root. Names start with
`prefix`, so a later `up` or `down` removes what an earlier run left (only those names).

| side | name | address |
|------|------|---------|
| the machine's namespace | `<prefix>-wan` | `.1` of `subnet` (the brokers' WAN listeners bind here) |
| the link's namespace | `<prefix>-wan`, device `eth0` | `.2` (the proxy listens here) |

Steps of `up` (a failure removes what was made): 1. leftovers of `prefix` (and a blackhole
route for `subnet`) removed; 2. the namespace and the veth pair, addressed and up; 3. a
blackhole route for `subnet` behind the link's own: while the link is down, what is sent to the
other side is dropped (a new connection fails at once, an open one's packets are lost)
instead of following the machine's default route out of it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from treedist.local.netbed import NetBedError, _ip, netns_unavailable, set_rate, teardown_prefix

DEFAULT_PREFIX = "tdwl"
DEFAULT_SUBNET = "10.78.0.0/30"
BLACKHOLE_METRIC = "1000"  # behind the link's own route (metric 0), used only while it is down


@dataclass
class WanLink:
    prefix: str = DEFAULT_PREFIX
    subnet: str = DEFAULT_SUBNET

    @property
    def name(self) -> str:
        return f"{self.prefix}-wan"  # the namespace and the machine-side device

    @property
    def outside(self) -> str:
        return str(ipaddress.ip_network(self.subnet)[1])

    @property
    def inside(self) -> str:
        return str(ipaddress.ip_network(self.subnet)[2])

    def exec_prefix(self) -> list[str]:
        """What runs a command inside the link's namespace (the proxy)."""
        return ["ip", "netns", "exec", self.name]

    def up(self) -> "WanLink":
        """Steps 1-3 of the module's docstring."""
        reason = netns_unavailable()
        if reason:
            raise NetBedError(reason)
        self.down()  # step 1
        try:
            prefixlen = ipaddress.ip_network(self.subnet).prefixlen
            _ip("netns", "add", self.name)
            _ip("link", "add", self.name, "type", "veth", "peer", "name", f"{self.prefix}-in")
            _ip("link", "set", f"{self.prefix}-in", "netns", self.name)
            _ip("-n", self.name, "link", "set", f"{self.prefix}-in", "name", "eth0")
            _ip("addr", "add", f"{self.outside}/{prefixlen}", "dev", self.name)
            _ip("link", "set", self.name, "up")
            _ip("-n", self.name, "addr", "add", f"{self.inside}/{prefixlen}", "dev", "eth0")
            _ip("-n", self.name, "link", "set", "eth0", "up")
            _ip("-n", self.name, "link", "set", "lo", "up")
            _ip("route", "add", "blackhole", self.subnet, "metric", BLACKHOLE_METRIC)  # step 3
        except BaseException:
            self.down()
            raise
        return self

    def cut(self, cut: bool = True) -> None:
        """Cut the link (nothing crosses between the data centres) or restore it."""
        _ip("link", "set", self.name, "down" if cut else "up")
        _ip("-n", self.name, "link", "set", "eth0", "down" if cut else "up")

    def limit(self, rate_mbit: float | None) -> None:
        """Cap the link at `rate_mbit` each way (tbf on both ends), or lift the cap (None)."""
        for where, dev in (([], self.name), (["-n", self.name], "eth0")):
            set_rate(where, dev, rate_mbit)

    def down(self) -> None:
        """The namespace (and whatever still runs in it), the veth pair and the blackhole route removed."""
        teardown_prefix(self.prefix, None)
        _ip("route", "del", "blackhole", self.subnet, "metric", BLACKHOLE_METRIC, check=False)
