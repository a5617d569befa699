"""Python over libhoprelay's C ABI (hoprelay/client.h), with ctypes only.

Publish into a hoprelay pipeline with a :class:`Producer` and consume from it with a
:class:`Consumer`::

    import hoprelay

    with hoprelay.Consumer("/etc/hoprelay/topology.toml", "sink") as consumer:
        with consumer.recv(timeout=5.0) as msg:      # raises hoprelay.Timeout
            handle(msg.origin, msg.seq, msg.data)    # msg.data: a view of the slot

    with hoprelay.Producer("/etc/hoprelay/topology.toml", "head") as producer:
        seq = producer.send(b"hello")
        buf = producer.reserve(5)                    # zero copy: registered memory
        buf[:] = b"world"
        producer.commit(5)
    # leaving the block closed the producer: flush, then the end-of-stream mark

The library is found through the environment variable ``HOPRELAY_LIBRARY`` (a path) if it
is set, else where ``cmake --install`` put it beside this module (a prefix of one's own), else
as ``libhoprelay.so.1`` by the dynamic loader. Its major version must be 1.

Conventions (those of the C library):

* Timeouts are in seconds (``int`` or ``float``). ``None`` waits as long as it takes, ``0``
  never waits (the call raises :class:`Timeout` with status ``EAGAIN`` when it would have
  to). They are rounded up to whole milliseconds. ``None`` waits in slices of 0.2 s, so that
  Ctrl-C (KeyboardInterrupt) and other signal handlers get through; a finite timeout is one
  library call, and signals are handled when it returns (but Producer()'s wait for its head
  is in slices too).
* Errors raise :class:`HoprelayError` (a subclass per status, e.g. :class:`Timeout`,
  :class:`NodeError`), carrying ``.status``, ``.name`` and the library's own explanation.
* Threads: a handle (a Producer or a Consumer, with the Messages it returned) is used by one
  thread at a time; the library takes no lock. Different handles may be used from different
  threads at once: the GIL is released during every library call. This module refuses a
  second thread entering a handle that is busy (``RuntimeError``) rather than let the
  library's state be corrupted; it does not queue it.
* Progress: the library has no thread of its own; it moves data, acknowledgements and
  reconnections only inside its calls. An application that does not block in ``recv``,
  ``send``, ``reserve`` or ``flush`` polls ``fileno()`` (readable when there is work, e.g. with
  ``select``/``selectors``) and calls ``process()`` then.
* Zero copy: :attr:`Message.data` is a read-only ``memoryview`` of the slot the message
  landed in (no copy); it is valid until the message is released and must not be used after
  that (copy with ``bytes(msg.data)`` to keep it). :meth:`Producer.reserve` returns a writable
  ``memoryview`` of the library's registered send buffer, which must not be touched after
  :meth:`Producer.commit`. The views this module handed out are released (any use raises
  ``ValueError``) at release, commit and close; slices or other views made from them are
  not, and must not outlive them.
"""

import ctypes
import math
import operator
import os
import threading
import time
import weakref
from collections import deque

__all__ = [
    "HoprelayError", "InvalidArgument", "ConfigError", "NodeError", "TooBig", "Timeout",
    "Refused", "OriginInUse", "VersionError", "StateError", "Unavailable", "InternalError", "ClosedError",
    "Producer", "Consumer", "Message", "Outcome", "Drop", "version", "strerror", "library_path",
    "OK", "EINVAL", "ECONFIG", "ENODE", "ETOOBIG", "ETIMEDOUT", "EAGAIN", "EREFUSED",
    "EVERSION", "ESTATE", "EUNAVAILABLE", "EINTERNAL", "EORIGIN", "SEND_MORE", "MESSAGE_END", "MESSAGE_COPY",
    "LOG_DEBUG", "LOG_INFO", "LOG_WARN", "LOG_ERROR",
]

# ---- constants of client.h ----------------------------------------------------------------

VERSION_MAJOR = 1  # HOPRELAY_CLIENT_VERSION_MAJOR of the header this module mirrors
VERSION_MINOR = 10

OK = 0
EINVAL = -1
ECONFIG = -2
ENODE = -3
ETOOBIG = -4
ETIMEDOUT = -5
EAGAIN = -6
EREFUSED = -7
EVERSION = -8
ESTATE = -9
EUNAVAILABLE = -10
EINTERNAL = -11
EORIGIN = -12

LOG_DEBUG = 1
LOG_INFO = 2
LOG_WARN = 3
LOG_ERROR = 4

SEND_MORE = 0x1
MESSAGE_END = 0x1
MESSAGE_COPY = 0x2  # since 1.8: reassembled from chunks into a copy

_INT_MAX = 2**31 - 1
_SLICE_MS = 200  # timeout=None: the library is called with this timeout, again and again

# ---- the library ----------------------------------------------------------------------------

def _library_path():
    """HOPRELAY_LIBRARY; else the library installed with this module (cmake --install writes
    its path into _installed.py, so that a venv pointed at a prefix of one's own loads that
    prefix's); else the soname, as the dynamic linker finds it."""
    if os.environ.get("HOPRELAY_LIBRARY"):
        return os.environ["HOPRELAY_LIBRARY"]
    try:
        from hoprelay._installed import LIBRARY  # pylint: disable=import-outside-toplevel
        if os.path.exists(LIBRARY):
            return LIBRARY
    except ImportError:  # a source tree: not installed
        pass
    return "libhoprelay.so.1"


library_path = _library_path()
try:
    _lib = ctypes.CDLL(library_path)
except OSError as e:
    raise ImportError(
        "hoprelay: cannot load the C library %r (%s): install libhoprelay1, or set "
        "HOPRELAY_LIBRARY to the path of libhoprelay.so.1" % (library_path, e)) from e

_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


class _ProducerOptions(ctypes.Structure):
    """struct hoprelay_producer_options."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("version_major", ctypes.c_uint16),
        ("version_minor", ctypes.c_uint16),
        ("origin", ctypes.c_uint32),
        ("first_seq", ctypes.c_uint64),
        ("connect_timeout_ms", ctypes.c_int),
        ("log", _LOG_FN),
        ("log_user", ctypes.c_void_p),
        ("log_level", ctypes.c_int),
        ("on_outcome", ctypes.c_void_p),  # an _OUTCOME_FN, or None
        ("outcome_user", ctypes.c_void_p),
        ("run_head", ctypes.c_int),  # since 1.4
        ("tls_cert", ctypes.c_char_p),  # since 1.10
        ("tls_key", ctypes.c_char_p),
        ("tls_ca", ctypes.c_char_p),
    ]

    def __init__(self):
        # hoprelay_producer_options_init() is static inline in the header: its defaults.
        super().__init__(ctypes.sizeof(_ProducerOptions), VERSION_MAJOR, VERSION_MINOR,
                         0, 0, 30000, _LOG_FN(), None, LOG_INFO, None, None, 0,
                         None, None, None)


class _ConsumerOptions(ctypes.Structure):
    """struct hoprelay_consumer_options."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("version_major", ctypes.c_uint16),
        ("version_minor", ctypes.c_uint16),
        ("log", _LOG_FN),
        ("log_user", ctypes.c_void_p),
        ("log_level", ctypes.c_int),
        ("state_dir", ctypes.c_char_p),  # since 1.1
        ("tls_cert", ctypes.c_char_p),  # since 1.10
        ("tls_key", ctypes.c_char_p),
        ("tls_ca", ctypes.c_char_p),
    ]

    def __init__(self):
        # hoprelay_consumer_options_init()'s defaults.
        super().__init__(ctypes.sizeof(_ConsumerOptions), VERSION_MAJOR, VERSION_MINOR,
                         _LOG_FN(), None, LOG_INFO, None, None, None, None)


