"""scripts/compare_runs.py: the before/after check of a restructuring finds a changed number."""
import importlib.util
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("compare_runs", ROOT / "scripts" / "compare_runs.py")
compare_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_runs)


def _run(tmp: Path, name: str, dcg: float, seconds: float, extra_row: bool = False) -> Path:
    d = tmp / name
    (d / "tables").mkdir(parents=True)
    (d / "figures").mkdir()
    rows = [{"method": "litseg", "dcg@10": dcg, "model_seconds": seconds}]
    if extra_row:
        rows.append({"method": "token", "dcg@10": 0.1, "model_seconds": 1.0})
    pd.DataFrame(rows).to_csv(d / "tables" / "05_table3.csv", index=False)
    return d


def test_timing_columns_are_not_compared_but_numbers_are(tmp_path, capsys):
    a = _run(tmp_path, "a", 0.5, 10.0)
    assert compare_runs.main([str(a), str(_run(tmp_path, "b", 0.5, 99.0))]) == 0
    assert "same (timing differs)" in capsys.readouterr().out
    assert compare_runs.main([str(a), str(_run(tmp_path, "c", 0.5000001, 10.0))]) == 1
    assert "DIFFERS" in capsys.readouterr().out
    assert compare_runs.main([str(a), str(_run(tmp_path, "d", 0.5, 10.0, extra_row=True))]) == 1
    assert "1 rows vs 2" in capsys.readouterr().out


def test_a_missing_table_is_reported(tmp_path, capsys):
    a = _run(tmp_path, "a", 0.5, 10.0)
    b = _run(tmp_path, "b", 0.5, 10.0)
    pd.DataFrame([{"x": 1}]).to_csv(b / "tables" / "06_new.csv", index=False)
    assert compare_runs.main([str(a), str(b)]) == 1
    assert "MISSING" in capsys.readouterr().out
    assert compare_runs.main([str(tmp_path / "nope"), str(b)]) == 2


def test_rows_in_another_order_are_reported_as_such(tmp_path, capsys):
    a = _run(tmp_path, "a", 0.5, 10.0, extra_row=True)
    b = tmp_path / "b"
    (b / "tables").mkdir(parents=True)
    (b / "figures").mkdir()
    pd.read_csv(a / "tables" / "05_table3.csv").iloc[::-1].to_csv(b / "tables" / "05_table3.csv", index=False)
    assert compare_runs.main([str(a), str(b)]) == 0
    assert "same rows (order differs)" in capsys.readouterr().out


def test_missing_values_in_rows_of_another_order(tmp_path, capsys):
    a = tmp_path / "a"
    b = tmp_path / "b"
    for d, rows in ((a, [{"m": "x", "v": None}, {"m": "y", "v": 1.0}]), (b, [{"m": "y", "v": 1.0}, {"m": "x", "v": None}])):
        (d / "tables").mkdir(parents=True)
        (d / "figures").mkdir()
        pd.DataFrame(rows).to_csv(d / "tables" / "t.csv", index=False)
    assert compare_runs.main([str(a), str(b)]) == 0
    assert "same rows (order differs)" in capsys.readouterr().out


def test_a_renamed_table_and_figure_are_compared_under_their_new_names(tmp_path, capsys):
    a = _run(tmp_path, "a", 0.5, 10.0)
    b = tmp_path / "b"
    (b / "tables").mkdir(parents=True)
    (b / "figures").mkdir()
    (a / "figures" / "06_fig.png").write_bytes(b"png")
    (b / "figures" / "05_fig.png").write_bytes(b"png")
    pd.read_csv(a / "tables" / "05_table3.csv").to_csv(b / "tables" / "07_table3.csv", index=False)
    assert compare_runs.main([str(a), str(b)]) == 1  # without the mapping: missing on both sides
    capsys.readouterr()
    assert compare_runs.main([str(a), str(b), "--renamed", "05_table3=07_table3", "--renamed", "06_fig=05_fig"]) == 0
    assert "same                   05_table3.csv -> 07_table3.csv" in capsys.readouterr().out
    # the moved table is still compared: a changed number under the new name differs
    pd.DataFrame([{"method": "litseg", "dcg@10": 0.6, "model_seconds": 10.0}]).to_csv(b / "tables" / "07_table3.csv",
                                                                                      index=False)
    assert compare_runs.main([str(a), str(b), "--renamed", "05_table3=07_table3", "--renamed", "06_fig=05_fig"]) == 1
    assert "DIFFERS" in capsys.readouterr().out
    for bad in ("05_table3", "=x", "x="):
        with pytest.raises(SystemExit, match="OLD=NEW"):
            compare_runs.main([str(a), str(b), "--renamed", bad])


def test_machine_columns_of_notebook_08_are_timing():
    cols = ["load_before", "load_avg_mean", "model_s_median", "dcg@10", "n_questions", "method"]
    assert compare_runs._timing_columns(pd.DataFrame(columns=cols)) == ["load_before", "load_avg_mean", "model_s_median"]
