"""The kernel example and benchmark run end to end (slow: about half a minute each under the interpreter)."""

import pathlib
import runpy

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_kernel_adapters_example_runs(capsys):
    runpy.run_path(str(ROOT / "examples" / "kernel_adapters.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert out.count("[FAIL]") >= 5 and "impossible outcome reached" in out


@pytest.mark.slow
def test_benchmark_runs_on_a_small_batch(capsys):
    bench = runpy.run_path(str(ROOT / "benchmarks" / "bench_kernels.py"))
    bench["main"](["--batch", "64", "--vocab", "1000", "--repeats", "1", "--backend", "torch"])
    assert "bytes moved" in capsys.readouterr().out
