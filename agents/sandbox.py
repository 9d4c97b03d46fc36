"""The sandbox: strategy code from outside the package runs in a process of its own.

Python cannot hide an object from other code in the same process: a strategy running beside the
simulation can walk up its caller's frames to the developer process and the evaluator, follow the
compliance mailbox through SimPy's process generators to the compliance agent, or ask the
garbage collector for every object alive, and find the protected attribute each way. The library's
own strategies are trusted to use only what they are handed; a strategy written elsewhere (a
plugin, :mod:`biasleak.agents.strategies.plugin`) runs here instead.

The parent side, :class:`Sandbox`, starts a fresh interpreter (``python -m
biasleak.agents.sandbox``) and talks to it over its standard input and output, one call at a
time. The child (:func:`serve`) holds only what a developer may hold: the public view of the data,
the base model's predictions, its own random stream (a generator with the same state as the one
the in-process path would hand it) and the plugin's own configuration. It never receives the
protected attribute, so walking frames or the garbage collector there finds nothing, and the
bundled data files refuse to load in it (:func:`is_sandboxed`; the loaders in
:mod:`biasleak.sim.datasets` check it).

The wire
    Every message is a frame: an 8-byte big-endian length, then the payload. The parent sends
    pickles (the child trusts its parent). The child answers with something the parent can read
    without running any of the child's code: a JSON header, followed by the raw bytes of the
    numeric arrays it names (booleans, integers and floats only). A pickle from the child could
    run code in the parent when read, so none is ever read there.

Limits
    The child runs as the same user as the parent, so a determined plugin can still open the
    installed data files by path, a user's CSV file, or anything else the user can read (and,
    where the kernel allows a process to read a sibling's memory through ``/proc``, even that):
    Python cannot hide a file from code it runs. A deployment that runs plugins it does not
    trust must run them as another user without read access to the data, or in a container; the
    sandbox removes every route through the simulation's own objects and API.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import weakref
from typing import IO, Any, Final

import numpy as np

__all__ = [
    "SANDBOX_ENV",
    "STARTUP_SECONDS",
    "PluginError",
    "Sandbox",
    "is_sandboxed",
    "read_reply",
    "serve",
    "write_reply",
]

SANDBOX_ENV: Final = "BIASLEAK_SANDBOX"
"""Environment variable set to ``"1"`` in a sandboxed child process."""
STARTUP_SECONDS: Final = 120.0
"""Least wall-clock seconds for the first call: a fresh interpreter imports the plugin."""
MAX_FRAME: Final = 1 << 34
"""Largest frame accepted (16 GiB): a larger announced length is a broken or hostile peer."""
ARRAY_DTYPES: Final = frozenset(
    {"|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f4", "<f8"}
)
"""The array types a child may send: fixed-size numbers, little-endian."""
NO_REPLY: Final = "the plugin process gave no reply within {seconds:g} seconds; it was stopped"
EXITED: Final = "the plugin process exited without a reply (exit code {code})"
MALFORMED: Final = "the plugin process sent a malformed reply: {why}"

_HEADER = struct.Struct(">Q")
_sandboxed = False


class PluginError(RuntimeError):
    """Strategy code in a sandbox failed, or the sandbox itself did (no reply, a bad reply)."""


def is_sandboxed() -> bool:
    """Whether this process is a sandboxed child (then the bundled data files do not load)."""
    return _sandboxed or os.environ.get(SANDBOX_ENV) == "1"


# -- frames and replies --------------------------------------------------------------------------


def _write_frame(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> bytes | None:
    """The next frame, or None at the end of the stream."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    if size > MAX_FRAME:
        raise PluginError(MALFORMED.format(why=f"a frame of {size} bytes"))
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return payload


