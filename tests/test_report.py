"""The run summary's arithmetic."""


def test_stage_times_sum_pages_and_share_the_workers_time():
    from mineru_cli.report import StageTimes

    st = StageTimes()
    st.add({"load": 1.0, "engine": 3.0, "engine.layout": 1.0, "engine.ocr": 2.0, "total": 4.0})
    st.add({"load": 1.0, "cache": 0.5, "total": 1.5})
    got = st.as_dict(wall=5.0, workers=2)
    assert list(got) == ["render", "cache", "engine", "engine.layout", "engine.ocr"]
    assert got["render"] == {"seconds": 2.0, "share": 0.2} and got["engine"]["share"] == 0.3
