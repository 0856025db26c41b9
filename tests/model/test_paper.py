"""FA1 Fig. 2 reproduced (flashsim.model.paper; `flashsim paper`)."""
import pytest

from flashsim.model.simulator import traffic
from flashsim.model.paper import PAPER_FIG2_LEFT, PAPER_FIG2_MIDDLE_GB, fig2_left, fig2_middle, format_report


def test_fig2_middle_within_1_percent():
    rows = fig2_middle()
    assert [r["block_c"] for r in rows] == [64, 128, 256, 512]
    for r in rows:
        assert abs(r["hbm_bytes"] / 1e9 - PAPER_FIG2_MIDDLE_GB[r["block_c"]]) <= 0.01 * PAPER_FIG2_MIDDLE_GB[
            r["block_c"]]
        assert r["block_r"] == 64


def test_fig2_middle_setup_is_the_issue_setup():
    t = traffic("flash1", 1024, 64, block_c=64, batch=64, heads=16, dtype="fp16", stats_dtype="fp16",
                sram_bytes=1048576)
    assert t.hbm_bytes == fig2_middle()[0]["hbm_bytes"]
    n, d, tc = 1024, 64, 1024 // 64  # Algorithm 1: 2Nd + Tc·(3Nd + 4N) elements of 2 bytes, per head
    assert t.hbm_bytes == (2 * n * d + tc * (3 * n * d + 4 * n)) * 2 * 1024


@pytest.fixture(scope="module")
def left():
    return fig2_left(l2=True)


def test_fig2_left_standard_within_20_percent(left):
    std = left["standard"]
    assert std["eager_ops"] == "megatron2020"
    assert abs(std["hbm_gb"] / PAPER_FIG2_LEFT["standard"]["hbm_gb"] - 1) <= 0.20
    t = traffic("eager", 1024, 64, batch=64, heads=16, dtype="fp16", causal=True, backward=True, dropout_p=0.1,
                device="a100", eager_ops="megatron2020")
    assert t.hbm_bytes == std["hbm_bytes"]


def test_fig2_left_flashattention_reported_with_blocks_and_l2(left):
    fa = left["flashattention"]
    assert fa["algo"] == "flash1" and fa["block_r"] > 0 and fa["block_c"] > 0
    assert fa["paper_gb"] == 4.4
    # requested bytes count every re-read; behind the 40 MB L2 far fewer reach DRAM, near the paper's 4.4 GB
    assert fa["dram_gb"] < fa["hbm_gb"]
    assert abs(fa["dram_gb"] / 4.4 - 1) <= 0.25
    # FlashAttention moves ~an order of magnitude less than standard attention, as the figure says
    assert fa["dram_gb"] * 5 < left["standard"]["hbm_gb"]


def test_fig2_left_alternatives_bracket_the_paper(left):
    alt = {r["eager_ops"] or r["algo"]: r["hbm_gb"] for r in left["alternatives"]}
    assert alt["naive"] < PAPER_FIG2_LEFT["standard"]["hbm_gb"] < alt["pytorch"]


def test_format_report_prints_paper_numbers(monkeypatch, left):
    import flashsim.model.paper as paper
    monkeypatch.setattr(paper, "fig2_left", lambda l2=True: left)
    text = format_report()
    for s in ("6.85", "3.56", "1.91", "1.09", "40.3", "4.4", "Br=", "L2"):
        assert s in text