def write_reply(value: Any) -> bytes:
    """Encode ``value`` (JSON values and numeric arrays) as the payload of a child's reply."""
    arrays: list[np.ndarray] = []

    def pack(item: Any) -> Any:
        if isinstance(item, np.ndarray):
            arr = np.ascontiguousarray(item)
            if arr.dtype.str not in ARRAY_DTYPES and arr.dtype.kind in "biuf":
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            if arr.dtype.str not in ARRAY_DTYPES:
                raise TypeError(f"cannot send an array of dtype {arr.dtype} (numbers only)")
            arrays.append(arr)
            return {"__array__": len(arrays) - 1, "dtype": arr.dtype.str, "shape": arr.shape}
        if isinstance(item, dict):
            return {str(k): pack(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [pack(v) for v in item]
        if isinstance(item, np.generic):
            return item.item()
        return item

    header = json.dumps(pack(value)).encode("utf-8")
    return b"".join([_HEADER.pack(len(header)), header, *(a.tobytes() for a in arrays)])


def read_reply(payload: bytes) -> Any:
    """Decode a child's reply without running any of its code (no pickle is read)."""
    try:
        (size,) = _HEADER.unpack_from(payload)
        header = json.loads(payload[_HEADER.size : _HEADER.size + size].decode("utf-8"))
    except (struct.error, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise PluginError(MALFORMED.format(why=f"unreadable header ({err})")) from None
    offset = _HEADER.size + size

    def unpack(item: Any) -> Any:
        nonlocal offset
        if isinstance(item, dict) and "__array__" in item:
            dtype, shape = item.get("dtype"), item.get("shape")
            if dtype not in ARRAY_DTYPES or not isinstance(shape, list):
                raise PluginError(MALFORMED.format(why=f"an array of type {dtype!r}"))
            if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
                raise PluginError(MALFORMED.format(why=f"an array of shape {shape!r}"))
            count = math.prod(shape)
            nbytes = count * np.dtype(dtype).itemsize
            if offset + nbytes > len(payload):
                raise PluginError(MALFORMED.format(why="an array longer than the reply"))
            arr = np.frombuffer(payload, dtype=dtype, count=count, offset=offset)
            offset += nbytes
            return arr.reshape(shape).copy()
        if isinstance(item, dict):
            return {k: unpack(v) for k, v in item.items()}
        if isinstance(item, list):
            return [unpack(v) for v in item]
        return item

    try:
        return unpack(header)
    except RecursionError:
        raise PluginError(MALFORMED.format(why="nested too deeply")) from None


# -- the parent side -----------------------------------------------------------------------------


def _pump(stream: IO[bytes], inbox: queue.Queue[bytes | Exception | None]) -> None:
    """Move the child's frames into ``inbox`` (None at its end), so reads can time out."""
    try:
        while True:
            frame = _read_frame(stream)
            inbox.put(frame)
            if frame is None:
                return
    except Exception as err:  # a broken stream ends the conversation
        inbox.put(err)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End a child process: close its input (it exits), and kill it if it does not."""
    if process.poll() is None:
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=2.0)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
    for stream in (process.stdin, process.stdout):
        if stream is not None and not stream.closed:
            stream.close()


_NATIVE_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
"""Environment variables that native libraries read for their thread counts when they load."""


class Sandbox:
    """A child process running one strategy; :meth:`call` forwards one method call to it.

    ``timeout`` (wall-clock seconds) bounds every call: a child that does not answer in time is
    stopped and the call raises :class:`PluginError`, as it does when the strategy raises there.
    """

    def __init__(self, *, timeout: float) -> None:
        self.timeout = float(timeout)
        """Wall-clock seconds a call may take."""
        # one native thread: the strategy runs beside its world, which has the cores
        env = {**os.environ, SANDBOX_ENV: "1", **{name: "1" for name in _NATIVE_THREADS}}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "biasleak.agents.sandbox"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
            start_new_session=True,  # a Ctrl-C reaches the parent, which stops the child
        )
        self._inbox: queue.Queue[bytes | Exception | None] = queue.Queue()
        assert self._process.stdout is not None
        threading.Thread(
            target=_pump, args=(self._process.stdout, self._inbox), daemon=True
        ).start()
        self._finalizer = weakref.finalize(self, _stop, self._process)

    @property
    def alive(self) -> bool:
        """Whether the child process is still running."""
        return self._process.poll() is None

    def call(self, method: str, *args: Any, timeout: float | None = None) -> dict[str, Any]:
        """Run ``method(*args)`` in the child; return its decoded reply (``result``, and
        ``estimate`` when the strategy's estimate changed), or raise :class:`PluginError`.

        ``timeout`` overrides :attr:`timeout` for this call."""
        seconds = self.timeout if timeout is None else float(timeout)
        if not self.alive:
            raise PluginError(EXITED.format(code=self._process.returncode))
        try:
            assert self._process.stdin is not None
            _write_frame(self._process.stdin, pickle.dumps((method, args), protocol=5))
        except (OSError, ValueError):
            self.close()
            raise PluginError(EXITED.format(code=self._process.returncode)) from None
        try:
            frame = self._inbox.get(timeout=seconds)
        except queue.Empty:
            self.close()
            raise PluginError(NO_REPLY.format(seconds=seconds)) from None
        if isinstance(frame, Exception) or frame is None:
            self.close()
            if isinstance(frame, PluginError):
                raise frame
            raise PluginError(EXITED.format(code=self._process.returncode))
        reply = read_reply(frame)
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            raise PluginError(MALFORMED.format(why="not a reply"))
        if not reply["ok"]:
            raise PluginError(str(reply.get("error")))
        return reply

    def close(self) -> None:
        """Stop the child (idempotent)."""
        self._finalizer()


# -- the child side ------------------------------------------------------------------------------


def _handler(strategy: Any) -> dict[str, Any]:
    """The calls a child answers, bound to its strategy."""
    from biasleak.agents.strategies import Stop, Submit, Wait

    def next_action(now: float) -> dict[str, Any]:
        action = strategy.next_action(now)
        if isinstance(action, Submit):
            return {
                "type": "submit",
                "predictions": np.asarray(action.predictions),
                "metric": action.metric,
                "prepare_hours": action.prepare_hours,
                "label": action.label,
            }
        if isinstance(action, Wait):
            return {"type": "wait", "until": action.until}
        if isinstance(action, Stop):
            return {"type": "stop", "reason": action.reason}
        raise TypeError(f"unknown action {type(action).__name__}")

    return {
        "next_action": next_action,
        "receive_answer": strategy.receive_answer,
        "on_answer": strategy.on_answer,
        "on_refusal": strategy.on_refusal,
        "report": strategy.report,
    }


def _estimate(strategy: Any, sent: int) -> dict[str, Any] | None:
    """The strategy's estimate when it changed since version ``sent``."""
    estimate = getattr(strategy, "estimate", None)
    version = getattr(strategy, "estimate_version", 0)
    if estimate is None or version == sent:
        return None
    probability = estimate.probability
    return {
        "version": version,
        "attribute": np.asarray(estimate.attribute),
        "confidence": np.asarray(estimate.confidence),
        "models_used": estimate.models_used,
        "method": estimate.method,
        "probability": None if probability is None else np.asarray(probability),
    }


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """The child's loop: build the strategy, then answer one call per frame until the end."""
    global _sandboxed
    _sandboxed = True
    os.environ[SANDBOX_ENV] = "1"
    from biasleak.agents.strategies.plugin import start_plugin

    handlers: dict[str, Any] = {}
    strategy: Any = None
    sent = 0
    while True:
        frame = _read_frame(requests)
        if frame is None:
            return
        method, args = pickle.loads(frame)
        try:
            if method == "start":
                strategy = start_plugin(*args)
                handlers = _handler(strategy)
                result = None
            elif method in handlers:
                result = handlers[method](*args)
            else:
                raise ValueError(f"unknown call {method!r}")
            estimate = _estimate(strategy, sent)
            if estimate is not None:
                sent = estimate["version"]
            payload = write_reply({"ok": True, "result": result, "estimate": estimate})
        except BaseException as err:  # the plugin's failure is a reply, even sys.exit()
            payload = write_reply({"ok": False, "error": f"{type(err).__name__}: {err}"})
        _write_frame(replies, payload)


def _main() -> None:
    """Entry point of ``python -m biasleak.agents.sandbox``: keep the protocol's streams to
    itself, so that whatever the plugin prints goes to the standard error, not to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(requests, replies)


if __name__ == "__main__":
    _main()
