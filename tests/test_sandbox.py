"""Sandboxed code execution (the code_exec tool of task=tool_calls): each status, truncation, the working directory,
processes that try to outlive their timeout, and what bubblewrap keeps the code from (files outside, a loopback
server)."""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from align_kit import sandbox
from align_kit.sandbox import SandboxResult, run_python

HAS_BWRAP = sandbox._bwrap_works()
needs_bwrap = pytest.mark.skipif(
    not HAS_BWRAP, reason=f"bubblewrap unusable here ({sandbox._BWRAP_PROBE.get('why')}); run make install-sandbox"
)
MODES = [pytest.param("bwrap", marks=needs_bwrap), "process"]
# The code under test prints its call's token (from its own environment), so a test can look for survivors itself.
PRINT_TOKEN = "import os\nprint(os.environ['ALIGN_KIT_SANDBOX_TOKEN'], flush=True)\n"


@pytest.fixture
def token(monkeypatch) -> str:
    """A part of the next call's token, known before it runs: its survivors can be looked for even where the code was
    killed before it printed the token (a loaded machine may start it late)."""
    value = uuid.uuid4()
    monkeypatch.setattr("align_kit.sandbox.uuid", SimpleNamespace(uuid4=lambda: value))
    return value.hex


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    monkeypatch.setenv("ALIGN_KIT_SANDBOX", request.param)
    return request.param


