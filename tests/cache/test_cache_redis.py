"""Shared tier against a real redis-server on a loopback port."""

import json
import shutil
import socket
import subprocess
import time

import numpy as np
import pytest
from helpers import EXAMPLES, mineru, read_journal
from PIL import Image

from mineru_cli.cache import ResultCache
from mineru_cli.cache.redis_tier import RedisTier
from mineru_cli.cache.similarity import pixel_sha256
from mineru_cli.cache.store import digest
from mineru_cli.config import MAX_CACHE_TTL_S

redis = pytest.importorskip("redis", reason="the redis client package is not installed")
REDIS_SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server binary not found (apt-get install redis-server)"
)
FP = "engine=test;v=1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_server():
    port = free_port()
    proc = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("redis-server did not start")
    yield proc, f"redis://127.0.0.1:{port}/0", client
    proc.kill()
    proc.wait()


def page(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (200, 300, 3), dtype=np.uint8), "RGB")


def test_shared_hits_across_two_cache_dirs(tmp_path, redis_server):
    _, url, _ = redis_server
    img = page(1)
    with ResultCache(tmp_path / "machine-a", redis_url=url) as a:
        a.store(img, pixel_sha256(img), FP, "a/x.png#0", {"blocks": [], "markdown": "from A"})
    warnings = []
    with ResultCache(tmp_path / "machine-b", redis_url=url, warn=warnings.append) as b:
        hit = b.lookup(img, pixel_sha256(img), FP)
        assert hit.kind == "hit" and hit.source == "a/x.png#0" and hit.payload["markdown"] == "from A"
    assert warnings == []
    # the Redis hit filled B's local tier: it now hits without Redis
    with ResultCache(tmp_path / "machine-b") as b:
        assert b.lookup(img, pixel_sha256(img), FP).kind == "hit"


def test_ttl_is_honoured(tmp_path, redis_server):
    _, url, client = redis_server
    img = page(2)
    with ResultCache(tmp_path / "a", redis_url=url, ttl_s=1) as a:
        a.store(img, pixel_sha256(img), FP, "p#0", {"blocks": [], "markdown": ""})
    key = RedisTier.key(FP, pixel_sha256(img))
    assert 0 < client.pttl(key) <= 1000
    time.sleep(1.2)
    assert client.get(key) is None
    with ResultCache(tmp_path / "b", redis_url=url) as b:
        assert b.lookup(img, pixel_sha256(img), FP) is None
    with ResultCache(tmp_path / "c", redis_url=url) as c:  # default TTL: 2 h
        c.store(img, pixel_sha256(img), FP, "p#0", {"blocks": [], "markdown": ""})
    assert 7190 <= client.ttl(key) <= 7200


def test_the_longest_cache_ttl_is_one_redis_keeps(tmp_path, redis_server):
    """MAX_CACHE_TTL_S, the longest --cache-ttl parse takes, is stored by a real Redis with that
    TTL; a longer one such as 2**70 s, which --cache-ttl took before, made Redis refuse every
    store (ERR value is not an integer or out of range): parse now refuses it before it starts
    (tests/test_config.py). Where between the two Redis's own limit lies depends on its version."""
    _, url, client = redis_server
    img = page(3)
    key = RedisTier.key(FP, pixel_sha256(img))
    warnings: list[str] = []
    with ResultCache(tmp_path / "a", redis_url=url, ttl_s=MAX_CACHE_TTL_S, warn=warnings.append) as a:
        a.store(img, pixel_sha256(img), FP, "p#0", {"blocks": [], "markdown": ""})
    assert warnings == [] and MAX_CACHE_TTL_S - 5 <= client.ttl(key) <= MAX_CACHE_TTL_S
    with ResultCache(tmp_path / "b", redis_url=url, ttl_s=2**70, warn=warnings.append) as b:
        b.store(page(4), pixel_sha256(page(4)), FP, "q#0", {"blocks": [], "markdown": ""})
    assert len(warnings) == 1 and "refuses writes" in warnings.pop()
    assert client.get(RedisTier.key(FP, pixel_sha256(page(4)))) is None


