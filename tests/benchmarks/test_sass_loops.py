"""benchmarks/experiments/sass_loops.py: the main loop of a SASS listing (a made-up one here, in cuobjdump's format)
and what one trip of it costs."""
import pytest

from benchmarks.experiments import sass_loops as S


def listing(instrs, base=0x100):
    """cuobjdump -sass lines for ``instrs``, 16 bytes apart from ``base``."""
    return "\n".join(f"        /*{base + 16 * k:04x}*/                   {i} ;   /* 0x0000 */"
                     for k, i in enumerate(instrs))


#: a prologue, one trip (0x110-0x1e0) with an SS wgmma of N=80, an RS one and three barriers, then the out-of-line
#: retry of an mbarrier wait that branches back into the trip over a longer span
TRIP = ["SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR20], R152",          # 0x110
        "@!P0 BRA 0x200",
        "WARPGROUP.ARRIVE",
        "HGMMA.64x80x16.F32 R192, gdesc[UR8], RZ, !UPT",
        "HGMMA.64x80x16.F32 R192, gdesc[UR8], R192, gsb0",
        "WARPGROUP.DEPBAR.LE gsb0, 0x0",
        "MUFU.EX2 R1, R2",
        "STSM.16.MT88.4 [R3], R196",
        "HGMMA.64x128x16.F32 R88, R224, gdesc[UR16].tnspB, R88, gsb0",
        "MEMBAR.ALL.CTA",
        "BAR.SYNC.DEFER_BLOCKING 0x5, 0x100",
        "BAR.SYNC.DEFER_BLOCKING R3, 0xa0",
        "BAR.ARV R3, 0xa0",
        "@P0 BRA 0x110"]                                            # 0x1e0: the trip's back edge
SASS = listing(["MOV R1, c[0x0][0x28]"] + TRIP + ["EXIT", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR20], R152",
                                                   "@P0 BRA 0x130", "BRA 0x200"])


def test_main_loop_is_the_shortest_with_the_most_wgmmas():
    found = S.loops(SASS)
    assert [(lp.start, lp.end) for lp in found] == [(0x110, 0x1e0), (0x130, 0x210)]
    lp = S.main_loop(SASS)
    assert (lp.start, lp.end) == (0x110, 0x1e0) and len(lp.instrs) == len(TRIP)


def test_one_trip_counted():
    lp = S.main_loop(SASS)
    assert lp.query_rows() == 80                                    # the N of the trip's first wgmma
    s = lp.summary(lp.query_rows())
    assert s["hgmma"] == 3 and s["shapes"] == {"64x80x16": 2, "64x128x16": 1}
    assert s["barriers"] == ["SYNC 0x5/256", "SYNC R3/160", "ARV R3/160"]
    # two SS wgmmas read A (64x16) and B (80x16), the RS one only B (128x16), 2 bytes an element
    assert s["wgmma_shared_bytes"] == 2 * (2 * 64 * 16 + 2 * 80 * 16) + 2 * 128 * 16
    assert s["instructions"] == 14 and s["instructions_per_row"] == round(14 / 80, 2)
    assert (s["mufu"], s["shared_stores"], s["fences"], s["syncs"], s["wgmma_waits"]) == (1, 1, 1, 1, 1)
    line = S.describe("k.sass", s)
    assert "per row of 80" in line and "barriers 3 [SYNC 0x5/256" in line


def test_main_prints_one_line_per_file(tmp_path, capsys):
    path = tmp_path / "k.sass"
    path.write_text(SASS)
    assert S.main([f"{path}:auto", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "per row of 80" in out[0] and "per row" not in out[1]


def test_a_listing_without_wgmma_names_the_fix():
    with pytest.raises(ValueError, match="cuobjdump -sass"):
        S.main_loop(listing(["MOV R1, R2", "@P0 BRA 0x100"]))
