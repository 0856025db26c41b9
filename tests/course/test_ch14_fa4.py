"""Chapter 14's three-kernel comparison (flashsim.course.ch14.fa4) read from the recorded run with FA4's column."""
from matplotlib.figure import Figure

from flashsim.course.ch14.fa4 import fa4_comparison, fa4_summary_text, plot_fa4_comparison
from flashsim.course.kit.results import load_result


def test_every_recorded_row_has_the_three_kernels_and_the_runs_own_label():
    run = load_result("attention_speed_fa4")
    cmp = fa4_comparison(run)
    v = run["versions"]
    assert cmp["label"] == f"{v['gpu']}, {v['date_utc'][:10]}"
    assert len(cmp["rows"]) == len(run["rows"]) == 16
    for r, raw in zip(cmp["rows"], run["rows"]):
        assert set(r["tflops"]) == {"ours", "cudnn", "fa4"}
        assert r["tflops"]["fa4"] == raw["tflops"]["fa4"]
        med, lo, hi = r["ours_over_fa4"]
        assert lo <= med <= hi and med == raw["ratio"]["fa4"]


def test_the_summary_is_written_from_the_numbers():
    cmp = fa4_comparison()
    fwd = [r["ours_over_fa4"][0] for r in cmp["rows"] if r["mode"] == "fwd"]
    text = fa4_summary_text(cmp)
    assert f"{min(fwd):.2f}–{max(fwd):.2f}× FlashAttention-4" in text
    assert cmp["label"] in text and "16/16 rows correct" in text


def test_a_run_without_fa4_gives_no_rows_and_a_figure_that_says_so():
    run = {"versions": {"gpu": "G", "date_utc": "2026-01-01"},
           "rows": [{"mode": "fwd", "dtype": "float16", "d": 64, "causal": False, "n": 1024,
                     "tflops": {"ours": 1.0, "cudnn": 1.0}, "ratio": {}}]}
    assert fa4_comparison(run) == {}
    assert fa4_summary_text({}) == "No recorded run with FlashAttention-4."
    assert isinstance(plot_fa4_comparison({}), Figure)


def test_the_figure_has_forward_and_backward():
    fig = plot_fa4_comparison()
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["forward", "backward"]