def test_redis_killed_mid_run_warns_once_and_continues(tmp_path, redis_server):
    proc, url, _ = redis_server
    warnings = []
    with ResultCache(tmp_path, redis_url=url, warn=warnings.append) as c:
        for s in range(3):
            img = page(s)
            assert c.lookup(img, pixel_sha256(img), FP) is None
            c.store(img, pixel_sha256(img), FP, f"p{s}", {"blocks": [], "markdown": str(s)})
        proc.kill()
        proc.wait()
        for s in range(3, 10):  # misses and stores go on locally
            img = page(s)
            assert c.lookup(img, pixel_sha256(img), FP) is None
            c.store(img, pixel_sha256(img), FP, f"p{s}", {"blocks": [], "markdown": str(s)})
        for s in range(10):
            img = page(s)
            assert c.lookup(img, pixel_sha256(img), FP).payload["markdown"] == str(s)
    assert len(warnings) == 1 and "local cache only" in warnings[0], warnings


@pytest.mark.parametrize("refusal", ["acl", "replica"])
def test_a_redis_that_refuses_writes_is_still_read(tmp_path, redis_server, refusal):
    """A shared tier that answers reads but refuses writes (a user whose ACL allows GET only, a
    read-only replica) was switched off at the first refused store, its hits with it: now one
    warning says so, stores stop, and what it holds is still served."""
    _, url, client = redis_server
    img, other = page(20), page(21)
    with ResultCache(tmp_path / "writer", redis_url=url) as a:
        a.store(img, pixel_sha256(img), FP, "a/x.png#0", {"blocks": [], "markdown": "from A"})
    if refusal == "acl":
        client.acl_setuser("reader", enabled=True, passwords=["+pw"], keys=["*"], commands=["+get", "+ping"])
        url = url.replace("redis://", "redis://reader:pw@")
    else:
        client.config_set("replica-read-only", "yes")
        client.replicaof("127.0.0.1", free_port())  # a replica of a master that never answers: it keeps its data
    warnings = []
    with ResultCache(tmp_path / "reader", redis_url=url, warn=warnings.append) as b:
        assert b.lookup(other, pixel_sha256(other), FP) is None
        b.store(other, pixel_sha256(other), FP, "b/y.png#0", {"blocks": [], "markdown": "from B"})
        hit = b.lookup(img, pixel_sha256(img), FP)
        assert hit is not None and hit.kind == "hit" and hit.payload["markdown"] == "from A"
    assert len(warnings) == 1 and "refuses writes" in warnings[0], warnings
    assert client.get(RedisTier.key(FP, pixel_sha256(other))) is None


def test_redis_down_from_the_start(tmp_path):
    warnings = []
    t = time.perf_counter()
    with ResultCache(tmp_path, redis_url=f"redis://127.0.0.1:{free_port()}/0", warn=warnings.append) as c:
        for s in range(5):
            img = page(s)
            assert c.lookup(img, pixel_sha256(img), FP) is None
            c.store(img, pixel_sha256(img), FP, f"p{s}", {"blocks": [], "markdown": ""})
        img = page(0)
        assert c.lookup(img, pixel_sha256(img), FP).kind == "hit"
    assert len(warnings) == 1
    assert time.perf_counter() - t < 10


def test_damaged_redis_value_is_a_miss(tmp_path, redis_server):
    _, url, client = redis_server
    img = page(3)
    client.set(RedisTier.key(FP, pixel_sha256(img)), b"\x00not json")
    with ResultCache(tmp_path, redis_url=url) as c:
        assert c.lookup(img, pixel_sha256(img), FP) is None


