"""A thin publish/subscribe bus over a Cyclone DDS participant, speaking ROS 2 on the wire.

One module on purpose: one participant's life. The domain it is created in (the
Cyclone configuration with :data:`ROS_INTEROPERABILITY` merged in, domains shared by the buses
of a process), the QoS it maps ROS profiles to, its writers and readers and the dispatcher
thread that runs the callbacks are the parts of one :class:`DdsBus`, documented together below
(a tenth of the module); apart from :func:`loopback_config` and :func:`resolve_domain_id`,
nothing here is used without a bus.

:class:`DdsBus` owns one ``DomainParticipant`` and lets the online node publish and subscribe to
ROS 2 topics without a ROS 2 install::

    with DdsBus() as bus:
        publish = bus.publisher("/mb_estimator/parameters", Float64MultiArray)
        bus.subscribe("/joint_states", JointState, on_joint_state, qos="sensor_data")
        publish(Float64MultiArray(data=[1.0, 2.0]))

ROS 2 conventions followed (as ``rmw_cyclonedds_cpp`` does them):

* topic ``/x/y`` is DDS topic ``rt/x/y`` (:func:`.dds_messages.ros_topic_name`), and the types
  of :mod:`.dds_messages` carry the ROS DDS type names;
* QoS profiles of ``rmw/qos_profiles.h``: ``"default"`` (``rmw_qos_profile_default``) = reliable,
  keep last 10, volatile; ``"sensor_data"`` (``rmw_qos_profile_sensor_data``) = best effort,
  keep last 5, volatile.  Like ``rmw_cyclonedds_cpp`` the bus also sets automatic liveliness with
  an infinite lease, no auto-dispose on writers, and XCDR1 data representation (what ROS 2 puts
  on the wire).  A ``cyclonedds.qos.Qos`` can be passed instead of a profile name;
* the domain id is the argument, else ``ROS_DOMAIN_ID``, else 0.

Configuration: every bus creates its domain explicitly with the user's Cyclone configuration --
the ``config`` argument, else ``CYCLONEDDS_URI`` (XML or file URIs, comma-separated), else
Cyclone's defaults -- followed by :data:`ROS_INTEROPERABILITY`, which lets the bus talk to ROS 2
nodes on Fast DDS.  Buses of one domain id in a process share the domain while their
configurations are equal (a bus with another one is refused); the domain is deleted with the last
of them.  :func:`loopback_config` gives an XML configuration that keeps all traffic on 127.0.0.1.

Threading: subscription callbacks are never run on Cyclone's receive threads.  Each bus has one
dispatcher thread that waits on a DDS ``WaitSet`` (read conditions of all its readers plus a guard
condition to wake it), takes the samples of all readers and calls the callbacks in the order the
samples were written (source timestamp), across topics.  A slow callback
therefore delays only this bus's other callbacks; the readers' keep-last history drops the oldest
samples if the callbacks cannot keep up.  Exceptions raised by callbacks are logged (logger
``mb_estimation.transport.dds_bus``) and counted in :attr:`Subscription.errors`.  Publishing from
inside a callback is fine; closing the bus from inside a callback is allowed too.
"""

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any
from xml.sax.saxutils import quoteattr

from cyclonedds.core import (
    DDSException,
    GuardCondition,
    InstanceState,
    ReadCondition,
    SampleState,
    ViewState,
    WaitSet,
)
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from mb_estimation.transport.dds_messages import ros_topic_name

__all__ = [
    "QOS_PROFILES",
    "DdsBus",
    "Publisher",
    "Subscription",
    "loopback_config",
    "resolve_domain_id",
]

_log = logging.getLogger(__name__)

#: ROS 2 QoS profiles by name: (reliable, keep-last depth); both volatile.
QOS_PROFILES = {
    "default": (True, 10),
    "sensor_data": (False, 5),
    # not a ROS profile: reliable with room for a burst (the shadow states of one window)
    "burst": (True, 2000),
}

#: How long a reliable writer may block when its history is full (Cyclone's default; ROS uses
#: infinity, which would let a stuck subscriber stall the estimator).
_MAX_BLOCKING_NS = duration(milliseconds=100)

#: The dispatcher wakes at least this often even without data (it is woken at once by the guard
#: condition on subscribe and close).
_WAIT_NS = duration(milliseconds=500)

#: Samples taken from one reader per take call.
_TAKE_BATCH = 64

# Domains created explicitly by a DdsBus with a ``config``: domain id -> [Domain, config, users].
_DOMAINS: dict[int, list[Any]] = {}
_DOMAINS_LOCK = threading.Lock()

