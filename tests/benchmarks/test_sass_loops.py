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


def listing_with_control(instrs, base=0x100):
    """cuobjdump -sass lines with the second word on the line below, as the tool prints them: each entry of
    ``instrs`` is (instruction, stall count, write scoreboard, wait mask)."""
    out = []
    for k, (i, stall, write_sb, wait_mask) in enumerate(instrs):
        word = (stall | (write_sb << 5) | (7 << 8) | (wait_mask << 11)) << 41
        out.append(f"        /*{base + 16 * k:04x}*/                   {i} ;   /* 0x0000000000000000 */")
        out.append(f"                                                        /* 0x{word:016x} */")
    return "\n".join(out)


#: one trip (0x100-0x1a0) whose mask block (0x140-0x170) is jumped over when not needed, and whose mbarrier wait
#: retries out of line (a forward branch that leaves the trip, so nothing is skipped for it)
CONTROLLED = [("SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR20], R152", 1, 7, 0),   # 0x100
              ("@!P0 BRA 0x300", 10, 7, 0),                                    # 0x110: the retry, outside
              ("HGMMA.64x128x16.F32 R24, gdesc[UR24], RZ, !UPT, gsb0", 1, 7, 0),
              ("@!P1 BRA 0x180", 5, 7, 0),                                     # 0x130: skips the mask
              ("ISETP.GE.AND P3, PT, R39, R216, PT", 1, 7, 0),               # 0x140
              ("FSEL R24, R24, RZ, !P3", 1, 7, 0),
              ("FSEL R25, R25, RZ, !P3", 1, 7, 0),
              ("FSEL R26, R26, RZ, !P3", 1, 7, 0),                              # 0x170
              ("MUFU.EX2 R1, R24", 8, 2, 0),                                    # 0x180
              ("MUFU.EX2 R2, R25", 2, 3, 0b100),                                # waits on scoreboard 2
              ("@P0 BRA 0x100", 5, 7, 0)]                                       # 0x1a0: the back edge


def test_control_codes_decoded_from_the_second_word():
    rows = S.parse_full(listing_with_control(CONTROLLED))
    assert [p for _, _, p, _ in rows][:4] == [False, True, False, True]          # predicated branches marked
    mufu = rows[9][3]
    assert (mufu.stall, mufu.write_sb, mufu.read_sb, mufu.wait_mask) == (2, 3, 7, 0b100)
    assert S.parse_full(SASS)[0][3] is None                                       # no second word, no control


def test_static_cycles_on_the_straight_path():
    lp = S.main_loop(listing_with_control(CONTROLLED))
    # the mask block 0x140-0x170 is jumped over; the retry branch leaves the trip and skips nothing
    assert [lp.addresses[k] for k in lp.straight_path()] == [0x100, 0x110, 0x120, 0x130, 0x180, 0x190, 0x1a0]
    st = lp.static_cycles()
    assert st["straight_instructions"] == 7 and st["static_cycles"] == 1 + 10 + 1 + 5 + 8 + 2 + 5
    assert st["mufu_stall_cycles"] == 10 and st["mufu_back_to_back"] == 1
    assert st["stall_by_opcode"]["BRA"] == 20
    s = lp.summary()
    assert s["static_cycles"] == 32 and "32 static cycles (MUFU 10, 1 back to back" in S.describe("k", s)


def test_a_listing_without_control_words_reports_no_static_cycles():
    lp = S.main_loop(SASS)
    assert lp.static_cycles() is None and "static_cycles" not in lp.summary()


def test_a_trip_split_into_two_loops_gives_the_shorter_one_not_a_span_over_both():
    """A kernel with a masked and an unmasked copy of its trip: a retry path that branches back over both holds
    twice the wgmmas, but it is not innermost."""
    trip = ["WARPGROUP.ARRIVE", "HGMMA.64x128x16.F32 R24, gdesc[UR24], RZ, !UPT, gsb0", "MUFU.EX2 R1, R2"]
    sass = listing(trip + ["FSEL R1, R1, RZ, !P3", "@P0 BRA 0x100"]              # 0x100-0x140, masked
                   + trip + ["@P0 BRA 0x150"]                                  # 0x150-0x180, unmasked
                   + ["EXIT", "@P1 BRA 0x100"])                                # 0x1a0: a retry back over both
    lp = S.main_loop(sass)
    assert (lp.start, lp.end) == (0x150, 0x180)


def test_a_retry_block_that_branches_back_unconditionally_is_not_the_trip():
    """A forward kernel's trip (0x100-0x130, a conditional back edge) and an mbarrier retry block after EXIT that
    jumps back unconditionally to a point inside it: the retry's span holds more wgmmas, the trip is still chosen,
    and its straight path does not run into the retry code."""
    sass = listing(["WARPGROUP.ARRIVE",                                       # 0x100
                    "HGMMA.64x128x16.F32 R24, gdesc[UR24], RZ, !UPT, gsb0",  # 0x110
                    "@!P2 BRA 0x170",                                         # 0x120: the wait's retry, outside
                    "@P0 BRA 0x100",                                          # 0x130: the back edge
                    "HGMMA.64x64x16.F32 R88, R148, gdesc[UR12].tnspB, R88",  # 0x140: the epilogue
                    "HGMMA.64x64x16.F32 R88, R148, gdesc[UR12].tnspB, R88",
                    "EXIT",                                                   # 0x160
                    "SYNCS.PHASECHK.TRANS64.TRYWAIT P2, [UR20], R8",          # 0x170: the retry
                    "BRA 0x110"])                                             # 0x180
    lp = S.main_loop(sass)
    assert (lp.start, lp.end) == (0x100, 0x130) and lp.straight_path() == [0, 1, 2, 3]