NOT_RESULTS = (
    "[]",  # JSON, not an object
    '{"blocks": []}',  # no markdown
    '{"blocks": [{"type": "text", "text": "x"}], "markdown": "x"}',  # a block without its box
    '{"blocks": [{"type": "text", "bbox": [0, 0, "a", 9]}], "markdown": ""}',
    '{"blocks": [], "markdown": "", "warnings": "one"}',
)


def shared_value(payload_json, page_id="other#0") -> str:
    """A value as RedisTier.put writes it, its checksum right, around any payload text."""
    dig = digest(payload_json) if isinstance(payload_json, str) else "0" * 64
    return json.dumps({"page_id": page_id, "payload": payload_json, "digest": dig, "width": 300, "height": 200})


@pytest.mark.parametrize("payload_json", NOT_RESULTS)
def test_a_shared_value_that_is_no_page_result_is_a_miss_and_not_copied(tmp_path, redis_server, payload_json):
    """A value whose checksum holds but whose payload is JSON of another shape (another
    program's, one written by hand): as a hit it failed its page on every run, and was copied
    into the local tier, where it failed the page after Redis had forgotten it too."""
    _, url, client = redis_server
    img = page(4)
    sha = pixel_sha256(img)
    client.set(RedisTier.key(FP, sha), shared_value(payload_json))
    warnings = []
    with ResultCache(tmp_path, redis_url=url, warn=warnings.append) as c:
        assert c.lookup(img, sha, FP) is None
        assert any("not a page result" in w for w in warnings), warnings
    with ResultCache(tmp_path) as c:  # nothing of it reached the local tier
        assert c.lookup(img, sha, FP) is None
    with ResultCache(tmp_path, redis_url=url) as c:  # the page parsed again replaces it
        c.store(img, sha, FP, "mine#0", {"blocks": [], "markdown": "mine"})
    with ResultCache(tmp_path / "other", redis_url=url) as c:
        assert c.lookup(img, sha, FP).payload["markdown"] == "mine"


@pytest.mark.parametrize(
    "field",
    [{"payload": 5}, {"page_id": 7}, {"payload": None}, {"width": float("inf")}],  # inf: 1e400 in the JSON
)
def test_a_shared_value_with_fields_of_another_type_is_a_miss(tmp_path, redis_server, field):
    _, url, client = redis_server
    img = page(5)
    value = json.loads(shared_value('{"blocks": [], "markdown": "x"}')) | field
    client.set(RedisTier.key(FP, pixel_sha256(img)), json.dumps(value))
    with ResultCache(tmp_path, redis_url=url, warn=lambda m: None) as c:
        assert c.lookup(img, pixel_sha256(img), FP) is None


def test_a_key_of_another_redis_type_is_a_miss_for_its_page_alone(tmp_path, redis_server):
    """A list (or hash, set, ...) under a page's key, another program's: GET answered WRONGTYPE,
    which switched the whole shared tier off as "unavailable" for the rest of the run, and for
    every run after (nothing was stored over it). Now it is that page's miss, the tier serves the
    other pages, and the page's result replaces the list."""
    _, url, client = redis_server
    shared, listed = page(40), page(41)
    with ResultCache(tmp_path / "a", redis_url=url) as a:
        a.store(shared, pixel_sha256(shared), FP, "a#0", {"blocks": [], "markdown": "shared"})
    client.rpush(RedisTier.key(FP, pixel_sha256(listed)), "another program's list")
    warnings: list[str] = []
    with ResultCache(tmp_path / "b", redis_url=url, warn=warnings.append) as b:
        assert b.lookup(listed, pixel_sha256(listed), FP) is None
        assert b.lookup(shared, pixel_sha256(shared), FP).payload["markdown"] == "shared"
        b.store(listed, pixel_sha256(listed), FP, "b#0", {"blocks": [], "markdown": "mine"})
    assert len(warnings) == 1 and "holds no page result (WRONGTYPE" in warnings[0], warnings
    with ResultCache(tmp_path / "c", redis_url=url) as c:
        assert c.lookup(listed, pixel_sha256(listed), FP).payload["markdown"] == "mine"


