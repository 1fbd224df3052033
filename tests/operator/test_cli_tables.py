"""The CLI's tables in a pipe or a file keep a 64-hex id on one line (issue #27 item 10): rich
folds at 80 columns when it cannot ask a terminal, and a folded id cannot be grepped or copied."""

from tenzro_operator.cli.common import kv_table

TASK = "0x" + "ab" * 32


def test_a_table_in_a_pipe_keeps_an_id_on_one_line(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    kv_table("run", [("task_id_bytes32", TASK), ("run_root", "0x" + "cd" * 32)])
    out = capsys.readouterr().out
    assert any(TASK in line for line in out.splitlines()), out
    assert max(len(line) for line in out.splitlines()) < 200  # the table's own width, not padded to 1000


def test_columns_still_wins(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    kv_table("run", [("task_id_bytes32", TASK)])
    assert not any(TASK in line for line in capsys.readouterr().out.splitlines())  # folded, as asked
