"""Traffic's short repr and its table view (issue 25): readable units, one family; every field still in as_dict."""
import pytest

from flashsim.model.simulator import traffic
from flashsim.model.units import format_bytes, format_seconds


def test_repr_is_one_short_line_with_readable_units():
    t = traffic("flash2", 4096, 64, heads=16)
    r = repr(t)
    assert "\n" not in r and len(r) < 200 and "Br×Bc=256×64" in r and "272 MiB" in r and "µs" in r
    assert "read_bytes_by_tensor" not in r            # the 30-field wall is as_dict()'s, not the repr's


def test_table_view_for_notebooks():
    t = traffic("naive", 1024, 64, l2=True)
    tab = t.table()
    rows = dict((r[0], r[1]) for r in tab.rows)
    assert rows["HBM total"] == format_bytes(t.hbm_bytes) == "8.5 MiB" and "DRAM (L2 model)" in rows
    assert rows["read S"] == "2 MiB" and rows["roofline time"].endswith("memory-bound")
    assert t._repr_html_().startswith("<table>") and "HBM total" in t._repr_html_()


@pytest.mark.parametrize("x,text", [(0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (233472, "228 KiB"),
                                    (3 * 2**30, "3 GiB"), (float("nan"), "—"), (None, "—")])
def test_format_bytes(x, text):
    assert format_bytes(x) == text


@pytest.mark.parametrize("x,text", [(6.848e-05, "68.5 µs"), (0.0123, "12.3 ms"), (2.5, "2.5 s"),
                                    (3e-9, "3 ns"), (float("inf"), "—")])
def test_format_seconds(x, text):
    assert format_seconds(x) == text