@pytest.mark.e2e
def test_parse_reparses_a_page_whose_shared_value_is_no_result(tmp_path, redis_server):
    """Through `mineru parse`: a shared value of another shape under a page's key is parsed
    again (it failed the page with cache_error, on every run and --retry-failed)."""
    _, url, client = redis_server
    (tmp_path / "in").mkdir()
    shutil.copy(EXAMPLES / "prose.png", tmp_path / "in" / "prose.png")
    args = ["--engine", "ocr", "--cache-url", url]
    r = mineru("parse", "in", "--out", "a.jsonl", "--cache-dir", "ca", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (first,) = read_journal(tmp_path / "a.jsonl")
    (key,) = client.keys("*")
    value = json.loads(client.get(key))
    payload = json.loads(value["payload"])
    for block in payload["blocks"]:
        del block["bbox"]  # a layout this version does not write
    client.set(key, shared_value(json.dumps(payload), value["page_id"]))
    r = mineru("parse", "in", "--out", "b.jsonl", "--cache-dir", "cb", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (again,) = read_journal(tmp_path / "b.jsonl")
    assert again["status"] == "ok" and again["cache"] == {"status": "miss"}
    assert again["blocks"] == first["blocks"] and again["markdown"] == first["markdown"]
    assert "not a page result" in r.stderr


@pytest.mark.e2e
def test_under_ray_the_shared_tier_s_warnings_reach_the_user(tmp_path, redis_server):
    """A Ray worker handed its cache warnings over through a list it replaced with a new one at
    its first answer, while the cache went on appending to the old one: every warning after that
    was lost (a Redis that went away mid-run, one that refuses writes, a damaged entry), where
    the local executor says each once."""
    pytest.importorskip("ray")
    _, url, client = redis_server
    client.config_set("maxmemory", 1)  # full, evicting nothing: the page's store is refused
    (tmp_path / "in").mkdir()
    shutil.copy(EXAMPLES / "slide.png", tmp_path / "in" / "slide.png")
    args = ["--engine", "ocr", "--cache-url", url, "--cpus", "1", "--executor", "ray"]
    r = mineru("parse", "in", "--out", "o.jsonl", "--cache-dir", "c", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [x["status"] for x in read_journal(tmp_path / "o.jsonl")] == ["ok"]
    assert r.stderr.count(f"warning: shared cache {url} refuses writes (") == 1, r.stderr


def test_redis_down_with_no_local_cache_says_the_run_has_none(tmp_path):
    """A local cache it cannot use and a Redis it cannot reach: the second warning said
    "continuing with the local cache only" of a run that had none."""
    (tmp_path / "file").write_text("not a folder\n")
    warnings: list[str] = []
    url = f"redis://127.0.0.1:{free_port()}/0"
    with ResultCache(tmp_path / "file", redis_url=url, warn=warnings.append) as c:
        img = page(0)
        assert c.lookup(img, pixel_sha256(img), FP) is None
    assert len(warnings) == 2 and "running without it" in warnings[0], warnings
    assert warnings[1].startswith(f"shared cache {url} unavailable (") and warnings[1].endswith(
        "; running without a cache"
    ), warnings


def test_a_password_in_the_cache_url_is_never_shown(tmp_path, redis_server):
    """A Redis that needs a password: the warnings of a run (a wrong password, a full Redis that
    refuses writes), doctor's line and its fix, and the refusal of a mistyped URL repeated the
    URL whole, password and all, into cron mails and --log-json logs. Now it is `***`."""
    from mineru_cli.config import RunConfig
    from mineru_cli.core import SetupError
    from mineru_cli.doctor import redis_checks

    _, url, client = redis_server
    client.acl_setuser("app", enabled=True, passwords=["+s3cret-pw"], keys=["*"], commands=["+@all"])
    client.config_set("maxmemory", 1)  # full, evicting nothing: stores are refused
    client.config_set("requirepass", "s3cret-pw")  # the default user's password too: ":wr0ng-pw@" is refused
    wrong, right = url.replace("redis://", "redis://:wr0ng-pw@"), url.replace("redis://", "redis://app:s3cret-pw@")
    warnings: list[str] = []
    img = page(30)
    for i, u in enumerate((wrong, right)):
        with ResultCache(tmp_path / str(i), redis_url=u, warn=warnings.append) as c:
            assert c.lookup(img, pixel_sha256(img), FP) is None
            c.store(img, pixel_sha256(img), FP, "p#0", {"blocks": [], "markdown": ""})
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith(f"shared cache {url.replace('redis://', 'redis://:***@')} unavailable (")
    assert warnings[1].startswith(f"shared cache {url.replace('redis://', 'redis://app:***@')} refuses writes")
    checks = redis_checks(wrong) + redis_checks(right)
    assert [c.status for c in checks] == ["fail", "ok"], checks
    assert checks[1].detail.startswith(url.replace("redis://", "redis://app:***@")), checks
    with pytest.raises(SetupError) as refused:
        RunConfig.from_options(["x"], cache_url="redis//:s3cret-pw@localhost:6379/0")  # "redis:" lost its colon
    said = [*warnings, *(f"{c.detail} {c.fix}" for c in checks), str(refused.value)]
    assert not [s for s in said if "s3cret" in s or "wr0ng" in s], said


@pytest.mark.e2e
def test_a_server_that_requires_a_password_reached_without_one_is_said_so(tmp_path, redis_server):
    """A Redis with requirepass, --cache-url without a password: the run's warning and doctor's
    line gave Redis's own words (`AuthenticationError: HELLO must be called with the client already
    authenticated, otherwise the HELLO AUTH <user> <pass> option can be used ...`), which do not
    say that a password is missing nor where it goes. Now they say so, with the URL to give (its
    password as ***); the run goes on with its local cache as for any other Redis failure, and a
    wrong password keeps Redis's words (it was given)."""
    from mineru_cli.doctor import redis_checks

    _, url, client = redis_server
    client.config_set("requirepass", "s3cret-pw")
    (tmp_path / "in").mkdir()
    shutil.copy(EXAMPLES / "prose.png", tmp_path / "in" / "prose.png")
    r = mineru("parse", "in", "--out", "o.jsonl", "--engine", "ocr", "--cache-url", url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [x["status"] for x in read_journal(tmp_path / "o.jsonl")] == ["ok"]
    with_password = url.replace("redis://", "redis://:***@")
    said = (
        f"warning: shared cache {url} unavailable (the server requires a password: give it in --cache-url, "
        f"{with_password} with the password for ***); continuing with the local cache only"
    )
    assert r.stderr.count(said) == 1 and "HELLO" not in r.stderr, r.stderr
    (check,) = redis_checks(url)
    assert (check.status, check.detail) == ("fail", f"{url}: the server requires a password"), check
    assert check.fix == f"give it in --cache-url, {with_password} with the password for ***", check
    (wrong,) = redis_checks(url.replace("redis://", "redis://:wr0ng@"))
    assert "unreachable (AuthenticationError: invalid username-password pair" in wrong.detail, wrong
    for bare in (f"{url}?protocol=2", url.replace("redis://", "redis://default@")):  # NOAUTH; a user alone
        warnings: list[str] = []
        with ResultCache(tmp_path / "c", redis_url=bare, warn=warnings.append) as c:
            assert c.lookup(page(40), pixel_sha256(page(40)), FP) is None
        assert len(warnings) == 1 and "(the server requires a password: give it in --cache-url" in warnings[0]
    assert "redis://default:***@127.0.0.1:" in warnings[0], warnings
