"""Simulated devices joined by a ring of links (chapter 13): link presets and the :class:`Cluster` that counts.

A :class:`Cluster` holds P devices, each with its own HBM/SRAM counters (:class:`flashsim.model.memory.Counters`), and
a ring of directed links r → r+1 (mod P), each with a bandwidth preset and byte counters. A send reads the block
from the sender's HBM and writes it into the receiver's; the link counts it. Link presets are per direction (a
link's datasheet "bidirectional" figure is twice that); the model has no latency term (bandwidth only), which is
fine for the MiB-sized messages of attention.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from flashsim.errors import FlashsimError
from flashsim.model.hardware import Hardware, get_device
from flashsim.model.memory import Counters

__all__ = ["LinkSpec", "LINK_PRESETS", "get_link", "Cluster"]


# --- links ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LinkSpec:
    """A device-to-device link: bandwidth per direction in bytes/s, and where the number comes from."""
    name: str
    bandwidth_bytes_per_s: float
    source: str = ""


LINK_PRESETS: dict[str, LinkSpec] = {
    # NVIDIA H100 / H200 SXM datasheets: "NVLink: 900 GB/s" (bidirectional, 18 NVLink 4 links) = 450 GB/s per
    # direction.
    "nvlink4": LinkSpec("NVLink 4 (H100/H200 SXM)", 450e9,
                        "NVIDIA H100/H200 SXM datasheets: 900 GB/s bidirectional = 450 GB/s per direction"),
    # NVIDIA A100 datasheet: "NVLink: 600 GB/s" (bidirectional, 12 NVLink 3 links) = 300 GB/s per direction.
    "nvlink3": LinkSpec("NVLink 3 (A100 SXM)", 300e9,
                        "NVIDIA A100 datasheet: 600 GB/s bidirectional = 300 GB/s per direction"),
    # PCI Express Base Specification 5.0 (PCI-SIG): 32 GT/s per lane, 128b/130b encoding; x16 = 63 GB/s per
    # direction (NVIDIA's H100 PCIe datasheet: "PCIe Gen5: 128 GB/s", both directions).
    "pcie5": LinkSpec("PCIe 5.0 x16", 63e9,
                      "PCI-SIG PCIe 5.0: 32 GT/s x 16 lanes, 128b/130b = 63 GB/s per direction"),
    # PCI Express Base Specification 4.0: 16 GT/s per lane, 128b/130b; x16 = 31.5 GB/s per direction.
    "pcie4": LinkSpec("PCIe 4.0 x16", 31.5e9,
                      "PCI-SIG PCIe 4.0: 16 GT/s x 16 lanes, 128b/130b = 31.5 GB/s per direction"),
    # NVIDIA ConnectX-7 / Quantum-2 datasheets: InfiniBand NDR, 400 Gb/s per port = 50 GB/s per direction
    # (one NIC per GPU, as in a DGX H100/H200, for traffic between nodes).
    "infiniband_ndr": LinkSpec("InfiniBand NDR (400 Gb/s)", 50e9,
                               "NVIDIA ConnectX-7 datasheet: NDR 400 Gb/s per port = 50 GB/s per direction"),
}


def get_link(link="nvlink4", **overrides) -> LinkSpec:
    """A link preset by name (see :data:`LINK_PRESETS`) or a LinkSpec; ``bandwidth_bytes_per_s`` can be overridden."""
    if isinstance(link, LinkSpec):
        spec = link
    else:
        key = str(link).lower().replace("-", "_").replace(" ", "_")
        key = {"nvlink": "nvlink4", "pcie": "pcie5", "infiniband": "infiniband_ndr", "ib": "infiniband_ndr",
               "ndr": "infiniband_ndr"}.get(key, key)
        if key not in LINK_PRESETS:
            raise FlashsimError(f"unknown link {link!r}: use one of {sorted(LINK_PRESETS)}")
        spec = LINK_PRESETS[key]
    bw = overrides.get("bandwidth_bytes_per_s")
    if bw is not None:
        if not bw > 0:
            raise FlashsimError(f"bandwidth_bytes_per_s={bw!r} must be > 0")
        spec = LinkSpec(spec.name + " (overridden)", float(bw), spec.source)
    return spec


# --- the cluster ---------------------------------------------------------------------------------------------------
@dataclass
class LinkCounter:
    """Bytes and messages that went over one directed link src → dst."""
    src: int
    dst: int
    spec: LinkSpec
    bytes_sent: int = 0
    messages: int = 0


@dataclass
class SimDevice:
    """One device: its hardware preset and its own HBM/SRAM counters."""
    index: int
    hw: Hardware
    counters: Counters = field(default_factory=Counters)
    busy_s: float = 0.0


class Cluster:
    """P devices of one preset in a ring of links of one preset (chapter 13).

    >>> c = Cluster(4, device="h200", link="nvlink4")
    >>> seconds = c.send(0, 1, 1024); c.link_bytes()
    [1024, 0, 0, 0]
    """

    def __init__(self, world: int = 2, device="h200", link="nvlink4"):
        world = int(world)
        if world < 1:
            raise FlashsimError(f"world={world} must be >= 1 device")
        self.world = world
        self.hw = get_device(device)
        self.link = get_link(link)
        self.devices = [SimDevice(r, self.hw) for r in range(world)]
        self.links = {(r, (r + 1) % world): LinkCounter(r, (r + 1) % world, self.link)
                      for r in range(world)} if world > 1 else {}

    def send(self, src: int, dst: int, nbytes: int, tensor: str = "KV") -> float:
        """Move `nbytes` from src's HBM to dst's over the link src → dst; returns the transfer time in seconds."""
        key = (int(src), int(dst))
        if key not in self.links:
            raise FlashsimError(f"no link {src} → {dst}: the ring links r → r+1 (mod {self.world})")
        lk = self.links[key]
        lk.bytes_sent += int(nbytes)
        lk.messages += 1
        self.devices[src].counters.add_read(tensor, nbytes)     # the sender reads the block out of its HBM
        self.devices[dst].counters.add_write(tensor, nbytes)    # the receiver writes it into its HBM
        return nbytes / lk.spec.bandwidth_bytes_per_s

    def link_bytes(self) -> list[int]:
        """Bytes each device sent on its outgoing link (device r → r+1), one entry per device."""
        return [self.links[(r, (r + 1) % self.world)].bytes_sent if self.world > 1 else 0
                for r in range(self.world)]

    def link_messages(self) -> list[int]:
        return [self.links[(r, (r + 1) % self.world)].messages if self.world > 1 else 0 for r in range(self.world)]