# Open buses, closed at interpreter exit so that peers see the participants leave at once.
_OPEN_BUSES: "weakref.WeakSet[DdsBus]" = weakref.WeakSet()


@atexit.register
def _close_open_buses() -> None:
    for bus in list(_OPEN_BUSES):
        bus.close(timeout=1.0)


def resolve_domain_id(domain_id: int | None = None) -> int:
    """The DDS domain id to use: ``domain_id``, else ``$ROS_DOMAIN_ID``, else 0."""
    if domain_id is None:
        env = os.environ.get("ROS_DOMAIN_ID", "").strip()
        if not env:
            return 0
        try:
            domain_id = int(env)
        except ValueError:
            raise ValueError(f"ROS_DOMAIN_ID={env!r} is not an integer") from None
    domain_id = int(domain_id)
    if not 0 <= domain_id <= 232:
        raise ValueError(f"DDS domain id {domain_id} is outside 0..232")
    return domain_id


def loopback_config(
    domain_id: int | None = None,
    *,
    max_participants: int = 32,
    trace_file: str | os.PathLike[str] | None = None,
) -> str:
    """A Cyclone DDS XML configuration (``CYCLONEDDS_URI`` value) that keeps DDS on 127.0.0.1.

    Network interface 127.0.0.1 only, multicast off, unicast discovery with peer 127.0.0.1 and
    automatic participant indices up to ``max_participants`` (one index per DDS *process* on the
    host and domain; the participants of one process share one index).  ``domain_id`` restricts
    the configuration to that domain id (default: any).  ``trace_file`` turns on Cyclone's
    configuration trace into that file (it lists the configuration and the selected interfaces).
    """
    if max_participants < 1:
        raise ValueError("max_participants must be at least 1")
    dom = "any" if domain_id is None else str(resolve_domain_id(domain_id))
    tracing = ""
    if trace_file is not None:
        tracing = (
            "<Tracing><Verbosity>config</Verbosity>"
            f"<OutputFile>{_xml_text(os.fspath(trace_file))}</OutputFile></Tracing>"
        )
    return (
        f'<CycloneDDS><Domain Id="{dom}">'
        "<General>"
        '<Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces>'
        "<AllowMulticast>false</AllowMulticast>"
        "</General>"
        "<Discovery>"
        "<ParticipantIndex>auto</ParticipantIndex>"
        f"<MaxAutoParticipantIndex>{int(max_participants)}</MaxAutoParticipantIndex>"
        '<Peers><Peer address="127.0.0.1"/></Peers>'
        "</Discovery>"
        f"{tracing}"
        "</Domain></CycloneDDS>"
    )


#: Merged into every bus's configuration: ignore the XTypes type information announced by eProsima
#: Fast DDS (vendor id 1.15) and match its endpoints by type name, as ROS 2 matches across
#: middlewares.  Fast DDS 3 (ROS 2 Kilted's default middleware) announces type objects that Cyclone
#: DDS 11 rejects ("invalid type object"), and then no sample flows either way between them
#: (measured: 0 of ~120 samples each way in 6 s; with this setting 115); ``test_dds_interop.py``.
ROS_INTEROPERABILITY = (
    '<CycloneDDS><Domain Id="any"><Compatibility>'
    "<IgnoreTypeInformation>1.15</IgnoreTypeInformation>"
    "</Compatibility></Domain></CycloneDDS>"
)


def bus_config(config: str | None = None) -> str:
    """The Cyclone configuration a bus creates its domain with (see the module docstring)."""
    user = os.environ.get("CYCLONEDDS_URI", "") if config is None else config
    return f"{user},{ROS_INTEROPERABILITY}" if user.strip() else ROS_INTEROPERABILITY


def _xml_text(text: str) -> str:
    # quoteattr escapes &, <, > and quotes; strip the surrounding quotes for element text.
    return quoteattr(text)[1:-1]


def _qos(profile: "str | Qos", *, writer: bool) -> Qos:
    if isinstance(profile, Qos):
        return profile
    try:
        reliable, depth = QOS_PROFILES[profile]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown QoS profile {profile!r}; use one of {sorted(QOS_PROFILES)} or a Qos"
        ) from None
    policies = [
        Policy.Reliability.Reliable(max_blocking_time=_MAX_BLOCKING_NS)
        if reliable
        else Policy.Reliability.BestEffort,
        Policy.History.KeepLast(depth),
        Policy.Durability.Volatile,
        Policy.Liveliness.Automatic(lease_duration=duration(infinite=True)),
        Policy.DataRepresentation(use_cdrv0_representation=True),
    ]
    if writer:
        policies.append(Policy.WriterDataLifecycle(autodispose=False))
    return Qos(*policies)