def survivors(token: str) -> list[int]:
    """Live processes that hold `token` anywhere in their command line or environment (read from /proc here)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # a zombie has exited; only its parent's wait is missing
            blobs = [Path(f"/proc/{pid}/{part}").read_bytes() for part in ("cmdline", "environ")]
        except OSError:
            continue
        if any(token.encode() in blob for blob in blobs):
            found.append(int(pid))
    return found


def test_ok_returns_the_output_and_names_the_isolation(mode):
    result = run_python("print(6 * 7)\nimport sys\nprint('err', file=sys.stderr)")
    assert isinstance(result, SandboxResult)
    assert (result.status, result.output) == ("ok", "42\nerr\n")
    expected = "bubblewrap: " if mode == "bwrap" else "process only: "
    assert result.isolation.startswith(expected) and "\n" not in result.isolation


def test_code_runs_on_the_callers_python_and_standard_library(mode):
    # The interpreter's own installation is what the sandbox binds, not whatever python3 the system has.
    result = run_python("import json, sys\nprint(sys.version)\nprint(json.__file__)")
    version, json_file = result.output.splitlines()
    assert version == sys.version
    assert json_file.startswith(os.path.realpath(sys.base_prefix))


def test_crash_on_an_exception_or_a_non_zero_exit(mode):
    result = run_python("print('before')\nraise ValueError('boom')")
    assert result.status == "crash"
    assert result.output.startswith("before\nTraceback (most recent call last):\n")
    assert result.output.endswith("ValueError: boom\n")
    assert 'File "main.py", line 2' in result.output  # the model's own line, not the runner's
    assert run_python("import sys\nsys.exit(3)").status == "crash"
    assert run_python("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)").status == "crash"
    # code that SIGKILLs itself is a crash, not the OOM killer (which killed nothing meanwhile)
    assert run_python("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)").status == "crash"
    assert run_python("import sys\nsys.exit(0)").status == "ok"


def test_timeout_kills_an_infinite_loop_not_before_the_deadline(mode, token):
    # Only the floor is asserted: how long after the deadline the kill lands depends on the machine's load.
    start = time.monotonic()
    result = run_python(PRINT_TOKEN + "while True:\n    pass", timeout_s=0.5)
    assert result.status == "timeout"  # the loop never ends: it was killed
    assert time.monotonic() - start >= 0.5
    assert survivors(token) == []


def test_oom_when_the_memory_limit_is_hit(mode):
    result = run_python("x = bytearray(512 * 2**20)", memory_mb=64)
    assert result.status == "oom"
    assert result.output.endswith("MemoryError\n")
    # Memory filled bit by bit and still held when the error surfaces: still oom, whatever printing manages.
    assert run_python("hoard = []\nwhile True:\n    hoard.append(' ' * 4096)", memory_mb=64).status == "oom"
    # 16 MiB fits under 64 MiB: the limit is the one asked for, not something far smaller.
    assert run_python("x = bytearray(16 * 2**20)\nprint(len(x))", memory_mb=64).output == f"{16 * 2**20}\n"


def test_output_is_cut_to_the_limit(mode):
    assert run_python("print('a' * 10000)", output_limit=100).output == "a" * 100
    assert run_python("print('é' * 1000)", output_limit=10).output == "é" * 10  # characters, not bytes
    # A flood far beyond any pipe buffer neither blocks the code nor fills memory: it finishes ok.
    result = run_python("import sys\nfor _ in range(2000):\n    sys.stdout.write('x' * 10000)", output_limit=5)
    assert (result.status, result.output) == ("ok", "xxxxx")


def test_working_directory_is_fresh_and_gone_afterwards(mode, tmp_path, monkeypatch):
    tmp_root = tmp_path / "tmp"
    tmp_root.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_root))
    first = run_python("import os\nopen('left.txt', 'w').write('x')\nprint(os.getcwd())\nprint(os.listdir('.'))")
    assert first.status == "ok", first.output
    cwd, listing = first.output.splitlines()
    assert listing == "['left.txt']"
    second = run_python("import os\nprint(os.listdir('.'))")
    assert second.output == "[]\n"
    stuck = run_python("open('big.txt', 'w').write('x' * 1000)\nwhile True:\n    pass", timeout_s=0.3)
    assert stuck.status == "timeout"
    assert list(tmp_root.iterdir()) == []  # nothing left in the temp folder either way, a timeout included
    if mode == "process":
        assert cwd.startswith(str(tmp_root)) and not os.path.exists(cwd)
    else:
        assert cwd == "/sandbox"


def test_children_that_leave_the_session_do_not_outlive_the_timeout(mode, token):
    # Children that call setsid escape a process-group kill; the token sweep still finds them.
    code = PRINT_TOKEN + (
        "import subprocess, time\n"
        "for _ in range(3):\n"
        "    subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    while True:\n"
        "        pass\n"
        "time.sleep(60)\n"
    )
    result = run_python(code, timeout_s=1.0)
    assert result.status == "timeout"
    assert survivors(token) == []


def test_background_process_is_killed_when_the_code_exits_ok(mode, token):
    result = run_python(PRINT_TOKEN + "import subprocess\nsubprocess.Popen(['sleep', '60'], start_new_session=True)")
    assert result.status == "ok"
    assert survivors(token) == []


FORK_BOMB = PRINT_TOKEN + (
    "while True:\n"
    "    try:\n"
    "        os.fork()\n"
    "    except OSError:\n"
    "        pass\n"  # RLIMIT_NPROC said no: keep trying, as a bomb would
)


@pytest.mark.parametrize(
    "bomb_mode",
    [
        pytest.param("bwrap", marks=needs_bwrap),
        pytest.param(
            "process",
            marks=pytest.mark.skipif(
                os.geteuid() == 0,
                reason="the kernel never applies RLIMIT_NPROC to root: an uncapped fork bomb would swamp the machine "
                "(the process-only mode's kill of every process is tested with a session-leaving process tree)",
            ),
        ),
    ],
)
def test_fork_bomb_is_capped_and_does_not_outlive_the_timeout(bomb_mode, monkeypatch, token):
    monkeypatch.setenv("ALIGN_KIT_SANDBOX", bomb_mode)
    result = run_python(FORK_BOMB, timeout_s=1.0)
    assert result.status == "timeout"  # the bomb never ends: the call returned because it was killed
    assert survivors(token) == []


@needs_bwrap
def test_bwrap_code_cannot_read_or_write_outside_its_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGN_KIT_SANDBOX", "bwrap")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    outside = tmp_path / "out"
    outside.mkdir()
    outside.chmod(0o777)  # even a folder anyone may write to stays out of reach
    host_tmp = Path("/tmp", f"align_kit_sandbox_probe_{os.getpid()}_{time.monotonic_ns()}")
    code = (
        "import os\n"
        "def attempt(what, action):\n"
        "    try:\n"
        "        action()\n"
        "        print(what, 'allowed')\n"
        "    except OSError as error:\n"
        "        print(what, 'refused', type(error).__name__)\n"
        f"attempt('read', lambda: open({str(secret)!r}).read())\n"
        f"attempt('write', lambda: open({str(outside / 'x.txt')!r}, 'w').write('x'))\n"
        "attempt('usr', lambda: open('/usr/x.txt', 'w').write('x'))\n"
        "attempt('home', lambda: os.listdir('/root/.ssh'))\n"
        "attempt('own', lambda: open('mine.txt', 'w').write('x'))\n"
        f"attempt('tmp', lambda: open({str(host_tmp)!r}, 'w').write('x'))\n"
    )
    result = run_python(code)
    assert result.status == "ok", result.output
    lines = result.output.splitlines()
    assert lines[0] == "read refused FileNotFoundError"  # tmp_path is not even mounted inside
    assert lines[1] == "write refused FileNotFoundError"
    assert lines[2].startswith("usr refused")  # read-only bind
    assert lines[3] == "home refused FileNotFoundError"
    assert lines[4] == "own allowed"
    assert lines[5] == "tmp allowed"  # its own /tmp, a tmpfs: the host's /tmp does not get the file
    assert not host_tmp.exists()
    assert list(outside.iterdir()) == [] and secret.read_text() == "do not read"


class LoopbackServer:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.sendall(b"hello")
            conn.close()

    def close(self):
        self.stop.set()
        self.thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def server():
    srv = LoopbackServer()
    yield srv
    srv.close()


def connect_code(port: int) -> str:
    return (
        "import socket\n"
        "try:\n"
        f"    s = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        "    print('reached', s.recv(5).decode())\n"
        "except OSError as error:\n"
        "    print('unreachable', type(error).__name__)\n"
    )


@needs_bwrap
def test_bwrap_code_cannot_reach_a_loopback_server_outside(server, monkeypatch):
    monkeypatch.setenv("ALIGN_KIT_SANDBOX", "bwrap")
    result = run_python(connect_code(server.port))
    assert result.output == "unreachable ConnectionRefusedError\n"  # its own loopback, where nothing listens
    assert server.accepted == 0


def test_process_mode_is_not_network_isolated_and_says_so(server, monkeypatch):
    # The control for the test above: the same code does reach the server without bubblewrap.
    monkeypatch.setenv("ALIGN_KIT_SANDBOX", "process")
    result = run_python(connect_code(server.port))
    assert result.output == "reached hello\n"
    assert server.accepted == 1
    assert "NO filesystem or network isolation" in result.isolation


def test_missing_bwrap_falls_back_with_one_log_line(monkeypatch, caplog):
    monkeypatch.delenv("ALIGN_KIT_SANDBOX", raising=False)
    monkeypatch.setattr(sandbox, "_BWRAP_PROBE", {"ok": False, "why": "no bwrap on PATH"})
    monkeypatch.setattr(sandbox, "_LOGGED", set())
    with caplog.at_level(logging.INFO, logger="align_kit"):
        results = [run_python("print(1)") for _ in range(2)]
    assert [r.status for r in results] == ["ok", "ok"]
    assert results[0].isolation.startswith("process only: ")
    lines = [r.getMessage() for r in caplog.records if "sandbox isolation" in r.getMessage()]
    assert len(lines) == 1 and "process only" in lines[0] and "no bwrap on PATH" in lines[0]
    monkeypatch.setenv("ALIGN_KIT_SANDBOX", "bwrap")
    with pytest.raises(RuntimeError, match="ALIGN_KIT_SANDBOX=bwrap but bubblewrap does not run here"):
        run_python("print(1)")


# (keyword arguments, what the one error must say): non-finite, out of range, booleans and strings.
BAD_LIMITS = [
    ({"timeout_s": math.nan}, "timeout_s=nan (set a number of seconds > 0 and <= 86400)"),
    ({"timeout_s": math.inf}, "timeout_s=inf "),
    ({"timeout_s": -math.inf}, "timeout_s=-inf "),
    ({"timeout_s": -1}, "timeout_s=-1 "),
    ({"timeout_s": 0}, "timeout_s=0 "),
    ({"timeout_s": -0.0}, "timeout_s=-0.0 "),
    ({"timeout_s": 86400.5}, "timeout_s=86400.5 "),
    ({"timeout_s": True}, "timeout_s=True "),
    ({"timeout_s": "5"}, "timeout_s='5' "),
    ({"timeout_s": None}, "timeout_s=None "),
    ({"memory_mb": math.nan}, "memory_mb=nan (set an integer >= 1 and <= 1048576)"),
    ({"memory_mb": 0}, "memory_mb=0 "),
    ({"memory_mb": -5}, "memory_mb=-5 "),
    ({"memory_mb": True}, "memory_mb=True "),
    ({"memory_mb": 64.0}, "memory_mb=64.0 "),  # a float size would reach the runner as "67108864.0"
    ({"memory_mb": 2**20 + 1}, "memory_mb=1048577 "),
    ({"output_limit": -1}, "output_limit=-1 (set an integer >= 0)"),
    ({"output_limit": math.inf}, "output_limit=inf "),
    ({"output_limit": False}, "output_limit=False "),
    ({"output_limit": 2.5}, "output_limit=2.5 "),
]


@pytest.mark.parametrize(("kwargs", "fragment"), BAD_LIMITS, ids=[repr(kwargs) for kwargs, _ in BAD_LIMITS])
def test_non_finite_or_out_of_range_limits_are_refused_before_anything_runs(kwargs, fragment, monkeypatch):
    monkeypatch.setattr(sandbox.subprocess, "Popen", lambda *a, **k: pytest.fail("a process was started"))
    with pytest.raises(ValueError) as error:
        run_python("print(1)", **kwargs)
    message = str(error.value)
    assert message.startswith("run_python: ") and fragment in message and "\n" not in message


def test_every_bad_limit_is_named_in_the_one_error():
    with pytest.raises(ValueError) as error:
        run_python("print(1)", timeout_s=math.nan, memory_mb=0, output_limit=-1)
    assert [part.split("=")[0] for part in str(error.value).removeprefix("run_python: ").split("; ")] == [
        "timeout_s",
        "memory_mb",
        "output_limit",
    ]


def test_whole_seconds_and_a_zero_output_limit_are_accepted(mode):
    result = run_python("print(1)", timeout_s=3, output_limit=0)
    assert (result.status, result.output) == ("ok", "")


def test_an_unknown_mode_is_refused(monkeypatch):
    monkeypatch.setenv("ALIGN_KIT_SANDBOX", "docker")
    with pytest.raises(ValueError, match="use auto, bwrap or process"):
        run_python("print(1)")


# Each escape leaves the call's process tree in a child that becomes `sleep 30` under an argv[0] marker of the
# test's own, with an empty environment (no token), then waits until it sees that process before going on.
ESCAPE = """
import os, shutil, signal, time
MARKER = {marker!r}
def become_sleep(ignore_term):
    os.setsid()
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stays ignored across the exec
    os.execve(shutil.which('sleep'), [MARKER, '30'], {{}})
