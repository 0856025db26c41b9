"""benchmarks/dashboard_latency.py --markdown-only: a recorded run's table comes back from its JSON alone (the
results folder keeps the JSON; the table is not stored beside it)."""
import json
from pathlib import Path

from benchmarks import dashboard_latency as D

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_the_table_is_rendered_from_the_recorded_json(capsys):
    recorded = sorted(RESULTS.glob("dashboard_latency_*.json"))[-1]
    data = json.loads(recorded.read_text())
    assert D.main(["--markdown-only", str(recorded)]) == 0
    table = capsys.readouterr().out
    assert table == D.markdown(data)
    assert table.startswith(f"# Dashboard latency, {data['date']}") and data["command"] in table
