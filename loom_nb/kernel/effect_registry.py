"""The kernel's view of effects: specs, calls, results, the interceptor chain and a plain registry.

The kernel only needs to know an effect's id, whether it is idempotent, and how to invoke it
through a chain of interceptors that each hold ``next``. The interceptors themselves
(authorization, quota, retry, guard, claim-check...) live in ``loom_nb.effects``; the kernel does
not know they exist.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import CoroutineType
from typing import Any, Protocol, TypedDict, TypeVar, Unpack

from loom_nb.errors import EffectNotFoundError, UsageError, registered

_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class Principal:
    """Who an execution acts for.

    Attributes:
        name: A name for logs and errors.
        scopes: The scopes it holds (an effect may require some).
    """

    name: str = "anonymous"
    scopes: frozenset[str] = frozenset()

    @classmethod
    def of(cls, name: str, scopes: Iterable[str] = ()) -> Principal:
        """Build a principal from any iterable of scopes."""
        return cls(name=name, scopes=frozenset(scopes))


class Durability(StrEnum):
    """When a step of an effect is committed relative to running it (``docs/design.md``, section 4).

    * ``BEFORE``: its ``step_started`` is committed before the effect runs and its outcome right
      after (before anything else runs): a crash mid-call is detected (the step is in doubt). The
      only choice for an effect that is not idempotent.
    * ``AFTER``: its start and outcome are committed together once it returns, before the next
      effect runs (the default for idempotent effects, model calls included): a crash mid-call
      re-runs it.
    * ``DEFERRED``: its start and outcome ride the execution's next commit (an agent's idempotent
      tool: the next model step's): a crash before that commit re-runs it.
    """

    BEFORE = "before"
    AFTER = "after"
    DEFERRED = "deferred"


@dataclass(frozen=True, kw_only=True)
class EffectSpec:
    """A registered effect.

    Attributes:
        effect_id: Its id (a persisted contract).
        fn: The callable, sync or async, taking the input (and optionally an ``EffectContext``).
        idempotent: Safe to invoke again after a crash (with the same idempotency key).
        scopes: Scopes the principal must hold.
        retry: A retry policy (``loom_nb.effects.RetryPolicy``) or None.
        quota: Quota limits for this effect, or None.
        timeout: Seconds one attempt may take before the timeout interceptor abandons it, or None.
        trusted: False when its results are untrusted (tainted) text.
        kind: ``effect``, ``tool``, ``model`` or ``summarizer`` (for views and the guard).
        meta: Free-form extra data (a tool's JSON schema, a provider...).
        context_param: The name of the parameter that receives the ``EffectContext``, if any.
        durability: When its steps are committed (``Durability``); None means ``AFTER`` when
            idempotent, else ``BEFORE``. ``AFTER`` and ``DEFERRED`` need ``idempotent=True``.
        owner: Who registered it (an agent's flow name and version, ``"<flow>@<version>"``), or
            None for an effect the whole runtime shares. A step names only ``effect_id`` (the
            persisted contract); the execution's owner decides which registration runs it.
    """

    effect_id: str
    fn: Callable[..., Any]
    idempotent: bool = False
    scopes: frozenset[str] = frozenset()
    retry: Any = None
    quota: Any = None
    timeout: float | None = None
    trusted: bool = True
    kind: str = "effect"
    meta: Mapping[str, Any] = field(default_factory=dict)
    context_param: str | None = None
    durability: Durability | None = None
    owner: str | None = None

    @property
    def commit_rule(self) -> Durability:
        """The ``Durability`` its steps get: ``durability`` when set, else ``AFTER`` for an
        idempotent effect and ``BEFORE`` for one that is not."""
        if self.durability is not None:
            return self.durability
        return Durability.AFTER if self.idempotent else Durability.BEFORE


def no_progress(progress: float, total: float | None = None, message: str | None = None) -> None:
    """``EffectContext.report_progress`` where nobody can watch (outside a run): does nothing."""


@dataclass(frozen=True, kw_only=True)
class EffectContext:
    """What an effect may ask for by declaring a parameter annotated ``EffectContext``.

    Attributes:
        execution_id: The execution making the call.
        step_id: The step.
        effect_id: The effect.
        attempt: 1 for the first attempt, counting on across retries and recovery.
        idempotency_key: ``<execution_id>:<step_id>``: stable across retries and recovery.
        principal: Who the execution acts for.
        emit_delta: Send a streamed text delta (the cell shows every one; the journal keeps chunks).
        deps: What the run was given to hand its effects (``Engine.deps``: a database handle, a
            client...), never journaled; None when nothing was given in this process.
        ask: ``await ask(kind, payload, schema)`` asks a person a question mid-call and returns the
            answer (validated as ``schema``): a durable gate ``<step>:ask:<n>`` the run is suspended
            on in the journal while the call waits; a question this step asked before with the same
            payload gets its journaled answer at once (``kernel/questions.py``). None outside a run.
        report_progress: ``report_progress(progress, total=None, message=None)`` tells whoever watches the
            run how far a long call has got (the live view's tool row); never journaled. Does
            nothing outside a run or when nobody watches.
    """

    execution_id: str
    step_id: str
    effect_id: str
    attempt: int
    idempotency_key: str
    principal: Principal
    emit_delta: Callable[[str], None]
    deps: Any = None
    ask: Callable[[str, Any, Any], Awaitable[Any]] | None = None
    report_progress: Callable[..., None] = no_progress

    @property
    def fencing_token(self) -> tuple[str, int]:
        """``(idempotency_key, attempt)``: pass it to the system the effect changes, and have that
        system refuse a call whose attempt is lower than the highest it has seen for the key.

        For an effect that is not idempotent each attempt's start is committed under the
        execution's lease before the call, so attempts of one key rise from process to process: a
        process frozen past its lease (between the lease check and its call) carries a lower attempt
        than its successor's ``run again`` and is refused there (``docs/design.md``, section 5a).
        """
        return (self.idempotency_key, self.attempt)


@dataclass(frozen=True, kw_only=True)
class EffectResult:
    """What an invocation returns through the ring.

    Attributes:
        output: The effect's output (journaled as plain JSON).
        usage: Metering recorded on ``step_completed`` (calls, tokens, cost), if any.
        tainted: True when the output is untrusted text.
    """

    output: Any
    usage: Mapping[str, Any] | None = None
    tainted: bool = False


def frozen_instance(cls: type[_T], /, **values: Any) -> _T:
    """An instance of the frozen dataclass ``cls`` with ``values``, which must name every field.

    What its generated ``__init__`` builds, for less: that ``__init__`` stores each value with
    ``object.__setattr__`` (the class refuses plain assignment), one call per field; this fills the
    instance's ``__dict__`` in one update. For dataclasses without ``__post_init__``, slots or
    defaults left to fill: the per-step ``EffectContext``, ``EffectCall`` and ``EffectResult``.
    """
    instance = object.__new__(cls)
    instance.__dict__.update(values)
    return instance


RetryHook = Callable[[BaseException, float], Awaitable[int]]


@dataclass(frozen=True, kw_only=True)
class EffectCall:
    """One call travelling through the interceptor ring.

    Attributes:
        spec: The effect's registration.
        input: The real input.
        context: The ``EffectContext`` handed to the effect.
        on_retry: ``await on_retry(error, delay)`` journals the failed attempt, waits ``delay`` on
            the runtime's clock, journals the next ``step_started``, and returns the new attempt
            number. The retry interceptor uses it so every attempt is in the journal.
        sleep: The runtime clock's sleep.
    """

    spec: EffectSpec
    input: Any
    context: EffectContext
    on_retry: RetryHook
    sleep: Callable[[float], Awaitable[None]]

    def with_attempt(self, attempt: int) -> EffectCall:
        """The same call for another attempt."""
        return replace(self, context=replace(self.context, attempt=attempt))


Next = Callable[[EffectCall], Awaitable[EffectResult]]


class Interceptor(Protocol):
    """One link of the effect ring: it may refuse, change or observe a call, and calls ``next``.

    An interceptor may also define ``acts_on(spec) -> bool``: False when it would only pass every
    call of the effect ``spec`` straight to ``next`` (no scopes to check, no retry policy, no
    timeout...). The registry then leaves it out of that effect's chain (``EffectRegistry.chain``).
    Its answer may depend only on the spec and on the interceptor's own fixed configuration.
    """

    async def __call__(self, call: EffectCall, next: Next) -> EffectResult:
        """Handle ``call``, usually by awaiting ``next(call)``."""
        ...


class EffectOptions(TypedDict, total=False):
    """The keyword options of ``register`` (documented on ``EffectSpec``)."""

    idempotent: bool
    scopes: Iterable[str]
    retry: Any
    quota: Any
    timeout: float | None
    trusted: bool
    kind: str
    meta: Mapping[str, Any] | None
    durability: Durability | str | None
    owner: str | None


class EffectInvoker(Protocol):
    """What the kernel and its callers need from an effect runtime (``EffectRegistry`` and the
    ``EffectRing`` implement it): register, look up and invoke effects."""

    def register(self, effect_id: str, fn: Callable[..., Any], **options: Unpack[EffectOptions]) -> EffectSpec:
        """Register (or replace) an effect; returns its spec (see ``EffectRegistry.register``)."""
        ...

    def spec(self, effect_id: str, owner: str | None = None) -> EffectSpec:
        """The registration of ``effect_id`` that ``owner`` resolves to (``EffectNotFoundError`` if none)."""
        ...

    def specs_named(self, effect_id: str) -> list[EffectSpec]:
        """Every registration of ``effect_id``: the shared one and each owner's."""
        ...

    def __contains__(self, effect_id: object) -> bool:
        """True when ``effect_id`` is registered."""
        ...

    def invoke(self, call: EffectCall) -> Awaitable[EffectResult]:
        """Invoke through the ring (``await`` the result)."""
        ...


def _context_param(fn: Callable[..., Any]) -> str | None:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    for name, param in params.items():
        annotation = param.annotation
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if text == "EffectContext" or str(text).endswith(".EffectContext") or annotation is EffectContext:
            return name
    return None


def check_durability(effect_id: str, durability: Durability | str | None, idempotent: bool) -> Durability | None:
    """``durability`` as a ``Durability`` (None stays None), checked against ``idempotent``.

    Raises:
        UsageError: an unknown value, or ``AFTER`` / ``DEFERRED`` for an effect that is not
            idempotent (a crash mid-call would then go unnoticed and the call could run twice).
    """
    if durability is None:
        return None
    try:
        rule = Durability(durability)
    except ValueError:
        known = ", ".join(repr(d.value) for d in Durability)
        raise UsageError(f"effect {effect_id!r}: durability must be one of {known}, got {durability!r}") from None
    if rule is not Durability.BEFORE and not idempotent:
        raise UsageError(
            f"effect {effect_id!r}: durability={rule.value!r} needs idempotent=True: a step that is not "
            "committed before it runs may run twice after a crash, unnoticed. Mark the effect idempotent "
            "(it is safe to run again with the same idempotency key) or use durability='before'."
        )
    return rule


async def call_effect_fn(call: EffectCall) -> EffectResult:
    """The innermost link: call the registered function (sync or async) with the input."""
    spec = call.spec
    param = spec.context_param
    result = spec.fn(call.input, **{param: call.context}) if param else spec.fn(call.input)
    # An async function's coroutine is the usual case: its type is checked before the general test.
    if type(result) is CoroutineType or inspect.isawaitable(result):
        result = await result
    if isinstance(result, EffectResult):
        return result
    return frozen_instance(EffectResult, output=result, usage=None, tainted=not spec.trusted)


class EffectRegistry:
    """Effects by id, invoked through an interceptor ring (empty here; ``loom_nb.effects`` fills it).

    Args:
        interceptors: Outermost first.
    """

    def __init__(self, interceptors: Iterable[Interceptor] = ()) -> None:
        self._specs: dict[str, EffectSpec] = {}
        #: Owned registrations, by ``(owner, effect_id)`` (see ``EffectSpec.owner``).
        self._owned: dict[tuple[str, str], EffectSpec] = {}
        self.interceptors: list[Interceptor] = list(interceptors)
        #: Each effect's bound chain, by ``(owner, effect_id)``, with the spec it was bound for (see ``chain``).
        self._chains: dict[tuple[str | None, str], tuple[EffectSpec, Next]] = {}

    def register(self, effect_id: str, fn: Callable[..., Any], **options: Unpack[EffectOptions]) -> EffectSpec:
        """Register (or replace) an effect; returns its spec (options as ``EffectSpec`` documents them).

        With ``owner=`` the registration is that owner's: an execution resolving with that owner
        runs it, and it never replaces another owner's registration of the same id (two agents'
        ``tools.search``). Without, it is the runtime's shared one, which owners without their own
        registration of the id resolve to.
        """
        if not effect_id or not isinstance(effect_id, str):
            raise UsageError(f"an effect id must be a non-empty string, got {effect_id!r}")
        if not callable(fn):
            raise UsageError(f"effect {effect_id!r}: {fn!r} is not callable")
        given: dict[str, Any] = {**options}
        given.update(scopes=frozenset(options.get("scopes", ())), meta=dict(options.get("meta") or {}))
        given["durability"] = check_durability(effect_id, options.get("durability"), options.get("idempotent", False))
        spec = replace(EffectSpec(effect_id=effect_id, fn=fn, context_param=_context_param(fn)), **given)
        return self.add(spec)

    def add(self, spec: EffectSpec) -> EffectSpec:
        """Register a ready-made spec (replacing the one with the same id and owner)."""
        if spec.owner is None:
            self._specs[spec.effect_id] = spec
        else:
            self._owned[(spec.owner, spec.effect_id)] = spec
        return spec

    def spec(self, effect_id: str, owner: str | None = None) -> EffectSpec:
        """The spec of ``effect_id`` that ``owner`` resolves to: the owner's own registration, else
        the shared one."""
        if owner is not None:
            owned = self._owned.get((owner, effect_id))
            if owned is not None:
                return owned
        spec = self._specs.get(effect_id)  # the usual case, without building the error's text first
        if spec is not None:
            return spec
        return registered(self._specs, effect_id, EffectNotFoundError, f"effect {effect_id!r}", "registers it")

    def specs_named(self, effect_id: str) -> list[EffectSpec]:
        """Every registration of ``effect_id``: the shared one first, then each owner's."""
        shared = self._specs.get(effect_id)
        owned = [spec for (_, eid), spec in self._owned.items() if eid == effect_id]
        return ([shared] if shared is not None else []) + owned

    def __contains__(self, effect_id: object) -> bool:
        return effect_id in self._specs

    def ids(self) -> list[str]:
        """Registered ids (shared and owned), sorted."""
        return sorted(set(self._specs) | {eid for _, eid in self._owned})

    def use(self, interceptor: Interceptor) -> None:
        """Add an interceptor innermost (closest to the effect). Change the ring only through this
        method: it drops the chains bound for the old ring."""
        self.interceptors.append(interceptor)
        self._chains.clear()

    def chain(self, spec: EffectSpec) -> Next:
        """The ring bound for ``spec``: each interceptor's link, outermost first, down to the effect,
        leaving out an interceptor whose ``acts_on(spec)`` is False (it would only call ``next``).

        Bound once per spec and kept while ``spec`` is the one registered (a spec is frozen, and
        ``acts_on`` depends only on the spec and the interceptor's fixed configuration, so a kept
        chain is the one a fresh binding would build); registering the effect again binds anew.
        """
        key = (spec.owner, spec.effect_id)
        bound = self._chains.get(key)
        if bound is not None and bound[0] is spec:
            return bound[1]
        link: Next = call_effect_fn
        for interceptor in reversed(self.interceptors):
            acts_on = getattr(interceptor, "acts_on", None)
            if acts_on is None or acts_on(spec):
                link = _bind(interceptor, link)
        self._chains[key] = (spec, link)
        return link

    def invoke(self, call: EffectCall) -> Awaitable[EffectResult]:
        """Run ``call`` through the ring (``await`` the result): its spec's bound ``chain``."""
        return self.chain(call.spec)(call)


def _bind(interceptor: Interceptor, nxt: Next) -> Next:
    # A plain function handing back the interceptor's awaitable: the caller awaits it as it would
    # a coroutine of this link's, without one more coroutine frame per link and call.
    def link(call: EffectCall) -> Awaitable[EffectResult]:
        return interceptor(call, nxt)

    return link
