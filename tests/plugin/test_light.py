"""Loading the plugin, and a pytest session that certifies nothing, import neither torch, triton nor hypothesis."""

import subprocess
import sys

HEAVY = ("torch", "triton", "hypothesis")


def test_loading_the_plugin_and_the_testing_package_stays_light():
    code = (
        "import sys, specverify.pytest_plugin, specverify.testing, specverify.testing.session; "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_a_session_that_certifies_nothing_stays_light(pytester):
    pytester.makepyfile(
        f"""
        import sys

        def test_nothing_heavy(specverify_options):
            assert specverify_options["seed"] == 0
            assert [m for m in {HEAVY[:2]!r} if m in sys.modules] == []
        """
    )
    # hypothesis' own pytest plugin may load hypothesis: it is left out to see what ours loads
    result = pytester.runpytest_subprocess("-p", "no:hypothesispytest", "-p", "no:randomly", "-p", "no:xdist")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["specverify: level=quick seed=0 *(reproduce: --specverify-seed=0 *)"])
