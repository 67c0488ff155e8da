"""RunConfig checks every option once, whichever way it is given (CLI strings or API values)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from mineru_cli.config import (
    LOAD_OPTIONS_OF,
    MAX_CACHE_TTL_S,
    PAGE_CHOICE_OPTIONS,
    FileKind,
    LoadOptions,
    OutputFormat,
    RunConfig,
    page_fingerprints,
)
from mineru_cli.core import SetupError
from mineru_cli.core.record import fingerprint


def test_api_values_are_taken_as_the_cli_would_take_them():
    c = RunConfig.from_options(
        ["x"],
        include="*.png",
        exclude=("a*", "b*"),
        formats="markdown",
        page_timeout="5",
        dpi="150",
        workers="1",
        max_worker_rss=1.5e9,
        cache_ttl="90s",
        shard="2/3",
    )
    assert c.include == ("*.png",) and c.exclude == ("a*", "b*")  # one glob, not its letters
    assert c.formats == frozenset({OutputFormat.MARKDOWN})
    assert (c.page_timeout, c.workers, c.max_worker_rss, c.cache_ttl) == (5.0, 1, 1_500_000_000, 90)
    assert c.load == LoadOptions(dpi=150) == RunConfig.from_options(["x"], dpi=150.0).load  # one fingerprint
    assert str(c.shard) == "2/3" and pickle.loads(pickle.dumps(c)) == c


def test_formats_may_come_comma_separated():
    """`-f markdown,layout` (as many tools take a list) was refused with a message from the
    option parser; each value of --format may now list several."""
    c = RunConfig.from_options(["x"], formats=["markdown,layout", "content-list"], out_dir="o")
    assert c.formats == frozenset({OutputFormat.MARKDOWN, OutputFormat.LAYOUT, OutputFormat.CONTENT_LIST})
    with pytest.raises(SetupError, match="--format 'pdf': choose from"):
        RunConfig.from_options(["x"], formats="markdown, pdf")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"max_worker_rss": -1}, "--max-worker-rss must be at least 0"),
        ({"max_worker_rss": "9" * 400}, "--max-worker-rss: not a size: '9{39}... is too large .use e.g. 500MB"),
        ({"max_worker_rss": "x" * 400}, "--max-worker-rss: not a size: 'x{39}... .use e.g. 500MB"),
        ({"dpi": 150.5}, "--dpi must be a whole number"),
        ({"dpi": 20}, "--dpi must be between 36 and 600"),
        ({"workers": True}, "--workers must be a whole number"),
        ({"page_timeout": "soon"}, "--page-timeout must be a number"),
        ({"crop_batch": 0}, "--crop-batch must be between 1 and 256"),
        ({"engine": "gpt"}, "--engine 'gpt': choose from auto, ocr, vlm"),
        ({"formats": ["markdown", "pdf"]}, "--format 'pdf': choose from markdown, content-list"),
        ({"gif_frames": "some"}, "--gif-frames 'some': choose from first, all"),
        ({"cache_ttl": "later"}, "--cache-ttl"),
        ({"cache_ttl": "0.5s"}, "--cache-ttl must be at least 1 second, not 0 .'0.5s' is 0 whole seconds"),
        ({"cache_ttl": "0"}, "--cache-ttl must be at least 1 second, not 0: give how long a result lives"),
        ({"cache_ttl": 0.5}, "--cache-ttl must be at least 1 second, not 0 .0.5 is 0 whole seconds"),
        ({"cache_ttl": float("nan")}, "--cache-ttl: not a duration: nan .use e.g. 90s"),
        ({"cache_ttl": "9" * 400}, "--cache-ttl '9999.* is too long"),
        ({"cache_ttl": float("inf")}, "--cache-ttl inf is too long"),
        ({"cache_ttl": float("-inf")}, "--cache-ttl must be at least 1 second, not -inf:"),
        ({"cache_ttl": -(2**2000)}, "--cache-ttl must be at least 1 second, not -inf:"),
        ({"cache_url": "localhost:6379"}, "--cache-url 'localhost:6379' is not a Redis URL"),
        ({"cache_url": 6379}, "--cache-url 6379 is not a Redis URL"),
        ({"model": 5}, "--model must be a path, not 5"),
        ({"cache_url": "redis://:6379/0"}, "is not a Redis URL"),
        ({"cache_url": "redis://host:port/0"}, "is not a Redis URL"),
        ({"colour": "red"}, "unknown option"),
        ({"shard": "3/2"}, "--shard"),
    ],
)
def test_a_bad_option_is_a_setup_error_naming_it(options, message):
    with pytest.raises(SetupError, match=message.replace("(", r"\(")):
        RunConfig.from_options(["x"], **options)


def test_cache_ttl_is_whole_seconds_of_a_value_parsed_once():
    """--cache-ttl is parsed once into its seconds and their whole part (it was parsed twice, the
    second time only to tell whether a fraction was cut off): a fraction is cut, a text or a
    number alike; a value past a float's range (400 digits on the command line) is refused as too
    long, where int() of its infinite seconds ended in an OverflowError traceback."""
    for given, seconds in [("90s", 90), ("2h", 7200), (90, 90), (1.5, 1), ("1.9", 1), ("0.25m", 15)]:
        assert RunConfig.from_options(["x"], cache_ttl=given).cache_ttl == seconds, given


def test_a_cache_ttl_no_tier_can_keep_is_refused_in_one_short_line():
    """Redis refuses an expiry past (2**63 - 1) // 1000 s less the time since 1970 (and a number
    past 2**63 as no integer), so a --cache-ttl of 2**70 s made every store of a run fail ("refuses
    writes"); the SQLite tier keeps no TTL. A TTL over MAX_CACHE_TTL_S is refused, and MAX_CACHE_TTL_S
    itself taken (test_cache_redis stores with it). The refusal repeated the value whole, 5,000
    digits of it: it shows its first 40 characters and "..."."""
    assert RunConfig.from_options(["x"], cache_ttl=MAX_CACHE_TTL_S).cache_ttl == MAX_CACHE_TTL_S
    assert RunConfig.from_options(["x"], cache_ttl=f"{MAX_CACHE_TTL_S // 86400}d").cache_ttl <= MAX_CACHE_TTL_S
    limit = "the shared tier (Redis) keeps a result at most 9,000,000,000,000,000 s"
    for given in (2**70, str(2**70), MAX_CACHE_TTL_S + 1, f"{MAX_CACHE_TTL_S // 86400 + 1}d", 2**2000, 1e300):
        with pytest.raises(SetupError, match="is too long") as refused:
            RunConfig.from_options(["x"], cache_ttl=given)
        assert limit in str(refused.value), str(refused.value)
    for given in ("9" * 5000, "x" * 5000):
        with pytest.raises(SetupError) as refused:
            RunConfig.from_options(["x"], cache_ttl=given)
        message = str(refused.value)
        assert f"{given!r}"[:40] + "..." in message and len(message) < 200 and "\n" not in message, message


@pytest.mark.parametrize("spec", ["0/2", "3/2", "2", "a/b", "1/0", ""])
def test_a_bad_shard_is_a_setup_error(spec):
    with pytest.raises(SetupError, match="--shard"):
        RunConfig(inputs=("x",), shard=spec)


ENGINE = {"name": "ocr", "version": "1", "options": {"lang": "en"}}


def test_default_load_options_keep_every_kind_s_fingerprint():
    """The fingerprint hashed all the load options for every file: at their defaults each kind's
    is that same hash, so a journal or cache made before it was per kind resumes and serves."""
    before = fingerprint(ENGINE, dataclasses.asdict(LoadOptions()))
    assert page_fingerprints(ENGINE, LoadOptions()) == {kind: before for kind in FileKind}


@pytest.mark.parametrize(
    "option, value, kinds",
    [
        ("dpi", 150, {FileKind.PDF}),
        ("pdf_max_side", 2000, {FileKind.PDF}),
        ("text_layer", "off", {FileKind.PDF}),
        ("pdf_renderer", 1, {FileKind.PDF}),
        ("gif_frames", "all", set()),  # which frames are pages, not how a page is made
        ("max_page_pixels", 1_000_000, set(FileKind)),
        ("bomb_pixels", 10_000_000, set(FileKind)),
    ],
)
def test_a_load_option_changes_the_fingerprint_of_the_files_it_makes(option, value, kinds):
    base = page_fingerprints(ENGINE, LoadOptions())
    changed = page_fingerprints(ENGINE, LoadOptions(**{option: value}))
    assert {kind for kind in FileKind if changed[kind] != base[kind]} == kinds


def test_every_load_option_makes_some_kind_of_file():
    """A new load option left out of LOAD_OPTIONS_OF would be in no fingerprint at all, unless it
    only chooses which pages a file has (PAGE_CHOICE_OPTIONS)."""
    made = set().union(*LOAD_OPTIONS_OF.values())
    assert made | PAGE_CHOICE_OPTIONS == {f.name for f in dataclasses.fields(LoadOptions)}
    assert not made & PAGE_CHOICE_OPTIONS


@pytest.mark.parametrize(
    "url",
    [
        "redis://:ab/s3cret@localhost:6379/0",  # a base64 password's "/", not escaped as %2F
        "redis://app:ab/s3cret@localhost:6379/0",
        "redis://:ab/s3/cret@localhost/0",
        "redis//:ab/s3cret@localhost:6379/0",  # "redis:" lost its colon
    ],
)
def test_a_refused_cache_url_never_shows_a_password_holding_a_slash(url):
    """A password with an unescaped "/" (base64 passwords hold them) makes the URL no Redis URL,
    and its refusal repeated it whole, password and all: the password's end was taken for the
    host's. Now everything before the last "@" ahead of the query is masked after its first ":"."""
    with pytest.raises(SetupError) as refused:
        RunConfig.from_options(["x"], cache_url=url)
    assert "is not a Redis URL" in str(refused.value) and "s3" not in str(refused.value), refused.value
