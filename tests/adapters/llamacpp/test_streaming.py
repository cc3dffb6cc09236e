"""The streaming harness's comparison of llama-server's streamed deltas with its response
(``specverify.fuzz.streaming.recorded_run`` / ``check_runs``), without a server. The server itself:
test_streaming_engine.py."""

import pytest


def test_recorded_runs_compare_text_and_result_and_check_their_arguments():
    from specverify.errors import InvalidArgument
    from specverify.fuzz.properties import PropertyFailure
    from specverify.fuzz.streaming import check_runs, recorded_run

    whole = recorded_run([([2, 3], "ab ")], ((2, 3), "limit", ""))
    events = recorded_run([([2], ""), ([3], "ab "), ([], "")], ((2, 3), "limit", ""))
    assert events.sizes == (1, 1, 0) and check_runs(whole, events) is events
    with pytest.raises(PropertyFailure, match=r"(?s)'text': 'ab ' != 'ab'.*Reproduce: seed 3"):
        check_runs(whole, recorded_run([([2], "ab"), ([3], "")], ((2, 3), "limit", "")), reproduce="seed 3")
    with pytest.raises(PropertyFailure, match=r"result: .*'limit'.*'word'"):
        check_runs(whole, recorded_run([([2, 3], "ab ")], ((2, 3), "word", "ab ")))
    with pytest.raises(InvalidArgument, match="deltas="):
        recorded_run(["ab"], None)
    with pytest.raises(InvalidArgument, match="reference="):
        check_runs(whole, "ab ")