def _delete(entity: Any) -> None:
    # cyclonedds-python ties a DDS entity's lifetime to its Python object and deletes it in
    # ``__del__``, which is idempotent; calling it here deletes deterministically.
    if entity is not None:
        entity.__del__()


class Publisher:
    """A writer on one ROS topic; call it with a message to publish."""

    def __init__(self, bus: "DdsBus", topic: str, writer: DataWriter) -> None:
        self._bus = bus
        self.topic = topic
        self.writer = writer

    def __call__(self, msg: Any, timestamp_ns: int | None = None) -> None:
        """Publish ``msg`` (source timestamp ``timestamp_ns``, default now)."""
        if self._bus.closed:
            raise RuntimeError(f"publisher on {self.topic!r}: the DDS bus is closed")
        self.writer.write(msg, timestamp=timestamp_ns)

    @property
    def matched(self) -> int:
        """Number of subscriptions currently matched with this writer."""
        return self.writer.get_publication_matched_status().current_count

    def wait_for_subscribers(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Wait until at least ``count`` subscriptions are matched; False on timeout."""
        deadline = time.monotonic() + timeout
        while self.matched < count:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True


class Subscription:
    """A reader on one ROS topic whose samples go to ``callback`` on the bus's dispatcher."""

    def __init__(self, topic: str, reader: DataReader, condition: ReadCondition,
                 callback: Callable[[Any], None]) -> None:
        self.topic = topic
        self.reader = reader
        self.condition = condition
        self.callback = callback
        #: Samples delivered to the callback, and callbacks that raised.
        self.received = 0
        self.errors = 0

    @property
    def matched(self) -> int:
        """Number of publishers currently matched with this reader."""
        return self.reader.get_subscription_matched_status().current_count


class DdsBus:
    """One DDS domain participant with ROS-2-compatible publishers and subscriptions.

    ``domain_id``: DDS domain (default ``$ROS_DOMAIN_ID``, else 0).  ``config``: optional Cyclone
    XML configuration for the domain (default: ``$CYCLONEDDS_URI`` / Cyclone's defaults), see the
    module docstring.  Use as a context manager or call :meth:`close`.
    """

    def __init__(self, domain_id: int | None = None, *, config: str | None = None) -> None:
        self.domain_id = resolve_domain_id(domain_id)
        self._lock = threading.RLock()
        self._closed = False
        self._topics: dict[str, Topic] = {}
        self._publishers: list[Publisher] = []
        self._subscriptions: list[Subscription] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._config = bus_config(config)
        _acquire_domain(self.domain_id, self._config)
        try:
            self.participant = DomainParticipant(self.domain_id)
            self._guard = GuardCondition(self.participant)
            self._waitset = WaitSet(self.participant)
            self._waitset.attach(self._guard)
        except BaseException:
            self._release_entities()
            raise
        _OPEN_BUSES.add(self)

    # --- public API ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._closed

    def publisher(self, topic: str, msg_type: type, qos: "str | Qos" = "default") -> Publisher:
        """A :class:`Publisher` (callable with a message) on ROS topic ``topic``."""
        with self._lock:
            self._check_open()
            dds_topic = self._topic(topic, msg_type)
            writer = DataWriter(self.participant, dds_topic, qos=_qos(qos, writer=True))
            pub = Publisher(self, topic, writer)
            self._publishers.append(pub)
            return pub

    def subscribe(self, topic: str, msg_type: type, callback: Callable[[Any], None],
                  qos: "str | Qos" = "default") -> Subscription:
        """Deliver every message on ROS topic ``topic`` to ``callback(msg)`` (dispatcher thread).

        The message is an instance of ``msg_type`` with Cyclone's ``sample_info`` attribute
        (``source_timestamp`` in ns, ...).
        """
        if not callable(callback):
            raise TypeError("callback must be callable")
        with self._lock:
            self._check_open()
            dds_topic = self._topic(topic, msg_type)
            reader = DataReader(self.participant, dds_topic, qos=_qos(qos, writer=False))
            condition = ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Any)
            sub = Subscription(topic, reader, condition, callback)
            self._subscriptions.append(sub)
            self._waitset.attach(condition)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._dispatch, name=f"dds-bus-{self.domain_id}", daemon=True
                )
                self._thread.start()
            self._guard.set(True)  # let the dispatcher pick up the new reader now
            return sub

    def close(self, timeout: float = 5.0) -> None:
        """Stop the dispatcher and delete all DDS entities of this bus (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
            thread = self._thread
            try:
                self._guard.set(True)
            except DDSException:  # pragma: no cover - guard already gone
                pass
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                _log.warning("DDS bus dispatcher did not stop within %.1f s (callback stuck?)",
                             timeout)
        with self._lock:
            self._release_entities()
        _OPEN_BUSES.discard(self)

    def __enter__(self) -> "DdsBus":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (f"DdsBus(domain_id={self.domain_id}, {state}, "
                f"topics={sorted(self._topics)})")

    # --- internals ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the DDS bus is closed")

    def _topic(self, topic: str, msg_type: type) -> Topic:
        name = ros_topic_name(topic)
        existing = self._topics.get(name)
        if existing is not None:
            if existing.data_type is not msg_type:
                raise ValueError(
                    f"topic {topic!r} is already used with {existing.data_type.__name__} on this "
                    f"bus, not {getattr(msg_type, '__name__', msg_type)}"
                )
            return existing
        dds_topic = Topic(self.participant, name, msg_type)
        self._topics[name] = dds_topic
        return dds_topic

    def _dispatch(self) -> None:
        while not self._stop.is_set():
            try:
                self._waitset.wait(_WAIT_NS)
                self._guard.set(False)
            except DDSException:
                if self._stop.is_set():
                    break
                _log.exception("DDS bus: waitset failed; dispatcher stops")
                break
            with self._lock:
                subscriptions = list(self._subscriptions)
            self._drain(subscriptions)

    def _drain(self, subscriptions: list[Subscription]) -> None:
        """Deliver what the readers hold, in the order it was written across all topics.

        A batch is taken from every reader and delivered sorted by source timestamp (stable:
        per-reader order kept), so that a message published after another on a different topic
        (a voltage after its joint state) reaches the callbacks after it, however the samples
        were split into batches; repeated while any reader had a full batch.
        """
        while not self._stop.is_set():
            batch, full = [], False
            for order, sub in enumerate(subscriptions):
                try:
                    samples = sub.reader.take(N=_TAKE_BATCH, condition=sub.condition)
                except DDSException:
                    if not self._stop.is_set():
                        _log.exception("DDS bus: take failed on %s", sub.topic)
                    continue
                full |= len(samples) == _TAKE_BATCH
                batch += [(sample.sample_info.source_timestamp, order, k, sub, sample)
                          for k, sample in enumerate(samples)]
            batch.sort(key=lambda entry: entry[:3])
            for *_, sub, sample in batch:
                if self._stop.is_set():
                    return  # closed from a callback: deliver nothing more
                if not sample.sample_info.valid_data:
                    continue  # instance-state notification (e.g. writer gone), no message
                sub.received += 1
                try:
                    sub.callback(sample)
                except Exception:
                    sub.errors += 1
                    _log.exception("DDS bus: callback for %s raised", sub.topic)
            if not full:
                return

    def _release_entities(self) -> None:
        waitset = getattr(self, "_waitset", None)
        if waitset is not None:
            for entity in list(waitset.get_entities()):
                try:
                    waitset.detach(entity)
                except DDSException:  # pragma: no cover - entity already gone
                    pass
        for sub in self._subscriptions:
            _delete(sub.condition)
            _delete(sub.reader)
        for pub in self._publishers:
            _delete(pub.writer)
        for dds_topic in self._topics.values():
            _delete(dds_topic)
        _delete(waitset)
        _delete(getattr(self, "_guard", None))
        _delete(getattr(self, "participant", None))
        self._topics.clear()
        if self._config is not None:
            _release_domain(self.domain_id)
            self._config = None


def _acquire_domain(domain_id: int, config: str) -> None:
    with _DOMAINS_LOCK:
        entry = _DOMAINS.get(domain_id)
        if entry is not None:
            if entry[1] != config:
                raise ValueError(
                    f"DDS domain {domain_id} already exists in this process with another config"
                )
            entry[2] += 1
            return
        try:
            domain = Domain(domain_id, config)
        except DDSException as exc:
            raise RuntimeError(
                f"cannot create DDS domain {domain_id} with the given config: {exc} (a domain "
                "with that id probably exists in this process already, created by another "
                "participant with $CYCLONEDDS_URI)"
            ) from exc
        _DOMAINS[domain_id] = [domain, config, 1]


def _release_domain(domain_id: int) -> None:
    with _DOMAINS_LOCK:
        entry = _DOMAINS.get(domain_id)
        if entry is None:
            return
        entry[2] -= 1
        if entry[2] <= 0:
            del _DOMAINS[domain_id]
            _delete(entry[0])
