"""Add-ons: what a lab runs on top of its control plane (TensorFusion is one, in lab.tensorfusion).

The cluster core knows add-ons only through this interface; an add-on's module provides an
``Addon`` and registers a factory for it under its name (``register``), so the core never
imports it. ``up`` starts the add-ons it is given after the control plane is ready, in the order
given, and records their names in the state (``state['addons']``); ``down`` stops them in the
reverse order before it stops the control plane; ``status`` asks each for its health; an API
server restart or outage tells each one (the operator double of TensorFusion is restarted then).
Whatever fails says which add-on it was (``AddonError.addon``).

The functions that run add-ons take the add-on objects and the state dict and nothing else, so
their order and error handling are unit-tested without a cluster."""
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Union

from .errors import AddonError


class Addon:
    """One add-on of a lab. ``start`` must record every process it spawns in
    ``state['processes']`` (the core's ``down`` stops whatever is recorded there, even when the
    add-on's module is not loaded) and may keep its details under a key of its own."""

    name = ""

    def start(self, state: Dict) -> None:
        raise NotImplementedError

    def stop(self, state: Dict) -> None:
        """Stop what ``start`` started (before the control plane goes)."""

    def health(self, state: Dict) -> None:
        """Raise a LabError that says what is wrong; return when healthy."""

    def api_server_restarted(self, state: Dict) -> None:
        """kube-apiserver was restarted (or was away for a while) and answers again."""


Factory = Callable[..., Addon]
_REGISTRY: Dict[str, Factory] = {}


def register(name: str, factory: Factory) -> None:
    """Make the add-on ``name`` known: ``factory(**options)`` returns an Addon."""
    _REGISTRY[name] = factory


def registered(name: str) -> bool:
    return name in _REGISTRY


def create(name: str, **options) -> Addon:
    """The registered add-on ``name`` with ``options`` (its defaults for the rest)."""
    if name not in _REGISTRY:
        raise AddonError(name, f"add-on {name}: not registered in this process; import the module "
                               "that provides it first (python -m lab does)")
    return _REGISTRY[name](**options)


def resolve(items: Iterable[Union[str, Addon]]) -> List[Addon]:
    """Add-on objects for a list of add-ons or registered names (a name: its default options)."""
    return [create(item) if isinstance(item, str) else item for item in items]


def recorded(state: Dict) -> List[str]:
    """The names of the add-ons started in this lab, in the order they were started."""
    return list(state.get("addons") or [])


def _fail(addon: str, action: str, exc: BaseException) -> AddonError:
    err = AddonError(addon, f"add-on {addon} failed to {action}: {exc}")
    err.__cause__ = exc
    return err


def start_all(state: Dict, addons: Sequence[Addon],
              saved: Optional[Callable[[Dict], None]] = None) -> None:
    """Start ``addons`` in order; each is recorded in the state before it starts, so that a
    partly started one is stopped too. The first failure ends it: the rest are not started and
    the error names the add-on. ``saved(state)`` (if given) runs after each record and start."""
    names = [a.name for a in addons]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise AddonError(dupes[0], f"add-on {dupes[0]}: given more than once")
    for addon in addons:
        if addon.name not in recorded(state):
            state["addons"] = recorded(state) + [addon.name]
        if saved:
            saved(state)
        try:
            addon.start(state)
        except Exception as exc:  # noqa: BLE001  any failure of an add-on is reported as its own
            raise _fail(addon.name, "start", exc) from exc
        if saved:
            saved(state)


def for_state(state: Dict) -> List[Addon]:
    """The add-ons recorded in ``state`` that this process knows (registered), in start order."""
    return [create(name) for name in recorded(state) if registered(name)]


def stop_all(state: Dict, addons: Optional[Sequence[Addon]] = None) -> None:
    """Stop the add-ons (default: those recorded in the state and registered here) in the
    reverse order of their start. Every one is asked even when an earlier one fails; then the
    failures are raised together, the first one's name in ``AddonError.addon``."""
    failures: List[AddonError] = []
    for addon in reversed(list(for_state(state) if addons is None else addons)):
        try:
            addon.stop(state)
        except Exception as exc:  # noqa: BLE001
            failures.append(_fail(addon.name, "stop", exc))
    if failures:
        err = AddonError(failures[0].addon, "; ".join(str(f) for f in failures))
        err.__cause__ = failures[0].__cause__
        raise err


def health(state: Dict, addons: Optional[Sequence[Addon]] = None) -> Dict[str, str]:
    """Each add-on's health: ``"ok"`` or what is wrong, by name (recorded ones this process does
    not know are reported as such)."""
    result: Dict[str, str] = {}
    if addons is None:
        for name in recorded(state):
            if not registered(name):
                result[name] = "unknown: not registered in this process"
        addons = for_state(state)
    for addon in addons:
        try:
            addon.health(state)
            result[addon.name] = "ok"
        except Exception as exc:  # noqa: BLE001  a health check that breaks is not healthy
            result[addon.name] = str(exc)
    return result


def api_server_restarted(state: Dict, addons: Optional[Sequence[Addon]] = None) -> None:
    """Tell every add-on (default: every one recorded in the state, which must be registered
    here) that kube-apiserver is back, in start order; the first failure names its add-on."""
    for addon in resolve(recorded(state)) if addons is None else addons:
        try:
            addon.api_server_restarted(state)
        except Exception as exc:  # noqa: BLE001
            raise _fail(addon.name, "follow the API server restart", exc) from exc