def _tls_options(options, tls, who):
    """tls=(cert, key, ca) into the options (libhoprelay 1.10); None: as a library that
    knows no TLS options sees them (the topology's tls applies)."""
    if tls is None:
        if version() < (1, 10):
            options.struct_size = type(options).tls_cert.offset
        return
    try:
        cert, key, ca = tls
    except (TypeError, ValueError):
        raise ValueError("%s(tls=%r): a (cert, key, ca) tuple of PEM file paths" % (who, tls)) from None
    if version() < (1, 10):
        raise VersionError(EVERSION, "%s(tls=...): libhoprelay %d.%d has no TLS options (1.10 "
                           "and later)" % ((who,) + version()))
    options.tls_cert, options.tls_key, options.tls_ca = (os.fsencode(p) for p in (cert, key, ca))


class _Message(ctypes.Structure):
    """struct hoprelay_message."""
    _fields_ = [
        ("origin", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("seq", ctypes.c_uint64),
        ("data", ctypes.c_void_p),
        ("length", ctypes.c_size_t),
        ("internal_", ctypes.c_void_p),
    ]


_DROP_REASONS = ("stage_drop", "stage_error", "too_large_for_peer", "peer_down",
                 "incomplete", "reassembly_full")


class _OutcomeCounts(ctypes.Structure):
    """struct hoprelay_outcome_counts."""
    _fields_ = [
        ("delivered", ctypes.c_uint64),
        ("dropped", ctypes.c_uint64),
        ("repeat", ctypes.c_uint64),
        ("partial", ctypes.c_uint64),
        ("by_reason", ctypes.c_uint64 * (len(_DROP_REASONS) + 1)),
        ("spooled", ctypes.c_uint64),  # since 1.9 (filled through the size: 0 before)
    ]


class _Drop(ctypes.Structure):
    """struct hoprelay_drop."""
    _fields_ = [("reason", ctypes.c_int), ("node", ctypes.c_char_p), ("detail", ctypes.c_char_p)]


_OUTCOME_RECORDS = 3  # HOPRELAY_OUTCOME_RECORDS


class _Outcome(ctypes.Structure):
    """struct hoprelay_outcome."""
    _fields_ = [
        ("origin", ctypes.c_uint32),
        ("seq", ctypes.c_uint64),
        ("status", ctypes.c_int),
        ("reason", ctypes.c_int),
        ("partial", ctypes.c_int),
        ("drops", ctypes.c_uint32),
        ("n_drops", ctypes.c_uint32),
        ("drop", _Drop * _OUTCOME_RECORDS),
        # Since 1.9: read only from a library that fills them (_SPOOLED_OUTCOMES).
        ("spooled", ctypes.c_uint32),
        ("spooled_at", ctypes.c_char_p),
        ("spooled_for", ctypes.c_char_p),
    ]


_OUTCOME_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_Outcome))
_STATUSES = ("delivered", "dropped", "repeat")  # hoprelay_outcome_status


def _reason_name(reason):
    return _DROP_REASONS[reason - 1] if 1 <= reason <= len(_DROP_REASONS) else "unknown"


class Drop:
    """Where and why a node gave a message up: `reason` ('stage_error', ...), `node` (its
    name) and `detail` (its words, '' if none)."""
    __slots__ = ("reason", "node", "detail")

    def __init__(self, reason, node, detail):
        self.reason, self.node, self.detail = reason, node, detail

    def __eq__(self, other):
        return isinstance(other, Drop) and (self.reason, self.node, self.detail) == (
            other.reason, other.node, other.detail)

    def __repr__(self):
        return "Drop(%r, %r, %r)" % (self.reason, self.node, self.detail)


class Outcome:
    """What became of one message (docs/client.md, "Outcomes"), passed to a Producer's
    `on_outcome`: `origin`, `seq`; `status` 'delivered' (on every branch it was routed to),
    'dropped' (given up somewhere) or 'repeat' (not sent: the head had taken that sequence
    number); for 'dropped', `reason` (the main one, as in :meth:`Producer.outcomes`),
    `partial` (delivered on some branches, dropped on others), `drops` (how many places gave
    it up) and `records` (a list of :class:`Drop`, the first few of them); `spooled` (since
    libhoprelay 1.9: how many spools it waits in, delivered from there once their branch takes
    it; 0 otherwise), and the first one's node and branch, `spooled_at` and `spooled_for`
    (None without). A plain copy: it may be kept."""
    __slots__ = ("origin", "seq", "status", "reason", "partial", "drops", "records", "spooled",
                 "spooled_at", "spooled_for")

    def __init__(self, c):
        self.origin = c.origin
        self.seq = c.seq
        self.status = _STATUSES[c.status] if 0 <= c.status < len(_STATUSES) else "unknown"
        self.reason = _reason_name(c.reason) if c.status == 1 else None
        self.partial = bool(c.partial)
        self.drops = c.drops
        self.records = [Drop(_reason_name(d.reason),
                             (d.node or b"").decode("utf-8", "replace"),
                             (d.detail or b"").decode("utf-8", "replace"))
                        for d in c.drop[:min(c.n_drops, _OUTCOME_RECORDS)]]
        spooled = _SPOOLED_OUTCOMES and c.spooled
        self.spooled = c.spooled if spooled else 0
        self.spooled_at = c.spooled_at.decode("utf-8", "replace") if spooled else None
        self.spooled_for = c.spooled_for.decode("utf-8", "replace") if spooled else None

    def __repr__(self):
        if self.status != "dropped":
            return "Outcome(seq=%d, %s%s)" % (
                self.seq, self.status,
                ", spooled at %s for %s" % (self.spooled_at, self.spooled_for)
                if self.spooled else "")
        return "Outcome(seq=%d, dropped, reason=%r, partial=%r, drops=%d, records=%r)" % (
            self.seq, self.reason, self.partial, self.drops, self.records)


class _ProducerStats(ctypes.Structure):
    """struct hoprelay_producer_stats."""
    _fields_ = [
        ("sent", ctypes.c_uint64),
        ("acknowledged", ctypes.c_uint64),
        ("bytes_acknowledged", ctypes.c_uint64),
        ("reconnects", ctypes.c_uint64),
        ("bytes_sent", ctypes.c_uint64),  # since 1.9, as the next one
        ("failovers", ctypes.c_uint64),
    ]