def seen():
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            if open(f'/proc/{{pid}}/cmdline', 'rb').read().startswith(MARKER.encode()):
                return True
        except OSError:
            pass
    return False
"""
ESCAPES = {
    "setsid_exec": "if os.fork() == 0:\n    become_sleep(False)\n",
    "double_fork": (
        "if os.fork() == 0:\n"
        "    if os.fork() == 0:\n"
        "        become_sleep(False)\n"
        "    os._exit(0)\n"  # the middle process dies: the grandchild is an orphan
        "os.wait()\n"
    ),
    "ignores_sigterm": "if os.fork() == 0:\n    become_sleep(True)\n",
}
WAIT_SEEN = "deadline = time.monotonic() + 5\nwhile not seen() and time.monotonic() < deadline:\n    time.sleep(0.01)\n"


def escape_code(marker: str, how: str, then: str) -> str:
    return ESCAPE.format(marker=marker) + ESCAPES[how] + WAIT_SEEN + "print('seen' if seen() else 'not seen')\n" + then


@pytest.fixture
def marker():
    name = f"align_kit_escapee_{uuid.uuid4().hex}"
    yield name
    for pid in survivors(name):  # a failed test leaves no sleeper behind
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("how", sorted(ESCAPES))
def test_a_process_that_detaches_and_drops_the_token_dies_with_the_call(mode, marker, how):
    result = run_python(escape_code(marker, how, ""), timeout_s=10)
    assert (result.status, result.output) == ("ok", "seen\n")
    assert survivors(marker) == []


@pytest.mark.slow
def test_detached_processes_die_at_the_timeout_too(mode, marker):
    # The code detaches two processes within its first 5 s (WAIT_SEEN), then sleeps: 10 s leave a loaded machine
    # room to start them, and the call still ends at the timeout (the sleep would take 60 s).
    code = escape_code(marker, "setsid_exec", "") + ESCAPES["double_fork"] + WAIT_SEEN + "time.sleep(60)\n"
    result = run_python(code, timeout_s=10.0)
    assert (result.status, result.output) == ("timeout", "seen\n")
    assert survivors(marker) == []


def test_code_that_kills_its_own_process_group_leaves_nothing_either(mode, marker):
    # Its group is its own: the kill does not reach the supervisor, which still sweeps the escapee.
    result = run_python(escape_code(marker, "setsid_exec", "import signal\nos.killpg(0, signal.SIGKILL)\n"))
    assert result.output == "seen\n" and result.status != "ok"
    assert survivors(marker) == []


@pytest.mark.slow
def test_a_stopped_supervisor_is_killed_after_the_deadline_with_what_kept_the_token(monkeypatch, token):
    # What the process mode cannot promise (the code runs as the caller's user): once the code stops or kills its
    # own supervisor, only processes that kept the token are found. run_python still returns, as a timeout, after
    # the grace it gives a supervisor (a floor: no load makes it shorter). 5 s leave a loaded machine room to start
    # the code and stop the supervisor before the deadline.
    monkeypatch.setenv("ALIGN_KIT_SANDBOX", "process")
    code = PRINT_TOKEN + "import signal\nos.kill(os.getppid(), signal.SIGSTOP)\nwhile True:\n    pass\n"
    start = time.monotonic()
    result = run_python(code, timeout_s=5.0)
    assert result.status == "timeout"
    assert time.monotonic() - start >= 5.0 + sandbox.SUPERVISOR_GRACE_S
    assert survivors(token) == []


def test_a_sigkill_while_the_kernels_oom_killer_killed_something_is_oom(mode, monkeypatch):
    counts = iter([7, 8])  # /proc/vmstat's oom_kill before the call, then after it: one kill meanwhile
    monkeypatch.setattr("align_kit.sandbox._oom_kills", lambda: next(counts))
    assert run_python("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)").status == "oom"
