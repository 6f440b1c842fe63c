"""Which address the driver binds and advertises (driver, pure choice).

Invariants: a local master gets loopback unless spark.conf names an address; a master on
another host never gets loopback: the address is spark.conf's, a non-loopback SPARK_LOCAL_IP,
or one of the host's own non-loopback interfaces (the one on the master's network before the
default route's); with none of those the choice fails naming the settings to give."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.spark.address import (
    DriverAddressError, Interface, default_route_interface, driver_address, is_local_master, master_hosts,
)

LO = Interface("lo", "127.0.0.1", 8)
ETH = Interface("eth0", "192.0.2.2", 24)
BED = Interface("veth-bed", "10.77.0.30", 24)


@pytest.mark.parametrize("master, hosts", [
    ("spark://10.77.0.10:7077", ["10.77.0.10"]),
    ("spark://m1:7077,m2:7077", ["m1", "m2"]),
    ("k8s://https://api.example:6443", ["api.example"]),
    ("mesos://zk.example:5050", ["zk.example"]),
    ("spark://[fd00::1]:7077", ["fd00::1"]),
    ("yarn", []), ("local[2,4]", []), ("local-cluster[2,1,1024]", []),
])
def test_master_hosts_are_read_from_the_url(master, hosts):
    assert master_hosts(master) == hosts


@pytest.mark.parametrize("master", ["local", "local[2,4]", "local[*]", "local-cluster[2,1,1024]"])
def test_a_local_master_binds_loopback_whatever_the_interfaces(master):
    chosen = driver_address(master, {}, [LO, ETH, BED], "eth0")
    assert (chosen.host, chosen.bind) == ("127.0.0.1", "127.0.0.1")


def test_a_standalone_master_on_loopback_is_local():
    assert is_local_master("spark://127.0.0.1:7077", ["127.0.0.1"])
    assert driver_address("spark://127.0.0.1:7077", {}, [LO, ETH], "eth0", ["127.0.0.1"]).host == "127.0.0.1"


def test_the_interface_on_the_masters_network_wins_over_the_default_route():
    chosen = driver_address("spark://10.77.0.10:7077", {}, [LO, ETH, BED], "eth0", ["10.77.0.10"])
    assert (chosen.host, chosen.bind) == ("10.77.0.30", "10.77.0.30")
    assert "veth-bed" in chosen.reason


def test_a_master_behind_a_gateway_gets_the_default_routes_interface():
    chosen = driver_address("spark://203.0.113.9:7077", {}, [LO, ETH, BED], "eth0", ["203.0.113.9"])
    assert chosen.host == "192.0.2.2" and "default route" in chosen.reason


def test_yarn_gets_the_default_routes_interface():
    assert driver_address("yarn", {}, [LO, BED], "veth-bed").host == "10.77.0.30"


def test_spark_conf_wins_for_any_master():
    conf = {"spark.driver.host": "driver.example", "spark.driver.bindAddress": "0.0.0.0"}
    for master in ("local[2]", "spark://10.77.0.10:7077"):
        chosen = driver_address(master, conf, [LO, BED], "veth-bed", ["10.77.0.10"])
        assert (chosen.host, chosen.bind) == ("driver.example", "0.0.0.0")
    only_bind = driver_address("spark://10.77.0.10:7077", {"spark.driver.bindAddress": "10.77.0.30"}, [], None)
    assert (only_bind.host, only_bind.bind) == ("10.77.0.30", "10.77.0.30")


def test_a_wildcard_bind_address_still_advertises_a_routable_host():
    chosen = driver_address("spark://10.77.0.10:7077", {"spark.driver.bindAddress": "0.0.0.0"}, [LO, BED], None,
                            ["10.77.0.10"])
    assert (chosen.host, chosen.bind) == ("10.77.0.30", "0.0.0.0")


def test_spark_local_ip_is_taken_unless_it_is_loopback():
    master, ips = "spark://10.77.0.10:7077", ["10.77.0.10"]
    assert driver_address(master, {}, [LO, BED], None, ips, local_ip_env="10.77.0.31").host == "10.77.0.31"
    assert driver_address(master, {}, [LO, BED], None, ips, local_ip_env="127.0.0.1").host == "10.77.0.30"


def test_no_routable_address_names_the_settings_to_give():
    with pytest.raises(DriverAddressError, match="spark.driver.host"):
        driver_address("spark://10.77.0.10:7077", {}, [LO], None, ["10.77.0.10"])


def test_the_default_route_is_read_from_the_route_table(tmp_path):
    table = tmp_path / "route"
    table.write_text(
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
        "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n")
    assert default_route_interface(str(table)) == "eth0"
    table.write_text(table.read_text().splitlines()[0] + "\n")
    assert default_route_interface(str(table)) is None


addresses = st.ip_addresses(v=4).map(str)
interfaces = st.lists(st.builds(Interface, st.sampled_from(["lo", "eth0", "eth1", "veth"]), addresses,
                                st.integers(8, 30)), max_size=5)


@given(interfaces, st.one_of(st.none(), st.sampled_from(["lo", "eth0", "eth1", "veth"])),
       st.lists(addresses, min_size=1, max_size=3))
def test_a_remote_master_never_gets_loopback(ifaces, default, master_ips):
    if all(ipaddress.ip_address(ip).is_loopback for ip in master_ips):
        return  # that master is local
    try:
        chosen = driver_address(f"spark://{master_ips[0]}:7077", {}, ifaces, default, master_ips)
    except DriverAddressError:
        assert not [i for i in ifaces if not ipaddress.ip_address(i.address).is_loopback and
                    (i.name == default or any(ipaddress.ip_address(ip) in
                                              ipaddress.ip_interface(f"{i.address}/{i.prefixlen}").network
                                              for ip in master_ips))]
        return
    assert not ipaddress.ip_address(chosen.host).is_loopback
    assert chosen.host == chosen.bind
    assert chosen.host in {i.address for i in ifaces}