def _declare(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_H = ctypes.c_void_p  # the opaque handles
_c_int, _c_size, _c_u32, _c_u64 = ctypes.c_int, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_uint64
_P = ctypes.POINTER

_strerror = _declare("hoprelay_strerror", ctypes.c_char_p, _c_int)
_last_error = _declare("hoprelay_last_error", ctypes.c_char_p)
_version = _declare("hoprelay_version", _c_u32)
# struct hoprelay_outcome's spooled fields: an older library's struct ends before them.
_SPOOLED_OUTCOMES = _version() >= (1 << 16 | 9)

_producer_open = _declare("hoprelay_producer_open", _c_int, ctypes.c_char_p, ctypes.c_char_p,
                          _P(_ProducerOptions), _P(_H))
_producer_send = _declare("hoprelay_producer_send", _c_int, _H, ctypes.c_void_p, _c_size,
                          _c_int, _P(_c_u64), _c_int)
_producer_reserve = _declare("hoprelay_producer_reserve", _c_int, _H, _c_size,
                             _P(ctypes.c_void_p), _c_int)
_producer_commit = _declare("hoprelay_producer_commit", _c_int, _H, _c_size, _c_int, _P(_c_u64))
_producer_flush = _declare("hoprelay_producer_flush", _c_int, _H, _c_int)
try:  # since 1.2; with an older library Producer() waits for its head in one call
    _producer_wait_connected = _declare("hoprelay_producer_wait_connected", _c_int, _H, _c_int)
except AttributeError:
    _producer_wait_connected = None
_producer_fd = _declare("hoprelay_producer_fd", _c_int, _H)
_producer_process = _declare("hoprelay_producer_process", _c_int, _H)
_producer_max_message = _declare("hoprelay_producer_max_message", _c_size, _H)
_producer_max_reserve = _declare("hoprelay_producer_max_reserve", _c_size, _H)
_producer_origin = _declare("hoprelay_producer_origin", _c_u32, _H)
_producer_next_seq = _declare("hoprelay_producer_next_seq", _c_u64, _H)
# Since 1.9 the structs the library fills go with their size; an older library fills 1.0's
# (the counters it does not have stay 0).
if hasattr(_lib, "hoprelay_producer_stats_sized"):
    _stats_sized = _declare("hoprelay_producer_stats_sized", None, _H, _P(_ProducerStats), _c_size)

    def _producer_stats(h, out):
        _stats_sized(h, out, ctypes.sizeof(_ProducerStats))
else:
    _producer_stats = _declare("hoprelay_producer_stats", None, _H, _P(_ProducerStats))
_producer_outcomes = _declare("hoprelay_producer_outcomes", None, _H, _P(_OutcomeCounts), _c_size)
_producer_resume_seq = _declare("hoprelay_producer_resume_seq", _c_u64, _H)
_producer_end = _declare("hoprelay_producer_end", _c_int, _H, _c_int)
_producer_close = _declare("hoprelay_producer_close", _c_int, _H, _c_int)
_producer_destroy = _declare("hoprelay_producer_destroy", None, _H)

_consumer_open = _declare("hoprelay_consumer_open", _c_int, ctypes.c_char_p, ctypes.c_char_p,
                          _P(_ConsumerOptions), _P(_H))
if hasattr(_lib, "hoprelay_consumer_recv_sized"):
    _recv_sized = _declare("hoprelay_consumer_recv_sized", _c_int, _H, _P(_Message), _c_size,
                           _c_int)

    def _consumer_recv(h, msg, timeout_ms):
        return _recv_sized(h, msg, ctypes.sizeof(_Message), timeout_ms)
else:
    _consumer_recv = _declare("hoprelay_consumer_recv", _c_int, _H, _P(_Message), _c_int)
_consumer_release = _declare("hoprelay_consumer_release", _c_int, _H, _P(_Message))
_consumer_release_at = _declare("hoprelay_consumer_release_at", _c_int, _H, _P(_Message), _c_u64)
# Since 1.3; with an older library the module keeps the refusal to itself (Consumer.recv).
_consumer_abandon = (_declare("hoprelay_consumer_abandon", _c_int, _H, _P(_Message))
                     if hasattr(_lib, "hoprelay_consumer_abandon") else None)
_consumer_app_position = _declare("hoprelay_consumer_app_position", _c_u64, _H)
_consumer_resume_seq = _declare("hoprelay_consumer_resume_seq", _c_u64, _H, _c_u32)
_consumer_fd = _declare("hoprelay_consumer_fd", _c_int, _H)
_consumer_process = _declare("hoprelay_consumer_process", _c_int, _H)
_consumer_close = _declare("hoprelay_consumer_close", None, _H)
# Since 1.8 close keeps a handle until destroy; before, close freed it (and there was no
# consumer destroy): _close_keeps() says which.
_consumer_destroy = (_declare("hoprelay_consumer_destroy", None, _H)
                     if hasattr(_lib, "hoprelay_consumer_destroy") else None)


def _close_keeps():
    return _consumer_destroy is not None


def _consumer_free(h):
    if _consumer_destroy is not None:
        _consumer_destroy(h)  # closes it, then frees the handle
    else:
        _consumer_close(h)


def version():
    """The loaded library's version as (major, minor)."""
    v = _version()
    return v >> 16, v & 0xFFFF


if version()[0] != VERSION_MAJOR:
    raise ImportError(
        "hoprelay: %s is version %d.%d; this module needs major version %d "
        "(libhoprelay.so.%d)" % (library_path, version()[0], version()[1], VERSION_MAJOR,
                                  VERSION_MAJOR))


def strerror(status):
    """The status's name and meaning ("HOPRELAY_ETIMEDOUT: timed out")."""
    return _strerror(int(status)).decode("utf-8", "replace")


# ---- errors ---------------------------------------------------------------------------------

_NAMES = {
    OK: "HOPRELAY_OK", EINVAL: "HOPRELAY_EINVAL", ECONFIG: "HOPRELAY_ECONFIG",
    ENODE: "HOPRELAY_ENODE", ETOOBIG: "HOPRELAY_ETOOBIG", ETIMEDOUT: "HOPRELAY_ETIMEDOUT",
    EAGAIN: "HOPRELAY_EAGAIN", EREFUSED: "HOPRELAY_EREFUSED", EVERSION: "HOPRELAY_EVERSION",
    ESTATE: "HOPRELAY_ESTATE", EUNAVAILABLE: "HOPRELAY_EUNAVAILABLE",
    EINTERNAL: "HOPRELAY_EINTERNAL", EORIGIN: "HOPRELAY_EORIGIN",
}


class HoprelayError(Exception):
    """A failed call of libhoprelay.

    ``status``: the (negative) hoprelay_status; ``name``: its name ("HOPRELAY_ENODE");
    ``message``: what the library found wrong (hoprelay_last_error()), or the status's
    meaning when it said nothing. ``str()`` gives "NAME: message".
    """

    def __init__(self, status, message=None):
        self.status = int(status)
        self.name = _NAMES.get(self.status, "HOPRELAY_STATUS_%d" % self.status)
        if not message:
            message = strerror(self.status).split(": ", 1)[-1]
        self.message = message
        super().__init__("%s: %s" % (self.name, message))


class InvalidArgument(HoprelayError):
    """HOPRELAY_EINVAL: a bad argument."""


class ConfigError(HoprelayError):
    """HOPRELAY_ECONFIG: the topology does not load or validate."""


class NodeError(HoprelayError):
    """HOPRELAY_ENODE: no such node, or the wrong kind (not a head / not a leaf)."""


class TooBig(HoprelayError):
    """HOPRELAY_ETOOBIG: larger than the pipeline (or a reserved buffer) takes."""


class Timeout(HoprelayError):
    """HOPRELAY_ETIMEDOUT (the timeout passed) or HOPRELAY_EAGAIN (timeout 0 and the call
    would have had to wait): normal on the datapath, try again later."""


class Refused(HoprelayError):
    """HOPRELAY_EREFUSED: the head node refused this producer."""


class OriginInUse(Refused):
    """HOPRELAY_EORIGIN: the head has a producer of this origin connected already."""


class VersionError(HoprelayError):
    """HOPRELAY_EVERSION: options of an incompatible header version."""


class StateError(HoprelayError):
    """HOPRELAY_ESTATE: not valid now (commit without reserve, ...)."""


class Unavailable(HoprelayError):
    """HOPRELAY_EUNAVAILABLE: cannot start (port in use, no RDMA device, memlock limit), or the
    RDMA device of an open handle went away: close it and open a new one once a device is back
    (the device stays in use until the process exits: librdmacm keeps its device contexts)."""


class InternalError(HoprelayError):
    """HOPRELAY_EINTERNAL: a failure of the library or the system."""


class ClosedError(StateError, ValueError):
    """The handle was closed (or destroyed) already: status HOPRELAY_ESTATE. Also a
    ValueError, like an operation on a closed file."""


_CLASSES = {
    EINVAL: InvalidArgument, ECONFIG: ConfigError, ENODE: NodeError, ETOOBIG: TooBig,
    ETIMEDOUT: Timeout, EAGAIN: Timeout, EREFUSED: Refused, EVERSION: VersionError,
    ESTATE: StateError, EUNAVAILABLE: Unavailable, EINTERNAL: InternalError,
    EORIGIN: OriginInUse,
}


def _error(status):
    """The exception of a failed call; call it right after the call, on the same thread."""
    text = _last_error()
    text = text.decode("utf-8", "replace") if text else ""
    return _CLASSES.get(status, HoprelayError)(status, text)


# ---- helpers --------------------------------------------------------------------------------

def _int(value, what, lo, hi, meaning):
    """`value` as an int from `lo` to `hi`: TypeError for what is not an int (a bool neither),
    ValueError outside the range (a ctypes field or argument would wrap it silently: origin
    2**32+92 would become 92). `what` names the argument ("Producer(origin=%r)")."""
    try:
        if isinstance(value, bool):
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise TypeError("%s: an int, %s" % (what % (value,), meaning)) from None
    if not lo <= value <= hi:
        raise ValueError("%s: out of range, %s" % (what % (value,), meaning))
    return value


_LEVEL = "LOG_DEBUG (1) to LOG_ERROR (4), lines of that level and above (a C int)"


def _ms(timeout):
    """Seconds (None: forever) to the library's milliseconds (-1: forever)."""
    if timeout is None:
        return -1
    if timeout < 0:
        raise ValueError("timeout must be None (wait as long as it takes) or 0 or more seconds")
    return min(_INT_MAX, math.ceil(timeout * 1000))


def _view(address, length, readonly):
    """A memoryview (format 'B') of `length` bytes at `address`, without a copy."""
    if not address or not length:
        return memoryview(b"") if readonly else memoryview(bytearray())
    array = (ctypes.c_char * length).from_address(address)
    view = memoryview(array).cast("B")
    return view.toreadonly() if readonly else view


def _bytes_arg(data):
    """(pointer argument, length) of a bytes-like object, without a copy when possible."""
    if isinstance(data, bytes):
        return data, len(data)
    view = memoryview(data)
    if not view.c_contiguous:
        data = view.tobytes()
        return data, len(data)
    n = view.nbytes
    if n == 0:
        return None, 0
    if view.readonly:
        # ctypes gives no pointer into a read-only buffer other than bytes: copy (the library
        # copies into its registered buffers anyway).
        data = view.tobytes()
        return data, n
    return (ctypes.c_char * n).from_buffer(view), n


def _log_callback(log):
    if log is None:
        return _LOG_FN()  # null: lines are discarded

    def trampoline(_user, level, line):
        log(level, line.decode("utf-8", "replace") if line else "")

    return _LOG_FN(trampoline)


class _Handle:
    """An opaque handle of the library, with a guard against concurrent use by two threads
    (the library takes no lock: one thread at a time per handle)."""

    _kind = "handle"

    def __init__(self):
        self._h = None
        self._lock = threading.Lock()
        self._log_cb = None
        self._in_callback = None  # (name, thread) of the callback running inside a call
        self._callback_error = None  # what a callback raised, raised again by _leave()

    def _enter(self):
        """The handle, with the guard held: call self._leave() after the call."""
        running = self._in_callback
        if running is not None and running[1] == threading.get_ident():
            raise RuntimeError(
                "hoprelay: %s called into its own %s: a callback runs inside a call of the "
                "handle and must not call it (note what it needs, act after the call returns)"
                % (running[0], self._kind))
        if not self._lock.acquire(False):
            raise RuntimeError(
                "hoprelay: this %s is in use by another thread: a handle is used by one thread "
                "at a time (use one handle per thread)" % self._kind)
        if self._h is None:
            self._lock.release()
            raise ClosedError(ESTATE, "this %s is closed" % self._kind)
        return self._h

    def _leave(self):
        """Releases the guard; raises what a callback raised during the call, if it did."""
        error, self._callback_error = self._callback_error, None
        self._lock.release()
        if error is not None:
            raise error

    def _callback(self, name, fn):
        """fn wrapped for a C callback: an exception it raises cannot cross the library, so it
        is kept (the first one) and raised when the library call returns."""
        def run(*args):
            self._in_callback = (name, threading.get_ident())
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 - raised again by _leave()
                if self._callback_error is None:
                    self._callback_error = e
            finally:
                self._in_callback = None
        return run

    @property
    def closed(self):
        """True once the handle was closed (or destroyed)."""
        return self._h is None

    def _get(self, fn, *args):
        h = self._enter()
        try:
            return fn(h, *args)
        finally:
            self._leave()

    def _fd(self, fn):
        h = self._enter()
        try:
            fd = fn(h)
            if fd < 0:
                raise _error(fd)
            return fd
        finally:
            self._leave()

    def _call(self, fn, *args):
        h = self._enter()
        try:
            self._between_calls(h)
            rc = fn(h, *args)
            if rc != OK:
                raise _error(rc)
        finally:
            self._leave()

    def _call_wait(self, fn, timeout, *args):
        """fn(h, *args, timeout_ms), a call that waits. timeout None: in slices, again while
        it times out (nothing happened then), so that signals get through."""
        ms = _ms(timeout)
        h = self._enter()
        try:
            while True:
                self._between_calls(h)
                rc = fn(h, *args, _SLICE_MS if ms < 0 else ms)
                if rc != ETIMEDOUT or ms >= 0:
                    break
            if rc != OK:
                raise _error(rc)
        finally:
            self._leave()

    def _between_calls(self, h):
        """Work of this module due before each library call, with the guard held."""


# ---- producer -------------------------------------------------------------------------------

class Producer(_Handle):
    """A producer: connects to head node `head` of `topology` and sends messages into it.

    `topology` is a file path, or the topology's TOML text itself when it contains a newline.
    The constructor waits until the head has admitted this producer (up to
    `connect_timeout` seconds; None: as long as it takes; 0: it returns at once and the
    connection proceeds inside later calls, which raise :class:`Refused` if the head refused;
    :meth:`wait_connected` waits for it then). `origin` is the origin id every message carries
    (0: a random one; an int up to 2**32-1); `first_seq` the first message's sequence number (a
    restart resumes; up to 2**64-1): a value out of range raises ValueError, one that is not
    an int TypeError, rather than wrap; `log`, if
    given, a callable(level: int, line: str) called with the handle's log lines of level
    `log_level` and above (connections, reconnections, refusals; never per message), on the
    thread that called into the library, inside that call. `on_outcome`, if given, a
    callable(:class:`Outcome`) called once per message, in sequence order, when the head
    acknowledged it: delivered, or dropped with where and why (:meth:`outcomes` counts
    them either way); also on the calling thread, inside a call (send, commit, flush,
    process, close...). A callback must not call into this producer (RuntimeError); an
    exception it raises is raised by the call it ran in, once that call is done (the
    first one, if several). `run_head=True` (libhoprelay 1.4): this process runs the head
    node itself instead of connecting to its hoprelayd (docs/client.md, "A producer that runs
    its head"): one copy fewer per message; the head moves only inside this producer's calls
    and stops with it; it binds the head's addresses (:class:`Unavailable` when another
    process holds them).

    The head acknowledges each message once it is safe downstream; the library keeps every
    message until then and sends again what was not acknowledged if the link drops.

    Threads: one thread at a time (another thread entering a busy producer gets
    RuntimeError). As a context manager, leaving the block normally calls :meth:`close`
    (flush, then the end-of-stream mark), leaving it by an exception :meth:`destroy` (no
    end-of-stream mark: the stream did not end whole). After close or destroy, every call
    raises :class:`ClosedError`.
    """

    _kind = "producer"

    def __init__(self, topology, head, *, origin=0, first_seq=0, connect_timeout=30.0,
                 log=None, log_level=LOG_INFO, on_outcome=None, run_head=False,
                 flush_on_destroy=5.0, tls=None):
        super().__init__()
        # Seconds the finaliser of a producer not closed waits for what was sent to be
        # acknowledged (0: not at all, None: as long as it takes), as the C++ wrapper does.
        self._flush_on_destroy = flush_on_destroy
        options = _ProducerOptions()
        if run_head:
            if version() < (1, 4):
                raise VersionError(EVERSION, "Producer(run_head=True): libhoprelay %d.%d cannot "
                                   "run the head (1.4 and later)" % version())
            options.run_head = 1
        _tls_options(options, tls, "Producer")
        if version() < (1, 4):
            # The options as a 1.3 library knows them (it refuses a larger struct).
            options.struct_size = _ProducerOptions.run_head.offset
        options.origin = _int(origin, "Producer(origin=%r)", 0, (1 << 32) - 1,
                              "0 (a random one) to 2**32-1")
        options.first_seq = _int(first_seq, "Producer(first_seq=%r)", 0, (1 << 64) - 1,
                                 "0 to 2**64-1")
        options.log_level = _int(log_level, "Producer(log_level=%r)", -(1 << 31), _INT_MAX,
                                 _LEVEL)
        try:
            connect_ms = _ms(connect_timeout)  # -1: None, as long as it takes
        except ValueError:
            raise ValueError("Producer(connect_timeout=%r): None (wait as long as it takes) or 0 "
                             "or more seconds" % (connect_timeout,)) from None
        self._head = head
        # The library is opened without waiting; the wait for the head is below, in slices,
        # so that Ctrl-C gets through it (one open with the whole timeout would hold it). An
        # older library (before 1.2) waits in open, and knows no unbounded wait: ~24 days.
        options.connect_timeout_ms = (0 if _producer_wait_connected else
                                      _INT_MAX if connect_ms < 0 else connect_ms)
        self._log_cb = _log_callback(log)  # kept alive as long as the handle
        options.log = self._log_cb
        self._outcome_cb = None
        if on_outcome is not None:
            if not callable(on_outcome):
                raise TypeError("on_outcome must be a callable(outcome), or None")

            def outcome(_user, c):
                on_outcome(Outcome(c.contents))

            self._outcome_cb = _OUTCOME_FN(self._callback("on_outcome", outcome))
            options.on_outcome = ctypes.cast(self._outcome_cb, ctypes.c_void_p)
        self._reserved = None  # the memoryview reserve() gave, until commit
        h = _H()
        try:
            rc = _producer_open(os.fsencode(topology), os.fsencode(head), ctypes.byref(options),
                                ctypes.byref(h))
            if rc != OK:
                raise _error(rc)
            self._h = h.value
            if connect_ms != 0 and _producer_wait_connected:
                self._wait_connected(connect_ms)
        except BaseException:
            # Not shared yet: freed here, not through destroy() and its guard (a Ctrl-C may
            # come anywhere in between).
            self._h = None
            if h.value:
                _producer_destroy(h.value)
            raise

    def wait_connected(self, timeout=None):
        """Waits up to `timeout` seconds (None: as long as it takes; 0: never) until the head
        has admitted this producer; returns at once when it has. For a producer opened with
        `connect_timeout=0` (the constructor waits for this itself otherwise): until then send
        and reserve wait for it within their own timeout. Raises :class:`Timeout` when the
        head did not admit it in time (status ``EAGAIN`` for 0), :class:`Refused` (or
        :class:`OriginInUse`) when it refused, with its reason. Admitted once: the link may
        have dropped again since (it reconnects inside later calls, as always)."""
        if _producer_wait_connected is None:
            raise VersionError(EVERSION, "wait_connected: libhoprelay %d.%d has no "
                               "hoprelay_producer_wait_connected (1.2 and later)" % version())
        self._wait_connected(_ms(timeout))

    def _wait_connected(self, timeout_ms):
        """In slices (Ctrl-C gets through); timeout_ms -1: as long as it takes."""
        if timeout_ms == 0:
            self._call(_producer_wait_connected, 0)
            return
        deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        while True:
            left_ms = (_SLICE_MS if deadline is None else
                       max(0, math.ceil((deadline - time.monotonic()) * 1000)))
            h = self._enter()
            try:
                rc = _producer_wait_connected(h, max(1, min(_SLICE_MS, left_ms)))
                error = _error(rc) if rc != OK else None
            finally:
                self._leave()
            if rc == OK:
                return
            if rc != ETIMEDOUT:
                raise error
            if deadline is not None and time.monotonic() >= deadline:
                raise Timeout(ETIMEDOUT, "no connection to %s within %d ms: is hoprelayd running "
                              "there?" % (self._head, timeout_ms))

    def __repr__(self):
        if self._h is None:
            return "<hoprelay.Producer closed>"
        return "<hoprelay.Producer origin=%d next_seq=%d>" % (
            _producer_origin(self._h), _producer_next_seq(self._h))

    def send(self, data, more=False, timeout=None):
        """Sends a copy of `data` (any bytes-like object, 0 to :attr:`max_message` bytes) as
        the next message and returns its sequence number. `data` may be reused at once.

        Waits up to `timeout` seconds (None: as long as it takes) for buffer space (the
        head's credits): :class:`Timeout` then, nothing sent. A message larger than the
        head's slots travels as chunks. :class:`TooBig` beyond max_message. `more=True`: more
        messages follow at once, so the library may hold this one until the next send or
        commit without it (or flush, close, a call that waits).
        """
        arg, n = _bytes_arg(data)
        seq = _c_u64()
        try:
            self._call_wait(_producer_send, timeout, arg, n, SEND_MORE if more else 0,
                            ctypes.byref(seq))
        except Timeout as e:
            # The library names its C function; a Python user calls the method.
            if "hoprelay_producer_wait_connected" in e.message:
                raise Timeout(e.status, e.message.replace(
                    "hoprelay_producer_wait_connected", "Producer.wait_connected()")) from None
            raise
        return seq.value

    def reserve(self, length, timeout=None):
        """Zero copy: a writable memoryview of `length` bytes (0 to :attr:`max_message`) of
        the library's registered send buffer, for the next message. Write the message into
        it and :meth:`commit`; do not touch it after the commit (the view this returns is
        released then). One reservation at a time. Waits up to `timeout` seconds for a free
        buffer. Up to :attr:`max_reserve` (one slot of the head) the message goes as one
        frame; a larger one (libhoprelay 1.5 or later) as chunks, still without a copy.
        """
        length = _int(length, "reserve(%r)", 0, (1 << 64) - 1, "a length of 0 to max_message")
        address = ctypes.c_void_p()
        self._call_wait(_producer_reserve, timeout, length, ctypes.byref(address))
        self._reserved = _view(address.value, length, readonly=False)
        return self._reserved

    def commit(self, length=None, more=False):
        """Sends the reserved buffer's first `length` bytes (default: all of it, 0 to the
        reserved length: 0 is an empty message) as the next message; returns its sequence
        number."""
        if length is None:
            length = self._reserved.nbytes if self._reserved is not None else 0
        length = _int(length, "commit(%r)", 0, (1 << 64) - 1,
                      "a length of 0 to the reserved length")
        seq = _c_u64()
        self._call(_producer_commit, length, SEND_MORE if more else 0, ctypes.byref(seq))
        self._drop_reserved()
        return seq.value

    def _drop_reserved(self):
        view, self._reserved = self._reserved, None
        if view is not None:
            try:
                view.release()
            except BufferError:  # someone holds an export of it: their problem now
                pass

    def flush(self, timeout=None):
        """Waits up to `timeout` seconds until every message sent is acknowledged by the
        head (:class:`Timeout` otherwise)."""
        self._call_wait(_producer_flush, timeout)

    def fileno(self):
        """A descriptor readable when the producer has work: call :meth:`process` then."""
        return self._fd(_producer_fd)

    def process(self):
        """Does the work that is ready, without waiting (acknowledgements, reconnection,
        sending)."""
        self._call(_producer_process)

    @property
    def origin(self):
        """The origin id every message of this producer carries."""
        return self._get(_producer_origin)

    @property
    def next_seq(self):
        """The sequence number the next message gets."""
        return self._get(_producer_next_seq)

    @property
    def max_message(self):
        """The largest message send takes (bytes)."""
        return self._get(_producer_max_message)

    @property
    def max_reserve(self):
        """The largest message that goes as one frame (one slot of the head). Since
        libhoprelay 1.5 reserve gives up to :attr:`max_message`, larger ones as chunks."""
        return self._get(_producer_max_reserve)

    def stats(self):
        """{'sent', 'acknowledged', 'bytes_acknowledged', 'reconnects', 'bytes_sent',
        'failovers'}: the producer's counters (messages handed to send or commit; of them,
        acknowledged by the head; their bytes; times the link came back after a drop; the bytes
        of the messages sent; times it moved between its head and the head's standby; the last
        two since libhoprelay 1.9, 0 with an older one)."""
        out = _ProducerStats()
        self._get(lambda h: _producer_stats(h, ctypes.byref(out)))
        return {name: getattr(out, name) for name, _ in _ProducerStats._fields_}

    @property
    def resume_seq(self):
        """One past the highest sequence number the head had taken from this origin when the
        producer connected (0: none): messages below it are not sent (repeats)."""
        return self._get(_producer_resume_seq)

    def outcomes(self):
        """{'delivered', 'dropped', 'repeat', 'partial', 'spooled', 'by_reason': {reason: n}}:
        what became of the messages acknowledged so far (docs/client.md, "Outcomes"; 'spooled',
        since libhoprelay 1.9: of them, those waiting in a spool somewhere)."""
        out = _OutcomeCounts()
        self._get(lambda h: _producer_outcomes(h, ctypes.byref(out), ctypes.sizeof(out)))
        return {"delivered": out.delivered, "dropped": out.dropped, "repeat": out.repeat,
                "partial": out.partial, "spooled": out.spooled,
                "by_reason": {name: out.by_reason[i + 1]
                              for i, name in enumerate(_DROP_REASONS)}}

    def end(self, timeout=None):
        """Ends the stream without closing: once everything sent is acknowledged, sends the
        end-of-stream mark (once) and waits up to `timeout` seconds for its acknowledgement.
        :class:`Timeout`: not yet, call again (timeout 0 suits an application driving the
        producer from its own event loop). After the first call, send and reserve raise
        :class:`StateError`. A reservation not committed is dropped."""
        self._drop_reserved()
        self._call_wait(_producer_end, timeout)

    def close(self, timeout=None):
        """Ends the stream (:meth:`end` with `timeout` seconds), then closes the link and frees
        the handle, whatever happened. :class:`Timeout` when messages (or the end mark) were
        still unacknowledged; if messages were, no end mark was sent (the stream did not end
        whole). A reservation not committed is dropped. Closing a closed producer does
        nothing."""
        if self._h is None:
            return
        ended = None
        if timeout is None:
            # end() in slices first, so that Ctrl-C gets through a wait for a head that is
            # down (the handle stays open then); the close itself then has nothing to wait for.
            self._drop_reserved()
            try:
                self._call_wait(_producer_end, None)
            except HoprelayError as e:
                ended = e
        h = self._enter()
        try:
            self._drop_reserved()
            self._h = None
            rc = _producer_close(h, 0 if timeout is None else _ms(timeout))
            failed = _error(rc) if rc != OK else None
            if _close_keeps():
                _producer_destroy(h)
            if ended is not None:
                raise ended
            if failed is not None:
                raise failed
        finally:
            self._leave()

    def destroy(self):
        """Frees the handle at once: no flush and no end-of-stream mark; messages not yet
        acknowledged are given up. For error paths. Does nothing when closed already."""
        if self._h is None:
            return
        h = self._enter()
        try:
            self._drop_reserved()
            self._h = None
            _producer_destroy(h)
        finally:
            self._leave()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.destroy()

    def __del__(self):
        # Like the C++ wrapper's destructor: what was sent gets flush_on_destroy seconds to be
        # acknowledged, then the handle goes without the end-of-stream mark (close() sends
        # it); what is still unacknowledged is given up, said through the log callback.
        try:
            if self._h is not None:
                wait = getattr(self, "_flush_on_destroy", 0)
                if wait != 0:
                    _producer_flush(self._h, -1 if wait is None else _ms(wait))
                _producer_destroy(self._h)
                self._h = None
        except Exception:
            pass


# ---- consumer -------------------------------------------------------------------------------

class _Lease:
    """A received message's claim on its slot, until released. The data view's buffer holds
    it, so a Message forgotten (with its view) without release() is given back by its
    consumer's next call, as the C++ wrapper's destructor does."""

    __slots__ = ("consumer", "msg", "released", "view", "__weakref__")

    def __init__(self, consumer, msg):
        self.consumer = consumer
        self.msg = msg
        self.released = False
        self.view = None  # weakref to the data memoryview

    def invalidate(self):
        self.released = True
        view = self.view() if self.view is not None else None
        if view is not None:
            try:
                view.release()
            except BufferError:
                pass

    def __del__(self):
        try:
            if not self.released and self.consumer._h is not None:
                self.consumer._deferred.append(self.msg)  # deque.append: atomic
        except Exception:
            pass


class Message:
    """A message received by a :class:`Consumer`, or the end of a stream.

    ``origin``, ``seq``, ``flags``; ``end`` is True for the end-of-stream mark (no data: the
    producer of `origin` closed after the message before `seq`). ``data`` is a read-only
    memoryview of the slot the message landed in, **not a copy**: it is valid until
    :meth:`release` and must not be used after (the slot is reused). ``bytes(msg.data)``
    copies it. The view itself is released at release() (using it raises ValueError), but
    slices and other views made from it are not: do not keep them.

    The message is acknowledged upstream when released: call :meth:`release`, or use the
    message as a context manager (released on leaving the block; left by an exception, with a
    `state_dir`, abandoned instead: not taken, it comes again after a restart). Unreleased
    messages hold a slot each, and the slots of those released after them (slots are
    acknowledged in the order messages arrived): when the node's slots are all held, the
    upstream waits. A variable still bound to the previous message while ``recv`` waits holds
    it: release it (or use ``with``) before the next ``recv``. A message dropped
    (with its data view) without release is released by its consumer's next recv, process
    or close (with a `state_dir`, recorded as taken: :meth:`abandon` one the application did
    not take). Release on the thread that uses the consumer.
    """

    __slots__ = ("origin", "flags", "seq", "_lease", "_data")

    def __init__(self, consumer, msg):
        self.origin = msg.origin
        self.flags = msg.flags
        self.seq = msg.seq
        lease = _Lease(consumer, msg)
        if msg.data and msg.length:
            array = (ctypes.c_char * msg.length).from_address(msg.data)
            array._lease = lease  # the view keeps the claim on the slot alive
            self._data = memoryview(array).cast("B").toreadonly()
        else:
            self._data = memoryview(b"")
        lease.view = weakref.ref(self._data)
        self._lease = lease
        consumer._leases.add(lease)

    @property
    def end(self):
        """True for the end-of-stream mark of `origin`."""
        return bool(self.flags & MESSAGE_END)

    @property
    def copied(self):
        """True for a message larger than a slot, reassembled into a copy (libhoprelay 1.8)."""
        return bool(self.flags & MESSAGE_COPY)

    @property
    def data(self):
        """The payload: a read-only memoryview of the library's slot, valid until release."""
        if self._lease.released:
            raise ClosedError(ESTATE, "message %d of origin %d was released (or its consumer "
                              "closed): its data is gone" % (self.seq, self.origin))
        return self._data

    def __len__(self):
        return self._lease.msg.length

    @property
    def released(self):
        return self._lease.released

    def release(self, app_position=None):
        """Gives the message back (acknowledged upstream). Its data must not be read after.
        Releasing twice does nothing; after the consumer was closed it only drops the data
        (the message was not acknowledged: it comes again to whoever runs the node next).

        `app_position`: with a consumer opened with a `state_dir`, a number of the
        application's own (its output file's length after this message, a database's
        transaction id...) kept with the durable position and read back after a restart as
        :attr:`Consumer.app_position`. Make what the message produced durable before
        releasing it with the position that covers it. Without it the position keeps the
        previous release's number; without a `state_dir` it is ignored."""
        if app_position is not None:
            try:
                if isinstance(app_position, bool):
                    raise TypeError
                app_position = operator.index(app_position)
            except TypeError:
                raise TypeError("release(app_position=%r): an int (0 to 2**64-1), e.g. the "
                                "output file's length after this message" % (app_position,)) \
                    from None
            if not 0 <= app_position < 1 << 64:
                raise ValueError("release(app_position=%d): out of range 0 to 2**64-1"
                                 % app_position)
        lease = self._lease
        if lease.released:
            return
        consumer = lease.consumer
        if consumer._h is None:
            lease.invalidate()
            return
        h = consumer._enter()
        try:
            lease.invalidate()
            if app_position is None:
                rc = _consumer_release(h, ctypes.byref(lease.msg))
            else:
                rc = _consumer_release_at(h, ctypes.byref(lease.msg), app_position)
            if rc != OK:
                raise _error(rc)
        finally:
            consumer._lock.release()

    def abandon(self, _cause=None):
        """Gives the message up unreleased: it is not acknowledged and comes again to whoever
        runs the node next (this consumer keeps its slot until it closes). For an application
        that could not take it (its write failed) and stops: nothing after it can be
        acknowledged (acknowledgements go in order), so the consumer's next :meth:`recv`
        raises :class:`StateError` saying so; close the consumer and open it again to have the
        message again. To skip a message instead, release it. Its data must not be read after.
        A message merely dropped is released instead (by the consumer's next call), which with
        a `state_dir` records it as taken: abandon what the application did not take."""
        lease = self._lease
        if lease.released:
            return
        consumer = lease.consumer
        if consumer is None or consumer._h is None or _consumer_abandon is None:
            lease.invalidate()
        else:
            h = consumer._enter()
            try:
                lease.invalidate()
                rc = _consumer_abandon(h, ctypes.byref(lease.msg))
                if rc != OK:
                    raise _error(rc)
            finally:
                consumer._lock.release()
        if consumer is not None and consumer._abandoned is None:
            consumer._abandoned = "message %d of origin %d was abandoned%s" % (
                self.seq, self.origin, _cause or "")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # Left by an exception, with a `state_dir`: the application did not take the message
        # (its write failed, say), and a release would record it as taken: given up instead,
        # it comes again after a restart. (The durable position cannot pass it anyway.)
        consumer = self._lease.consumer
        if exc_type is not None and consumer is not None and consumer._durable:
            self.abandon(" (its with block raised %s)" % exc_type.__name__)
        else:
            self.release()

    def __repr__(self):
        state = " released" if self._lease.released else ""
        if self.end:
            return "<hoprelay.Message end origin=%d seq=%d%s>" % (self.origin, self.seq, state)
        return "<hoprelay.Message origin=%d seq=%d length=%d%s>" % (
            self.origin, self.seq, len(self), state)


class Consumer(_Handle):
    """A consumer: runs node `node` of `topology` (a path, or TOML text when it contains
    a newline) in this process: a leaf, or (libhoprelay 1.6) a relay, which forwards every
    message to its downstream peers too and keeps a copy for the application. It listens on the node's address and takes its upstream
    peers' links, so open it before the producers send. The node's stage runs on every
    message before the application sees it; a message larger than a slot is handed over
    whole (reassembled).

    :meth:`recv` returns :class:`Message` objects, in arrival order, whose data are views of
    the node's slots (zero copy; see Message). `log`: as for :class:`Producer`.

    `state_dir`: a directory (created if missing) for the consumer's durable position: per
    origin, what the application released is made durable there (fdatasync) before it is
    acknowledged upstream, and a consumer opened again on it does not hand over what was
    released before, whatever else restarted meanwhile. With :attr:`app_position` and
    ``Message.release(app_position=...)`` that is exactly once into the application across
    its crashes, for what it makes durable itself before releasing (docs/client.md,
    "Exactly once into the application"). A damaged position file raises
    :class:`Unavailable` naming it rather than start afresh.

    Threads: one thread at a time, for the consumer and its messages (release included);
    another thread entering it while busy gets RuntimeError. As a context manager it closes
    on leaving the block. Closing with messages not released leaves them unacknowledged
    (they come again) and invalidates their data views.
    """

    _kind = "consumer"

    def __init__(self, topology, node, *, state_dir=None, log=None, log_level=LOG_INFO,
                 tls=None):
        super().__init__()
        options = _ConsumerOptions()
        _tls_options(options, tls, "Consumer")
        options.log_level = _int(log_level, "Consumer(log_level=%r)", -(1 << 31), _INT_MAX,
                                 _LEVEL)
        self._log_cb = _log_callback(log)  # kept alive as long as the handle
        options.log = self._log_cb
        if state_dir is not None:
            state_dir = os.fsencode(state_dir)
            if not state_dir:
                raise ValueError("Consumer(state_dir=''): a directory for the durable position "
                                 "(created if missing), or None for none")
            options.state_dir = state_dir
        self._durable = state_dir is not None  # a message's with block abandons on an exception
        self._abandoned = None  # what Message.abandon gave up: recv refuses to go on past it
        self._leases = weakref.WeakSet()  # messages out, not released
        self._deferred = deque()  # _Message structs of messages dropped without release
        h = _H()
        rc = _consumer_open(os.fsencode(topology), os.fsencode(node), ctypes.byref(options),
                            ctypes.byref(h))
        if rc != OK:
            raise _error(rc)
        self._h = h.value

    def __repr__(self):
        return "<hoprelay.Consumer%s>" % (" closed" if self._h is None else "")

    def _between_calls(self, h):
        # Messages dropped without release (see _Lease) are released here, on this thread.
        while self._deferred:
            _consumer_release(h, ctypes.byref(self._deferred.popleft()))

    def recv(self, timeout=None):
        """The next message (or end-of-stream mark), waiting up to `timeout` seconds (None:
        as long as it takes; 0: never). Raises :class:`Timeout` when none came in time, and
        :class:`StateError` once a message was abandoned (see :meth:`Message.abandon`)."""
        if self._abandoned is not None and self._h is not None:
            raise StateError(ESTATE, "recv: %s: nothing after it can be acknowledged "
                             "(acknowledgements go in order), so this consumer would stall once "
                             "the node's slots fill. Close it and open it again to have the "
                             "message again%s; to skip a message instead, release it (in an "
                             "except inside its with block)" % (
                                 self._abandoned, " (with the state_dir, nothing released "
                                 "before is handed over twice)" if self._durable else
                                 " (without a state_dir, what was released after it comes "
                                 "again too)"))
        msg = _Message()
        self._call_wait(_consumer_recv, timeout, ctypes.byref(msg))
        return Message(self, msg)

    @property
    def app_position(self):
        """With a `state_dir`: the `app_position` of the last release recorded (0: none); at
        open, that of the last durable one. Read it at start: an application that appends to
        a file truncates the file to it and appends from there."""
        return self._get(_consumer_app_position)

    def resume_seq(self, origin):
        """With a `state_dir`: one past the highest sequence number of `origin` the
        application released durably (0: none): the first one the consumer hands over."""
        origin = _int(origin, "resume_seq(%r)", 0, (1 << 32) - 1, "an origin is 0 to 2**32-1")
        return self._get(_consumer_resume_seq, origin)

    def fileno(self):
        """A descriptor readable when the consumer has work: call :meth:`process` then."""
        return self._fd(_consumer_fd)

    def process(self):
        """Does the work that is ready, without waiting (receiving, sending credits)."""
        self._call(_consumer_process)

    def close(self):
        """Closes the node's links and frees the consumer. Messages not released are not
        acknowledged (they come again); their data views are released. Closing a closed
        consumer does nothing."""
        if self._h is None:
            return
        h = self._enter()
        try:
            self._between_calls(h)
            for lease in list(self._leases):
                lease.invalidate()
            self._h = None
            _consumer_free(h)
        finally:
            self._leave()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()

    def __del__(self):
        try:
            if self._h is not None:
                h, self._h = self._h, None
                _consumer_free(h)
        except Exception:
            pass
